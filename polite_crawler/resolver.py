"""The SSRF guard's DNS check: a name resolver that never hands out an internal address.

:class:`PolicyResolver` is a Twisted ``IHostnameResolver`` (usable as Scrapy's
``TWISTED_DNS_RESOLVER``) that looks names up (``getaddrinfo`` in the reactor's
thread pool, or an injected lookup function) and passes on only the addresses
the address policy allows for that name, so a connection to a refused address
is never even attempted (no SYN leaves). A name that resolves inward — by its
first answer, or later, by DNS rebinding — resolves to nothing; the reason is
kept (:meth:`PolicyResolver.refusal_for`) so the download handler reports it
as a refusal rather than a DNS failure. Every lookup is checked, cached answers
included, so a short TTL gains an attacker nothing.

Scrapy installs the process's resolver from the project settings, which an
add-on cannot reach; so the download handler
(:class:`polite_crawler.handlers.GuardedHTTPDownloadHandler`) installs a
PolicyResolver on the reactor when the crawl opens if none is installed, and
restores the previous resolver when the last crawl using it closes. Each crawl
attaches its own :class:`AddressPolicy` (its start hosts differ); an address is
passed on when any attached policy allows it for that name. The handler's
connection check then holds each crawl to its own policy, on the address the
connection actually reached.

A crawl that fails while Scrapy builds its engine (a component refusing to
start after the download handler was made) never closes its handler. Its
policy is dropped the next time the resolver is used (:meth:`PolicyResolver.prune`),
so its allowances do not widen a later crawl's filter; when no crawl is left,
the previous resolver is put back.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import socket
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IHostnameResolver, IHostResolution
from twisted.internet.threads import deferToThreadPool
from zope.interface import implementer

from polite_crawler.defaults import polite_settings
from polite_crawler.policy.addresses import AddressPolicy

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from scrapy.crawler import Crawler
    from twisted.internet.defer import Deferred
    from twisted.internet.interfaces import IAddress
    from twisted.python.failure import Failure

    Lookup = Callable[[str, int], "Sequence[str]"]

logger = logging.getLogger(__name__)

CACHE_TTL = 300.0  # seconds a raw answer is reused (it is re-checked on every use)


def system_lookup(name: str, port: int) -> list[str]:
    """The addresses ``getaddrinfo`` gives for ``name`` (blocking: run it in a thread)."""
    try:
        infos = socket.getaddrinfo(name, port, 0, socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError):
        return []
    out: list[str] = []
    for family, _type, _proto, _canon, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6):
            address = str(sockaddr[0])
            if address not in out:
                out.append(address)
    return out


@functools.lru_cache(maxsize=8192)
def _literal(name: str) -> str | None:
    """``name`` when it is an IP address in its standard text (no lookup needed)."""
    try:
        return str(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        return None


@implementer(IHostResolution)
class _Resolution:
    def __init__(self, name: str) -> None:
        self.name = name

    def cancel(self) -> None:  # the lookup runs to its end in its thread; the answer is dropped
        pass


@implementer(IHostnameResolver)
class PolicyResolver:
    """Resolves names and passes on only the addresses an address policy allows."""

    def __init__(
        self,
        reactor: Any,
        policy: AddressPolicy | None = None,
        lookup: Lookup = system_lookup,
        cache_size: int = 10_000,
        cache_ttl: float = CACHE_TTL,
    ) -> None:
        self.reactor = reactor
        self.base = policy if policy is not None else AddressPolicy()
        self.lookup = lookup
        self.cache_size = cache_size
        self.cache_ttl = cache_ttl
        self._cache: OrderedDict[str, tuple[float, list[str]]] = OrderedDict()
        self._refusals: OrderedDict[str, str] = OrderedDict()
        self._policies: list[AddressPolicy] = []
        self._owners: dict[int, weakref.ref[Crawler]] = {}  # id(policy) -> its crawler
        self._previous: Any = None
        self.lookups = 0  # calls of the lookup function (cache misses)

    # --- Scrapy's resolver interface -------------------------------------------------
    @classmethod
    def from_crawler(cls, crawler: Crawler, reactor: Any) -> PolicyResolver:
        settings = polite_settings(crawler.settings)
        policy = AddressPolicy(allow_networks=settings.getlist("POLITE_ALLOW_NETWORKS"))
        lookup = settings.get("POLITE_DNS_LOOKUP") or system_lookup
        if isinstance(lookup, str):
            from scrapy.utils.misc import load_object

            lookup = load_object(lookup)
        size = settings.getint("DNSCACHE_SIZE", 10_000) if settings.getbool(
            "DNSCACHE_ENABLED", True) else 0
        return cls(reactor, policy, lookup, cache_size=size)

    def install_on_reactor(self) -> None:
        self._previous = self.reactor.nameResolver
        self.reactor.installNameResolver(self)

    def uninstall(self) -> None:
        """Put back the resolver that was installed before this one."""
        if self.reactor.nameResolver is self and self._previous is not None:
            self.reactor.installNameResolver(self._previous)
        self._previous = None

    # --- crawls --------------------------------------------------------------------
    def attach(self, policy: AddressPolicy, owner: Crawler | None = None) -> None:
        """Add a crawl's policy; ``owner``, its crawler, lets :meth:`prune` drop it."""
        if not any(p is policy for p in self._policies):
            self._policies.append(policy)
            if owner is not None:
                self._owners[id(policy)] = weakref.ref(owner)

    def detach(self, policy: AddressPolicy) -> bool:
        """Forget a crawl's policy; True when no crawl uses the resolver any more."""
        self._policies = [p for p in self._policies if p is not policy]
        self._owners.pop(id(policy), None)
        return not self._policies

    def prune(self) -> bool:
        """Detach the policies of crawls that will never close their handler.

        True when some were dropped and no crawl uses the resolver any more.
        """
        gone = [p for p in self._policies if _abandoned(self._owners.get(id(p)))]
        for policy in gone:
            self.detach(policy)
        if gone:
            logger.debug("Dropped the address policies of %(n)d crawls that never ran",
                         {"n": len(gone)})
        return bool(gone) and not self._policies

    def refusal_for(self, name: str) -> str | None:
        """Why ``name`` last resolved to nothing, if the policy was the reason."""
        return self._refusals.get(name.lower().rstrip("."))

    # --- the check ---------------------------------------------------------------------
    def filter(self, name: str, addresses: Sequence[str], port: int) -> list[str]:
        """The addresses some policy allows for ``name``; records the refusal if none."""
        policies = [*self._policies, self.base]
        for policy in policies:
            policy.note_resolution(name, addresses)
        allowed: list[str] = []
        reasons: list[str] = []
        for address in addresses:
            verdicts = [p.check_address(address, name, port) for p in policies]
            if any(v is None for v in verdicts):
                allowed.append(address)
            else:
                reasons.append(next(v for v in verdicts if v is not None))
        key = name.lower().rstrip(".")
        if reasons and not allowed:
            self._remember(self._refusals, key, reasons[0])
            logger.debug("%(name)s resolved only to refused addresses %(addrs)s",
                         {"name": name, "addrs": list(addresses)})
        else:
            self._refusals.pop(key, None)
        return allowed

    def _remember(self, table: OrderedDict[str, Any], key: str, value: Any) -> None:
        table[key] = value
        table.move_to_end(key)
        while len(table) > max(self.cache_size, 1000):
            table.popitem(last=False)

    # --- the frontier's question: which server a name is ---------------------------------
    def address_now(self, name: str) -> str | None:
        """The address ``name`` connects to as this resolver knows it now, without a
        lookup: the literal itself, or the first address of the cached answer that the
        policy allows (the first of the answer when it allows none: the connection is
        then refused, and the name is still that machine's); None when nothing fresh is
        cached."""
        literal = _literal(name)
        if literal is not None:
            return literal
        cached = self._cache.get(name)
        if cached is None or self.reactor.seconds() - cached[0] >= self.cache_ttl:
            return None
        return self._first(name, cached[1])

    def known_answer(self, name: str) -> list[str] | None:
        """The addresses ``name`` resolves to as this resolver knows them now, without a
        lookup and unfiltered: the literal itself, or the fresh cached answer (the
        download handler connects straight to one of them, checking it against its
        crawl's policy first); None when nothing fresh is cached. A name that moves is
        followed as a connection's lookup follows it: the answer is kept no longer than
        the cache time (300 s)."""
        cached = self._cache.get(name)  # a literal is never cached
        if cached is not None:
            return cached[1] if self.reactor.seconds() - cached[0] < self.cache_ttl else None
        literal = _literal(name)
        return None if literal is None else [literal]

    def _first(self, name: str, answer: Sequence[str]) -> str | None:
        if not answer:
            return None
        allowed = self.filter(name, answer, 0)
        return (allowed or list(answer))[0]

    def address(self, name: str) -> Deferred[str | None]:
        """The address ``name`` connects to (:meth:`address_now`), looked up in the
        reactor's thread pool when nothing fresh is cached (the answer is cached as a
        connection's is); None when the name does not resolve."""
        from twisted.internet.defer import succeed

        known = self.address_now(name)
        if known is not None:
            return succeed(known)
        self.lookups += 1
        d = deferToThreadPool(self.reactor, self.reactor.getThreadPool(), self.lookup, name, 0)

        def found(addresses: Sequence[str]) -> str | None:
            answer = [str(a) for a in addresses]
            if self.cache_size and answer:
                self._remember(self._cache, name, (self.reactor.seconds(), answer))
            return self._first(name, answer)

        def failed(failure: Failure) -> None:
            logger.debug("Lookup of %(name)s failed: %(err)s",
                         {"name": name, "err": failure.getErrorMessage()})

        out: Deferred[str | None] = d.addCallbacks(found, failed)
        return out

    # --- IHostnameResolver ---------------------------------------------------------------
    def resolveHostName(
        self,
        resolutionReceiver: Any,  # IResolutionReceiver
        hostName: str,
        portNumber: int = 0,
        addressTypes: Sequence[type[IAddress]] | None = None,
        transportSemantics: str = "TCP",
    ) -> Any:  # IHostResolution
        previous = self._previous
        if self.prune() and previous is not None and self.reactor.nameResolver is self:
            # Left behind by crawls that never ran: not this resolution's business.
            self.uninstall()
            return previous.resolveHostName(resolutionReceiver, hostName, portNumber,
                                            addressTypes, transportSemantics)
        resolution = _Resolution(hostName)
        resolutionReceiver.resolutionBegan(resolution)
        literal = _literal(hostName)
        if literal is not None:
            self._deliver(resolutionReceiver, hostName, [literal], portNumber, addressTypes)
            return resolution
        cached = self._cache.get(hostName)
        if cached is not None and self.reactor.seconds() - cached[0] < self.cache_ttl:
            self._deliver(resolutionReceiver, hostName, cached[1], portNumber, addressTypes)
            return resolution
        self.lookups += 1
        d = deferToThreadPool(self.reactor, self.reactor.getThreadPool(), self.lookup,
                              hostName, portNumber)

        def found(addresses: Sequence[str]) -> None:
            answer = [str(a) for a in addresses]
            if self.cache_size and answer:
                self._remember(self._cache, hostName, (self.reactor.seconds(), answer))
            self._deliver(resolutionReceiver, hostName, answer, portNumber, addressTypes)

        def failed(failure: Failure) -> None:
            logger.debug("Lookup of %(name)s failed: %(err)s",
                         {"name": hostName, "err": failure.getErrorMessage()})
            resolutionReceiver.resolutionComplete()

        d.addCallbacks(found, failed)
        return resolution

    def _deliver(
        self,
        receiver: Any,  # IResolutionReceiver
        name: str,
        addresses: Sequence[str],
        port: int,
        types: Sequence[type[IAddress]] | None,
    ) -> None:
        try:
            for address in self.filter(name, addresses, port):
                ip = ipaddress.ip_address(address.split("%", 1)[0])
                if ip.version == 4 and (types is None or IPv4Address in types):
                    receiver.addressResolved(IPv4Address("TCP", str(ip), port))
                elif ip.version == 6 and (types is None or IPv6Address in types):
                    receiver.addressResolved(IPv6Address("TCP", str(ip), port))
        finally:
            receiver.resolutionComplete()


