"""Real-web cost: the crawler against Debian's nginx serving real sites.

nginx (``/usr/sbin/nginx``; ``bash scripts/system-deps.sh bench`` installs it) is
started by the bench on loopback with its own configuration, pid file and logs in a
temporary directory (:mod:`bench.realweb_nginx`), and stopped by its PID on every exit.
It serves N sites on 127.0.x.y (one ``server`` block and ``listen`` each, one port),
gzip on, ``Content-Type: text/html`` without a charset as nginx sends it, each site
with its own robots.txt whose ``Sitemap:`` line names a sitemap of all its pages.

Each site's sitemap lists its pages in an order of its own (a shuffle seeded by the
host, stable from run to run: :func:`bench.realweb_nginx.host_order`), as different
sites do; a budget then fetches different pages on different hosts.

Each workload runs the project's crawler (``scrapy crawl site -a urls=FILE``,
everything on, fresh state in the temporary directory) and stock Scrapy
(:mod:`bench.realweb_stock`: Scrapy's SitemapSpider reading the same robots.txt and
sitemaps, following in-host links with LinkExtractor, ROBOTSTXT_OBEY, one request per
domain, the same per-site budget) one after the other against the same server, each
in its own process. CPU is the crawl process's own (user + system, from ``wait4``),
peak RSS its ``ru_maxrss``; pages are the HTML 200s the server's access log shows for
that crawler's User-Agent. Every figure is printed with the average size of the pages
behind it: on disk (raw) and as nginx sent them (gzipped, ``$body_bytes_sent``).

Workloads (``--workload``, default all):

``sitemap``   N = 200 python3-doc sites, POLITE_HOST_BUDGET=10, POLITE_REST_PAGE=1;
              pages per CPU-second (target 2x stock's). Stock: the same budget,
              counted per host by its spider.
``whole``     N = 20 python3-doc sites, every page, POLITE_REST_PAGE=0.2; pages per
              CPU-second (target 2x stock's). Stock: DOWNLOAD_DELAY 0.2.
              Also the crawl's ``polite/frontier/latency_doubled`` and its pages/s
              in the first and the last minute.
``discovery`` listed URLs per CPU-second from parsed sitemaps into the durable
              frontier (target >= 100,000): N = 200 sites of 2,000 small pages, budget
              10, rest 1 s, crawled twice: sitemaps listing all 2,000 pages, and
              sitemaps listing only the 10 the budget fetches (the same requests both
              times, checked): extra URLs listed / extra CPU seconds.
``polite``    N = 1,000 small sites (10 pages of ~5 KB of real text cut from the
              python docs, a sitemap each), R = 10 s, jitter 0, budget 10, nginx
              ``limit_req`` one request per R per site (429 beyond): efficiency as
              :mod:`bench.frontier_efficiency` defines it (target >= 0.95), 429s and
              rests below R (target 0 both), the rests' overrun at the median, CPU
              per request (target half of stock's) and peak RSS. Stock:
              DOWNLOAD_DELAY R unrandomised, the broad-crawl priority queue (as that
              bench runs it).
``sorted``    an extra, labelled so: ``sitemap`` with every sitemap in one sorted
              order (every host's budget fetches the same few small pages).

After stock, the ``sitemap``, ``whole`` and ``polite`` workloads run Scrapy's floor: the
pages the polite crawl fetched, in its order, through Scrapy's own request path with its
default settings (and the workload's delay), read by nothing (``bench.realweb_stock
--floor``). Its CPU a page and a request are printed against stock's: how much of stock's
cost is Scrapy's request path as its defaults run it, and how much stock's own reading.
(A spider spends less there only by changing those defaults, as the crawler does with its
charset middleware, its log formatter and its scheduler.)

    .venv/bin/python -m bench.realweb [--workload W ...] [--sites N] [--skip-stock]
        [--profile cprofile|py-spy] [--profile-stock] [--keep DIR] [-s NAME=VALUE ...]

``--sites`` overrides N (a shorter run); ``--profile-stock`` profiles stock's runs and
its floor with py-spy (their CPU figures are then the profiler's process, not the
crawl's: use such a run for its profile only); ``--profile`` profiles the polite crawl
process (py-spy's collapsed stacks when py-spy is on PATH and asked for, else cProfile)
and prints the profile's path; ``--keep DIR`` keeps the nginx config and logs, crawl
logs, stats and state of every run.
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
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.frontier_efficiency import measure
from bench.realweb_nginx import (
    DOCS,
    Hit,
    Nginx,
    doc_pages,
    free_port,
    hosts_for,
    make_readable_tmp,
    raw_size,
    read_log,
    write_site_files,
    write_small_pages,
)

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ("sitemap", "whole", "discovery", "polite", "sorted")
DEFAULT_SITES = {"sitemap": 200, "whole": 20, "discovery": 200, "polite": 1000, "sorted": 200}
POLITE_AGENT = "PoliteCrawler"
STOCK_AGENT = "StockScrapyBench"


@dataclass
class Run:
    """One crawl process: what it cost and what the server saw of it."""

    workload: str
    crawler: str
    cpu: float
    wall: float
    hits: list[Hit]
    root: Path
    rss_mb: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    @property
    def pages(self) -> int:
        return sum(h.is_page for h in self.hits)

    @property
    def rate(self) -> float:
        return self.pages / self.cpu if self.cpu else 0.0

    def sizes(self) -> tuple[float, float]:
        """Average KB of the pages fetched: on disk (raw) and as sent (gzipped)."""
        pages = [h for h in self.hits if h.is_page]
        if not pages:
            return 0.0, 0.0
        raw = [raw_size(self.root, h.path) or 0 for h in pages]
        return sum(raw) / len(pages) / 1000, sum(h.size for h in pages) / len(pages) / 1000

    @property
    def size_text(self) -> str:
        raw, gz = self.sizes()
        return f"{raw:.1f} / {gz:.1f}"


@dataclass
class Ctx:
    tmp: Path
    args: argparse.Namespace
    env: dict[str, str]
    runs: list[Run] = field(default_factory=list)
    # (workload, figure, value, target)
    # (workload, figure, value, target, average size of the pages behind it)
    figures: list[tuple[str, str, str, str, str]] = field(default_factory=list)


def _run_child(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Run ``cmd``; its CPU seconds (user + system, its own and its waited-for children),
    wall seconds and peak RSS (MB)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)
    try:
        _pid, status, usage = os.wait4(proc.pid, 0)
    except BaseException:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:6]}... exited {proc.returncode}")
    return (usage.ru_utime + usage.ru_stime, time.monotonic() - t0,
            usage.ru_maxrss / 1024)


def _mine(hits: list[Hit], agent: str) -> list[Hit]:
    return [h for h in hits if agent in h.agent]


def run_polite(ctx: Ctx, nginx: Nginx, workload: str, label: str, urls: Path,
               settings: dict[str, Any]) -> Run:
    d = ctx.tmp / "runs" / f"{workload}-{label}"
    d.mkdir(parents=True, exist_ok=True)
    stats_file = d / "stats.json"
    py = sys.executable
    crawl = ["-m", "scrapy", "crawl", "site", "-a", f"urls={urls}",
             "-s", f"POLITE_STATE_DIR={d / 'state'}", "-s", "LOG_LEVEL=INFO",
             "-s", f"LOG_FILE={d / 'crawl.log'}", "-s", f"POLITE_STATS_FILE={stats_file}"]
    for k, v in settings.items():
        crawl += ["-s", f"{k}={v}"]
    for kv in ctx.args.extra:
        crawl += ["-s", kv]
    cmd = [py, *crawl]
    profile_path: Path | None = None
    # Outside the temporary directory, which goes at the end: in --keep DIR, else /tmp.
    out = ctx.args.keep or Path(tempfile.gettempdir())
    out.mkdir(parents=True, exist_ok=True)
    stem = f"realweb-profile-{workload}-{label.replace(' ', '-')}"
    if ctx.args.profile:
        if ctx.args.profile == "py-spy" and shutil.which("py-spy"):
            # Collapsed stacks (one line a stack, its sample count last): grep-able, and
            # any flame graph tool draws them.
            profile_path = out / f"{stem}.folded"
            cmd = [str(shutil.which("py-spy")), "record", "-r", "100", "--nonblocking",
                   "--format", "raw", "-o", str(profile_path), "--", py, *crawl]
        else:
            profile_path = out / f"{stem}.pstats"
            cmd = [py, "-m", "cProfile", "-o", str(profile_path), *crawl]
    before = len(read_log(nginx.access_log)) if nginx.access_log.exists() else 0
    print(f"-- {workload}: polite_crawler ({label})", flush=True)
    print("   " + " ".join(cmd), flush=True)
    cpu, wall, rss = _run_child(cmd, ctx.env)
    time.sleep(0.2)  # the last access-log lines
    hits = _mine(read_log(nginx.access_log)[before:], POLITE_AGENT)
    stats: dict[str, Any] = {}
    if stats_file.exists():
        stats = json.loads(stats_file.read_text()).get("stats", {})
    run = Run(workload, f"polite_crawler{'' if label == 'main' else ' ' + label}", cpu, wall,
              hits, nginx.root, rss, stats)
    if profile_path is not None:
        print(f"   profile of the polite crawl: {profile_path}", flush=True)
        run.note = f"profile {profile_path}"
    ctx.runs.append(run)
    _print_run(run)
    return run


def run_stock(ctx: Ctx, nginx: Nginx, workload: str, label: str, urls: Path,
              extra: list[str]) -> Run:
    d = ctx.tmp / "runs" / f"{workload}-stock-{label}"
    d.mkdir(parents=True, exist_ok=True)
    before = len(read_log(nginx.access_log)) if nginx.access_log.exists() else 0
    print(f"-- {workload}: stock Scrapy ({label})", flush=True)
    cmd = [sys.executable, "-m", "bench.realweb_stock", "--urls", str(urls),
           "--log-file", str(d / "crawl.log"), *extra]
    profile_path: Path | None = None
    if ctx.args.profile_stock and shutil.which("py-spy"):
        out = ctx.args.keep or Path(tempfile.gettempdir())
        out.mkdir(parents=True, exist_ok=True)
        profile_path = out / f"realweb-profile-{workload}-stock-{label}.folded"
        cmd = [str(shutil.which("py-spy")), "record", "-r", "100", "--nonblocking",
               "--format", "raw", "-o", str(profile_path), "--", *cmd]
    print("   " + " ".join(cmd), flush=True)
    cpu, wall, rss = _run_child(cmd, ctx.env)
    if profile_path is not None:
        print(f"   profile of the stock crawl: {profile_path}", flush=True)
    time.sleep(0.2)
    hits = _mine(read_log(nginx.access_log)[before:], STOCK_AGENT)
    run = Run(workload, f"stock Scrapy{'' if label == 'main' else ' ' + label}", cpu, wall, hits,
              nginx.root, rss)
    ctx.runs.append(run)
    _print_run(run)
    return run


def run_floor(ctx: Ctx, nginx: Nginx, workload: str, polite: Run, urls: Path,
              extra: list[str]) -> Run:
    """Scrapy's floor: the pages ``polite`` fetched, in its order, through Scrapy's own
    request path (a bare spider, default settings) and read by nothing: what that path
    costs a page as Scrapy's defaults run it."""
    port = urls.read_text().split()[0].rsplit(":", 1)[1].strip("/")
    listed = ctx.tmp / "runs" / f"{workload}-stock-floor" / "urls.txt"
    listed.parent.mkdir(parents=True, exist_ok=True)
    listed.write_text("".join(f"http://{h.host}:{port}{h.path}\n"
                              for h in polite.hits if h.is_page))
    return run_stock(ctx, nginx, workload, "floor", urls, ["--floor", str(listed), *extra])


