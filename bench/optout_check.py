"""What the opt-out list costs a crawl, and how long ``scrapy forget`` takes on a live one.

1. The request path: the opt-out middleware's ``process_request`` for a request of an
   origin not on the list (the usual case), with a list of ``--listed`` origins, on a
   real origin store (WAL SQLite): the version is read at most every 5 ms, so the
   cost per request depends on the request rate; measured back to back (the worst case:
   a read every 5 ms of a loop doing nothing else) and with no read due.
2. ``scrapy forget`` against a running crawl (two loopback sites, rests 0.1 s, the
   forgotten one answering in 0.15 s): the time from the list's write to the last live
   job's acknowledgement, and the whole command's time, over ``--runs`` crawls.

``python -m bench.optout_check [--listed N] [--runs N]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def request_path(listed: int, n: int) -> dict[str, float]:
    from scrapy import Request, Spider
    from scrapy.utils.test import get_crawler

    from polite_crawler.middlewares import optout as mw
    from polite_crawler.store.optout import OptOutList

    with tempfile.TemporaryDirectory() as tmp:
        lst = OptOutList(Path(tmp) / "polite-origins.sqlite3")
        for i in range(listed):
            lst.add(f"https://refused{i}.example", "bench", time.time())
        lst.close()
        crawler = get_crawler(Spider, {"POLITE_STATE_DIR": tmp})
        middleware = mw.OptOutMiddleware(crawler)
        requests = [Request(f"https://ok{i % 50}.example/p{i}") for i in range(n)]
        for r in requests:
            r.meta["polite_origin"] = f"https://ok{hash(r.url) % 50}.example"
        t0 = time.perf_counter()
        for r in requests:
            middleware.process_request(r)
        no_read = (time.perf_counter() - t0) / n
        t0 = time.perf_counter()
        for r in requests:
            middleware._checked = 0.0  # a version read on every request
            middleware.process_request(r)
        with_read = (time.perf_counter() - t0) / n
        middleware.list.close()
    return {"no_read_us": no_read * 1e6, "with_read_us": with_read * 1e6}


def forget_live(runs: int) -> list[dict[str, float]]:
    from demo.web.server import TestWeb
    from tests.commands_util import crawl_cmd, env, scrapy
    from tests.test_commands_forget_live import GONE, KEPT, PAGES, wide_site

    out = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp, \
                TestWeb({GONE: wide_site(PAGES, 0.15), KEPT: wide_site(2 * PAGES, 0.02)}) as web:
            state = Path(tmp) / "state"
            cmd = crawl_cmd([web.url(GONE), web.url(KEPT)], state, Path(tmp) / "job",
                            LOG_FILE=Path(tmp) / "crawl.log")
            crawl = subprocess.Popen(cmd, cwd=ROOT, env=env())
            try:
                while len([e for e in web.entries(GONE) if e.path.startswith("/p")]) < 5:
                    time.sleep(0.02)
                t0 = time.perf_counter()
                done = scrapy("forget", f"http://{GONE}:{web.port}", "--json",
                              "--state-dir", str(state))
                total = time.perf_counter() - t0
                data = json.loads(done.stdout)
                crawl.wait(120)
            finally:
                if crawl.poll() is None:
                    crawl.kill()
                    crawl.wait()
            out.append({"ack_wait": data["ack_wait"], "command": total,
                        "acknowledged": len(data["acknowledged"])})
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.optout_check")
    parser.add_argument("--listed", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    cost = request_path(args.listed, args.requests)
    print(f"request path, {args.listed} origins listed: {cost['no_read_us']:.2f} us a request "
          f"with no version read due, {cost['with_read_us']:.2f} us with a read "
          "(at most one every 5 ms)")
    runs = forget_live(args.runs)
    waits = [r["ack_wait"] for r in runs]
    totals = [r["command"] for r in runs]
    print(f"forget on a live crawl, {args.runs} runs: acknowledged in median "
          f"{statistics.median(waits):.3f} s (max {max(waits):.3f} s); the command took "
          f"median {statistics.median(totals):.2f} s (Python start-up and the wait for the "
          "page store's open batch included)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main(sys.argv[1:]))
