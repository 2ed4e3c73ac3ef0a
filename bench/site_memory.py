"""Where a crawl's memory a site goes: tracemalloc in the crawl process.

``TraceMemory`` is a Scrapy extension for the crawl's child process (the bench enables it
with ``-s EXTENSIONS``): it starts tracemalloc when the crawl is built (one frame a
trace), takes a snapshot every BENCH_TRACE_INTERVAL seconds and keeps the one with the
most traced memory; when the crawl closes it writes that snapshot's allocations grouped
by source line to BENCH_TRACE_OUT (JSON: ``{"total": bytes, "lines": {"file:line":
bytes}}``), and the same of a snapshot taken as it closes (``end_total``, ``end_lines``:
what the crawl keeps once nothing is in flight).

``main`` runs :mod:`bench.descriptors` twice at the same request rate (N and 2 N sites,
rests R and 2 R) with the extension on, and prints the source lines whose memory grew the
most between the two, a site: what each added site costs, and where.

    .venv/bin/python -m bench.site_memory --sites 500 --rest 5
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class TraceMemory:
    def __init__(self, crawler: Crawler) -> None:
        self.out = Path(crawler.settings.get("BENCH_TRACE_OUT"))
        self.interval = crawler.settings.getfloat("BENCH_TRACE_INTERVAL", 5.0)
        self.best: tracemalloc.Snapshot | None = None
        self.best_total = 0
        tracemalloc.start(1)
        crawler.signals.connect(self.opened, signal=signals.spider_opened)
        crawler.signals.connect(self.closed, signal=signals.spider_closed)
        self.loop: Any = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> TraceMemory:
        return cls(crawler)

    def opened(self) -> None:
        from twisted.internet import task

        self.loop = task.LoopingCall(self.take)
        self.loop.start(self.interval, now=False)

    def take(self) -> None:
        total = tracemalloc.get_traced_memory()[0]
        if total > self.best_total:
            self.best_total = total
            self.best = tracemalloc.take_snapshot()

    def closed(self) -> None:
        if self.loop is not None and self.loop.running:
            self.loop.stop()
        end = tracemalloc.take_snapshot()  # what the crawl keeps once nothing is in flight
        self.out.write_text(json.dumps({
            "total": self.best_total, "lines": _by_line(self.best),
            "end_total": tracemalloc.get_traced_memory()[0], "end_lines": _by_line(end)}))
        tracemalloc.stop()


def _by_line(snapshot: tracemalloc.Snapshot | None) -> dict[str, int]:
    lines: dict[str, int] = {}
    if snapshot is not None:
        for stat in snapshot.statistics("lineno"):
            frame = stat.traceback[0]
            lines[f"{frame.filename}:{frame.lineno}"] = stat.size
    return lines


def main(argv: list[str]) -> int:
    from bench import descriptors

    ap = argparse.ArgumentParser(prog="bench.site_memory", description=__doc__.split("\n")[0])
    ap.add_argument("--sites", type=int, default=500)
    ap.add_argument("--rest", type=float, default=5.0)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="site-memory-"))
    traces = {}
    for n, rest in ((a.sites, a.rest), (2 * a.sites, 2 * a.rest)):
        out = tmp / f"trace-{n}.json"
        descriptors.main(["--sites", str(n), "--rest", str(rest),
                          "-s", 'EXTENSIONS={"bench.site_memory.TraceMemory": 0}',
                          "-s", f"BENCH_TRACE_OUT={out}"])
        traces[n] = json.loads(out.read_text())
    small, big = traces[a.sites], traces[2 * a.sites]
    for when, total, lines in (("at the peak", "total", "lines"),
                               ("at the end (kept)", "end_total", "end_lines")):
        per_site = (big[total] - small[total]) / a.sites
        print(f"\ntraced memory {when}: N={a.sites}: {small[total] / 2**20:.1f} MB, "
              f"N={2 * a.sites}: {big[total] / 2**20:.1f} MB; {per_site / 1024:.1f} KB a site")
        grew = sorted(((big[lines].get(k, 0) - small[lines].get(k, 0), k)
                       for k in set(big[lines]) | set(small[lines])), reverse=True)
        print(f"{'KB a site':>10}  source line")
        for size, line in grew[:a.top]:
            print(f"{size / a.sites / 1024:>10.2f}  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