def _floor_figures(ctx: Ctx, workload: str, floor: Run | None, s: Run | None) -> None:
    if floor is None or s is None or not floor.pages or not s.pages:
        return
    per, stock_per = floor.cpu / floor.pages, s.cpu / s.pages
    _fig(ctx, workload, "Scrapy's floor: pages/CPU-s (ms a page), pages, 429s",
         f"{floor.rate:.1f} ({1000 * per:.2f}), {floor.pages}, "
         f"{sum(h.status == 429 for h in floor.hits)}", "", floor)
    _fig(ctx, workload, "Scrapy's floor / stock, CPU a page", f"{per / stock_per:.2f}x")


def _print_run(run: Run) -> None:
    statuses: dict[int, int] = {}
    for h in run.hits:
        statuses[h.status] = statuses.get(h.status, 0) + 1
    print(f"   {run.crawler}: {len(run.hits)} requests, {run.pages} pages "
          f"(avg KB raw / gzip {run.size_text}), CPU {run.cpu:.1f}s, wall {run.wall:.1f}s, "
          f"{run.rate:.1f} pages/CPU-s, peak RSS {run.rss_mb:.0f} MB; statuses {statuses}",
          flush=True)


def _urls_file(tmp: Path, name: str, hosts: list[str], port: int) -> Path:
    path = tmp / f"{name}-urls.txt"
    path.write_text("".join(f"http://{h}:{port}/\n" for h in hosts))
    return path


