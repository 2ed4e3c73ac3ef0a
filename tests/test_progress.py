"""The progress line: where the frontier's sites stand, and the polite rate ceiling."""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest
import pytest_twisted

from demo.web.server import Site, page
from polite_crawler.extensions.progress import progress_line
from polite_crawler.frontier.core import frontier_snapshot
from polite_crawler.spiders.site import SiteSpider
from tests.clock import T0, Clock
from tests.crawl import run_crawl
from tests.frontier_fixtures import Env
from tests.robots_numbers import ROBOTS_NUMBERS

if TYPE_CHECKING:
    from pathlib import Path


def test_snapshot_counts_each_state_and_the_ceiling(tmp_path: Path) -> None:
    clock = Clock()
    env = Env(tmp_path, clock)
    for host in ("127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"):
        env.push(f"http://{host}/1")
        env.push(f"http://{host}/2")
    dispatched = {}
    for _ in range(5):
        d = env.f.pop()
        assert d is not None
        dispatched[d.origin] = d
    a, b, c, d_, e = (f"http://127.0.0.{i}" for i in range(1, 6))
    clock.t += 0.2
    env.f.settle(b, dispatched[b].token, start=T0, end=clock.t)  # rests 1 s (5 x 0.2 s)
    server = replace(env.f.state(c).failure, wait_until=clock.t + 60)
    env.f.settle(c, dispatched[c].token, start=T0, end=clock.t, failure=server)
    env.f.settle(d_, dispatched[d_].token, start=T0, end=clock.t - 0.2)
    env.f.stop(e, "403")
    clock.t += 0.1
    snap = frontier_snapshot(env.f, clock.t)
    assert snap["active"] == 4 and snap["stopped"] == 1
    assert (snap["in_flight"], snap["resting"], snap["server_wait"]) == (1, 2, 1)
    assert snap["ready"] == 0
    assert snap["queued"] == 4  # one left on each of a..d; e's were dropped
    # 1/rest over a, b, c, d: the last rest set, at least the 1 s base.
    rests = [max(env.f.state(o).last_rest, 1.0) for o in (a, b, c, d_)]
    assert snap["rate_ceiling"] == pytest.approx(sum(1 / r for r in rests))
    clock.t += 61
    later = frontier_snapshot(env.f, clock.t)
    assert later["ready"] == 3 and later["server_wait"] == 0
    assert "limited by the machine" in progress_line(later, 0.0)
    env.close()


@pytest_twisted.ensureDeferred
async def test_the_line_and_its_stats_in_a_crawl(web_factory, tmp_path, caplog) -> None:
    pages = {f"/p{i}": page(f"p{i}", f"page number {i} " * 30) for i in range(8)}
    home = page("home", "the home page " * 30, list(pages))
    sites = {h: Site({"/": home, "/robots.txt": "User-agent: *\nAllow: /\n", **pages})
             for h in ("127.0.0.1", "127.0.0.2")}
    web = web_factory(sites)
    caplog.set_level(logging.INFO, logger="polite_crawler.extensions.progress")
    result = await run_crawl(SiteSpider, {"POLITE_PROGRESS_INTERVAL": 0.2,
                                          "POLITE_REST_PAGE": 0.1},
                             url=",".join(web.url(h) for h in sites))
    lines = [r.getMessage() for r in caplog.records if r.name.endswith("progress")]
    assert lines, "no progress line in the crawl"
    assert any("active" in x and "polite ceiling" in x for x in lines)
    stats = result.stats
    for key in ("active", "in_flight", "resting", "server_wait", "stopped", "queued",
                "rate_ceiling"):
        assert f"polite/progress/{key}" in stats
    assert isinstance(stats["polite/progress/queued"], int)
    ceilings = [float(m.group(1)) for x in lines
                for m in [re.search(r"polite ceiling ([0-9.]+) req/s", x)] if m]
    # Two sites resting at least 0.1 s: at most 10 requests a second each.
    assert 0 < max(ceilings) <= 20.0 + 1e-6


def test_a_site_waiting_to_ask_for_robots_txt_again_is_not_the_machine_s_limit(
        tmp_path: Path) -> None:
    from polite_crawler.extensions.progress import robots_waits
    from polite_crawler.store.robots import RobotsBook

    clock = Clock()
    book = RobotsBook(tmp_path / "robots.sqlite3", "PoliteCrawler", clock=clock, **ROBOTS_NUMBERS)
    env = Env(tmp_path, clock, robots=book)
    env.push("http://127.0.0.1/1")
    book.record_failure("http://127.0.0.1", "refused: connection refused")  # asks in 60 s
    snap = frontier_snapshot(env.f, clock.t)
    assert snap["ready"] == 1  # the frontier's own figure: not in flight, not resting
    waiting = robots_waits(env.f, clock.t)
    assert waiting == 1
    line = progress_line({**snap, "ready": snap["ready"] - waiting,
                          "robots_wait": float(waiting)}, 0.0)
    assert "limited by the machine" not in line
    assert "1 waiting for robots.txt" in line and "POLITE_ROBOTS_RETRY_MIN" in line
    clock.t += 61
    assert robots_waits(env.f, clock.t) == 0  # its time came: it is ready, asked now
    book.close()
    env.close()
