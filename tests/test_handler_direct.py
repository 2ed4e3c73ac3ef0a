"""A new connection goes straight to the address the name is known to resolve to.

The frontier has each name resolved (through the handler's resolver, its cache and the
address policy) before the origin's first request; the download handler connects to
that address with a plain TCP endpoint instead of running Twisted's name resolution for
every connection. The rules stay: an address the policy refuses is never connected to,
the name's other addresses are tried when the first does not answer, and an answer is
used no longer than the resolver's cache time (a name that moves is followed).

Names come from an injected lookup; the addresses are real loopback servers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import pytest_twisted
from scrapy import Request, Spider
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.test import get_crawler

from demo.web.server import Site, page
from polite_crawler.handlers import GuardedHTTPDownloadHandler
from polite_crawler.middlewares.addresses import AddressRefusedError, address_policy
from polite_crawler.resolver import release_resolver
from tests.netguard import LOOPBACK, guard_connections
from tests.tls_web import TLSTestWeb, self_signed, server_context

if TYPE_CHECKING:
    from pathlib import Path

    from twisted.internet.defer import Deferred

START = "127.0.0.1"
OTHER = "127.0.0.2"
INSIDE = "127.0.0.3"  # loopback, never named by the operator
DOWN = "127.0.0.4"  # nothing listens there


class Answers:
    """An injected lookup whose answers the test changes."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.calls = 0

    def __call__(self, name: str, port: int) -> list[str]:
        self.calls += 1
        return list(self.answers.get(name, []))


_OPEN: list[GuardedHTTPDownloadHandler] = []


@pytest.fixture(autouse=True)
def _close_handlers() -> Any:
    yield
    while _OPEN:
        handler = _OPEN.pop()
        release_resolver(handler.resolver, handler.policy)