def _abandoned(owner: weakref.ref[Crawler] | None) -> bool:
    """The crawl is gone, or failed before its engine existed (nothing will close its handler)."""
    if owner is None:
        return False
    crawler = owner()
    if crawler is None:
        return True
    # Started, stopped, and no engine: Scrapy's crawl failed before the engine was made.
    # (Scrapy documents the underscore attributes for code that runs before the crawl
    # starts; test_resolver pins them.)
    return bool(getattr(crawler, "_started", False) and not crawler.crawling
            and getattr(crawler, "_engine", None) is None)


def ensure_resolver(crawler: Crawler, policy: AddressPolicy) -> PolicyResolver:
    """The reactor's PolicyResolver (installed now if another one is), with ``policy`` attached."""
    from twisted.internet import reactor

    current: Any = getattr(reactor, "nameResolver", None)
    if isinstance(current, PolicyResolver) and current.prune():
        current.uninstall()  # only crawls that never ran used it: start afresh
        current = getattr(reactor, "nameResolver", None)
    fresh = PolicyResolver.from_crawler(crawler, reactor)
    if not isinstance(current, PolicyResolver):
        fresh.install_on_reactor()
        logger.debug("Installed the address-checking name resolver")
        resolver = fresh
    else:
        # One process, one resolver: the newest crawl's lookup and networks rule it
        # (a crawl that ended without closing its handler must not leave its own).
        resolver = current
        if resolver.lookup is not fresh.lookup:
            resolver.lookup = fresh.lookup
            resolver._cache.clear()
            resolver._refusals.clear()
        resolver.base = fresh.base
        resolver.cache_size = fresh.cache_size
    resolver.attach(policy, crawler)
    return resolver


def release_resolver(resolver: PolicyResolver, policy: AddressPolicy) -> None:
    """Detach a crawl's policy; the last crawl out puts the previous resolver back."""
    if resolver.detach(policy):
        resolver.uninstall()


__all__ = ["PolicyResolver", "ensure_resolver", "release_resolver", "system_lookup"]
