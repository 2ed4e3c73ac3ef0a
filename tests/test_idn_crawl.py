"""A real crawl on loopback of a site whose name has a deviation character (faß).

IDNA 2003 spells ``faß.test`` as ``fass.test``, another name: the crawler must ask the
server that ``xn--fa-hia.test`` names, never the one ``fass.test`` names. The names are
answered by an injected lookup (POLITE_DNS_LOOKUP), as in tests/test_resolver.py.
"""

from __future__ import annotations

from typing import Any

import pytest_twisted

from demo.web.server import Site, page
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import run_crawl
from tests.test_resolver import BOT_URL, FakeDNS

FASS_SHARP = "127.0.0.1"  # the server of faß.test (xn--fa-hia.test)
FASS = "127.0.0.2"  # the server of fass.test: someone else's


@pytest_twisted.ensureDeferred
async def test_a_deviation_character_host_is_crawled_at_its_own_name(web_factory: Any,
                                                                     tmp_path: Any) -> None:
    web = web_factory({
        FASS_SHARP: Site({"/robots.txt": "User-agent: *\nAllow: /\n",
                          "/": page("faß", "the start page", links=["/a"]),
                          "/a": page("a", "a page", links=[])}),
        FASS: Site({"/robots.txt": "User-agent: *\nAllow: /\n", "/": page("fass"),
                    "/b": page("b")}),
    })
    # An absolute link spelt with the sharp s, as a page writes it.
    web.sites[FASS_SHARP].routes["/"] = page(
        "faß", "the start page", links=["/a", f"http://faß.test:{web.port}/b"])
    dns = FakeDNS({"xn--fa-hia.test": [[FASS_SHARP]], "fass.test": [[FASS]]})
    result = await run_crawl(
        SiteSpider,
        {"POLITE_STATE_DIR": str(tmp_path), "POLITE_DNS_LOOKUP": dns,
         "DNSCACHE_ENABLED": False, "POLITE_BOT_URL": BOT_URL},
        url=f"http://faß.test:{web.port}/",
    )
    assert web.entries(FASS) == []  # not one request to the other name's server
    assert "fass.test" not in dns.calls
    asked = {e.path for e in web.entries(FASS_SHARP)}
    assert {"/robots.txt", "/", "/a", "/b"} <= asked
    urls = {i["canonical_url"] for i in result.items if "canonical_url" in i}
    assert f"http://xn--fa-hia.test:{web.port}/a" in urls
