"""The DNS guard and the connection check: no name can lead the crawler inward.

A name in /etc/hosts is not available to tests, so names are resolved by an
injected lookup function (:class:`FakeDNS`); the addresses it returns are real
loopback servers of the test web. 127.0.0.1 is the start host; 127.0.0.3 is
loopback too but not a start host, so reaching it is an escape.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
import pytest_twisted
from scrapy import Request, Spider
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.test import get_crawler
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IResolutionReceiver
from zope.interface import implementer

from demo.web.server import Resp, Site, page
from polite_crawler.extensions.accesslog import read_access_log
from polite_crawler.handlers import (
    ConnectTimeoutError,
    ExchangeTimeoutError,
    GuardedHTTPDownloadHandler,
    HeadersTimeoutError,
    HeadersTooLargeError,
)
from polite_crawler.middlewares.addresses import AddressRefusedError, address_policy
from polite_crawler.policy.addresses import AddressPolicy
from polite_crawler.policy.identity import IdentityError
from polite_crawler.policy.verdicts import Action, classify_exception
from polite_crawler.resolver import PolicyResolver, release_resolver, system_lookup
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import run_crawl
from tests.netguard import LOOPBACK, guard_connections

START = "127.0.0.1"
INSIDE = "127.0.0.3"  # loopback, never named by the operator
BOT_URL = "https://bot.example/"  # names that are not loopback need a bot page
BROWSER = "Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/128.0"  # refused at start


class FakeDNS:
    """An injected lookup: each name answers from a list of answers, one per lookup."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    def __call__(self, name: str, port: int) -> list[str]:
        self.calls.append(name)
        seq = self.answers.get(name)
        if not seq:
            return []
        return seq.pop(0) if len(seq) > 1 else seq[0]


async def resolve(resolver: PolicyResolver, name: str, port: int = 80) -> list[str]:
    done: Deferred[list[str]] = Deferred()
    found: list[str] = []

    @implementer(IResolutionReceiver)
    class Receiver:
        def resolutionBegan(self, resolution: Any) -> None:
            pass

        def addressResolved(self, address: Any) -> None:
            found.append(address.host)

        def resolutionComplete(self) -> None:
            done.callback(found)

    resolver.resolveHostName(Receiver(), name, port)
    return await done


# --- the resolver ------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_resolver_passes_public_and_drops_internal() -> None:
    dns = FakeDNS({
        "public.example": [["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"]],
        "inward.example": [["10.0.0.1"]],
        "metadata.example": [["169.254.169.254"]],
        "mixed.example": [["192.168.1.1", "93.184.215.14"]],
        "mapped.example": [["::ffff:127.0.0.1"]],
    })
    resolver = PolicyResolver(reactor, AddressPolicy(), dns)
    assert await resolve(resolver, "public.example") == [
        "93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"]
    assert resolver.refusal_for("public.example") is None
    assert await resolve(resolver, "inward.example") == []
    assert resolver.refusal_for("inward.example") == "dns-private"
    assert await resolve(resolver, "metadata.example") == []
    assert resolver.refusal_for("METADATA.example.") == "dns-link-local"
    assert await resolve(resolver, "mixed.example") == ["93.184.215.14"]
    assert await resolve(resolver, "mapped.example") == []
    assert resolver.refusal_for("mapped.example") == "dns-loopback"
    assert await resolve(resolver, "nxdomain.example") == []
    assert resolver.refusal_for("nxdomain.example") is None  # a plain DNS failure


@pytest_twisted.ensureDeferred
async def test_resolver_refuses_rebinding_even_from_cache() -> None:
    dns = FakeDNS({"rebind.example": [["93.184.215.14"], ["127.0.0.1"]]})
    resolver = PolicyResolver(reactor, AddressPolicy(start_urls=["http://rebind.example/"]), dns,
                              cache_ttl=0.0)
    assert await resolve(resolver, "rebind.example") == ["93.184.215.14"]
    # The second answer, a moment later, points at loopback: the start name was public.
    assert await resolve(resolver, "rebind.example") == []
    assert resolver.refusal_for("rebind.example") == "dns-loopback"
    assert dns.calls == ["rebind.example", "rebind.example"]


