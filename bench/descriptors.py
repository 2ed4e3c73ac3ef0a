"""Many small sites on an ordinary machine: descriptors and memory a site.

Debian's nginx (:mod:`bench.realweb_nginx`, started on loopback by the bench and stopped
by its PID) serves N small sites, each on its own loopback address (127.0.x.y), so no
two sites share a server: 3 pages of ~5 KB of real text each ("/" links to the other
two), a robots.txt with a ``Sitemap:`` line and a sitemap listing the 3 pages. nginx's
``limit_req`` answers 429 to a second request of a site within the rest R. Its rate is
kept in thousandths of a request a second, so it is exact only where 1000 / R is a
whole number (R = 1, 2, 4, 5, 10, 20 s): at 30 s it would answer 429 to a crawler that
rests exactly 30 s. Runs with R = 40 s run with the limit off (``--no-limit``).

One crawl a run: ``scrapy crawl site -a urls=FILE`` with POLITE_REST_PAGE = R,
POLITE_JITTER = 0, a fresh state directory, in a child process whose descriptor
limits the bench sets (``--soft`` and ``--hard``: ``resource.setrlimit`` before the
crawl's exec, as ``ulimit -S -n`` / ``ulimit -H -n`` would). Every 0.5 s the bench
reads the child's resident memory (``/proc/PID/status`` VmRSS) and its open
descriptors (``/proc/PID/fd``, and how many of them are sockets).

Printed per run: pages fetched (the HTML 200s nginx logged) of 3 N, 429s, efficiency
(requests after each site's first a second over the polite ideal N / R, as
:mod:`bench.frontier_efficiency` defines it), peak RSS and peak RSS a site, peak open
descriptors and sockets (and a site), the crawl's exit status and finish reason, and
the tracebacks and "Too many open files" lines in its log; the crawl's CPU seconds; and
where the span beyond the ideal's 4 R goes (:func:`where_the_time_goes`: the ramp of the
first requests, each next request's wave, the CPU and run-queue wait while it went out).

    .venv/bin/python -m bench.descriptors --sites 1000 --rest 10
    .venv/bin/python -m bench.descriptors --sites 1100 --rest 10 --soft 1024
    .venv/bin/python -m bench.descriptors --sites 1100 --rest 10 --soft 1024 --hard 1024
    .venv/bin/python -m bench.descriptors --sites 4000 --rest 40 --no-limit

``--keep DIR`` keeps nginx's configuration and logs and the crawl's log, stats and
samples; ``-s NAME=VALUE`` passes a setting to the crawl.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.frontier_efficiency import measure
from bench.realweb_nginx import (
    DOCS,
    Nginx,
    free_port,
    hosts_for,
    make_readable_tmp,
    read_log,
    write_site_files,
    write_small_pages,
)

ROOT = Path(__file__).resolve().parent.parent
AGENT = "PoliteCrawler"


@dataclass
class Sample:
    t: float
    rss_kb: int
    fds: int
    sockets: int
    cpu: float = 0.0  # the crawl's CPU seconds so far (user and system)
    # Seconds its threads were ready to run but waited for a core (the kernel's
    # /proc/PID/schedstat, summed over threads): the machine's other work.
    runqueue: float = 0.0


_TICK = os.sysconf("SC_CLK_TCK")


def _sample(pid: int, t0: float) -> Sample | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fd_dir = f"/proc/{pid}/fd"
        fds = sockets = 0
        for name in os.listdir(fd_dir):
            fds += 1
            try:
                if os.readlink(f"{fd_dir}/{name}").startswith("socket:"):
                    sockets += 1
            except OSError:
                continue
    except OSError:
        return None
    rss = 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    try:  # utime and stime, fields 14 and 15 of /proc/PID/stat (after the name)
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, IndexError, ValueError):
        cpu = 0.0
    waited = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            waited += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        pass
    return Sample(time.monotonic() - t0, rss, fds, sockets, cpu, waited / 1e9)


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(int(q * (len(xs) - 1)), len(xs) - 1)] if xs else 0.0


def where_the_time_goes(hits: list[Any], rest: float, samples: list[Sample],
                        t0_wall: float) -> dict[str, Any]:
    """What the span of the crawl is made of, beyond the ideal's 4 R (5 requests a
    site): the spread of the sites' first requests (the ramp), and for each next
    request of a site (its "wave": every site's k-th request) the spread of its start
    times and how much longer than R its gap was (median, max), with the crawl's CPU
    use (CPU seconds over wall seconds) while the wave went out.

    The efficiency's span runs from the first request's start to the last one's end,
    so it is the ramp plus the gaps of the site that ends last: a wave that takes longer
    to go out than the one before it adds its extra time to its last sites' gaps."""
    by_host: dict[str, list[tuple[float, float]]] = {}
    for h in hits:
        by_host.setdefault(h.host, []).append((h.start, h.end))
    if not by_host:
        return {}
    first = min(s for v in by_host.values() for s, _e in v)
    waves: dict[int, list[float]] = {}
    excess: dict[int, list[float]] = {}
    for v in by_host.values():
        v.sort()
        for k, (s, _e) in enumerate(v):
            waves.setdefault(k, []).append(s - first)
            if k:
                excess.setdefault(k, []).append(s - v[k - 1][1] - rest)

    def cpu_between(a: float, b: float) -> tuple[float, float] | None:
        """CPU seconds and run-queue wait a wall second, from ``a`` to ``b``."""
        # Sample times are seconds from the crawl's start; hits are epoch seconds.
        lo, hi = a - t0_wall, b - t0_wall
        inside = [x for x in samples if lo <= x.t <= hi]
        if len(inside) < 2 or inside[-1].t <= inside[0].t:
            return None
        wall = inside[-1].t - inside[0].t
        return (round((inside[-1].cpu - inside[0].cpu) / wall, 2),
                round((inside[-1].runqueue - inside[0].runqueue) / wall, 2))

    rows = []
    for k in sorted(waves):
        w = waves[k]
        rows.append({
            "wave": k, "start": round(min(w), 2), "spread": round(max(w) - min(w), 2),
            "gap_excess_p50": round(_quantile(excess.get(k, []), 0.5), 3),
            "gap_excess_max": round(max(excess.get(k, [0.0])), 3),
            "cpu": cpu_between(first + min(w), first + max(w)),
        })
    last_host = max(by_host, key=lambda h: by_host[h][-1][1])
    chain = by_host[last_host]
    return {
        "span": round(max(e for v in by_host.values() for _s, e in v) - first, 2),
        "ramp": round(max(v[0][0] for v in by_host.values()) - first, 2),
        "last_site_first": round(chain[0][0] - first, 2),
        "last_site_gap_excess": [round(chain[k][0] - chain[k - 1][1] - rest, 2)
                                 for k in range(1, len(chain))],
        "waves": rows,
    }


def _limits(soft: int | None, hard: int | None) -> Any:
    def apply() -> None:
        cur_soft, cur_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        new_hard = hard if hard is not None else cur_hard
        new_soft = soft if soft is not None else min(cur_soft, new_hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(new_soft, new_hard), new_hard))
    return apply