# --- the workloads ------------------------------------------------------------------------
def _docs_web(ctx: Ctx, name: str, n: int, *, sitemap: bool = True,
              order: str = "host") -> tuple[Nginx, Path, int]:
    port = free_port()
    hosts = hosts_for(n)
    tmp = ctx.tmp / name
    tmp.mkdir(parents=True, exist_ok=True)
    tmp.chmod(0o755)
    nginx = Nginx(tmp, hosts, port, DOCS.resolve())
    listed = write_site_files(nginx.sites, hosts, port, doc_pages(), sitemap=sitemap,
                              order=order)
    return nginx, _urls_file(tmp, name, hosts, port), listed


def _fig(ctx: Ctx, workload: str, figure: str, value: str, target: str = "",
         run: Run | None = None) -> None:
    """One row of the table; with the average size of the pages ``run`` fetched."""
    ctx.figures.append((workload, figure, value, target, run.size_text if run else ""))


def _ratio(ctx: Ctx, workload: str, p: Run, s: Run | None, target: str) -> None:
    if s is None:
        return
    _fig(ctx, workload, "stock pages/CPU-s", f"{s.rate:.1f}", "", s)
    _fig(ctx, workload, "polite / stock, pages per CPU-s", f"{p.rate / s.rate:.2f}x", target)
    _fig(ctx, workload, "pages polite / stock", f"{p.pages} / {s.pages}", "equal")


