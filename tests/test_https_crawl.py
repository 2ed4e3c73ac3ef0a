"""The politeness over HTTPS: identity, robots.txt, conditional requests and the
connect-time address check, against loopback TLS servers with a self-signed
certificate made for the test.

Scrapy's default TLS context factory does not verify the peer's certificate
(``DOWNLOAD_VERIFY_CERTIFICATES`` is False), so the self-signed certificate is
accepted as any certificate would be; the test web answers nothing but TLS, so
every page that comes back came over it. Every assertion about what was sent
comes from the TLS server's own request log.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest
import pytest_twisted

from demo.web.server import Resp, Site, page
from polite_crawler import __version__
from polite_crawler.middlewares.addresses import AddressRefusedError
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import run_crawl
from tests.netguard import LOOPBACK, guard_connections
from tests.pages_web import ArticleSite, PageSpider
from tests.test_resolver import FakeDNS, _fails, _fetch, _handler
from tests.tls_web import TLSTestWeb, self_signed, server_context

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

START = "127.0.0.1"
INSIDE = "127.0.0.3"  # loopback, never named by the operator
BOT_URL = "https://bot.example/"
NAMES = ["localhost", "good.test", "evil.test", "rebind.test"]
ADDRESSES = [START, "127.0.0.2", INSIDE, "127.0.9.1"]


@pytest.fixture
def tls_web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., TLSTestWeb]]:
    """Start TLS test webs with ``tls_web(sites)``; every one is stopped after the test."""
    cert, key = self_signed(tmp_path_factory.mktemp("tls"), NAMES, ADDRESSES)
    context = server_context(cert, key)
    started: list[TLSTestWeb] = []

    def make(sites: dict[str, Site]) -> TLSTestWeb:
        web = TLSTestWeb(sites, context).start()
        started.append(web)
        return web

    yield make
    for web in started:
        web.stop()


def _site(name: str) -> Site:
    return Site({
        # OtherCrawler is another bot: its permissive group is not ours.
        "/robots.txt": "User-agent: *\nDisallow: /private\n\n"
                       "User-agent: OtherCrawler\nAllow: /\n",
        "/": page(name, f"home of {name}", ["/a", "/private/secret", "/b"]),
        "/a": page("A", f"alpha {name}", ["/", "/b"]),
        "/b": page("B", f"beta {name}", ["/a", "/private/other"]),
        "/private/secret": page("secret"),
        "/private/other": page("other"),
    })


def test_scrapy_does_not_verify_certificates_by_default() -> None:
    from scrapy.utils.test import get_crawler

    from tests.crawl import project_settings_dict

    crawler = get_crawler(SiteSpider, project_settings_dict())
    crawler._apply_settings()  # the add-on's settings too
    assert crawler.settings.getbool("DOWNLOAD_VERIFY_CERTIFICATES") is False
    # "SENTINEL": Scrapy's own context factory, whose TLS options skip verification
    # unless DOWNLOAD_VERIFY_CERTIFICATES is on (scrapy/core/downloader/contextfactory.py).
    assert crawler.settings["DOWNLOADER_CLIENTCONTEXTFACTORY"] == "SENTINEL"


@pytest_twisted.ensureDeferred
async def test_https_identity_and_robots_txt(tls_web: Any, tmp_path: Path) -> None:
    web = tls_web({START: _site("one"), "127.0.0.2": _site("two")})
    result = await run_crawl(
        SiteSpider, {"POLITE_STATE_DIR": str(tmp_path), "POLITE_CONTACT": "ops@example.org"},
        url=f"{web.url(START)},{web.url('127.0.0.2')}",
    )
    assert {i["url"] for i in result.items} == {
        web.url(h, p) for h in (START, "127.0.0.2") for p in ("/", "/a", "/b")}
    for host in (START, "127.0.0.2"):
        entries = web.entries(host)
        assert entries[0].path == "/robots.txt"  # robots.txt first, over TLS too
        assert [e.path for e in entries].count("/robots.txt") == 1
        assert not [e for e in entries if e.path.startswith("/private")]
        for e in entries:
            assert e.headers["user-agent"].startswith(f"PoliteCrawler/{__version__} (+http")
            assert e.headers["user-agent"].endswith("; ops@example.org)")
            assert e.headers["from"] == "ops@example.org"


@pytest_twisted.ensureDeferred
async def test_https_conditional_requests(tls_web: Any, tmp_path: Path) -> None:
    site = ArticleSite(n=3, validators="etag")
    web = tls_web({"127.0.9.1": site})
    state = {"POLITE_STATE_DIR": str(tmp_path)}
    first = await run_crawl(PageSpider, {**state, "JOBDIR": str(tmp_path / "job1")},
                            url=web.url("127.0.9.1"))
    assert len(first.items) == 4
    before = len(web.entries("127.0.9.1"))
    etags = {i["final_url"]: i["etag"] for i in first.items}
    second = await run_crawl(PageSpider, {**state, "JOBDIR": str(tmp_path / "job2")},
                             url=web.url("127.0.9.1"), recrawl="all")
    again = [e for e in web.entries("127.0.9.1")[before:]
             if e.path == "/" or e.path.startswith("/a/")]
    assert {e.path for e in again} == {"/", *site.texts}
    for e in again:
        assert e.headers["if-none-match"] == etags[web.url("127.0.9.1", e.path)]
        assert e.status == 304 and e.bytes_sent == 0
    assert second.stats["polite/conditional/not_modified"] == 4


@pytest_twisted.ensureDeferred
async def test_https_handler_refuses_a_name_resolving_inward(tls_web: Any) -> None:
    web = tls_web({START: Site({"/": page("start")}), INSIDE: Site({"/": page("secret")})})
    dns = FakeDNS({"evil.test": [[INSIDE]], "good.test": [[START]]})
    handler = _handler(start=web.url(START), dns=dns)
    with guard_connections(LOOPBACK) as netguard:
        ok = await _fetch(handler, web.url(START))
        assert ok.status == 200 and b"start" in ok.body
        ok = await _fetch(handler, f"https://good.test:{web.port}/")
        assert ok.status == 200
        refused, _ = await _fails(handler, f"https://evil.test:{web.port}/", AddressRefusedError)
    assert refused.reason == "dns-loopback"
    assert netguard.escapes == []
    assert web.entries(INSIDE) == []
    assert INSIDE not in netguard.hosts()  # not even a TCP connect, let alone a handshake


@pytest_twisted.ensureDeferred
async def test_https_connection_check_holds_without_the_resolver(tls_web: Any,
                                                                 monkeypatch: Any) -> None:
    """An internal address handed out anyway: the connection closes before the TLS handshake."""
    web = tls_web({START: Site({"/": page("start")}), INSIDE: Site({"/": page("secret")})})
    handler = _handler(start=web.url(START), dns=FakeDNS({"evil.test": [[INSIDE]]}))
    monkeypatch.setattr(handler.resolver, "filter",
                        lambda name, addresses, port: list(addresses))
    with guard_connections(LOOPBACK) as netguard:
        refused, _ = await _fails(handler, f"https://evil.test:{web.port}/", AddressRefusedError)
    assert refused.reason == "dns-loopback"
    assert refused.address == INSIDE
    assert INSIDE in netguard.hosts()  # the TCP connection was made ...
    time.sleep(0.2)
    assert web.entries(INSIDE) == []  # ... and no request went over it


@pytest_twisted.ensureDeferred
async def test_https_crawl_redirect_to_a_name_resolving_inward(tls_web: Any,
                                                               tmp_path: Path) -> None:
    web = tls_web({
        START: Site({"/robots.txt": "User-agent: *\nAllow: /\n",
                     "/": page("home", links=["/a", "/to-evil"]), "/a": page("A")}),
        INSIDE: Site({"/": page("secret"), "/robots.txt": "User-agent: *\nAllow: /\n"}),
    })
    web.sites[START].routes["/to-evil"] = Resp(302, b"", headers={
        "Location": f"https://evil.test:{web.port}/"})
    dns = FakeDNS({"evil.test": [[INSIDE]]})
    with guard_connections(LOOPBACK) as netguard:
        result = await run_crawl(
            SiteSpider,
            {"POLITE_STATE_DIR": str(tmp_path), "POLITE_DNS_LOOKUP": dns,
             "DNSCACHE_ENABLED": False, "POLITE_BOT_URL": BOT_URL},
            url=web.url(START),
        )
    assert netguard.escapes == []
    assert {i["url"] for i in result.items} == {web.url(START), web.url(START, "/a")}
    assert web.entries(INSIDE) == []
    assert INSIDE not in netguard.hosts()
    assert result.stats.get("polite/addresses/refused/dns-loopback", 0) >= 1


def test_the_tls_web_answers_nothing_over_plain_http(tls_web: Any) -> None:
    import socket

    web = tls_web({START: Site({"/": page("start")})})
    with socket.create_connection((START, web.port), timeout=2) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.settimeout(1.0)
        try:
            answer = sock.recv(100)
        except (TimeoutError, ConnectionResetError):
            answer = b""
    assert not answer.startswith(b"HTTP/")
    assert web.entries(START) == []
