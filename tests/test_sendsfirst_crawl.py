"""Sends first (extensions.sendsfirst): crawls of real loopback sites, in-process.

Every site rests the same time (no jitter), so each site's k-th request falls due in one
wave; the spider's parse takes COST seconds a page (a sleep: the event loop is held as
a long page's analysis holds it).

* The wave goes out before the answers already in are read: no request due before a
  page's parse started reached its server after that parse ended (as Scrapy reads them,
  each answer's parse holds every send still due behind it), and every page is parsed
  and its item out.
* The wait is bounded: with sends still falling due through the wave, an answer waits
  at most POLITE_SENDS_FIRST_MAX_WAIT (and some did wait that long).
* Scrapy's private names it replaces and calls are where it expects them (Scrapy 2.19).
"""

from __future__ import annotations

import itertools
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

import pytest
import pytest_twisted
import scrapy
from scrapy.core.scraper import Scraper

from demo.web.server import Req, Resp
from polite_crawler.extensions.sendsfirst import SendsFirstScraper, missing_names
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import run_crawl
from tests.test_descriptors_crawl import hosts, small_site

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from demo.web.server import LogEntry, Site

COST = 0.04  # seconds a page's parse holds the event loop
REST = 1.0  # under the keep-alive time: connections are kept, no connect in a send


class SlowParseSpider(SiteSpider):
    """The site spider, with a parse that holds the event loop COST seconds, recording
    when each parse started and when its answer was received."""

    name = "slowparse"
    parsed: ClassVar[list[tuple[float, str]]] = []  # (start, url)
    installed: ClassVar[list[bool]] = []
    missing: ClassVar[list[list[str]]] = []
    cost: ClassVar[float] = COST

    def parse(self, response: Any, **kwargs: Any) -> Iterator[Any]:
        start = time.time()
        type(self).parsed.append((start, response.url))
        if not type(self).installed:
            engine: Any = self.crawler.engine
            # Scrapy's private loop replaced on the scraper by the sends-first order.
            bound = engine.scraper._scrape_next
            type(self).installed.append(isinstance(bound.__self__, SendsFirstScraper))
            type(self).missing.append(missing_names(engine))
        time.sleep(type(self).cost)
        yield from super().parse(response, **kwargs)


def settings(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"POLITE_STATE_DIR": str(tmp_path), "POLITE_REST_PAGE": REST,
            "POLITE_JITTER": 0.0, "CLOSESPIDER_TIMEOUT": 120, **extra}


async def slow_crawl(web_factory: Any, tmp_path: Path, n: int,
                     **extra: Any) -> tuple[Any, list[LogEntry], list[str]]:
    SlowParseSpider.parsed, SlowParseSpider.installed, SlowParseSpider.missing = [], [], []
    SlowParseSpider.cost = COST
    names = hosts(n)
    web = web_factory({h: small_site(h) for h in names})
    listed = tmp_path / "urls.txt"
    listed.write_text("".join(web.url(h) + "\n" for h in names))
    result = await run_crawl(SlowParseSpider, settings(tmp_path / "state", **extra),
                             urls=str(listed))
    return result, web.entries(), names


def late_sends(entries: list[LogEntry], parsed: list[tuple[float, str]]) -> int:
    """Requests due (their host's rest over) before a parse started that reached their
    server only after that parse ended: sends held behind an answer being read."""
    due: list[tuple[float, float]] = []  # (due, started) of each request after the first
    by_host: dict[str, list[LogEntry]] = {}
    for e in entries:
        by_host.setdefault(e.host, []).append(e)
    for seq in by_host.values():
        seq.sort(key=lambda e: e.started)
        due += [(a.finished + REST + 0.03, b.started) for a, b in itertools.pairwise(seq)]
    return sum(1 for start, _url in parsed for d, s in due
               if d < start and s > start + COST)


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_a_wave_goes_out_before_the_answers_in_are_read(
        web_factory: Any, tmp_path: Path) -> None:
    n = 16
    result, entries, names = await slow_crawl(web_factory, tmp_path, n)
    assert SlowParseSpider.installed == [True]
    # Every page parsed and its item out: the answers waited, none was lost.
    pages = {(h, p) for h in names for p in ("/", "/a", "/b")}
    assert {(e.host, e.path) for e in entries if e.status == 200
            and e.path in ("/", "/a", "/b")} == pages
    assert len(SlowParseSpider.parsed) == len(pages)
    assert len(result.items) == len(pages)
    assert result.stats.get("finish_reason") == "finished"
    assert result.stats.get("polite/sendsfirst/waited", 0) >= n // 2
    # As Scrapy reads them, each wave's answers are parsed as they come and every send
    # still due waits behind them (12 and 24 late in two runs here); sends first: none
    # or a stray one.
    late = late_sends(entries, SlowParseSpider.parsed)
    assert late <= 2, late