def run(args: argparse.Namespace, n: int, tmp: Path) -> dict[str, Any]:
    rest = args.rest
    hosts = hosts_for(n)
    port = free_port()
    web = tmp / f"web-{n}"
    web.mkdir(parents=True, exist_ok=True)
    web.chmod(0o755)
    paths = write_small_pages(web / "pages", args.pages)
    nginx = Nginx(web, hosts, port, web / "pages",
                  limit_rest=None if args.no_limit else rest)
    write_site_files(nginx.sites, hosts, port, paths)
    urls = web / "urls.txt"
    urls.write_text("".join(f"http://{h}:{port}/\n" for h in hosts))
    d = tmp / f"run-{n}"
    d.mkdir(parents=True, exist_ok=True)
    log = d / "crawl.log"
    stats_file = d / "stats.json"
    profile = ["-m", "cProfile", "-o", str(args.profile)] if args.profile else []
    cmd = [sys.executable, *profile, "-m", "scrapy", "crawl", "site", "-a", f"urls={urls}",
           "-s", f"POLITE_STATE_DIR={d / 'state'}", "-s", "LOG_LEVEL=INFO",
           "-s", f"LOG_FILE={log}", "-s", f"POLITE_STATS_FILE={stats_file}",
           "-s", f"POLITE_REST_PAGE={rest}", "-s", "POLITE_JITTER=0",
           "-s", f"CLOSESPIDER_TIMEOUT={args.timeout}"]
    for kv in args.extra:
        cmd += ["-s", kv]
    limits = f"soft {args.soft or '-'} hard {args.hard or '-'}"
    print(f"-- N={n} R={rest:g} limit_req={'off' if args.no_limit else 'on'} "
          f"descriptors {limits}", flush=True)
    print("   " + " ".join(cmd), flush=True)
    samples: list[Sample] = []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with nginx:
        t0 = time.monotonic()
        t0_wall = time.time()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                preexec_fn=_limits(args.soft, args.hard))  # noqa: PLW1509
        try:
            while proc.poll() is None:
                s = _sample(proc.pid, t0)
                if s is not None:
                    samples.append(s)
                time.sleep(0.25)
        except BaseException:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise
        wall = time.monotonic() - t0
        time.sleep(0.3)  # the last access-log lines
        hits = [h for h in read_log(nginx.access_log) if AGENT in h.agent]
        if args.keep is not None:
            nginx.keep(args.keep / f"run-{n}")
    if args.keep is not None:
        (d / "samples.json").write_text(json.dumps([s.__dict__ for s in samples]))
        for p in d.iterdir():
            if p.is_file():
                shutil.copy(p, args.keep / f"run-{n}" / p.name)
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    stats: dict[str, Any] = {}
    if stats_file.exists():
        stats = json.loads(stats_file.read_text()).get("stats", {})
    pages = sum(h.is_page for h in hits)
    lines = [(h.host, h.path, h.start, h.end) for h in hits]
    eff = measure("polite", lines, n, rest, wall) if lines else None
    peak_rss = max((s.rss_kb for s in samples), default=0)
    peak_fds = max((s.fds for s in samples), default=0)
    peak_sockets = max((s.sockets for s in samples), default=0)
    out = {
        "sites": n, "rest": rest, "soft": args.soft, "hard": args.hard,
        "limit_req": not args.no_limit, "exit": proc.returncode,
        "finish_reason": stats.get("finish_reason"), "wall": round(wall, 1),
        "pages": pages, "pages_of": args.pages * n, "requests": len(hits),
        "429s": sum(h.status == 429 for h in hits),
        "efficiency": round(eff.efficiency, 3) if eff else 0.0,
        "short_rests": eff.short if eff else 0, "overlaps": eff.overlaps if eff else 0,
        # nginx logs milliseconds: a gap a millisecond short of R is the log's rounding.
        "short_rests_1pct": eff.short_1pct if eff else 0,
        "min_gap": round(eff.min_gap, 3) if eff else 0.0,
        "peak_rss_mb": round(peak_rss / 1024, 1),
        "rss_kb_per_site": round(peak_rss / n, 1),
        "peak_fds": peak_fds, "peak_sockets": peak_sockets,
        "fds_per_site": round(peak_fds / n, 3),
        "tracebacks": text.count("Traceback"),
        "emfile_lines": text.count("Too many open files"),
        "budget_line": next((ln.split("] ", 1)[-1] for ln in text.splitlines()
                             if "Descriptor budget" in ln or "Fewer requests" in ln
                             or "Not crawling" in ln), ""),
        "connections_opened": stats.get("polite/connections/opened"),
        "cpu_s": round(max((s.cpu for s in samples), default=0.0), 1),
        "load": os.getloadavg()[0],
    }
    print("   " + json.dumps(out), flush=True)
    detail = where_the_time_goes(hits, rest, samples, t0_wall)
    if detail:
        print(f"   span {detail['span']} s = 4 R + {detail['span'] - 4 * rest:.2f}: ramp "
              f"{detail['ramp']} s; the site that ended last started at "
              f"{detail['last_site_first']} s, its gaps longer than R by "
              f"{detail['last_site_gap_excess']}", flush=True)
        for w in detail["waves"]:
            cpu = w["cpu"] or (None, None)
            print(f"   request {w['wave'] + 1} of each site: from {w['start']} s over "
                  f"{w['spread']} s, gap over R p50 {w['gap_excess_p50']} max "
                  f"{w['gap_excess_max']}; CPU {cpu[0]}, waiting for a core {cpu[1]} "
                  "(a wall second)", flush=True)
    out["time"] = detail
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench.descriptors", description=__doc__.split("\n")[0])
    ap.add_argument("--sites", type=int, action="append", default=None,
                    help="N (repeat for several runs; default 1000)")
    ap.add_argument("--rest", type=float, default=10.0)
    ap.add_argument("--pages", type=int, default=3)
    ap.add_argument("--soft", type=int, default=None, help="RLIMIT_NOFILE soft limit")
    ap.add_argument("--hard", type=int, default=None, help="RLIMIT_NOFILE hard limit")
    ap.add_argument("--no-limit", action="store_true", help="nginx's limit_req off")
    ap.add_argument("--timeout", type=float, default=1800.0, help="CLOSESPIDER_TIMEOUT")
    ap.add_argument("--keep", type=Path, default=None)
    ap.add_argument("-s", dest="extra", action="append", default=[])
    ap.add_argument("--profile", type=Path, default=None,
                    help="run the crawl under cProfile, its stats to this file")
    a = ap.parse_args(argv)
    if not DOCS.is_dir():
        print(f"{DOCS} is missing: run `bash scripts/system-deps.sh bench`", file=sys.stderr)
        return 2
    # nginx itself needs a descriptor a site (its listening sockets) and one a connection.
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    def _terminate(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)  # unwinds through `with nginx:`

    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    tmp = make_readable_tmp("descriptors-")
    results = []
    try:
        for n in a.sites or [1000]:
            results.append(run(a, n, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("command: " + " ".join([Path(sys.executable).name, "-m", "bench.descriptors",
                                  *argv]))
    cols = ("sites", "rest", "soft", "hard", "exit", "finish_reason", "pages", "pages_of",
            "429s", "efficiency", "peak_rss_mb", "rss_kb_per_site", "peak_fds",
            "peak_sockets", "tracebacks", "emfile_lines", "wall")
    print(" | ".join(cols))
    for r in results:
        print(" | ".join(str(r[c]) for c in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