def wl_sitemap(ctx: Ctx, n: int, order: str = "host") -> None:
    """N python3-doc sites, budget 10; each site's sitemap in its own order (or sorted)."""
    name = "sitemap" if order == "host" else "sorted"
    nginx, urls, _listed = _docs_web(ctx, name, n, order=order)
    with nginx:
        p = run_polite(ctx, nginx, name, "main", urls,
                       {"POLITE_HOST_BUDGET": 10, "POLITE_REST_PAGE": 1})
        s = None if ctx.args.skip_stock else run_stock(ctx, nginx, name, "main", urls,
                                                       ["--budget", "10"])
        floor = None if s is None else run_floor(ctx, nginx, name, p, urls, [])
    _keep(ctx, nginx, name)
    label = "host order" if order == "host" else "sorted order (extra: same pages on every host)"
    _fig(ctx, name, f"pages/CPU-s, N={n}, budget 10, {label}", f"{p.rate:.1f}", "", p)
    _ratio(ctx, name, p, s, ">= 2x" if order == "host" else "")
    _floor_figures(ctx, name, floor, s)


def wl_sorted(ctx: Ctx, n: int) -> None:
    wl_sitemap(ctx, n, order="sorted")


def _pages_per_s(hits: list[Hit], first: bool, span: float = 60.0) -> float:
    pages = sorted(h.end for h in hits if h.is_page)
    if not pages:
        return 0.0
    if first:
        return sum(t < pages[0] + span for t in pages) / span
    return sum(t > pages[-1] - span for t in pages) / span


def wl_whole(ctx: Ctx, n: int) -> None:
    nginx, urls, listed = _docs_web(ctx, "whole", n)
    with nginx:
        p = run_polite(ctx, nginx, "whole", "main", urls, {"POLITE_REST_PAGE": 0.2})
        s = None if ctx.args.skip_stock else run_stock(
            ctx, nginx, "whole", "main", urls, ["--delay", "0.2"])
        floor = None if s is None else run_floor(ctx, nginx, "whole", p, urls,
                                                 ["--delay", "0.2"])
    _keep(ctx, nginx, "whole")
    _floor_figures(ctx, "whole", floor, s)
    doubled = p.stats.get("polite/frontier/latency_doubled", 0)
    _fig(ctx, "whole", f"pages/CPU-s, N={n}, rest 0.2 s", f"{p.rate:.1f}", "", p)
    _ratio(ctx, "whole", p, s, ">= 2x")
    _fig(ctx, "whole", "pages fetched / listed", f"{p.pages} / {listed}", "all")
    _fig(ctx, "whole", "wall s; pages/s first min, last min",
         f"{p.wall:.0f}; {_pages_per_s(p.hits, True):.1f}, {_pages_per_s(p.hits, False):.1f}")
    _fig(ctx, "whole", "polite/frontier/latency_doubled", str(doubled), "0")
    if s is not None:
        _fig(ctx, "whole", "stock wall s", f"{s.wall:.0f}")