def staggered_site(host: str, delay: float) -> Site:
    """A small site whose robots.txt answers after ``delay`` seconds: its later requests
    fall due that much after the others'."""
    site = small_site(host)
    body = str(site.routes["/robots.txt"]).encode()

    def robots(_req: Req) -> Resp:
        return Resp(200, body, content_type="text/plain", delay=delay)

    site.routes["/robots.txt"] = robots
    return site


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_an_answer_waits_at_most_the_bound(web_factory: Any, tmp_path: Path) -> None:
    # 80 sites, each falling due `step` after the one before (its robots.txt that much
    # slower): for the 0.64 s of each wave a send is due every 8 ms, within the 20 ms an
    # answer looks ahead, so the answers in would wait much of the wave (up to 0.36 s
    # here with a bound of 5 s). The bound cuts it. A parse of 5 ms: a wave's parses fit
    # in its rest.
    n, step, bound, cost = 80, 0.008, 0.1, 0.005
    SlowParseSpider.parsed, SlowParseSpider.installed, SlowParseSpider.missing = [], [], []
    SlowParseSpider.cost = cost
    names = hosts(n)
    web = web_factory({h: staggered_site(h, i * step) for i, h in enumerate(names)})
    listed = tmp_path / "urls.txt"
    listed.write_text("".join(web.url(h) + "\n" for h in names))
    result = await run_crawl(SlowParseSpider, settings(
        tmp_path / "state", POLITE_SENDS_FIRST_MAX_WAIT=bound,
        # The rest not grown by the slow robots.txt (loopback: no floor on the factor).
        POLITE_REST_DURATION_FACTOR=1.0), urls=str(listed))
    entries = web.entries()
    pages = {(h, p) for h in names for p in ("/", "/a", "/b")}
    assert len(SlowParseSpider.parsed) == len(pages)
    assert len(result.items) == len(pages)
    # From the answer's last byte (the server's log) to its parse.
    answered = {(e.host, e.path): e.finished for e in entries if e.status == 200}
    waits = sorted(start - answered[urlsplit(url).hostname or "", urlsplit(url).path]
                   for start, url in SlowParseSpider.parsed)
    # Answers did wait for the sends (109 of 240 here; as Scrapy reads them, 15 to 17 waited
    # that long, behind the event loop's other work) ...
    assert sum(w >= 0.8 * bound for w in waits) >= len(waits) // 4, waits
    # ... and none beyond the bound, the parse in progress when the bound ran out, and
    # the event loop's steps, but for a few the machine's other work held (with a bound
    # of 5 s, 40 of 240 waited 0.3 s or more here).
    beyond = [w for w in waits if w > bound + cost + 0.1]
    assert len(beyond) <= len(waits) // 20, beyond
    assert result.stats["polite/sendsfirst/waited"] >= len(pages) // 2


@pytest_twisted.ensureDeferred
async def test_scrapys_private_names_have_not_moved(web_factory: Any, tmp_path: Path) -> None:
    # Sends first replaces Scraper._scrape_next and calls _wait_for_processing and the
    # scraper slot's queue; Scrapy is pinned to 2.19. If this fails after an upgrade,
    # find where Scrapy 2.x now starts reading queued answers and mend
    # polite_crawler.extensions.sendsfirst (until then the crawl falls back to
    # Scrapy's own order with one WARNING line).
    assert scrapy.__version__.startswith("2.19.")
    for name in ("_scrape_next", "_wait_for_processing", "enqueue_scrape"):
        assert callable(getattr(Scraper, name, None)), f"Scrapy's Scraper.{name} moved"
    await slow_crawl(web_factory, tmp_path, 1)
    assert SlowParseSpider.missing == [[]], f"Scrapy's names moved: {SlowParseSpider.missing}"
    assert SlowParseSpider.installed == [True], "the sends-first order was not installed"


def test_missing_names_are_named() -> None:
    engine: Any = SimpleNamespace(scraper=SimpleNamespace(slot=None), _slot=None)
    assert missing_names(engine)[:2] == ["Scraper._scrape_next",
                                         "Scraper._wait_for_processing"]


def test_the_addon_installs_it_and_room_for_a_waves_answers() -> None:
    from scrapy.settings import Settings
    from scrapy.utils.test import get_crawler

    from polite_crawler.addon import PoliteAddon

    crawler = get_crawler(SiteSpider)
    s = Settings()
    PoliteAddon(crawler).update_settings(s)
    assert "polite_crawler.extensions.sendsfirst.SendsFirst" in s.getdict("EXTENSIONS")
    assert s.getint("SCRAPER_SLOT_MAX_ACTIVE_SIZE") >= 50_000_000
    assert s.getfloat("POLITE_SENDS_FIRST_MAX_WAIT") == 2.0
