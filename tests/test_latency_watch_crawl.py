"""The latency watch in real crawls: a busy crawler is not a slow server.

The test web answers in a millisecond or two throughout while the spider burns ~50 ms
of CPU in the reactor thread for every page (hashing, which lets the test web's
threads run meanwhile, so its answer times stay flat): no doubling. A server that
really slows gets a doubled rest, and the rest comes back down when it recovers.
"""

from __future__ import annotations

import hashlib
import itertools
import socket
import sys
import threading
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest
import pytest_twisted

from demo.web.server import LogEntry, Req, Resp, Site, TestWeb, page
from polite_crawler.extensions.accesslog import read_access_log
from polite_crawler.handlers import tcp_times, tcp_transfer
from tests.crawl import run_crawl
from tests.fetch import FetchSpider, fetch

if TYPE_CHECKING:
    from scrapy.http import Response

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the transport timing reads Linux's TCP_INFO")

BURN = 0.05  # seconds of CPU per page
_BLOCK = b"x" * (1 << 20)


def burn(seconds: float) -> None:
    """Keep this thread's CPU busy for ``seconds`` (hashlib lets other threads run)."""
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        hashlib.sha256(_BLOCK).digest()


class BusySpider(FetchSpider):
    """Fetches its URLs; every page costs the reactor BURN seconds of CPU."""

    name = "busy"
    calm = 0  # pages per host answered before the crawler becomes busy

    def parse(self, response: Response, **kwargs: Any) -> Any:
        seen = self.seen_per_host = getattr(self, "seen_per_host", {})
        host = response.url.split("/")[2]
        seen[host] = seen.get(host, 0) + 1
        if seen[host] > self.calm:
            burn(BURN)
        yield {"url": response.url, "status": response.status}


class Phased(Site):
    """Pages answered with a delay set per request number: ``delays(n) -> seconds``."""

    def __init__(self, delays: Any) -> None:
        super().__init__()
        self.delays = delays
        self.count = itertools.count()
        self.lock = threading.Lock()

    def handle(self, req: Req) -> Resp:
        if req.path == "/robots.txt":
            return Resp(200, b"User-agent: *\nAllow: /\n", content_type="text/plain")
        with self.lock:
            n = next(self.count)
        # Text of its own on every page (the yield monitor stops a site of repeats).
        words = " ".join(hashlib.md5(f"{req.path} {i}".encode()).hexdigest()[:8]
                         for i in range(150))
        return Resp(200, page(req.path, words), delay=self.delays(n))


def _pages(web: TestWeb, host: str) -> list[LogEntry]:
    return [e for e in web.entries(host) if e.path != "/robots.txt"]


def _settings(tmp_path: Any, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "POLITE_STATE_DIR": str(tmp_path),
        "POLITE_REST_PAGE": 0.05,
        "POLITE_JITTER": 0.0,
        "POLITE_REST_DURATION_FACTOR": 1.0,
        "POLITE_LATENCY_BASELINE_N": 3,
        "POLITE_LATENCY_WINDOW_N": 6,
    }
    base.update(extra)
    return base


