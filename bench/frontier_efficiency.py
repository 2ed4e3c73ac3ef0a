"""Polite efficiency: N origins at full polite speed, against stock Scrapy.

One server process (asyncio, one listener per loopback address 127.0.x.y, all on
one port) serves N origins with P small pages each ("/" links to the other P-1) and
a robots.txt that allows everything. It logs every request: origin, path, the time
its head arrived and the time its answer was written.

Two crawls run one after the other against it, each in its own process:

* polite_crawler: ``scrapy crawl site -a urls=FILE`` with POLITE_REST_PAGE = R and
  POLITE_JITTER = 0;
* stock Scrapy at its most polite: DOWNLOAD_DELAY = R (no jitter),
  CONCURRENT_REQUESTS_PER_DOMAIN = 1, ROBOTSTXT_OBEY, and the broad-crawl priority
  queue (DownloaderAwarePriorityQueue), the same CONCURRENT_REQUESTS.

From the server's log, per crawl: every origin needs P + 1 requests (robots.txt
included), so a perfect crawler finishes in P x R; efficiency = (requests after each
origin's first) per second / (N / R), 1.0 at best. Violations: two requests of one
origin in flight at once, and rests (end of one answer to the start of the next
request) below R.

    .venv/bin/python -m bench.frontier_efficiency [--origins N] [--pages P] [--rest R]
    (the issue's target: --origins 1000 --pages 10 --rest 10)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ROBOTS = b"User-agent: *\nAllow: /\n"


def hosts_for(n: int) -> list[str]:
    return [f"127.0.{1 + i // 250}.{1 + i % 250}" for i in range(n)]


def _page(path: str, links: list[str]) -> bytes:
    items = "".join(f'<a href="{h}">{h}</a> ' for h in links)
    html = f"<html><head><title>{path}</title></head><body>{items}<p>text</p></body></html>"
    return html.encode()


# --- the server ----------------------------------------------------------------
async def _serve(hosts: list[str], port: int, pages: int, log_path: Path) -> None:
    others = [f"/p{i}" for i in range(1, pages)]
    bodies = {"/": _page("/", others), **{p: _page(p, []) for p in others}}
    log = log_path.open("w", buffering=1 << 16)

    def answer(status: int, body: bytes, ctype: str) -> bytes:
        head = (f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n")
        return head.encode() + body

    def handler(host: str) -> Any:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while True:
                    try:
                        head = await reader.readuntil(b"\r\n\r\n")
                    except (asyncio.IncompleteReadError, ConnectionError):
                        break
                    started = time.time()
                    path = head.split(b" ", 2)[1].decode("latin-1")
                    if path == "/robots.txt":
                        out = answer(200, ROBOTS, "text/plain")
                    elif path in bodies:
                        out = answer(200, bodies[path], "text/html")
                    else:
                        out = answer(404, b"no", "text/plain")
                    writer.write(out)
                    await writer.drain()
                    log.write(f"{host} {path} {started:.6f} {time.time():.6f}\n")
            finally:
                writer.close()
        return handle

    servers = [await asyncio.start_server(handler(h), h, port, backlog=64, reuse_address=True)
               for h in hosts]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    print("ready", flush=True)
    await stop.wait()
    for s in servers:
        s.close()
    log.close()


def serve_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--origins", type=int)
    ap.add_argument("--port", type=int)
    ap.add_argument("--pages", type=int)
    ap.add_argument("--log", type=Path)
    a = ap.parse_args(argv)
    asyncio.run(_serve(hosts_for(a.origins), a.port, a.pages, a.log))
    return 0


# --- stock Scrapy ------------------------------------------------------------------
def stock_main(argv: list[str]) -> int:
    import scrapy
    from scrapy.crawler import CrawlerProcess
    from scrapy.linkextractors import LinkExtractor

    ap = argparse.ArgumentParser()
    ap.add_argument("--urls", type=Path)
    ap.add_argument("--rest", type=float)
    ap.add_argument("--log-file", type=str)
    a = ap.parse_args(argv)
    start_urls = a.urls.read_text().split()

    class StockSpider(scrapy.Spider):
        name = "stock"

        async def start(self) -> Any:
            for url in start_urls:
                yield scrapy.Request(url)

        def parse(self, response: Any, **kwargs: Any) -> Any:
            host = response.url.split("/")[2]
            for link in LinkExtractor().extract_links(response):
                if link.url.split("/")[2] == host:
                    yield response.follow(link.url)

    process = CrawlerProcess({
        "DOWNLOAD_DELAY": a.rest,
        "DOWNLOAD_DELAY_JITTER": 0,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "CONCURRENT_REQUESTS_PER_IP": 0,
        "CONCURRENT_REQUESTS": 128,
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
        "ROBOTSTXT_OBEY": True,
        "AUTOTHROTTLE_ENABLED": False,
        "COOKIES_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "USER_AGENT": "StockScrapyBench/1.0",
        "LOG_LEVEL": "INFO",
        "LOG_FILE": a.log_file,
    })
    process.crawl(StockSpider)
    process.start()
    return 0


# --- the measurement ---------------------------------------------------------------
@dataclass
class Result:
    name: str
    requests: int
    pages: int
    span: float
    wall: float
    efficiency: float
    overlaps: int
    short: int
    short_1pct: int
    min_gap: float
    median_gap: float
    p99_gap: float
    ramp: float


    def line(self, rest: float, n: int) -> str:
        return (
            f"{self.name:>15}: {self.requests} requests ({self.pages} pages) in {self.span:.1f}s "
            f"(process {self.wall:.1f}s); {(self.requests - n) / self.span:.1f} req/s after "
            f"first vs ideal {n / rest:.1f}/s -> efficiency {self.efficiency:.3f}; "
            f"violations: {self.overlaps} overlaps, {self.short} rests < R "
            f"({self.short_1pct} < 0.99 R); gaps min {self.min_gap:.3f} median "
            f"{self.median_gap:.3f} p99 {self.p99_gap:.3f}s; first requests spread over "
            f"{self.ramp:.2f}s"
        )


def measure(name: str, lines: list[tuple[str, str, float, float]], n: int, rest: float,
            wall: float) -> Result:
    by_host: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for host, _path, start, end in lines:
        by_host[host].append((start, end))
    overlaps = short = short_1pct = 0
    gaps: list[float] = []
    for items in by_host.values():
        items.sort()
        for (_s1, e1), (s2, _e2) in itertools.pairwise(items):
            if s2 < e1:
                overlaps += 1
            gap = s2 - e1
            gaps.append(gap)
            short += gap < rest
            short_1pct += gap < 0.99 * rest
    span = max(e for *_x, e in lines) - min(s for _h, _p, s, _e in lines)
    gaps.sort()
    return Result(
        name, len(lines), sum(1 for _h, p, _s, _e in lines if p != "/robots.txt"), span, wall,
        (len(lines) - len(by_host)) / span / (n / rest), overlaps, short, short_1pct,
        gaps[0] if gaps else 0.0, statistics.median(gaps) if gaps else 0.0,
        gaps[int(0.99 * (len(gaps) - 1))] if gaps else 0.0,
        max(v[0][0] for v in by_host.values()) - min(v[0][0] for v in by_host.values()),
    )


def _read_log(path: Path) -> list[tuple[str, str, float, float]]:
    out = []
    for line in path.read_text().splitlines():
        host, p, s, e = line.split()
        out.append((host, p, float(s), float(e)))
    return out


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        return serve_main(argv[1:])
    if argv[:1] == ["stock"]:
        return stock_main(argv[1:])
    ap = argparse.ArgumentParser(prog="bench.frontier_efficiency")
    ap.add_argument("--origins", type=int, default=200)
    ap.add_argument("--pages", type=int, default=5)
    ap.add_argument("--rest", type=float, default=2.0)
    ap.add_argument("--skip-stock", action="store_true")
    ap.add_argument("--profile", type=Path, default=None,
                    help="write a cProfile of the polite crawl process to this file")
    ap.add_argument("--keep", type=Path, default=None,
                    help="copy the server's request log and the crawl's state dir here")
    ap.add_argument("-s", dest="extra", action="append", default=[],
                    help="NAME=VALUE, an extra setting for the polite crawl")
    a = ap.parse_args(argv)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    n, rest = a.origins, a.rest
    print(f"N={n} origins, P={a.pages} pages each (+ robots.txt and whatever discovery asks "
          f"for, e.g. /sitemap.xml), R={rest}s, jitter 0; ideal {n / rest:.1f} req/s", flush=True)
    py = sys.executable
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="frontier-eff-") as tmp_name:
        tmp = Path(tmp_name)
        port = _free_port()
        urls = tmp / "urls.txt"
        urls.write_text("".join(f"http://{h}:{port}/\n" for h in hosts_for(n)))
        log = tmp / "server.log"
        server = subprocess.Popen(
            [py, "-m", "bench.frontier_efficiency", "serve", "--origins", str(n), "--port",
             str(port), "--pages", str(a.pages), "--log", str(log)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            assert server.stdout.readline().strip() == "ready"
            runs: list[tuple[str, float, float]] = []
            cpu0 = _child_cpu()
            t0 = time.time()
            profile = ["-m", "cProfile", "-o", str(a.profile)] if a.profile else []
            subprocess.run(
                [py, *profile, "-m", "scrapy", "crawl", "site", "-a", f"urls={urls}",
                 "-s", f"POLITE_REST_PAGE={rest}", "-s", "POLITE_JITTER=0",
                 "-s", f"POLITE_STATE_DIR={tmp / 'state'}", "-s", "LOG_LEVEL=INFO",
                 "-s", f"LOG_FILE={tmp / 'polite.log'}",
                 *[x for kv in a.extra for x in ("-s", kv)]],
                cwd=ROOT, env=env, check=True)
            runs.append(("polite_crawler", t0, time.time()))
            print(f"    polite_crawler process CPU: {_child_cpu() - cpu0:.1f}s "
                  f"over {runs[-1][2] - t0:.1f}s", flush=True)
            for line in (tmp / "polite.log").read_text().splitlines():
                if "'polite/frontier/" in line or "'scheduler/" in line:
                    print("   ", line.strip(), flush=True)
            if not a.skip_stock:
                t0 = time.time()
                subprocess.run(
                    [py, "-m", "bench.frontier_efficiency", "stock", "--urls", str(urls),
                     "--rest", str(rest), "--log-file", str(tmp / "stock.log")],
                    cwd=ROOT, env=env, check=True)
                runs.append(("stock Scrapy", t0, time.time()))
        finally:
            server.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(timeout=30)
        lines = _read_log(log)
        if a.keep is not None:
            a.keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(log, a.keep / "server.log")
            shutil.copytree(tmp / "state", a.keep / "state", dirs_exist_ok=True)
    results = []
    for name, start, end in runs:
        mine = [x for x in lines if start <= x[2] <= end]
        results.append(measure(name, mine, n, rest, end - start))
        print(results[-1].line(rest, n), flush=True)
    if len(results) == 2:
        print(f"polite_crawler / stock efficiency: "
              f"{results[0].efficiency / results[1].efficiency:.2f}x")
    ok = results[0].overlaps == 0 and results[0].short == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