@pytest_twisted.ensureDeferred
async def test_resolver_cache_is_rechecked_and_literals_need_no_lookup() -> None:
    dns = FakeDNS({"a.example": [["10.0.0.7"]]})
    crawl = AddressPolicy()
    resolver = PolicyResolver(reactor, AddressPolicy(), dns)
    resolver.attach(crawl)
    assert await resolve(resolver, "a.example") == []
    crawl.allow_networks.append(__import__("ipaddress").ip_network("10.0.0.0/24"))
    assert await resolve(resolver, "a.example") == ["10.0.0.7"]  # from the cache, re-checked
    assert resolver.lookups == 1
    assert await resolve(resolver, "10.0.0.9") == ["10.0.0.9"]
    assert await resolve(resolver, "127.0.0.1") == []
    assert resolver.lookups == 1
    assert resolver.detach(crawl) is True


@pytest_twisted.ensureDeferred
async def test_intranet_start_name_resolves_inward() -> None:
    dns = FakeDNS({"wiki.corp.example": [["10.1.1.1"]], "other.corp.example": [["10.1.1.2"]]})
    resolver = PolicyResolver(reactor, AddressPolicy(), dns)
    resolver.attach(AddressPolicy(start_urls=["http://wiki.corp.example/"]))
    assert await resolve(resolver, "wiki.corp.example") == ["10.1.1.1"]
    assert await resolve(resolver, "other.corp.example") == []


@pytest_twisted.ensureDeferred
async def test_failing_lookup_resolves_to_nothing() -> None:
    def broken(name: str, port: int) -> list[str]:
        raise OSError("resolver on fire")

    resolver = PolicyResolver(reactor, AddressPolicy(), broken)
    assert await resolve(resolver, "x.example") == []


def test_system_lookup_reads_numeric_hosts_like_the_policy() -> None:
    # getaddrinfo reads these spellings as addresses, as the policy does.
    for spelling, address in [("2130706433", "127.0.0.1"), ("0x7f.1", "127.0.0.1"),
                              ("127.1", "127.0.0.1"), ("0177.0.0.1", "127.0.0.1")]:
        assert system_lookup(spelling, 80) == [address]
        assert address_host_text(spelling) == address


def address_host_text(spelling: str) -> str:
    from polite_crawler.policy.addresses import parse_host

    return parse_host(spelling).text


# --- the download handler, driven directly -----------------------------------------------


_OPEN: list[GuardedHTTPDownloadHandler] = []


def _handler(settings: dict[str, Any] | None = None, start: str | None = None,
             dns: FakeDNS | None = None) -> GuardedHTTPDownloadHandler:
    values = {"POLITE_DNS_LOOKUP": dns or FakeDNS({}), **(settings or {})}
    crawler = get_crawler(Spider, values)
    if start:
        address_policy(crawler).add_start_url(start)
    handler = GuardedHTTPDownloadHandler.from_crawler(crawler)
    _OPEN.append(handler)
    return handler


@pytest.fixture(autouse=True)
def _no_resolver_left_behind() -> Any:
    """A failed test must not leave its resolver on the reactor for the next one."""
    yield
    while _OPEN:
        handler = _OPEN.pop()
        release_resolver(handler.resolver, handler.policy)


async def _fetch(handler: GuardedHTTPDownloadHandler, url: str) -> Any:
    return await deferred_from_coro(handler.download_request(Request(url)))


async def _fails(handler: GuardedHTTPDownloadHandler, url: str,
                 expected: type[BaseException]) -> tuple[Any, float]:
    """The exception the fetch ends in and the seconds it took; the handler is closed."""
    t0 = time.monotonic()
    try:
        with pytest.raises(expected) as exc:
            await _fetch(handler, url)
    finally:
        await deferred_from_coro(handler.close())
    return exc.value, time.monotonic() - t0


@pytest_twisted.ensureDeferred
async def test_handler_refuses_name_resolving_inward(web_factory) -> None:
    web = web_factory({START: Site({"/": page("start")}), INSIDE: Site({"/": page("secret")})})
    dns = FakeDNS({"evil.test": [[INSIDE]], "good.test": [[START]]})
    handler = _handler(start=web.url(START), dns=dns)
    with guard_connections(LOOPBACK) as netguard:
        ok = await _fetch(handler, web.url(START))
        assert ok.status == 200
        # A name that resolves to the start host's address reaches it (the operator named it).
        ok = await _fetch(handler, f"http://good.test:{web.port}/")
        assert ok.status == 200
        refused, _ = await _fails(handler, f"http://evil.test:{web.port}/", AddressRefusedError)
    assert refused.reason == "dns-loopback"
    assert netguard.escapes == []
    assert web.entries(INSIDE) == []
    assert INSIDE not in netguard.hosts()  # not even a TCP connect: the resolver dropped it
    assert classify_exception(refused).action is Action.GIVE_UP  # not the site's failure


