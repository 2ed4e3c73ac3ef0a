"""Which server each host name is, for the frontier: the address it connects to.

The frontier asks for a host's address every time it dispatches one of its origins
(:attr:`polite_crawler.frontier.core.Frontier.address_of`), so the answer must cost a
dictionary lookup: this book keeps each name's address for the resolver's cache time
(``resolver.CACHE_TTL``) and asks again in the background when it runs out, keeping the
old answer meanwhile (a name that moves follows its new address within that time). A
name never asked before is looked up through the process's
:class:`polite_crawler.resolver.PolicyResolver` (the one the download handler installed
on the reactor, so its cache and address policy; one of the book's own, built from the
same settings, until the handler exists) and its origins wait until the answer comes
(``Frontier.address_known``). A name that does not resolve is a server of its own
(``name:<host>``): its request fails at the handler, as it would without the book.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from polite_crawler.resolver import CACHE_TTL, PolicyResolver

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class AddressBook:
    def __init__(self, crawler: Crawler, clock: Callable[[], float],
                 on_known: Callable[[str], None], ttl: float = CACHE_TTL) -> None:
        self.crawler = crawler
        self.clock = clock
        self.on_known = on_known
        self.ttl = ttl
        self._known: dict[str, tuple[str, float]] = {}  # name -> (address, good until)
        self._pending: set[str] = set()
        self._own: PolicyResolver | None = None

    def _resolver(self) -> PolicyResolver:
        from twisted.internet import reactor

        current: Any = getattr(reactor, "nameResolver", None)
        if isinstance(current, PolicyResolver):
            return current
        if self._own is None:
            self._own = PolicyResolver.from_crawler(self.crawler, reactor)
        return self._own

    def address(self, name: str) -> str | None:
        """The address ``name`` connects to; None while it is being looked up."""
        found = self._known.get(name)
        if found is not None:
            if self.clock() >= found[1] and name not in self._pending:
                self._ask(name)  # followed: the old answer stands until the new one
            return found[0]
        now = self._resolver().address_now(name)
        if now is not None:
            self._known[name] = (now, self.clock() + self.ttl)
            return now
        if name not in self._pending:
            self._ask(name)
        return None

    def _ask(self, name: str) -> None:
        self._pending.add(name)

        def done(address: str | None) -> None:
            self._pending.discard(name)
            old = self._known.get(name)
            self._known[name] = (address or f"name:{name}", self.clock() + self.ttl)
            if old is not None and address and old[0] != address:
                logger.info("%(name)s moved from %(old)s to %(new)s",
                            {"name": name, "old": old[0], "new": address})
            self.on_known(name)

        self._resolver().address(name).addCallback(done)
