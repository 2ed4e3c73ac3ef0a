"""Memory and speed of the frontier with a million queued URLs.

Queues ``--urls`` requests (default 1,000,000) over ``--origins`` origins (10,000)
through the real scheduler (:class:`FrontierScheduler`: canonical-URL duplicate
check, serialisation, SQLite queue), then dequeues ``--dequeue`` of them (each one a
full dispatch: eligibility heap, lease in the shared state DB, settle, done) with a
simulated clock, and reports the peak RSS and the rates.

    .venv/bin/python -m bench.frontier_memory [--urls N] [--origins N] [--dequeue N]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

from scrapy import Request, Spider
from scrapy.utils.reactor import install_reactor
from scrapy.utils.test import get_crawler

from polite_crawler.context import polite_context
from polite_crawler.frontier.scheduler import FrontierScheduler

RSS_LIMIT_MB = 500


class _Spider(Spider):
    name = "bench"

    def parse(self, response, **kwargs):  # type: ignore[no-untyped-def]
        return None


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _host(i: int) -> str:
    return f"127.{1 + i // 62500}.{(i // 250) % 250 + 1}.{i % 250 + 1}"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench.frontier_memory")
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--origins", type=int, default=10_000)
    ap.add_argument("--dequeue", type=int, default=50_000)
    args = ap.parse_args(argv)

    # The scheduler's timers need an event loop; nothing here runs it.
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    with tempfile.TemporaryDirectory(prefix="frontier-bench-") as tmp:
        crawler = get_crawler(_Spider, {
            "POLITE_STATE_DIR": tmp, "JOBDIR": str(Path(tmp) / "job"),
            "POLITE_REST_PAGE": 1.0, "POLITE_JITTER": 0.0,
            "POLITE_HOST_BUDGET": 10**9, "LOG_LEVEL": "WARNING",
        })
        spider = _Spider()
        crawler.spider = spider
        ctx = polite_context(crawler)
        now = [1_700_000_000.0]
        ctx.clock = lambda: now[0]
        sched = FrontierScheduler(crawler)
        sched.open(spider)
        cb = spider.parse
        rss0 = _rss_mb()
        t0 = time.perf_counter()
        hosts = [_host(i) for i in range(args.origins)]
        for n in range(args.urls):
            host = hosts[n % args.origins]
            sched.enqueue_request(Request(f"http://{host}/page/{n}?a=1&b=2", callback=cb))
        assert sched.frontier is not None
        sched.frontier.queue.commit()
        enq = time.perf_counter() - t0
        print(f"enqueued {args.urls:,} URLs over {args.origins:,} origins in {enq:.1f}s: "
              f"{args.urls / enq:,.0f}/s; queued={len(sched):,}", flush=True)
        rss_after_enqueue = _rss_mb()

        t1 = time.perf_counter()
        got = 0
        while got < args.dequeue:
            req = sched.next_request()
            if req is None:
                now[0] += 10.0  # every origin's rest is over
                continue
            start = now[0]
            now[0] += 0.001
            sched.settle(req, start=start, end=now[0], failure=None, observe=True)
            sched.done(req)
            got += 1
        deq = time.perf_counter() - t1
        print(f"dequeued {got:,} (dispatch + lease + settle + done each) in {deq:.1f}s: "
              f"{got / deq:,.0f}/s", flush=True)
        sched.close("finished")
        db = Path(tmp, "job", "polite_frontier.sqlite3")
        size = db.stat().st_size / 2**20 if db.exists() else 0.0
    peak = _rss_mb()
    print(f"peak RSS {peak:.0f} MB (before enqueue {rss0:.0f} MB, after enqueue "
          f"{rss_after_enqueue:.0f} MB); queue file {size:.0f} MB; limit {RSS_LIMIT_MB} MB")
    return 0 if peak < RSS_LIMIT_MB else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