def _handler(dns: Answers, networks: list[str] | None = None, start: str | None = None,
             ) -> tuple[GuardedHTTPDownloadHandler, list[str], Answers]:
    """The handler, the names Twisted's resolution was asked for (one a connection that
    went through it), and the lookup as the resolver holds it (the settings copy it)."""
    crawler = get_crawler(Spider, {"POLITE_DNS_LOOKUP": dns,
                                   "POLITE_ALLOW_NETWORKS": networks or []})
    if start:
        address_policy(crawler).add_start_url(start)
    handler = GuardedHTTPDownloadHandler.from_crawler(crawler)
    _OPEN.append(handler)
    resolved: list[str] = []
    resolver: Any = handler.resolver
    through = resolver.resolveHostName

    def counted(receiver: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        resolved.append(name)
        return through(receiver, name, *args, **kwargs)

    resolver.resolveHostName = counted
    lookup: Answers = resolver.lookup
    return handler, resolved, lookup


async def _fetch(handler: GuardedHTTPDownloadHandler, url: str) -> Any:
    response = await deferred_from_coro(handler.download_request(Request(url)))
    handler.pool.closeCachedConnections()  # the next fetch makes a new connection
    return response


async def _known(handler: GuardedHTTPDownloadHandler, name: str) -> str | None:
    """The frontier's question (frontier.addresses.AddressBook): the name's address."""
    d: Deferred[str | None] = handler.resolver.address(name)
    return await d


@pytest_twisted.ensureDeferred
async def test_a_known_name_is_connected_to_without_resolving_it_again(web_factory) -> None:
    web = web_factory({START: Site({"/": page("a")})})
    handler, resolved, dns = _handler(Answers({"site.test": [START]}), networks=LOOPBACK)
    assert await _known(handler, "site.test") == START
    with guard_connections(LOOPBACK) as netguard:
        for _ in range(3):
            response = await _fetch(handler, f"http://site.test:{web.port}/")
            assert response.status == 200
    await deferred_from_coro(handler.close())
    assert resolved == [] and dns.calls == 1
    assert netguard.hosts() == {START}
    assert len(web.entries(START)) == 3


@pytest_twisted.ensureDeferred
async def test_a_known_address_the_policy_refuses_is_never_connected_to(web_factory) -> None:
    web = web_factory({START: Site({"/": page("start")}), INSIDE: Site({"/": page("secret")})})
    handler, _resolved, _dns = _handler(Answers({"evil.test": [INSIDE]}), start=web.url(START))
    assert await _known(handler, "evil.test") == INSIDE  # the server it would be
    with guard_connections(LOOPBACK) as netguard, \
            pytest.raises(AddressRefusedError) as refused:
        await _fetch(handler, f"http://evil.test:{web.port}/")
    await deferred_from_coro(handler.close())
    assert refused.value.reason == "dns-loopback"
    assert INSIDE not in netguard.hosts()  # not even a TCP connect
    assert web.entries(INSIDE) == []


@pytest_twisted.ensureDeferred
async def test_the_names_other_addresses_are_tried_when_the_first_does_not_answer(
        web_factory) -> None:
    web = web_factory({START: Site({"/": page("a")})})
    handler, _resolved, _dns = _handler(Answers({"two.test": [DOWN, START]}), networks=LOOPBACK)
    assert await _known(handler, "two.test") == DOWN
    with guard_connections(LOOPBACK) as netguard:
        response = await _fetch(handler, f"http://two.test:{web.port}/")
    await deferred_from_coro(handler.close())
    assert response.status == 200
    assert netguard.connects[0] == DOWN and START in netguard.hosts()
    assert len(web.entries(START)) == 1


@pytest_twisted.ensureDeferred
async def test_a_name_that_moves_is_followed_once_its_answer_is_old(web_factory) -> None:
    web = web_factory({START: Site({"/": page("a")}), OTHER: Site({"/": page("b")})})
    handler, resolved, dns = _handler(Answers({"moving.test": [START]}), networks=LOOPBACK)
    assert await _known(handler, "moving.test") == START
    await _fetch(handler, f"http://moving.test:{web.port}/")
    dns.answers["moving.test"] = [OTHER]
    await _fetch(handler, f"http://moving.test:{web.port}/")  # the cached answer holds
    handler.resolver.cache_ttl = 0.0  # ... until it is older than the cache time
    await _fetch(handler, f"http://moving.test:{web.port}/")
    await deferred_from_coro(handler.close())
    assert len(web.entries(START)) == 2
    assert len(web.entries(OTHER)) == 1
    assert resolved == ["moving.test"] and dns.calls == 2


@pytest_twisted.ensureDeferred
async def test_https_goes_straight_to_the_address_and_a_kept_connection_makes_no_tls_setup(
        tmp_path: Path) -> None:
    """TLS is wrapped round the direct connection with the URL's host for SNI, and a
    request on a kept connection builds no endpoint and no TLS connection creator."""
    cert, key = self_signed(tmp_path, ["good.test"], [START])
    web = TLSTestWeb({START: Site({"/": page("a"), "/b": page("b")})},
                     server_context(cert, key)).start()
    try:
        handler, resolved, _dns = _handler(Answers({"good.test": [START]}), networks=LOOPBACK)
        handler.pool.max_idle = 8  # keep the connection (the test crawl's budget keeps none)
        made: list[bytes] = []
        factory: Any = handler._contextFactory
        creator = factory.creatorForNetloc

        def counted(host: bytes, port: int) -> Any:
            made.append(host)
            return creator(host, port)

        factory.creatorForNetloc = counted
        assert await _known(handler, "good.test") == START
        for path in ("/", "/b"):
            response = await deferred_from_coro(handler.download_request(
                Request(f"https://good.test:{web.port}{path}", meta={"polite_origin": "o"})))
            assert response.status == 200
        await deferred_from_coro(handler.close())
    finally:
        web.stop()
    assert [e.path for e in web.entries(START)] == ["/", "/b"]
    assert made == [b"good.test"]  # one connection, one TLS setup, for the URL's host
    assert resolved == []
