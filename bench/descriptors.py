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
the tracebacks and "Too many open files" lines in its log.

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
    return Sample(time.monotonic() - t0, rss, fds, sockets)


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
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"urls={urls}",
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
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                preexec_fn=_limits(args.soft, args.hard))  # noqa: PLW1509
        try:
            while proc.poll() is None:
                s = _sample(proc.pid, t0)
                if s is not None:
                    samples.append(s)
                time.sleep(0.5)
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
    }
    print("   " + json.dumps(out), flush=True)
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
