"""A finished exchange's connection objects die by reference counting, not at a full
collection.

Twisted's connector and its TCP transport refer to each other after the connection is
lost, the endpoint's wrapping factory refers back to the connector, and a chunked
body's decoder calls back into the response parser: each a reference cycle that keeps
the connection's objects (transport, protocol, parser, response headers) until the
cyclic collector's next full collection, which a crawl's large heap rarely gets. With a
connection closed after each exchange (a rest longer than the keep-alive time) that was
one set a request, held for the whole crawl. These exchanges run with the collector off:
what a cycle holds stays, and the test sees it.
"""

from __future__ import annotations

import gc
import weakref
from typing import TYPE_CHECKING, Any

import pytest
import pytest_twisted
from scrapy import Request, Spider
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.test import get_crawler
from twisted.internet import reactor
from twisted.internet.task import deferLater

from demo.web.server import Resp, Site, page
from polite_crawler import handlers
from polite_crawler.handlers import GuardedHTTPDownloadHandler
from polite_crawler.resolver import release_resolver
from tests.netguard import LOOPBACK

if TYPE_CHECKING:
    from collections.abc import Iterator

HOST = "127.0.8.21"


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Weak references to every protocol the handler builds, its transport and its
    transport's connector (watched, not changed)."""
    refs: list[Any] = []
    build = handlers._GuardedFactory.buildProtocol

    def watched(self: Any, addr: Any) -> Any:
        proto = build(self, addr)
        refs.append(proto)
        return proto

    monkeypatch.setattr(handlers._GuardedFactory, "buildProtocol", watched)
    yield refs


def _alive(protocols: list[Any]) -> list[weakref.ref[Any]]:
    """Weak references to the protocols, their transports and connectors, their parsers."""
    out = []
    for proto in protocols:
        out.append(weakref.ref(proto))
        transport = proto.transport
        out.append(weakref.ref(transport))
        out.append(weakref.ref(transport.connector))
    return out


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("chunked", [True, False])
async def test_a_closed_connection_is_freed_without_the_collector(
        web_factory: Any, built: list[Any], chunked: bool) -> None:
    body = page("a page", "some text " * 200)
    web = web_factory({HOST: Site({
        "/": Resp(200, [body[:500], body[500:]] if chunked else body, chunked=chunked,
                  gzip_ok=False)})})
    crawler = get_crawler(Spider, {"POLITE_ALLOW_NETWORKS": LOOPBACK})
    handler = GuardedHTTPDownloadHandler.from_crawler(crawler)
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for _ in range(2):
            response = await deferred_from_coro(handler.download_request(Request(web.url(HOST))))
            assert response.status == 200 and response.body == body
            handler.pool.closeCachedConnections()  # the connection closes, as after a rest
        assert len(built) == 2
        watched = _alive(built)
        built.clear()
        del response
        await deferLater(reactor, 0.2, lambda: None)  # the connections' close runs
        alive = [ref() is not None for ref in watched]
    finally:
        await deferred_from_coro(handler.close())
        release_resolver(handler.resolver, handler.policy)
        if enabled:
            gc.enable()
    assert alive == [False] * 6
