"""The frontier on Redis: pages per second of 1 worker, then 2, on the small-site workload.

The realweb ``polite`` workload (``bench/realweb.py``): Debian's nginx on loopback serving
N small sites (10 pages of ~5 KB of text each, a sitemap per site) under ``limit_req``
(one request per R per site, 429 beyond), R = 10 s, jitter 0, budget 10. Redis (the
bundled ``deploy/redis/redis.conf``) and PostgreSQL (the shared page store) on loopback.
N is large enough that one worker is CPU-bound (its pages per second stay well under
N / R: at N = 8,000 the ceiling is 800 requests a second, one worker does about 160,
two about 290, so both stay CPU-bound to the end). nginx listens on one address per
site and the crawler keeps a connection to each: N is bounded by the open-file limit
(about 9,000 sites under this machine's 20,000).

Run 1: one worker. Run 2: two workers (the same command twice), a fresh crawl name and
fresh Redis and database. Reported: pages per second over the crawl (first to last page
of the run) and while it is under way (10th to 90th percentile of the pages' times), the
ratio (target >= 1.6x), the workers' CPU seconds, pages per second in each 30 s, 429s,
rests below R and overlaps per site from nginx's own log (target 0 / 0 / 0), Redis
memory per queued URL (sampled at the queue's peak) and Redis commands per request
(``INFO commandstats``, all commands, per request nginx saw).

    python -m bench.cluster [--sites 8000] [--rest 10]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.frontier_efficiency import measure
from bench.realweb_nginx import (
    Nginx,
    free_port,
    hosts_for,
    make_readable_tmp,
    read_log,
    write_site_files,
    write_small_pages,
)
from demo.cluster import Postgres, start_redis, stop_proc

ROOT = Path(__file__).resolve().parent.parent
AGENT = "PoliteCrawler"


def commands_total(r: Any) -> tuple[int, int]:
    """All commands (those Lua scripts run included) and the scripts called (EVALSHA)."""
    stats = r.info("commandstats")
    total = sum(int(v["calls"]) for k, v in stats.items() if k.startswith("cmdstat_"))
    scripts = sum(int(stats.get(k, {}).get("calls", 0)) for k in ("cmdstat_evalsha",
                                                                   "cmdstat_eval"))
    return total, scripts


class Sampler(threading.Thread):
    """Every 5 s: Redis memory and the URLs queued or claimed in the crawl (its peak)."""

    def __init__(self, r: Any, crawl: str, origins: list[str]) -> None:
        super().__init__(daemon=True)
        self.r, self.crawl, self.origins = r, crawl, origins
        self.stop_event = threading.Event()
        self.base = int(r.info("memory")["used_memory"])
        self.peak_rows = 0
        self.mem_at_peak = 0
        # Commands the sampler itself sends (those its script runs included): left out
        # of the workers' commands per request (every 5 s, two per active origin: at
        # N = 5,000 they had been ~20 of the ~30 "commands a request" counted).
        self.commands = 0
        self.scripts = 0

    # One script sums the queue and claimed rows of every origin inside Redis: the
    # sampler costs the machine (whose two cores the workers share) next to nothing.
    _ROWS = """
local n = 0
local origins = redis.call('SMEMBERS', KEYS[1])
for _, o in ipairs(origins) do
  n = n + redis.call('ZCARD', 'polite:q:{' .. o .. '}:' .. ARGV[1])
        + redis.call('HLEN', 'polite:f:{' .. o .. '}:' .. ARGV[1])
