"""Where a crawl's memory a site goes: the process's resident memory taken apart.

``TraceMemory`` is a Scrapy extension for the crawl's child process (the bench enables it
with ``-s EXTENSIONS``). Every BENCH_TRACE_INTERVAL seconds it reads the process's
resident memory (``/proc/self/status`` VmRSS) and what makes it up:

* ``pymalloc``: the bytes in Python's small-object arenas (objects of 512 bytes or less),
  in use and free (``sys._debugmallocstats``);
* ``malloc``: glibc's heap, in use and free (``mallinfo2``: ``uordblks``, ``fordblks``),
  and its mmapped blocks (``hblkhd``): larger Python objects, numpy arrays, lxml, Lexbor;
* ``sqlite``: SQLite's own allocations (``sqlite3_memory_used``, its page caches
  included; inside glibc's heap);
* ``traced``: what tracemalloc counts (Python's allocations, numpy's), with
  BENCH_TRACE_FRAMES > 0 (tracemalloc's own memory is subtracted from the RSS read).

It keeps the reading at the highest RSS. When the crawl closes it reads again, takes a
tracemalloc snapshot (``end``), runs a full garbage collection and takes another
(``kept``: what the crawl holds once nothing is in flight and no garbage waits); the
difference is the cyclic garbage that waited for the collector. It writes all of it to
BENCH_TRACE_OUT (JSON), the snapshots' allocations grouped by source line, or with more
than one frame by the innermost frame in ``polite_crawler`` that led to them.

``main`` runs :mod:`bench.descriptors` twice at the same request rate (N and 2 N sites,
rests R and 2 R) with the extension on, and prints each part's growth a site between the
two, and the source lines whose memory grew the most a site.

    .venv/bin/python -m bench.site_memory --sites 500 --rest 5
    .venv/bin/python -m bench.site_memory --sites 1000 --rest 10 --frames 0   # RSS parts only
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import json
import os
import re
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _libs() -> tuple[Any, Any]:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    sqlite = ctypes.CDLL(ctypes.util.find_library("sqlite3") or "libsqlite3.so.0")
    sqlite.sqlite3_memory_used.restype = ctypes.c_int64
    return libc, sqlite


def _pymalloc() -> tuple[int, int]:
    """Bytes in pymalloc's blocks in use, and free in its arenas (allocated, not in use)."""
    fd, name = tempfile.mkstemp(prefix="mallocstats-")
    saved = os.dup(2)
    try:
        sys.stderr.flush()
        os.dup2(fd, 2)
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)
    text = Path(name).read_text()
    os.unlink(name)

    def field(label: str) -> int:
        m = re.search(rf"^# {label}\s*=\s*([\d,]+)", text, re.M)
        return int(m.group(1).replace(",", "")) if m else 0

    arenas = field("arenas allocated current") * 1024 * 1024  # ARENA_SIZE: 1 MiB (3.10+)
    used = field("bytes in allocated blocks")
    return used, arenas - used


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class TraceMemory:
    def __init__(self, crawler: Crawler) -> None:
        self.out = Path(crawler.settings.get("BENCH_TRACE_OUT"))
        self.interval = crawler.settings.getfloat("BENCH_TRACE_INTERVAL", 5.0)
        self.frames = crawler.settings.getint("BENCH_TRACE_FRAMES", 1)
        self.take_apart = crawler.settings.getbool("BENCH_TAKE_APART", True)
        self.crawler = crawler
        self.libc, self.sqlite = _libs()
        self.peak: dict[str, int] = {}
        self.peak_types: dict[str, list[int]] = {}
        self.best: tracemalloc.Snapshot | None = None
        if self.frames:
            tracemalloc.start(self.frames)
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

    def parts(self) -> dict[str, int]:
        tracing = tracemalloc.is_tracing()
        own = tracemalloc.get_tracemalloc_memory() if tracing else 0
        m = self.libc.mallinfo2()
        py_used, py_free = _pymalloc()
        return {
            "rss": _rss() - own, "tracemalloc_own": own,
            "traced": tracemalloc.get_traced_memory()[0] if tracing else 0,
            "pymalloc_used": py_used, "pymalloc_free": py_free,
            "malloc_used": m.uordblks, "malloc_free": m.fordblks, "malloc_mmap": m.hblkhd,
            "sqlite": int(self.sqlite.sqlite3_memory_used()),
            "gc_objects": len(gc.get_objects()),
        }

    def take(self) -> None:
        parts = self.parts()
        if parts["rss"] > self.peak.get("rss", 0):
            self.peak = parts
            self.peak_types = _census()  # garbage not yet collected included
            if self.frames:
                self.best = tracemalloc.take_snapshot()

    def closed(self) -> None:
        if self.loop is not None and self.loop.running:
            self.loop.stop()
        out: dict[str, Any] = {"peak": self.peak, "end": self.parts(),
                               "peak_types": self.peak_types,
                               # the collector's work over the crawl, a generation each:
                               # collections, and the cyclic garbage they freed
                               "gc_stats": gc.get_stats()}
        if self.frames:
            end = tracemalloc.take_snapshot()  # what the crawl holds as it closes
            out["peak_lines"] = _by_line(self.best)
            out["end_lines"] = _by_line(end)
            del end
        gc.set_debug(gc.DEBUG_SAVEALL)  # the garbage kept aside to be counted by type
        freed = gc.collect()
        gc.set_debug(0)
        out["garbage_types"] = _census(gc.garbage)
        gc.garbage.clear()
        gc.collect()  # now freed
        out["kept"] = {**self.parts(), "gc_freed": freed}
        out["kept_types"] = _census()
        if self.frames:
            out["kept_lines"] = _by_line(tracemalloc.take_snapshot())
        if self.take_apart:
            out["apart"] = self.apart()
        if self.frames:
            tracemalloc.stop()
        self.out.write_text(json.dumps(out))

    def live(self) -> int:
        """Bytes in use: traced ones with tracemalloc on, else pymalloc's and glibc's."""
        if tracemalloc.is_tracing():
            return int(tracemalloc.get_traced_memory()[0])
        parts = self.parts()
        return parts["pymalloc_used"] + parts["malloc_used"]

    def apart(self) -> dict[str, int]:
        """What each part of the crawl's state holds, once the crawl is over: the bytes in
        use that go when it is emptied (:data:`PARTS`, in order; a part not found is 0)."""
        # only the components' own objects: a reference to anything else would keep it
        wanted = {"UrlRules", "YieldMonitor", "RobotsBook", "SiteSpider", "AddressBook",
                  "Frontier"}
        objects: dict[str, list[Any]] = {}
        for obj in gc.get_objects():
            if type(obj).__name__ in wanted:
                objects.setdefault(type(obj).__name__, []).append(obj)
        freed: dict[str, int] = {}
        for name, clear in PARTS:
            gc.collect()
            before = self.live()
            clear(self.crawler, objects)
            gc.collect()
            freed[name] = before - self.live()
        objects.clear()
        return freed