@pytest_twisted.ensureDeferred
async def test_connection_check_holds_without_the_resolver(web_factory, monkeypatch) -> None:
    """Even if a resolver hands out an internal address, nothing is written to it."""
    web = web_factory({START: Site({"/": page("start")}), INSIDE: Site({"/": page("secret")})})
    handler = _handler(start=web.url(START), dns=FakeDNS({"evil.test": [[INSIDE]]}))
    # A resolver that filters nothing (another resolver installed, a bug ...); undone after
    # the test, as the resolver may outlive it.
    monkeypatch.setattr(handler.resolver, "filter",
                        lambda name, addresses, port: list(addresses))
    with guard_connections(LOOPBACK) as netguard:
        refused, _ = await _fails(handler, f"http://evil.test:{web.port}/", AddressRefusedError)
    assert refused.reason == "dns-loopback"
    assert refused.address == INSIDE
    assert netguard.escapes == []
    assert INSIDE in netguard.hosts()  # the TCP connection was made ...
    time.sleep(0.2)
    assert web.entries(INSIDE) == []  # ... and closed before a byte of the request


def test_pool_never_resends_on_its_own() -> None:
    handler = _handler()
    assert handler._pool.retryAutomatically is False  # every failure goes to the gate


@pytest_twisted.ensureDeferred
async def test_crawl_that_never_ran_leaves_no_allowance_behind(web_factory, tmp_path) -> None:
    """A crawl refused at start (after its download handler was made) never closes it.

    Its policy, which named INSIDE, must not let a later crawl's name resolve there.
    """
    before = reactor.nameResolver
    web = web_factory({
        START: Site({"/robots.txt": "User-agent: *\nAllow: /\n",
                     "/": page("home", "the start page", links=["/to-evil"])}),
        INSIDE: Site({"/": page("secret")}),
    })
    web.sites[START].routes["/to-evil"] = _redirect(f"http://evil.test:{web.port}/")
    with pytest.raises(IdentityError):
        await run_crawl(SiteSpider, {"POLITE_STATE_DIR": str(tmp_path / "refused"),
                                     "USER_AGENT": BROWSER}, url=web.url(INSIDE))
    dns = FakeDNS({"evil.test": [[INSIDE]]})
    with guard_connections(LOOPBACK) as netguard:
        result = await run_crawl(
            SiteSpider,
            {"POLITE_STATE_DIR": str(tmp_path / "crawl"), "POLITE_DNS_LOOKUP": dns,
             "DNSCACHE_ENABLED": False, "POLITE_BOT_URL": BOT_URL},
            url=web.url(START),
        )
    assert result.stats.get("polite/addresses/refused/dns-loopback", 0) >= 1
    assert netguard.escapes == []
    assert INSIDE not in netguard.hosts()  # the resolver dropped it: not even a TCP connect
    assert web.entries(INSIDE) == []
    assert reactor.nameResolver is before  # the last crawl out put the old resolver back


@pytest_twisted.ensureDeferred
async def test_resolver_left_by_a_crawl_that_never_ran_steps_aside(web_factory) -> None:
    """A plain resolution after such a crawl is the previous resolver's, not a refusal."""
    before = reactor.nameResolver
    web = web_factory({START: Site({"/": page("home")})})
    with pytest.raises(IdentityError):
        await run_crawl(SiteSpider, {"USER_AGENT": BROWSER}, url=web.url(START))
    assert isinstance(reactor.nameResolver, PolicyResolver)  # left behind by the refused crawl
    # 127.0.0.3 was never named by anyone: a PolicyResolver would refuse it.
    assert await resolve(reactor.nameResolver, INSIDE) == [INSIDE]
    assert reactor.nameResolver is before


@pytest_twisted.ensureDeferred
async def test_resolver_installed_for_the_crawl_and_restored() -> None:
    before = reactor.nameResolver
    handler = _handler()
    assert reactor.nameResolver is handler.resolver
    await deferred_from_coro(handler.close())
    assert reactor.nameResolver is before


