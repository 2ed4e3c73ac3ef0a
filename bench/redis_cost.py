"""What one Redis worker costs against the embedded frontier, per request, and Redis's own
memory per queued and per seen URL.

Part 1, the crawl (``--sites`` N, ``--rest`` R): Debian's nginx on loopback serving N
small sites (10 pages of ~5 KB of text each, a sitemap per site) under ``limit_req`` (one
request per R per site, 429 beyond), the workload of ``bench/cluster.py`` at a smaller N
so that both runs finish in a few minutes on a shared 2-core machine. The same crawl runs
twice in one invocation, each against fresh state: once on the embedded frontier (SQLite
in the state directory) and once on one Redis worker (``deploy/redis/redis.conf``,
redis-server on loopback). Both keep their pages in SQLite (``POLITE_STORE`` empty), so
the difference is the frontier's. Reported: the worker's CPU per request nginx saw (user
+ system, from ``getrusage`` of the child) and the ratio Redis / embedded (target
<= 1.25x); Redis commands per request, counting those Lua scripts run (``INFO
commandstats``, ``calls`` summed, before/after; target <= 10), script calls per request;
Redis server CPU per 1,000 requests (``INFO cpu``: used_cpu_sys + used_cpu_user, delta)
and the request rate one Redis core would hold at that cost. Also 429s, rests below R
and overlaps per site from nginx's log (both must be 0 / 0 / 0).

Part 2, memory (``--urls`` U over ``--origins`` K): a fresh redis-server (same config);
U URLs of K origins (U / K each, ~50-byte URLs) pushed through the frontier's own push
path (``RedisShared.batch``: the push script with its seen-set check, rows shaped as
``RedisQueue`` makes them: priority, sequence, URL, URL-row template id). Reported:
``used_memory`` delta per URL, and from ``MEMORY USAGE`` (exact, ``SAMPLES 0``) of every
origin's keys: the queue rows per queued URL, the seen set per seen URL, and the origin
hash per origin.

    python -m bench.redis_cost [--sites 300] [--rest 2] [--urls 1000000] [--origins 10000]
                               [--no-crawl] [--no-memory]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.cluster import commands_total
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
from demo.cluster import start_redis, stop_proc

ROOT = Path(__file__).resolve().parent.parent
AGENT = "PoliteCrawler"


def redis_cpu(r: Any) -> float:
    """Redis server CPU seconds so far (user + system, main thread and the rest)."""
    info = r.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def by_command(r: Any) -> dict[str, int]:
    """Calls so far of each command (those scripts run included)."""
    return {k.removeprefix("cmdstat_"): int(v["calls"])
            for k, v in r.info("commandstats").items() if k.startswith("cmdstat_")}


def crawl_once(tmp: Path, nginx: Nginx, urls: Path, rest: float, label: str,
               redis_url: str) -> dict[str, Any]:
    """One crawl of every site by one worker; ``redis_url`` empty: the embedded frontier."""
    d = tmp / label
    d.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"urls={urls}"]
    for k, v in {
        "POLITE_FRONTIER": redis_url, "POLITE_CRAWL": f"bench-{label}",
        "POLITE_STATE_DIR": str(d / "state"), "JOBDIR": str(d / "job"),
        "POLITE_REST_PAGE": rest, "POLITE_JITTER": 0, "POLITE_HOST_BUDGET": 10,
        "LOG_LEVEL": "INFO", "LOG_FILE": str(d / "worker.log"),
    }.items():
        cmd += ["-s", f"{k}={v}"]
    before_hits = len(read_log(nginx.access_log)) if nginx.access_log.exists() else 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)
    try:
        code = proc.wait()
    finally:
        stop_proc(proc)
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    time.sleep(0.3)  # nginx writes its log line after the response
    hits = [h for h in read_log(nginx.access_log)[before_hits:] if AGENT in h.agent]
    lines = [(h.host, h.path, h.start, h.end) for h in hits]
    m = measure(label, lines, len(nginx.hosts), rest, wall) if lines else None
    return {"label": label, "code": code, "wall": wall, "cpu": cpu, "requests": len(hits),
            "pages": sum(h.is_page for h in hits), "429": sum(h.status == 429 for h in hits),
            "short": m.short if m else 0, "overlaps": m.overlaps if m else 0}


def crawl_part(sites: int, rest: float) -> None:
    import redis

    tmp = make_readable_tmp("polite-bench-redis-cost-")
    port = free_port()
    hosts = hosts_for(sites)
    site = tmp / "web"
    site.mkdir(parents=True, exist_ok=True)
    site.chmod(0o755)
    paths = write_small_pages(site / "pages", 10)
    nginx = Nginx(site, hosts, port, site / "pages", limit_rest=rest)
    write_site_files(nginx.sites, hosts, port, paths)
    urls = site / "urls.txt"
    urls.write_text("".join(f"http://{h}:{port}/\n" for h in hosts))
    with nginx:
        print(f"-- crawl: N={sites} sites, R={rest:g} s, 10 pages a site", flush=True)
        emb = crawl_once(tmp, nginx, urls, rest, "embedded", "")
        print("  ", _fmt(emb), flush=True)
        redis_proc, redis_port = start_redis(tmp / "redis")
        try:
            r = redis.Redis(port=redis_port)
            c0, s0 = commands_total(r)
            by0 = by_command(r)
            cpu0 = redis_cpu(r)
            red = crawl_once(tmp, nginx, urls, rest, "redis",
                             f"redis://127.0.0.1:{redis_port}/0")
            c1, s1 = commands_total(r)
            by1 = by_command(r)
            cpu1 = redis_cpu(r)
            r.close()
        finally:
            stop_proc(redis_proc)
        print("  ", _fmt(red), flush=True)
    n = red["requests"] or 1
    emb_ms = 1000 * emb["cpu"] / (emb["requests"] or 1)
    red_ms = 1000 * red["cpu"] / n
    srv = (cpu1 - cpu0) / n * 1000
    print(f"\nworker CPU per request: embedded {emb_ms:.2f} ms ({emb['requests']} requests), "
          f"Redis {red_ms:.2f} ms ({red['requests']} requests): "
          f"{red_ms / emb_ms if emb_ms else 0:.2f}x (target <= 1.25x)")
    print(f"Redis per request: {(c1 - c0) / n:.2f} commands (inside scripts included; "
          f"target <= 10), {(s1 - s0) / n:.2f} script calls; by command:", " ".join(
              f"{k} {v / n:.2f}" for k, v in sorted(
                  ((k, by1[k] - by0.get(k, 0)) for k in by1), key=lambda kv: -kv[1])
              if v / n >= 0.05))
    print(f"Redis server CPU: {srv:.3f} s per 1,000 requests: one Redis core would hold "
          f"{1000 / srv if srv else 0:.0f} requests/s")
    for res in (emb, red):
        print(f"  {res['label']}: exit {res['code']}, 429s {res['429']}, rests < R "
              f"{res['short']}, overlaps {res['overlaps']} (target 0 / 0 / 0)")


def _fmt(res: dict[str, Any]) -> dict[str, Any]:
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in res.items()}


def memory_part(urls: int, origins: int) -> None:
    import redis

    from polite_crawler.frontier.redis_shared import (
        RedisShared,
        row_body,
        seen_fp,
        template_id,
    )

    tmp = make_readable_tmp("polite-bench-redis-mem-")
    proc, port = start_redis(tmp)
    try:
        url = f"redis://127.0.0.1:{port}/0"
        r = redis.Redis(port=port)
        shared = RedisShared(url, "bench", "bench-worker")
        shared.register(time.time(), 3600.0)
        base = int(r.info("memory")["used_memory"])
        per = urls // origins
        # A URL row as the scheduler writes it: its template id after the URL line.
        data = b"u" + str(template_id(b"bench-template")).encode("ascii")
        names = [f"http://site{o:05d}.example" for o in range(origins)]
        t0 = time.monotonic()
        step = 100  # origins per batch (a busy worker's batch pushes to many origins)
        for lo in range(0, origins, step):
            pushes: dict[str, list[tuple[int | None, int, bytes]]] = {}
            for name in names[lo:lo + step]:
                rows: list[tuple[int | None, int, bytes]] = []
                for k in range(per):
                    u = f"{name}/section{k % 10}/article-{k:06d}.html"
                    rows.append((seen_fp(u), 0, row_body(name, u, data)))
                pushes[name] = rows
            shared.batch(now=time.time(), ttl=3600.0, pushes=pushes, seen={}, templates={},
                         stops={}, drops=[], owned=[])
        took = time.monotonic() - t0
        total = int(r.info("memory")["used_memory"]) - base
        q = s = o = 0
        pipe = r.pipeline(transaction=False)
        for name in names:
            pipe.memory_usage(shared.qkey(name), samples=0)
            pipe.memory_usage(shared.skey(name), samples=0)
            pipe.memory_usage(shared.okey(name), samples=0)
        got = pipe.execute()
        for i in range(0, len(got), 3):
            q, s, o = q + int(got[i] or 0), s + int(got[i + 1] or 0), o + int(got[i + 2] or 0)
        queued = sum(int(x) for x in _zcards(r, shared, names))
        sample = r.zrange(shared.qkey(names[0]), 0, 0)[0]
        shared.close()
        r.close()
    finally:
        stop_proc(proc)
    print(f"-- memory: {queued:,} URLs queued and seen over {origins:,} origins "
          f"({per} each), pushed in {took:.0f} s; a row: {sample[:80]!r} ({len(sample)} B)")
    print(f"used_memory delta {total / queued:.1f} B per URL (queue + seen + origin keys + "
          f"sets of origins)")
    print(f"queue rows {q / queued:.1f} B per queued URL (target <= 64); seen set "
          f"{s / queued:.1f} B per seen URL (target <= 32); origin hash {o / origins:.0f} B "
          f"per origin (MEMORY USAGE, exact)")


def _zcards(r: Any, shared: Any, names: list[str]) -> list[int]:
    pipe = r.pipeline(transaction=False)
    for name in names:
        pipe.zcard(shared.qkey(name))
    return [int(x) for x in pipe.execute()]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.redis_cost", description=__doc__)
    ap.add_argument("--sites", type=int, default=300)
    ap.add_argument("--rest", type=float, default=2.0)
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--origins", type=int, default=10_000)
    ap.add_argument("--no-crawl", action="store_true")
    ap.add_argument("--no-memory", action="store_true")
    args = ap.parse_args(argv)
    if not args.no_memory:
        memory_part(args.urls, args.origins)
    if not args.no_crawl:
        crawl_part(args.sites, args.rest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