def _clear_dicts(kind: str, *names: str) -> Callable[[Crawler, dict[str, list[Any]]], None]:
    def clear(_crawler: Crawler, objects: dict[str, list[Any]]) -> None:
        for obj in objects.get(kind, []):
            for name in names:
                getattr(obj, name).clear()
    return clear


def _clear_caches(_crawler: Crawler, objects: dict[str, list[Any]]) -> None:
    from polite_crawler.policy import addresses, owners, traps, urls

    for cached in (urls.origin_of, urls.host_of, addresses._judge_host, traps._path_query,
                   owners.owner_of):
        cached.cache_clear()
    for rules in objects.get("UrlRules", []):
        rules._reading.cache_clear()


def _clear_slots(crawler: Crawler, _objects: dict[str, list[Any]]) -> None:
    if crawler.engine is not None:
        crawler.engine.downloader.slots.clear()


# The parts of a crawl's state a site adds to, as TraceMemory.apart empties them (a
# bench's reading of other components' private state, at the crawl's end only).
PARTS: list[tuple[str, Callable[[Crawler, dict[str, list[Any]]], None]]] = [
    ("url and host caches", _clear_caches),
    ("yield monitor", _clear_dicts("YieldMonitor", "_origins")),
    ("downloader slots", _clear_slots),
    ("robots.txt book", _clear_dicts("RobotsBook", "_entries")),
    ("spider discovery", _clear_dicts("SiteSpider", "_discovery")),
    ("address book", _clear_dicts("AddressBook", "_known")),
    ("frontier records", _clear_dicts("Frontier", "_origins", "_hosts", "_owners",
                                      "_servers")),
]


def _census(objects: list[Any] | None = None) -> dict[str, list[int]]:
    """The objects the collector tracks (or ``objects``), by type: how many, and their
    own sizes (``sys.getsizeof``: a dict's table, a list's array; not what they point to)."""
    found: dict[str, list[int]] = {}
    for obj in gc.get_objects() if objects is None else objects:
        t = type(obj)
        key = f"{t.__module__}.{t.__qualname__}"
        entry = found.setdefault(key, [0, 0])
        entry[0] += 1
        entry[1] += sys.getsizeof(obj)
    return found


def _where(tb: tracemalloc.Traceback) -> str:
    """The allocation's line, and with more frames the innermost project line above it
    (a traceback's frames run from the oldest to the most recent)."""
    last = tb[-1]
    line = f"{_short(last.filename)}:{last.lineno}"
    if len(tb) > 1 and "polite_crawler" not in last.filename:
        for frame in reversed(tb):
            if "polite_crawler" in frame.filename:
                return f"{line} <- {_short(frame.filename)}:{frame.lineno}"
    return line


def _short(filename: str) -> str:
    for cut in ("site-packages/", "/work/main/", "lib/python3.11/"):
        if cut in filename:
            return filename.split(cut, 1)[1]
    return filename