# --- timeouts and the head cap ---------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_head_timeout(web_factory) -> None:
    web = web_factory({START: Site({"/slow-head": Resp(200, page("late"), delay=10.0)})})
    handler = _handler({"POLITE_HEADERS_TIMEOUT": 0.3, "POLITE_EXCHANGE_TIMEOUT": 5.0},
                       start=web.url(START))
    exc, took = await _fails(handler, web.url(START, "/slow-head"), HeadersTimeoutError)
    # Cut by the 0.3 s limit, not by the head at 10 s (the margin is a busy machine's).
    assert took < 5.0
    assert isinstance(exc, TimeoutError)
    verdict = classify_exception(exc)
    assert verdict.action is Action.RETRY_LATER and verdict.failure
    assert verdict.reason == "error:timeout"


@pytest_twisted.ensureDeferred
async def test_dribbling_body_cut_by_exchange_timeout(web_factory) -> None:
    dribble = Resp(200, (b"x" for _ in range(100)), delay_per_chunk=0.1, content_type="text/html")
    web = web_factory({START: Site({"/dribble": dribble})})
    handler = _handler({"POLITE_HEADERS_TIMEOUT": 0.5, "POLITE_EXCHANGE_TIMEOUT": 1.0,
                        "DOWNLOAD_TIMEOUT": 180}, start=web.url(START))
    exc, took = await _fails(handler, web.url(START, "/dribble"), ExchangeTimeoutError)
    assert 0.9 < took < 5.0  # the site's 10 s dribble could not stretch the 1 s limit
    assert classify_exception(exc).reason == "error:timeout"


@pytest_twisted.ensureDeferred
async def test_connect_timeout() -> None:
    # A listener whose backlog is full: the kernel drops further SYNs, the connect hangs.
    listener = socket.socket()
    listener.bind(("127.0.0.4", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.4", port))
        fillers.append(filler)
    handler = _handler({"POLITE_CONNECT_TIMEOUT": 0.5}, start=f"http://127.0.0.4:{port}/")
    try:
        exc, took = await _fails(handler, f"http://127.0.0.4:{port}/", ConnectTimeoutError)
    finally:
        for sock in [*fillers, listener]:
            sock.close()
    assert 0.4 < took < 5.0  # the 0.5 s limit, not the kernel's SYN retries (minutes)
    assert classify_exception(exc).reason == "error:timeout"


@pytest_twisted.ensureDeferred
async def test_head_size_cap(web_factory) -> None:
    many = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"y" * 100) for i in range(2000))
    web = web_factory({START: Site({
        "/fat-head": Resp(raw=b"HTTP/1.1 200 OK\r\n" + many + b"Content-Length: 2\r\n\r\nok"),
        "/ok-head": Resp(raw=b"HTTP/1.1 200 OK\r\n" + many[:20_000]
                         + b"Content-Length: 2\r\n\r\nok"),
    })})
    handler = _handler({"POLITE_MAX_HEADER_BYTES": 64 * 1024}, start=web.url(START))
    try:
        with pytest.raises(HeadersTooLargeError):
            await _fetch(handler, web.url(START, "/fat-head"))
        ok = await _fetch(handler, web.url(START, "/ok-head"))
        assert ok.status == 200 and ok.body == b"ok"
    finally:
        await deferred_from_coro(handler.close())


