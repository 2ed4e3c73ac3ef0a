"""A server is the address connected to: real crawls of many names that share one
loopback address (the resolver's injected lookup, POLITE_DNS_LOOKUP), judged from the
server's own log. A small server with two workers whose latency grows as requests queue
is never pressed with all its sites at once; a 503 from one of its sites makes its
siblings wait too."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import pytest_twisted

from demo.web.server import Req, Resp, Site, TestWeb, page
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import run_crawl
from tests.test_resolver import FakeDNS

if TYPE_CHECKING:
    from pathlib import Path

ADDRESS = "127.0.0.3"
PAGES = 3
BOT_URL = "https://bot.example/"


class SharedHost(Site):
    """Name-based sites on one machine with ``workers`` workers: a request waits for a
    free worker (so its latency grows with the load), then takes ``service`` seconds.
    Counts the requests open at once and those that had to wait. Each site's "/" links
    to ``pages`` pages."""

    def __init__(self, workers: int, service: float, pages: int = PAGES) -> None:
        super().__init__()
        self.pages = pages
        self.workers = threading.Semaphore(workers)
        self.service = service
        self.lock = threading.Lock()
        self.open = 0
        self.most = 0
        self.queued = 0
        self.served: list[tuple[str, str, float, float]] = []  # (name, path, start, end)
        self.answer: dict[tuple[str, str], Resp] = {}  # a forced answer, once

    def handle(self, req: Req) -> Resp:
        name = req.header("host").partition(":")[0]
        with self.lock:
            self.open += 1
            self.most = max(self.most, self.open)
        try:
            if not self.workers.acquire(blocking=False):
                with self.lock:
                    self.queued += 1
                self.workers.acquire()
            start = time.time()
            try:
                time.sleep(self.service)
            finally:
                self.workers.release()
            with self.lock:
                self.served.append((name, req.path, start, time.time()))
                forced = self.answer.pop((name, req.path), None)
            if forced is not None:
                return forced
            if req.path == "/robots.txt":
                return Resp(200, b"User-agent: *\nAllow: /\n", content_type="text/plain")
            links = [f"/p{i}" for i in range(self.pages)]
            words = " ".join(f"{name}{req.path}w{k}" for k in range(120))
            return Resp(200, page(f"{name} {req.path}", words, links))
        finally:
            with self.lock:
                self.open -= 1


def _crawl_settings(tmp_path: Path, names: list[str]) -> dict[str, Any]:
    # Names are not loopback addresses: their sites rest the public floor (3 s); the
    # server's own bound is what these tests watch.
    return {"POLITE_STATE_DIR": str(tmp_path / "state"), "POLITE_REST_PAGE": 0.2,
            "POLITE_JITTER": 0.0, "DNSCACHE_ENABLED": False, "POLITE_BOT_URL": BOT_URL,
            "POLITE_DNS_LOOKUP": FakeDNS({n: [[ADDRESS]] for n in names})}


async def _crawl(host: SharedHost, names: list[str], tmp_path: Path) -> None:
    """Crawl every name's site, all served by ``host`` on the one address."""
    web = TestWeb({ADDRESS: host}).start()
    try:
        urls = tmp_path / "urls.txt"
        urls.write_text("".join(f"http://{n}:{web.port}/\n" for n in names))
        await run_crawl(SiteSpider, _crawl_settings(tmp_path, names), urls=str(urls))
    finally:
        web.stop()


@pytest_twisted.ensureDeferred
async def test_sites_sharing_a_small_server_are_not_all_pressed_at_once(
        tmp_path: Path) -> None:
    host = SharedHost(workers=2, service=0.1)
    names = [f"s{i}.test" for i in range(8)]
    await _crawl(host, names, tmp_path)
    served = {(n, p) for n, p, _s, _e in host.served}
    for n in names:  # every site whole
        assert {(n, "/"), *((n, f"/p{i}") for i in range(PAGES))} <= served, n
    total = len(host.served)
    # Today's per-site gate opened all eight sites at once on the two workers.
    assert host.most <= 3, host.most  # its two workers, and one more in a rare probe
    assert host.queued <= max(3, 0.1 * total), (host.queued, total)
    busy = sum(e - s for _n, _p, s, e in host.served)
    span = max(e for *_x, e in host.served) - min(s for *_x, s, _e in host.served)
    assert busy / span <= 0.6, busy / span  # our share of one worker: a third, and probes


@pytest_twisted.ensureDeferred
async def test_a_503_from_one_site_makes_its_siblings_on_the_server_wait(
        tmp_path: Path) -> None:
    # One page a site: the siblings' requests after the 503 are what is watched, and each
    # more page is one more public-floor rest (3 s) of a.test's after its wait.
    host = SharedHost(workers=4, service=0.02, pages=1)
    names = ["a.test", "b.test", "c.test"]
    # Retry-After twice the siblings' own rest (the public floor's 3 s): held by the
    # server's wait, not by their own.
    host.answer[("a.test", "/")] = Resp(503, b"busy", headers={"Retry-After": "6"})
    await _crawl(host, names, tmp_path)
    failed_at = next(e for n, p, _s, e in host.served if (n, p) == ("a.test", "/"))
    after = [s for n, _p, s, _e in host.served if n != "a.test" and s > failed_at]
    assert after, "the siblings were crawled after the 503"
    assert min(after) - failed_at >= 6.0 - 0.05, min(after) - failed_at


@pytest_twisted.ensureDeferred
async def test_a_fast_server_with_flat_latency_is_not_serialised(tmp_path: Path) -> None:
    """A fast edge (many workers, 5 ms, flat under our load) serving 120 sites: the
    bound grows with the demand, past one request at a time on the machine. How close
    each site comes to its own polite pace is a throughput figure, which a busy test
    machine moves (its latency rises with the CPU's load and the bound rightly backs
    off): it is printed here and measured in bench/SHARED_SERVERS.md, not asserted."""
    # One page a site: the bound grows with the 120 sites waiting at once, not with the
    # length of each (every more page is one more public-floor rest of 3 s).
    host = SharedHost(workers=64, service=0.005, pages=1)
    names = [f"e{i:03d}.test" for i in range(120)]
    await _crawl(host, names, tmp_path)
    starts: dict[str, list[float]] = {}
    for n, _p, s, _e in host.served:
        starts.setdefault(n, []).append(s)
    ratios = []
    for n in names:
        times = sorted(starts[n])
        assert len(times) >= host.pages + 2, n  # robots.txt, "/", its pages
        ideal = (len(times) - 1) * 3.0  # the public floor's rest between its requests
        ratios.append(ideal / (times[-1] - times[0]))
    ratios.sort()
    print(f"\nfast edge: median site at {ratios[len(ratios) // 2]:.2f} of its polite pace, "
          f"at most {host.most} requests at once")
    assert host.most >= 2  # the bound grew past one request at a time
