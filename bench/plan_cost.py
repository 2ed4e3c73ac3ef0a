"""What planning a Redis batch costs the worker's reactor, against the origins it owns.

One worker (a real redis-server on loopback, started and stopped here) owns ``--origins``
K origins, each with ``--rows`` rows queued and a rest of ``--rest`` R seconds; an
injected clock moves by the batch interval (0.5 s) a step; rests have a jitter of a half, so
the origins do not all come due in the same step. Each step dispatches what is
due, settles every request at once and reports its row done, then runs one batch
(plan, execute, apply). Only :meth:`RedisFrontier.plan` is timed (process time): it runs
on the reactor, where every millisecond delays dispatches and page reading. Steady
state, as on a crawl of many small sites: about K / (2 R) origins change a step.

    .venv/bin/python -m bench.plan_cost --origins 1250 --rest 5
    .venv/bin/python -m bench.plan_cost --origins 5000 --rest 10
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from demo.cluster import start_redis, stop_proc
from polite_crawler.frontier.core import FrontierConfig
from polite_crawler.frontier.redis_frontier import RedisFrontier, execute
from polite_crawler.frontier.redis_shared import RedisShared
from polite_crawler.policy.rest import RestParams

INTERVAL = 0.5
TTL = 10.0


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def run(port: int, origins: int, rows: int, rest: float, steps: int) -> dict[str, float]:
    clock = Clock(time.time())
    shared = RedisShared(f"redis://127.0.0.1:{port}/0", "plan_cost", "w1")
    shared.register(clock(), TTL)
    f = RedisFrontier(shared, FrontierConfig(params=RestParams(rest_page=rest, jitter=0.5),
                                             budget=1_000_000),
                      clock=clock, ttl=TTL, interval=INTERVAL, exchange_timeout=5.0,
                      clock_skew=0.0, robots=lambda: None)
    names = [f"http://site{k}.example" for k in range(origins)]
    for name in names:
        for j in range(rows):
            f.frontier.push(name, 0, f"{name}/p{j}", b"data")
    f.run_batch()
    for _ in range(10):  # take every origin (a batch takes what the share allows)
        clock.t += INTERVAL
        f.run_batch()
        if len(f.queue.own) >= origins:
            break
    timed: list[float] = []
    dispatched = 0
    for step in range(steps):
        clock.t += INTERVAL
        while (d := f.frontier.pop()) is not None:
            f.frontier.settle(d.origin, d.token, start=clock.t, end=clock.t)
            f.frontier.done(d.row.id if d.row is not None else None)
            dispatched += 1
        t0 = time.process_time()
        plan = f.plan()
        took = time.process_time() - t0
        f.apply(execute(shared, plan, f.ttl))
        if step >= 4:  # past the first claims
            timed.append(took)
    owned = len(f.queue.own)
    f.close(False)
    return {"owned": owned, "dispatched": dispatched, "steps": len(timed),
            "plan_ms_median": 1000 * statistics.median(timed),
            "plan_ms_mean": 1000 * statistics.fmean(timed),
            "plan_ms_max": 1000 * max(timed)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--origins", type=int, default=1250)
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--rest", type=float, default=5.0)
    ap.add_argument("--steps", type=int, default=60)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="plan_cost_") as tmp:
        proc, port = start_redis(Path(tmp))
        try:
            res = run(port, args.origins, args.rows, args.rest, args.steps)
        finally:
            stop_proc(proc)
    print(f"owned {res['owned']:.0f} origins, rest {args.rest:g} s, {res['dispatched']:.0f} "
          f"requests over {args.steps} batches of {INTERVAL} s")
    print(f"plan: median {res['plan_ms_median']:.2f} ms, mean {res['plan_ms_mean']:.2f} ms, "
          f"max {res['plan_ms_max']:.2f} ms a batch "
          f"({res['plan_ms_mean'] / INTERVAL / 10:.2f} % of the reactor's time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