def wl_discovery(ctx: Ctx, n: int, listed_per_site: int = 2000, fetched: int = 10) -> None:
    port = free_port()
    hosts = hosts_for(n)
    tmp = ctx.tmp / "discovery"
    tmp.mkdir(parents=True, exist_ok=True)
    tmp.chmod(0o755)
    # Small pages; "/" links only to pages the short sitemap lists too, so both runs
    # find the same links and fetch the same pages: the budget's first ones.
    paths = write_small_pages(tmp / "pages", listed_per_site, linked=fetched - 1)
    nginx = Nginx(tmp, hosts, port, tmp / "pages")
    urls = _urls_file(tmp, "discovery", hosts, port)
    settings = {"POLITE_HOST_BUDGET": fetched, "POLITE_REST_PAGE": 1}
    stock_args = ["--budget", str(fetched)]
    runs: dict[str, tuple[Run, Run | None]] = {}
    with nginx:
        for label, listed in (("full sitemaps", paths), ("short sitemaps", paths[:fetched])):
            # One sorted order on every host: the short sitemaps list the full ones' first
            # pages, so both runs fetch the same pages (the budget's first).
            write_site_files(nginx.sites, hosts, port, listed, order="sorted")
            p = run_polite(ctx, nginx, "discovery", label, urls, settings)
            s = None if ctx.args.skip_stock else run_stock(ctx, nginx, "discovery", label,
                                                           urls, stock_args)
            runs[label] = (p, s)
    _keep(ctx, nginx, "discovery")
    extra_urls = n * (len(paths) - fetched)
    (full, full_s), (short, short_s) = runs["full sitemaps"], runs["short sitemaps"]
    same = {(h.host, h.path) for h in full.hits} == {(h.host, h.path) for h in short.hits}
    cpu = full.cpu - short.cpu
    ctx.figures += [(*f, "") for f in [
        ("discovery", f"URLs listed, N={n}: full / short sitemaps",
         f"{n * len(paths):,} / {n * fetched:,}", ""),
        ("discovery", "polite CPU s full / short (same requests?)",
         f"{full.cpu:.1f} / {short.cpu:.1f} ({'yes' if same else 'NO'})", ""),
        ("discovery", "listed URLs per CPU-s (polite)",
         f"{extra_urls / cpu:,.0f}" if cpu > 0 else "n/a (no extra CPU)", ">= 100,000"),
        ("discovery", "frontier rows: scheduler/enqueued full / short",
         f"{full.stats.get('scheduler/enqueued', '?')} / "
         f"{short.stats.get('scheduler/enqueued', '?')}", ""),
    ]]
    if full_s is not None and short_s is not None:
        d = full_s.cpu - short_s.cpu
        _fig(ctx, "discovery", "listed URLs per CPU-s (stock)",
             f"{extra_urls / d:,.0f}" if d > 0 else "n/a")


