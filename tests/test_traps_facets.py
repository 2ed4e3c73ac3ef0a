"""Faceted navigation: listings that differ only in their filters stop early,
a catalogue whose query pages are genuinely distinct is crawled whole."""

from __future__ import annotations

from typing import Any

import pytest_twisted

from demo.web.traps import CatalogueSite, FacetSite
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import run_crawl

FACETS = "127.0.8.31"
CATALOGUE = "127.0.8.32"


def _query_requests(web: Any, host: str, since: int = 0) -> list[Any]:
    return [e for e in web.entries(host)[since:] if "?" in e.path]


@pytest_twisted.ensureDeferred
async def test_facet_listings_stop_within_the_cap_and_every_product_is_found(
        web_factory, tmp_path) -> None:
    site = FacetSite(products=60)
    web = web_factory({FACETS: site})
    # Without the cap, the yield monitor alone lets more than a hundred listings through
    # (the product pages among them keep the origin's yield up).
    loose = await run_crawl(SiteSpider, {"POLITE_STATE_DIR": str(tmp_path / "loose"),
                                         "POLITE_MAX_QUERY_VARIANTS": 10**6},
                            url=web.url(FACETS))
    assert len(_query_requests(web, FACETS)) > 100
    assert "polite/traps/query_variants" not in loose.stats
    before = len(web.entries(FACETS))
    result = await run_crawl(SiteSpider, {"POLITE_STATE_DIR": str(tmp_path / "capped"),
                                          "JOBDIR": str(tmp_path / "capped" / "job")},
                             url=web.url(FACETS))
    listings = _query_requests(web, FACETS, before)
    # The default cap: 20 listings fetched before their yield decides; a few of the 60
    # products' listings bring new text, so a few more go out. Far under 50.
    assert 20 <= len(listings) <= 35
    got = {e.path for e in web.entries(FACETS)[before:]}
    assert set(site.real) <= got  # every product still found
    assert result.stats["polite/traps/query_variants"] > 300  # the rest, counted
    # The trap is remembered: a recrawl asks for none of the listings it learned.
    before = len(web.entries(FACETS))
    await run_crawl(SiteSpider, {"POLITE_STATE_DIR": str(tmp_path / "capped"),
                                 "JOBDIR": str(tmp_path / "capped" / "job2")},
                    url=web.url(FACETS), recrawl="all")
    again = _query_requests(web, FACETS, before)
    # Only the listings it fetched before, revalidated (the shop sends ETags): no new one.
    assert {e.path for e in again} <= {e.path for e in listings}
    assert [(e.path, e.status) for e in again if "if-none-match" not in e.headers] == []


@pytest_twisted.ensureDeferred
async def test_a_catalogue_of_distinct_query_pages_is_crawled_whole(web_factory,
                                                                     tmp_path) -> None:
    site = CatalogueSite(items=60)
    web = web_factory({CATALOGUE: site})
    result = await run_crawl(SiteSpider, {"POLITE_STATE_DIR": str(tmp_path)},
                             url=web.url(CATALOGUE))
    got = {e.path for e in web.entries(CATALOGUE)}
    assert set(site.real) <= got
    assert len(_query_requests(web, CATALOGUE)) > 60  # past the cap: the yield decided
    assert "polite/traps/query_variants" not in result.stats
