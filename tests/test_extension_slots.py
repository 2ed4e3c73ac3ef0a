"""Scrapy's downloader slots are dropped once idle, not kept 60 s (extensions.slots)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest_twisted
from scrapy import signals
from scrapy.core.downloader import Slot

from demo.web.server import Site, page
from polite_crawler.extensions.slots import drop_idle_slots
from polite_crawler.policy.urls import origin_of
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import run_crawl

if TYPE_CHECKING:
    from pathlib import Path

    from scrapy.crawler import Crawler
    from scrapy.http import Request

A, B = "127.0.0.1", "127.0.0.2"
SEEN: list[tuple[str, set[str]]] = []


class _SlotWatch:
    """Records the downloader's slot keys as each request reaches it."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        crawler.signals.connect(self.reached, signal=signals.request_reached_downloader)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> _SlotWatch:
        return cls(crawler)

    def reached(self, request: Request) -> None:
        assert self.crawler.engine is not None
        SEEN.append((request.url, set(self.crawler.engine.downloader.slots)))


def _sites() -> dict[str, Site]:
    robots = "User-agent: *\nAllow: /\n"
    a = Site({"/": page("A", "the only page of A", []), "/robots.txt": robots})
    paths = [f"/p{i}" for i in range(6)]
    b = Site({"/": page("B", "the home of B", paths), "/robots.txt": robots,
              **{p: page(p, f"the page {p} of B", ["/"]) for p in paths}})
    return {A: a, B: b}


async def _crawl(web: Any, tmp_path: Path, sweep: float) -> tuple[Any, str]:
    SEEN.clear()
    urls = tmp_path / f"urls-{sweep}.txt"
    urls.write_text(f"{web.url(A, '/')}\n{web.url(B, '/')}\n")
    result = await run_crawl(SiteSpider, {
        "POLITE_REST_PAGE": 0.25, "POLITE_SLOT_SWEEP": sweep,
        "EXTENSIONS": {f"{__name__}._SlotWatch": 0}}, urls=str(urls))
    return result, origin_of(web.url(A, "/"))


@pytest_twisted.ensureDeferred
async def test_an_idle_sites_slot_is_dropped_while_the_crawl_goes_on(
        web_factory: Any, tmp_path: Path) -> None:
    web = web_factory(_sites())
    result, a = await _crawl(web, tmp_path, sweep=0.1)
    assert len(result.items) == 8  # every page of both sites, as without the sweep
    last_of_a = max(i for i, (url, _) in enumerate(SEEN) if url.startswith(a))
    later = [keys for url, keys in SEEN[last_of_a + 1:] if not url.startswith(a)]
    # B's last requests came well after A's last one ended (B rests 0.25 s a page):
    # by then A's slot was gone.
    assert later and a not in later[-1]
    assert result.stats["polite/slots/dropped"] >= 1


@pytest_twisted.ensureDeferred
async def test_without_a_sweep_the_slot_stays(web_factory: Any, tmp_path: Path) -> None:
    """What the first test tells apart: Scrapy alone keeps A's slot to the end."""
    web = web_factory(_sites())
    result, a = await _crawl(web, tmp_path, sweep=3600.0)
    assert len(result.items) == 8
    assert a in SEEN[-1][1]
    assert result.stats["polite/slots/dropped"] == 0


def test_only_slots_with_nothing_in_them_and_their_delay_over_are_dropped() -> None:
    class _Downloader:
        slots: dict[str, Slot]

    d = _Downloader()
    busy, queued, waiting, idle = (Slot(1, 0.0), Slot(1, 0.0), Slot(1, 10.0), Slot(1, 0.0))
    busy.active.add(object())  # type: ignore[arg-type]
    queued.queue.append((object(), object()))  # type: ignore[arg-type]
    waiting.lastseen = idle.lastseen = 100.0
    d.slots = {"busy": busy, "queued": queued, "waiting": waiting, "idle": idle}
    assert drop_idle_slots(d, now=105.0) == 1  # type: ignore[arg-type]
    assert set(d.slots) == {"busy", "queued", "waiting"}  # "waiting": its delay runs to 110
    assert drop_idle_slots(d, now=110.0) == 1  # type: ignore[arg-type]
    assert set(d.slots) == {"busy", "queued"}