def wl_polite(ctx: Ctx, n: int, rest: float = 10.0, pages: int = 10) -> None:
    port = free_port()
    hosts = hosts_for(n)
    tmp = ctx.tmp / "polite"
    tmp.mkdir(parents=True, exist_ok=True)
    tmp.chmod(0o755)
    paths = write_small_pages(tmp / "pages", pages)
    nginx = Nginx(tmp, hosts, port, tmp / "pages", limit_rest=rest)
    write_site_files(nginx.sites, hosts, port, paths)
    urls = _urls_file(tmp, "polite", hosts, port)
    with nginx:
        p = run_polite(ctx, nginx, "polite", "main", urls, {
            "POLITE_REST_PAGE": rest, "POLITE_JITTER": 0, "POLITE_HOST_BUDGET": 10})
        s = None if ctx.args.skip_stock else run_stock(
            ctx, nginx, "polite", "main", urls,
            ["--delay", str(rest), "--budget", "10", "--no-randomize",
             "--broad"])
        floor = None if s is None else run_floor(
            ctx, nginx, "polite", p, urls, ["--delay", str(rest), "--no-randomize", "--broad"])
    _keep(ctx, nginx, "polite")
    for run in (p, s):
        if run is None or not run.hits:
            continue
        lines = [(h.host, h.path, h.start, h.end) for h in run.hits]
        r = measure(run.crawler, lines, n, rest, run.wall)
        print("  ", r.line(rest, n), flush=True)
        mine = run is p
        name = "" if mine else "stock "
        _fig(ctx, "polite", f"{name}efficiency, N={n}, R={rest:g}", f"{r.efficiency:.3f}",
             ">= 0.95" if mine else "", run)
        _fig(ctx, "polite", f"{name}429s / rests < R / overlaps",
             f"{sum(h.status == 429 for h in run.hits)} / {r.short} / {r.overlaps}",
             "0 / 0 / 0" if mine else "")
        _fig(ctx, "polite", f"{name}rest overrun at the median (gap - R), s",
             f"{r.median_gap - rest:.3f}")
        _fig(ctx, "polite", f"{name}CPU s (ms per request), requests",
             f"{run.cpu:.1f} ({1000 * run.cpu / len(run.hits):.2f}), {len(run.hits)}", "", run)
        _fig(ctx, "polite", f"{name}peak RSS MB", f"{run.rss_mb:.0f}")
    if p.hits and s is not None and s.hits:
        ratio = (p.cpu / len(p.hits)) / (s.cpu / len(s.hits))
        _fig(ctx, "polite", "CPU per request, polite / stock", f"{ratio:.2f}x", "<= 0.5x")
    _floor_figures(ctx, "polite", floor, s)
    if floor is not None and floor.hits and s is not None and s.hits:
        _fig(ctx, "polite", "Scrapy's floor / stock, CPU per request",
             f"{(floor.cpu / len(floor.hits)) / (s.cpu / len(s.hits)):.2f}x")


def _keep(ctx: Ctx, nginx: Nginx, name: str) -> None:
    if ctx.args.keep is None:
        return
    dest = ctx.args.keep / name
    nginx.keep(dest)
    runs = ctx.tmp / "runs"
    for d in runs.glob(f"{name}-*"):
        shutil.copytree(d, dest / d.name, dirs_exist_ok=True)


def print_table(ctx: Ctx) -> None:
    rows = [("workload", "figure", "value", "target", "pages avg KB raw / gzip"),
            *ctx.figures]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    print()
    print("command: " + " ".join([Path(sys.executable).name, "-m", "bench.realweb",
                                  *sys.argv[1:]]))
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print()
    print(f"{'run':<40} {'pages':>7} {'requests':>8} {'CPU s':>7} {'wall s':>7} "
          f"{'pages/CPU-s':>11} {'RSS MB':>6} {'KB raw / gz':>12}")
    for run in ctx.runs:
        print(f"{run.workload + ': ' + run.crawler:<40} {run.pages:>7} {len(run.hits):>8} "
              f"{run.cpu:>7.1f} {run.wall:>7.1f} {run.rate:>11.1f} {run.rss_mb:>6.0f} "
              f"{run.size_text:>12}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench.realweb", description=__doc__.split("\n")[0])
    ap.add_argument("--workload", action="append", choices=WORKLOADS, default=None)
    ap.add_argument("--sites", type=int, default=None, help="N for every workload run")
    ap.add_argument("--skip-stock", action="store_true")
    ap.add_argument("--profile", choices=("cprofile", "py-spy"), default=None)
    ap.add_argument("--profile-stock", action="store_true",
                    help="py-spy on stock Scrapy's runs too (its floor's included)")
    ap.add_argument("--keep", type=Path, default=None)
    ap.add_argument("-s", dest="extra", action="append", default=[],
                    help="NAME=VALUE, an extra setting for the polite crawls")
    a = ap.parse_args(argv)
    if not DOCS.is_dir():
        print(f"{DOCS} is missing: run `bash scripts/system-deps.sh bench`", file=sys.stderr)
        return 2
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def _terminate(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)  # unwinds through every `with nginx:`

    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    tmp = make_readable_tmp("realweb-")
    ctx = Ctx(tmp, a, env)
    try:
        for wl in a.workload or WORKLOADS:
            n = a.sites or DEFAULT_SITES[wl]
            {"sitemap": wl_sitemap, "whole": wl_whole, "discovery": wl_discovery,
             "polite": wl_polite, "sorted": wl_sorted}[wl](ctx, n)
    finally:
        print_table(ctx)
        if a.keep is not None:
            print(f"kept in {a.keep}")
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