def _by_line(snapshot: tracemalloc.Snapshot | None) -> dict[str, int]:
    lines: dict[str, int] = {}
    if snapshot is not None:
        for stat in snapshot.statistics("traceback"):
            key = _where(stat.traceback)
            lines[key] = lines.get(key, 0) + stat.size
    return lines


def main(argv: list[str]) -> int:
    from bench import descriptors

    ap = argparse.ArgumentParser(prog="bench.site_memory", description=__doc__.split("\n")[0])
    ap.add_argument("--sites", type=int, default=500)
    ap.add_argument("--rest", type=float, default=5.0)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--frames", type=int, default=1,
                    help="tracemalloc frames a trace (0: no tracemalloc, RSS parts only)")
    ap.add_argument("--interval", type=float, default=5.0, help="seconds between readings")
    ap.add_argument("--no-limit", action="store_true", help="nginx's limit_req off")
    ap.add_argument("--out", type=Path, default=None, help="keep the two runs' JSON here")
    ap.add_argument("-s", dest="extra", action="append", default=[])
    a = ap.parse_args(argv)
    tmp = a.out or Path(tempfile.mkdtemp(prefix="site-memory-"))
    tmp.mkdir(parents=True, exist_ok=True)
    traces = {}
    for n, rest in ((a.sites, a.rest), (2 * a.sites, 2 * a.rest)):
        out = tmp / f"trace-{n}.json"
        args = ["--sites", str(n), "--rest", str(rest),
                "-s", 'EXTENSIONS={"bench.site_memory.TraceMemory": 0}',
                "-s", f"BENCH_TRACE_OUT={out}", "-s", f"BENCH_TRACE_FRAMES={a.frames}",
                "-s", f"BENCH_TRACE_INTERVAL={a.interval}"]
        if a.no_limit:
            args.append("--no-limit")
        for kv in a.extra:
            args += ["-s", kv]
        descriptors.main(args)
        traces[n] = json.loads(out.read_text())
    small, big = traces[a.sites], traces[2 * a.sites]
    print(f"\nparts of the process's memory, N={a.sites} and N={2 * a.sites}, MB, "
          "and the growth a site, KB")
    for when in ("peak", "end", "kept"):
        print(f"  {when}:")
        for part in small[when]:
            x, y = small[when][part], big[when][part]
            scale = 1 if part in ("gc_objects", "gc_freed") else 2**20
            unit = "" if scale == 1 else " MB"
            print(f"    {part:>16} {x / scale:10.1f} {y / scale:10.1f}{unit}  "
                  f"{(y - x) / a.sites / (1 if scale == 1 else 1024):8.2f}"
                  f"{' a site' if scale == 1 else ' KB a site'}")
    if a.frames:
        for when, lines in (("at the peak", "peak_lines"), ("at the end", "end_lines"),
                            ("kept (after a full collection)", "kept_lines")):
            tot = (sum(big[lines].values()) - sum(small[lines].values())) / a.sites / 1024
            print(f"\ntraced memory {when}: {tot:.2f} KB a site; the lines that grew most")
            grew = sorted(((big[lines].get(k, 0) - small[lines].get(k, 0), k)
                           for k in set(big[lines]) | set(small[lines])), reverse=True)
            print(f"{'KB a site':>10}  source line")
            for size, line in grew[:a.top]:
                print(f"{size / a.sites / 1024:>10.2f}  {line}")
    print("\nthe collector over the crawl, a generation each: collections, and the cyclic "
          "garbage objects freed (a site)")
    pairs = zip(small.get("gc_stats", []), big.get("gc_stats", []), strict=False)
    for gen, (x, y) in enumerate(pairs):
        print(f"  {gen}: {x['collections']:6d} {y['collections']:6d}   "
              f"{x['collected'] / a.sites:8.1f} {y['collected'] / (2 * a.sites):8.1f} a site")
    print("\ntaken apart at the end (bytes in use that go when the part is emptied), "
          "KB a site")
    for name in small.get("apart", {}):
        x, y = small["apart"][name], big["apart"][name]
        print(f"  {name:>22} {x / 2**20:8.2f} {y / 2**20:8.2f} MB  {(y - x) / a.sites / 1024:6.2f}")
    for key, what in (("peak_types", "objects at the peak (garbage included)"),
                      ("kept_types", "objects kept after a full collection"),
                      ("garbage_types", "cyclic garbage the collection freed")):
        print(f"\n{what} (gc-tracked), by type, a site: count, bytes (their own size)")
        x, y = small[key], big[key]
        rows = sorted(((y.get(k, [0, 0])[1] - x.get(k, [0, 0])[1],
                        y.get(k, [0, 0])[0] - x.get(k, [0, 0])[0], k)
                       for k in set(x) | set(y)), reverse=True)
        for size, count, kind in rows[:a.top]:
            print(f"{count / a.sites:10.2f} {size / a.sites:10.0f}  {kind}")
    print(f"\n(the runs' JSON: {tmp})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