@linux_only
@pytest_twisted.ensureDeferred
async def test_a_busy_crawler_does_not_double_the_rest(web_factory, tmp_path) -> None:
    hosts = [f"127.0.0.{i}" for i in range(1, 5)]
    web = web_factory({h: Phased(lambda n: 0.0) for h in hosts})
    urls = [web.url(h, f"/p{i}") for i in range(24) for h in hosts]
    BusySpider.calm = 4  # the baseline is taken while the crawler is idle
    result = await run_crawl(BusySpider, _settings(tmp_path), urls=urls)
    stats = result.stats
    assert stats.get("item_scraped_count") == len(urls)
    # The server's answers stayed flat (a few ms: the median, a busy test machine may
    # keep one of its threads from the CPU now and then) ...
    answers = sorted(e.finished - e.started for h in hosts for e in _pages(web, h))
    assert answers[len(answers) // 2] < 0.01, answers
    # ... while the crawler was busy: four hosts' pages, 50 ms of CPU each, so a
    # request waited behind other hosts' pages for up to 150 ms before its answer was
    # read. The watch did not take that for the server's slowness: no doubling, and every
    # rest the crawler set (its access log) stayed the base rest, not the wait it read.
    # (The gaps the server saw add the reactor's lateness, a second or more on a busy
    # machine: not what the rule sets.)
    assert stats.get("polite/frontier/latency_doubled", 0) == 0
    lines = [r for r in read_access_log(next(tmp_path.glob("access-*.jsonl")))
             if r.get("status") == 200 and not r.get("robots")]
    assert len(lines) == len(urls)
    assert max(r["rest"] for r in lines) < 2 * 0.05, sorted(r["rest"] for r in lines)
    print(f"\nthe longest exchange as the crawler read it: "
          f"{max(r['duration'] for r in lines):.3f} s")


@linux_only
@pytest_twisted.ensureDeferred
async def test_a_slow_server_doubles_the_rest_and_it_comes_back_down(
    web_factory, tmp_path
) -> None:
    host = "127.0.0.1"
    fast, slow = 0.0, 0.09

    def delays(n: int) -> float:
        return slow if 6 <= n < 18 else fast  # 6 fast, 12 slow, then 30 fast again

    web = web_factory({host: Phased(delays)})
    urls = [web.url(host, f"/p{i}") for i in range(48)]
    result = await fetch(urls, _settings(tmp_path))
    stats = result.stats
    assert stats.get("item_scraped_count") == len(urls)
    doubled = stats.get("polite/frontier/latency_doubled", 0)
    eased = stats.get("polite/frontier/latency_eased", 0)
    assert doubled >= 1
    assert eased == doubled  # all the way back to x1
    entries = _pages(web, host)
    gaps = [b.started - a.finished for a, b in itertools.pairwise(entries)]
    # While slow: the rest is the duration (x1) doubled at least once.
    assert max(gaps[6:20]) >= 2 * slow * 0.95
    # Recovered: the last rests the crawler set are the base rest again, not a multiple
    # of it (the rests as set, from its access log: a wall-clock gap on a loaded machine
    # adds the reactor's lateness to the rest), and the server saw each of them kept.
    lines = [r for r in read_access_log(next(tmp_path.glob("access-*.jsonl")))
             if r.get("status") == 200 and not r.get("robots")]
    rests = [r["rest"] for r in sorted(lines, key=lambda r: r["sent"])]
    assert len(rests) == len(urls)
    assert max(rests[-4:]) < 2 * 0.05, rests[-4:]
    assert min(gaps[-4:]) >= min(rests[-5:-1]), (gaps[-4:], rests[-5:-1])


@linux_only
def test_transport_time_leaves_out_a_busy_reader() -> None:
    """tcp_transfer: the server's 100 ms, not the 600 ms (or more, on a busy machine) the
    reader took to look; and tcp_times: the answer had been in the kernel for the last
    500 ms of those."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.recv(100)
            time.sleep(0.1)  # the server's own time
            conn.sendall(b"y" * 1000)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with socket.create_connection(srv.getsockname()) as client:
            client.sendall(b"GET")
            burn(0.6)  # the client is busy; the answer waits in the kernel
            client.recv(1000)
            measured = tcp_transfer(client)
            times = tcp_times(client)
    finally:
        thread.join()
        srv.close()
    assert measured is not None
    # The server's 0.1 s, and whatever a busy machine added to its thread's sleep: far
    # under the reader's 0.6 s.
    assert 0.09 <= measured < 0.4
    assert times is not None
    assert times[0] == measured
    assert times[1] >= 0.3


class SlowAboveTheGate:
    """A downloader middleware between the handler and the gate that keeps the reactor
    busy LAG seconds with every response: the gate sees it that much after its last
    byte arrived."""

    LAG = 0.4
    ends: dict[str, float] = {}  # path -> when the reactor was free again (epoch s)

    def process_response(self, request: Any, response: Any) -> Any:
        burn(self.LAG)
        SlowAboveTheGate.ends[urlsplit(response.url).path] = time.time()
        return response


@linux_only
@pytest_twisted.ensureDeferred
async def test_the_rest_runs_from_the_last_byte_not_from_a_late_gate(web_factory,
                                                                     tmp_path) -> None:
    host = "127.0.0.1"
    rest = 0.6
    web = web_factory({host: Phased(lambda n: 0.0)})
    urls = [web.url(host, f"/p{i}") for i in range(4)]
    settings = _settings(tmp_path, POLITE_REST_PAGE=rest, DOWNLOADER_MIDDLEWARES={
        "tests.test_latency_watch_crawl.SlowAboveTheGate": 993})
    result = await fetch(urls, settings)
    assert result.stats.get("item_scraped_count") == len(urls)
    entries = _pages(web, host)
    gaps = [b.started - a.finished for a, b in itertools.pairwise(entries)]
    # Never less than the rest from the server's end ...
    assert min(gaps) >= rest, gaps
    # ... and not the rest counted from the gate, which sees the answer only when the
    # middleware lets the reactor go: that put every request a whole rest after it. Run
    # from the last byte, the next request goes out once the rest has run and the reactor
    # is free, a rest after the free reactor less the middleware's own time (LAG of CPU, at
    # least LAG of wall time). Read against the reactor's free time, not as a gap from the
    # server's end: on a busy machine the middleware's 0.4 s of CPU take a second or more.
    free = SlowAboveTheGate.ends
    late = [b.started - (free[a.path] + rest) for a, b in itertools.pairwise(entries)]
    assert max(late) < 0, (late, gaps)
    print(f"\nrests from the server's end: {[round(g, 3) for g in gaps]}")
