"""CPU of the frontier's per-request path: queue, hand out, settle, done.

A real :class:`~polite_crawler.frontier.scheduler.FrontierScheduler` on real SQLite
files (the job's queue in ``JOBDIR``, the origin store in the state directory), opened
with a crawler of the project's settings and an injected clock: ``--origins`` origins
(one host and one server each), ``--per-origin`` requests each, queued through
``enqueue_request``; then, the clock moved from one eligible time to the next,
``next_request`` until nothing is due, each request settled (0.05 s long, as the gate
settles a response) and done (as the spider's end does), and a checkpoint every
``POLITE_CHECKPOINT_INTERVAL`` of the clock, as the crawl's loop runs it. No network,
no robots.txt (no book: every origin's rows are content).

    .venv/bin/python -m bench.frontier_path [--origins 300] [--per-origin 10] [--repeat 5]

Reported: microseconds of this process's CPU a request for the enqueue and for the
rest of the path (hand out, settle, done and the checkpoints), best of the repeats,
and the SQLite statements the origin store ran a request.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
from pathlib import Path
from typing import Any

T0 = 1_790_000_000.0


class _Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_once(n_origins: int, per_origin: int, rest: float) -> dict[str, float]:
    from scrapy.utils.reactor import install_reactor, is_reactor_installed

    if not is_reactor_installed():  # the scheduler's timers need one (it is never run)
        install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from scrapy import Request
    from scrapy.utils.test import get_crawler

    from polite_crawler import settings as project_settings
    from polite_crawler.context import polite_context
    from polite_crawler.frontier.scheduler import FrontierScheduler
    from polite_crawler.spiders.site import SiteSpider

    base = {k: getattr(project_settings, k) for k in dir(project_settings) if k.isupper()}
    clock = _Clock(T0)
    origins = [f"http://127.{1 + i // 250}.{i % 250}.{1 + i % 7}:8080"
               for i in range(n_origins)]
    with tempfile.TemporaryDirectory() as tmp:
        Path(f"{tmp}/job").mkdir()
        crawler = get_crawler(SiteSpider, {
            **base, "POLITE_STATE_DIR": tmp, "JOBDIR": f"{tmp}/job", "LOG_LEVEL": "WARNING",
            "POLITE_REST_PAGE": rest, "POLITE_DISPATCH_LEAD": 0.25,
        })
        polite_context(crawler).clock = clock
        spider = SiteSpider.from_crawler(crawler, url=origins[0])
        crawler.spider = spider
        scheduler = FrontierScheduler.from_crawler(crawler)
        scheduler.open(spider)
        f = scheduler.frontier
        assert f is not None
        statements = 0

        def traced(_sql: str) -> None:
            nonlocal statements
            statements += 1

        try:
            requests = [Request(f"{o}/page{j}.html", callback=spider.parse)
                        for j in range(per_origin) for o in origins]
            c0 = _cpu()
            for request in requests:
                scheduler.enqueue_request(request)
            f.queue.commit()
            c1 = _cpu()
            stores = [s for s in (f.origin_store, f.host_store, f.owner_store)
                      if s is not None]
            for s in stores:
                s.conn.set_trace_callback(traced)
            interval = scheduler.checkpoint_interval
            next_checkpoint = clock.t + interval
            handed = 0
            c2 = _cpu()
            while True:
                at = f.next_eligible()
                if at is None:
                    break
                clock.t = max(clock.t, at)
                while clock.t >= next_checkpoint:
                    f.checkpoint()
                    next_checkpoint += interval
                out = []
                while (request := scheduler.next_request()) is not None:
                    out.append(request)
                for request in out:
                    handed += 1
                    start = max(clock.t, request.meta.get("polite_not_before", 0.0))
                    scheduler.settle(request, start=start, end=start + 0.05, failure=None,
                                     observe=True)
                    scheduler.done(request)
            f.checkpoint()
            c3 = _cpu()
            for s in stores:
                s.conn.set_trace_callback(None)
        finally:
            scheduler.close("finished")
    n = len(requests)
    assert handed == n, (handed, n)
    return {"enqueue_us": (c1 - c0) / n * 1e6, "path_us": (c3 - c2) / n * 1e6,
            "origin_db_statements": statements / n}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--origins", type=int, default=300)
    ap.add_argument("--per-origin", type=int, default=10)
    ap.add_argument("--rest", type=float, default=10.0, help="POLITE_REST_PAGE (s)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    runs = [run_once(args.origins, args.per_origin, args.rest) for _ in range(args.repeat)]
    best: dict[str, Any] = {k: round(min(r[k] for r in runs), 2) for k in runs[0]}
    print(json.dumps({"origins": args.origins, "per_origin": args.per_origin,
                      "best": best, "runs": [{k: round(v, 2) for k, v in r.items()}
                                             for r in runs]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