def test_private_hooks_still_exist() -> None:
    """The Scrapy/Twisted internals the handler relies on (see polite_crawler.handlers)."""
    from scrapy.core.downloader.handlers import http11
    from twisted.web._newclient import HTTP11ClientProtocol
    from twisted.web.client import HTTPConnectionPool

    assert hasattr(HTTPConnectionPool, "_newConnection")
    assert hasattr(HTTPConnectionPool, "_putConnection")
    # A known name's connection goes straight to its address (handlers._GuardedPool._direct).
    from twisted.internet.endpoints import HostnameEndpoint, _WrapperEndpoint, wrapClientTLS

    name = HostnameEndpoint(reactor, b"a.test", 80, timeout=3, bindAddress=None)
    assert (name._timeout, name._bindAddress) == (3, None)
    wrapped = wrapClientTLS(None, name)  # type: ignore[arg-type]
    assert type(wrapped) is _WrapperEndpoint and wrapped._wrappedEndpoint is name
    assert callable(wrapped._wrapperFactory)
    # The guarded agent (handlers._GuardedAgent, _LazyEndpoint) and the copy of Scrapy's
    # download_request in GuardedHTTPDownloadHandler._download_if_held.
    from scrapy.utils import _download_handlers

    assert hasattr(http11._ScrapyAgent, "_get_agent")
    assert issubclass(http11._BindAddressAgent, http11.Agent)
    for helper in ("wrap_twisted_exceptions", "get_dataloss_msg", "normalize_bind_address"):
        assert hasattr(_download_handlers, helper)
    from twisted.web.client import BrowserLikePolicyForHTTPS

    agent = http11._BindAddressAgent(reactor, BrowserLikePolicyForHTTPS(), 5, None, None)  # type: ignore[arg-type]
    made = agent._endpointFactory
    assert (made._connectTimeout, made._bindAddress) == (5, None)
    assert hasattr(made, "_policyForHTTPS") and hasattr(made, "endpointForURI")
    assert issubclass(http11._LenientHTTP11ClientProtocol, HTTP11ClientProtocol)
    assert hasattr(http11._LenientHTTPClientParser, "lineReceived")
    assert "_parser" in HTTP11ClientProtocol.request.__code__.co_names
    crawler = get_crawler(Spider)
    scrapy_handler = http11.HTTP11DownloadHandler(crawler)
    assert isinstance(scrapy_handler._pool, HTTPConnectionPool)
    for name in ("_contextFactory", "_bind_address", "_default_maxsize", "_default_warnsize",
                 "_fail_on_dataloss", "_fail_on_dataloss_warned", "_tls_verbose_logging"):
        assert hasattr(scrapy_handler, name), name
    # How the resolver tells a crawl that failed before its engine existed.
    assert crawler._started is False and crawler._engine is None


# --- whole crawls ----------------------------------------------------------------------


def _redirect(to: str) -> Resp:
    return Resp(302, b"", headers={"Location": to})


@pytest_twisted.ensureDeferred
async def test_crawl_redirect_to_name_resolving_inward(web_factory, tmp_path) -> None:
    web = web_factory({
        START: Site({
            "/robots.txt": "User-agent: *\nAllow: /\n",
            "/": page("home", links=["/a", "/to-evil", "/to-rebind"]),
            "/a": page("A"),
        }),
        INSIDE: Site({"/": page("secret"), "/robots.txt": "User-agent: *\nAllow: /\n"}),
    })
    web.sites[START].routes["/to-evil"] = _redirect(f"http://evil.test:{web.port}/")
    web.sites[START].routes["/to-rebind"] = _redirect(f"http://rebind.test:{web.port}/")
    # rebind.test answers the start address first (robots.txt is fetched from it), then
    # an inside one: whichever connection the later requests use, none reaches INSIDE.
    dns = FakeDNS({"evil.test": [[INSIDE]], "rebind.test": [[START], [INSIDE]]})
    log = tmp_path / "access.jsonl"
    with guard_connections(LOOPBACK) as netguard:
        result = await run_crawl(
            SiteSpider,
            {"POLITE_STATE_DIR": str(tmp_path), "POLITE_ACCESS_LOG": str(log),
             "POLITE_DNS_LOOKUP": dns, "DNSCACHE_ENABLED": False, "POLITE_BOT_URL": BOT_URL},
            url=web.url(START),
        )
    assert netguard.escapes == []
    got = {i["url"] for i in result.items}
    assert {web.url(START), web.url(START, "/a")} <= got
    # rebind.test's page may come from the start address (a pooled connection), never inside.
    assert got <= {web.url(START), web.url(START, "/a"), f"http://rebind.test:{web.port}/"}
    assert web.entries(INSIDE) == []
    assert INSIDE not in netguard.hosts()
    stats = result.stats
    assert stats.get("polite/addresses/refused/dns-loopback", 0) >= 1
    lines = read_access_log(log)
    refused = [ln for ln in lines if str(ln["verdict"]).startswith("refused:")]
    assert any(ln["url"].startswith("http://evil.test") for ln in refused)
    assert all(ln["sent"] is None for ln in refused)
    assert not any(INSIDE in ln["url"] for ln in lines)
