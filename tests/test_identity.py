from __future__ import annotations

import pytest
import pytest_twisted
from scrapy.utils.test import get_crawler

from demo.web.server import Site, page
from polite_crawler import __version__
from polite_crawler.policy.identity import (
    IdentityError,
    build_identity,
    check_user_agent,
    is_loopback_host,
)
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import project_settings_dict, run_crawl

CHROME = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/126.0 Safari/537.36"
)


def test_user_agent_form() -> None:
    ident = build_identity("PoliteCrawler", "0.1.0", "https://e.org/bot/", "ops@e.org")
    assert ident.user_agent == "PoliteCrawler/0.1.0 (+https://e.org/bot/; ops@e.org)"
    assert ident.token == "PoliteCrawler"
    assert ident.from_header == "ops@e.org"
    assert build_identity("PoliteCrawler", "0.1.0", "https://e.org/bot/").from_header is None


@pytest.mark.parametrize("name", ["Polite Crawler", "Mozilla", "Bot/1.0", ""])
def test_bad_token_refused(name: str) -> None:
    with pytest.raises(IdentityError):
        build_identity(name, "1", "https://e.org/bot")


def test_browser_user_agent_refused() -> None:
    ident = build_identity("PoliteCrawler", "0.1.0", "https://e.org/bot/")
    with pytest.raises(IdentityError, match="browser"):
        check_user_agent(CHROME, ident)
    with pytest.raises(IdentityError, match="token"):
        check_user_agent("SomethingElse/1.0", ident)
    check_user_agent(ident.user_agent, ident)
    check_user_agent(None, ident)


def test_loopback() -> None:
    assert is_loopback_host("127.0.0.9")
    assert is_loopback_host("[::1]")
    assert is_loopback_host("LOCALHOST.")
    assert not is_loopback_host("10.0.0.1")
    assert not is_loopback_host("example.org")


def _site(host: str = "") -> Site:
    # Each host its own text: pages with the same main text are one page (an alias).
    return Site({
        "/": page("Home", f"welcome {host}", ["/a", "/b"]),
        "/a": page("A", f"alpha {host}", ["/", "/b"]),
        "/b": page("B", f"beta {host}", ["/a"]),
        "/robots.txt": "User-agent: *\nAllow: /\n",
    })


@pytest_twisted.ensureDeferred
async def test_every_request_identified(web_factory) -> None:
    web = web_factory({"127.0.0.1": _site("one"), "127.0.0.2": _site("two")})
    result = await run_crawl(
        SiteSpider,
        {"POLITE_CONTACT": "ops@example.org"},
        url=f"{web.url('127.0.0.1')},{web.url('127.0.0.2')}",
    )
    assert len(result.items) == 6
    entries = web.entries()
    assert len(entries) >= 6
    for e in entries:
        ua = e.headers["user-agent"]
        assert ua.startswith(f"PoliteCrawler/{__version__} (+http")
        assert ua.endswith("; ops@example.org)")
        assert e.headers["from"] == "ops@example.org"


@pytest_twisted.ensureDeferred
async def test_no_from_without_contact(web_factory) -> None:
    web = web_factory({"127.0.0.1": _site()})
    await run_crawl(SiteSpider, url=web.url("127.0.0.1"))
    entries = web.entries()
    assert entries
    assert all("from" not in e.headers for e in entries)
    assert all(e.headers["user-agent"].endswith("/bot/)") for e in entries)


@pytest_twisted.ensureDeferred
async def test_browser_user_agent_setting_refuses_to_start(web_factory) -> None:
    web = web_factory({"127.0.0.1": _site()})
    with pytest.raises(IdentityError, match="browser"):
        await run_crawl(SiteSpider, {"USER_AGENT": CHROME}, url=web.url("127.0.0.1"))
    assert web.entries() == []


class BrowserSpider(SiteSpider):
    name = "browser"
    user_agent = CHROME


@pytest_twisted.ensureDeferred
async def test_browser_user_agent_spider_refuses_to_start(web_factory) -> None:
    web = web_factory({"127.0.0.1": _site()})
    with pytest.raises(IdentityError, match="browser"):
        await run_crawl(BrowserSpider, url=web.url("127.0.0.1"))
    assert web.entries() == []


@pytest_twisted.ensureDeferred
async def test_public_host_without_bot_url_refuses_to_start() -> None:
    # Nothing is listening: the refusal comes before any connection.
    with pytest.raises(IdentityError, match="POLITE_BOT_URL"):
        await run_crawl(SiteSpider, url="https://example.org/")


def test_addon_pins_timing_settings() -> None:
    # A gentler DOWNLOAD_DELAY becomes the rest's floor; Scrapy's own delay stays 0 (the
    # frontier owns the timing). CONCURRENT_REQUESTS_PER_DOMAIN above 1 is refused
    # (tests/test_spider_settings.py).
    crawler = get_crawler(
        SiteSpider,
        project_settings_dict(DOWNLOAD_DELAY=5, CONCURRENT_REQUESTS_PER_DOMAIN=1,
                              AUTOTHROTTLE_ENABLED=True),
    )
    crawler._apply_settings()
    assert crawler.settings.getfloat("DOWNLOAD_DELAY") == 0
    assert crawler.settings.getfloat("POLITE_REST_PAGE") == 5
    assert crawler.settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN") == 1
    assert not crawler.settings.getbool("AUTOTHROTTLE_ENABLED")


def test_a_test_host_is_loopback_or_in_the_test_networks() -> None:
    from polite_crawler.policy.network import is_test_host, parse_networks

    nets = parse_networks(["10.9.0.0/16", "2001:db8::/32"])
    assert is_test_host("127.0.0.2", nets) and is_test_host("localhost", nets)
    assert is_test_host("10.9.1.1", nets) and is_test_host("[2001:db8::1]", nets)
    assert not is_test_host("10.8.1.1", nets) and not is_test_host("example.org", nets)
    assert not is_test_host("10.9.1.1", [])