end
return {n, #origins}
"""

    def run(self) -> None:
        rows_of = self.r.register_script(self._ROWS)
        while not self.stop_event.wait(5.0):
            rows, origins = (int(v) for v in rows_of(keys=[f"polite:active:{self.crawl}"],
                                                      args=[self.crawl]))
            mem = int(self.r.info("memory")["used_memory"])
            # EVALSHA, SMEMBERS, ZCARD and HLEN an origin, INFO (and a script call).
            self.commands += 3 + 2 * origins
            self.scripts += 1
            if rows > self.peak_rows:
                self.peak_rows, self.mem_at_peak = rows, mem
                self.queue_bytes = self._queue_bytes()

    def _queue_bytes(self) -> tuple[float, float]:
        """Bytes per row of the queue and seen-set keys, and per origin of its state hash
        (MEMORY USAGE over the first 100 origins)."""
        keys_mem = rows = state = 0
        sample = self.origins[:100]
        for o in sample:
            for key in (f"polite:q:{{{o}}}:{self.crawl}", f"polite:f:{{{o}}}:{self.crawl}",
                        f"polite:s:{{{o}}}:{self.crawl}"):
                keys_mem += int(self.r.memory_usage(key) or 0)
            rows += int(self.r.zcard(f"polite:q:{{{o}}}:{self.crawl}")) + int(
                self.r.hlen(f"polite:f:{{{o}}}:{self.crawl}"))
            state += int(self.r.memory_usage(f"polite:o:{{{o}}}") or 0)
        self.commands += 6 * len(sample)
        return (keys_mem / rows if rows else 0.0), state / len(sample) if sample else 0.0

    queue_bytes: tuple[float, float] = (0.0, 0.0)

    def per_url(self) -> float:
        return (self.mem_at_peak - self.base) / self.peak_rows if self.peak_rows else 0.0


def run_workers(tmp: Path, nginx: Nginx, urls: Path, workers: int, rest: float,
                label: str) -> dict[str, Any]:
    import redis

    d = tmp / label
    d.mkdir(parents=True, exist_ok=True)
    redis_proc, redis_port = start_redis(d)
    pg = Postgres()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        store = pg.start()
        r = redis.Redis(port=redis_port)
        crawl = f"bench-{label}"
        sampler = Sampler(r, crawl, [f"http://{h}:{nginx.port}" for h in nginx.hosts])
        before_cmds, before_scripts = commands_total(r)
        before_hits = len(read_log(nginx.access_log)) if nginx.access_log.exists() else 0
        sampler.start()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        t0 = time.monotonic()
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        for i in range(workers):
            cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"urls={urls}"]
            for k, v in {
                "POLITE_FRONTIER": f"redis://127.0.0.1:{redis_port}/0",
                "POLITE_CRAWL": crawl, "POLITE_STORE": store,
                "POLITE_STATE_DIR": str(d / "state"), "POLITE_REST_PAGE": rest,
                "POLITE_JITTER": 0, "POLITE_HOST_BUDGET": 10, "LOG_LEVEL": "INFO",
                "LOG_FILE": str(d / f"worker{i}.log"),
                "POLITE_ACCESS_LOG": str(d / f"access{i}.jsonl"),
            }.items():
                cmd += ["-s", f"{k}={v}"]
            procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL))
            time.sleep(1.0)  # the state directory's SQLite files created by one first
        codes = [p.wait() for p in procs]
        wall = time.monotonic() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
        sampler.stop_event.set()
        sampler.join()
        time.sleep(0.3)
        hits = [h for h in read_log(nginx.access_log)[before_hits:] if AGENT in h.agent]
        after_cmds, after_scripts = commands_total(r)
        cmds = after_cmds - before_cmds - sampler.commands
        scripts = after_scripts - before_scripts - sampler.scripts
        batches = sum(_stat(d / f"worker{i}.log", "polite/redis/batches") for i in range(workers))
        r.close()
    finally:
        for p in procs:
            stop_proc(p)
        stop_proc(redis_proc)
        pg.stop()
    pages = [h for h in hits if h.is_page]
    timeline(label, hits, pages)
    span = (max(h.end for h in pages) - min(h.start for h in pages)) if pages else 0.0
    lines = [(h.host, h.path, h.start, h.end) for h in hits]
    m = measure(label, lines, len(nginx.hosts), rest, wall) if lines else None
    return {
        "label": label, "workers": workers, "codes": codes, "wall": wall,
        "worker_cpu_s": cpu,
        "pages": len(pages), "pages_per_s": len(pages) / span if span else 0.0,
        "steady_pages_per_s": steady_rate(pages),
        "requests": len(hits), "429": sum(h.status == 429 for h in hits),
        "short": m.short if m else 0, "overlaps": m.overlaps if m else 0,
        "mem_per_url": sampler.per_url(), "peak_rows": sampler.peak_rows,
        "cmds_per_request": cmds / len(hits) if hits else 0.0,
        "scripts_per_request": scripts / len(hits) if hits else 0.0,
        "batches_per_request": batches / len(hits) if hits else 0.0,
        "queue_bytes_per_url": sampler.queue_bytes[0], "state_bytes_per_origin":
            sampler.queue_bytes[1],
    }


def steady_rate(pages: list[Any]) -> float:
    """Pages per second between the 10th and the 90th percentile of the pages' end times:
    the rate while the crawl is under way, without its ramp and its tail."""
    ends = sorted(h.end for h in pages)
    if len(ends) < 10:
        return 0.0
    lo, hi = ends[len(ends) // 10], ends[(9 * len(ends)) // 10]
    return (0.8 * len(ends)) / (hi - lo) if hi > lo else 0.0


def timeline(label: str, hits: list[Any], pages: list[Any], step: float = 30.0) -> None:
    """Pages per second in each ``step`` of the run, and when the sites had their first
    and their last request (the tail of late-starting sites shows here)."""
    if not pages:
        return
    t0 = min(h.start for h in hits)
    buckets: dict[int, int] = {}
    for h in pages:
        buckets[int((h.end - t0) // step)] = buckets.get(int((h.end - t0) // step), 0) + 1
    print(f"   {label} pages/s per {step:g} s:", " ".join(
        f"{buckets.get(i, 0) / step:.0f}" for i in range(max(buckets) + 1)), flush=True)
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    for h in hits:
        first[h.host] = min(first.get(h.host, h.start), h.start)
        last[h.host] = max(last.get(h.host, h.end), h.end)
    starts = sorted(v - t0 for v in first.values())
    ends = sorted(v - t0 for v in last.values())
    q = [0.1, 0.5, 0.9, 1.0]
    print(f"   {label} first request of a site at (10/50/90/100 %):",
          " ".join(f"{starts[int(x * (len(starts) - 1))]:.0f}" for x in q),
          "s; last at:", " ".join(f"{ends[int(x * (len(ends) - 1))]:.0f}" for x in q), "s",
          flush=True)


def _stat(log: Path, key: str) -> int:
    """A number from the stats Scrapy dumps at the end of the worker's log."""
    if not log.exists():
        return 0
    for line in log.read_text(encoding="utf-8").splitlines():
        if f"'{key}':" in line:
            return int(line.split(":")[-1].strip().rstrip(",}"))
    return 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__)
    ap.add_argument("--sites", type=int, default=8000)
    ap.add_argument("--rest", type=float, default=10.0)
    args = ap.parse_args(argv)
    tmp = make_readable_tmp("polite-bench-cluster-")
    port = free_port()
    results = []
    for workers in (1, 2):
        hosts = hosts_for(args.sites)
        site = tmp / f"web{workers}"
        site.mkdir(parents=True, exist_ok=True)
        site.chmod(0o755)
        paths = write_small_pages(site / "pages", 10)
        nginx = Nginx(site, hosts, port, site / "pages", limit_rest=args.rest)
        write_site_files(nginx.sites, hosts, port, paths)
        urls = site / "urls.txt"
        urls.write_text("".join(f"http://{h}:{port}/\n" for h in hosts))
        with nginx:
            print(f"-- {workers} worker(s), N={args.sites}, R={args.rest:g}", flush=True)
            res = run_workers(tmp, nginx, urls, workers, args.rest, f"w{workers}")
        results.append(res)
        print("  ", {k: (round(v, 3) if isinstance(v, float) else v)
                     for k, v in res.items()}, flush=True)
    one, two = results
    ratio = two["pages_per_s"] / one["pages_per_s"] if one["pages_per_s"] else 0.0
    steady = (two["steady_pages_per_s"] / one["steady_pages_per_s"]
              if one["steady_pages_per_s"] else 0.0)
    print(f"\nN={args.sites}, R={args.rest:g}: 1 worker {one['pages_per_s']:.1f} pages/s "
          f"(ceiling N/R = {args.sites / args.rest:.0f}), 2 workers "
          f"{two['pages_per_s']:.1f} pages/s: {ratio:.2f}x (target >= 1.6x); while under way "
          f"(10th to 90th percentile of pages) {one['steady_pages_per_s']:.1f} and "
          f"{two['steady_pages_per_s']:.1f} pages/s: {steady:.2f}x; worker CPU "
          f"{one['worker_cpu_s']:.0f} and {two['worker_cpu_s']:.0f} s")
    for res in results:
        print(f"  {res['workers']} worker(s): exit {res['codes']}, 429s {res['429']}, rests "
              f"< R {res['short']}, overlaps {res['overlaps']} (target 0 / 0 / 0)")
        print(f"    Redis: {res['mem_per_url']:.0f} bytes of used_memory per queued URL at the "
              f"peak ({res['peak_rows']} URLs; queue + seen keys "
              f"{res['queue_bytes_per_url']:.0f} bytes a URL, origin state "
              f"{res['state_bytes_per_origin']:.0f} bytes an origin); per request "
              f"{res['cmds_per_request']:.2f} commands (inside scripts included), "
              f"{res['scripts_per_request']:.2f} script calls, "
              f"{res['batches_per_request']:.3f} batches")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
