"""CPU seconds per page for the whole chain, on real HTML: the Python documentation.

``apt-get install python3-doc`` installs /usr/share/doc/python3/html (530 pages,
about 95 KiB of HTML each). A server in its own process serves that directory
on loopback (its CPU is not counted); two crawls of it, each in its own process,
report the crawling process's CPU time (user + system, all threads) per response:

* stock Scrapy: a spider that only follows the site's links (LinkExtractor),
  Scrapy's default settings;
* polite_crawler, everything on: the add-on (frontier, robots.txt, verdicts,
  page rules, traps, conditional requests), the ``site`` spider's discovery and
  link parse, page items (main text), fingerprints, duplicates and the page
  store (SQLite), with loopback-sized rests.

Then the chain's stages alone, in this process, on the same files: link
parse, main text (resiliparse), the main text's words (hashed once), the yield
monitor's shingles, fingerprints (text hash + SimHash), and storage (zstd +
SQLite through the store's writer thread); the main text also as its two steps
(Lexbor's parse, then the main-content extraction). ``--stages``: only those.

    .venv/bin/python -m bench.cpu_per_page [--docs DIR] [--repeat N] [--skip-stock] [--stages]

Both figures are reported: responses per CPU-second over the whole run, and
"steady", after the first response (imports, components and the first fetch
left out: what each further page costs in a long crawl).

``--repeat N`` runs each crawl N times and reports every run and the median
(CPU time on a shared machine varies by a few per cent from run to run).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = Path("/usr/share/doc/python3/html")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# --- the server (own process) ----------------------------------------------------------
def serve_main(argv: list[str]) -> int:
    from demo.web.server import Req, Resp, Site, TestWeb

    docs = Path(argv[0]).resolve()

    class Docs(Site):
        def handle(self, req: Req) -> Resp:
            path = req.path.split("?", 1)[0].split("#", 1)[0]
            if path == "/robots.txt":
                return Resp(200, b"User-agent: *\nAllow: /\n", content_type="text/plain")
            target = (docs / path.lstrip("/")).resolve()
            if path.endswith("/"):
                target = target / "index.html"
            if not target.is_relative_to(docs) or not target.is_file():
                return Resp(404, b"not found")
            ctype = "text/html; charset=utf-8" if target.suffix == ".html" else (
                "text/plain; charset=utf-8" if target.suffix == ".txt" else
                "application/octet-stream")
            return Resp(200, target.read_bytes(), content_type=ctype)

    web = TestWeb({"127.0.0.1": Docs()}).start()
    print(web.port, flush=True)
    sys.stdin.read()  # until the parent closes it
    web.stop()
    return 0


# --- the crawls (own process each) ---------------------------------------------------------
def crawl_main(argv: list[str]) -> int:
    kind, url, state = argv
    import scrapy
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.http import TextResponse
    from scrapy.linkextractors import LinkExtractor

    counts = {"responses": 0, "html": 0}

    if kind == "stock":
        host = url.split("/")[2]

        class StockSpider(scrapy.Spider):
            name = "stock"
            start_urls = [url]
            links = LinkExtractor()

            def parse(self, response: Any, **kwargs: Any) -> Any:
                if not isinstance(response, TextResponse):
                    return
                for link in self.links.extract_links(response):
                    if link.url.split("/")[2] == host:
                        yield response.follow(link.url)

        process = CrawlerProcess({"LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False})
        crawler = process.create_crawler(StockSpider)
        args: dict[str, Any] = {}
    else:
        from tests.crawl import project_settings_dict
        from tests.pages_web import PageSpider

        process = CrawlerProcess(project_settings_dict(
            POLITE_STATE_DIR=state, JOBDIR=f"{state}/job", LOG_LEVEL="WARNING",
            POLITE_REST_PAGE=0.005, POLITE_REST_DURATION_FACTOR=1.0))
        crawler = process.create_crawler(PageSpider)
        args = {"url": url}

    marks: dict[str, float] = {}

    def on_response(response: Any, request: Any, spider: Any) -> None:
        if not counts["responses"]:
            marks["first"] = _cpu()  # start-up done: imports, components, the first fetch
        counts["responses"] += 1
        counts["html"] += isinstance(response, TextResponse) and \
            b"html" in (response.headers.get(b"Content-Type") or b"")

    crawler.signals.connect(on_response, signal=signals.response_received)
    profile = os.environ.get("BENCH_PROFILE")
    profiler: Any = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    import gc

    gc_time = {"t": 0.0, "start": 0.0, "n": [0, 0, 0]}

    def _gc_watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            gc_time["start"] = time.process_time()
        else:
            gc_time["t"] += time.process_time() - gc_time["start"]
            gc_time["n"][info["generation"]] += 1

    gc.callbacks.append(_gc_watch)
    cpu0, t0 = _cpu(), time.perf_counter()
    process.crawl(crawler, **args)
    process.start()
    cpu, wall = _cpu() - cpu0, time.perf_counter() - t0
    steady = _cpu() - marks.get("first", cpu0)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(f"{profile}.{kind}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    items = crawler.stats.get_value("item_scraped_count", 0) if crawler.stats else 0
    gc.callbacks.remove(_gc_watch)
    print(json.dumps({"cpu": cpu, "steady_cpu": steady, "wall": wall, "rss_mb": rss,
                      "items": items,
                      "gc_cpu": gc_time["t"], "gc_runs": gc_time["n"], **counts}))
    return 0


# --- the stages alone ------------------------------------------------------------------
def stages(files: list[Path]) -> list[tuple[str, float]]:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    from polite_crawler.extract import main_text
    from polite_crawler.policy.links import extract_links
    from polite_crawler.policy.simhash import fingerprints
    from polite_crawler.policy.text import read_words
    from polite_crawler.policy.traps import shingles
    from polite_crawler.store.pages import PageRecord, PageStore
    from polite_crawler.store.sqlite import SQLitePageBackend

    bodies = [(f"http://127.0.0.1/{i}/{f.name}", f.read_bytes()) for i, f in enumerate(files)]
    out: list[tuple[str, float]] = []

    def timed(name: str, fn: Any) -> list[Any]:
        cpu0 = _cpu()
        res = [fn(u, b) for u, b in bodies]
        out.append((name, (_cpu() - cpu0) / len(bodies) * 1000))
        return res

    timed("links (lxml, policy.links)", lambda u, b: extract_links(b, u, "utf-8", max_links=5000))
    mains = timed("main text (resiliparse)", lambda u, b: main_text(b, "utf-8"))
    # The main text's own steps: Lexbor's parse, then the main-content extraction.
    trees = timed("  of which: Lexbor parse",
                  lambda u, b: HTMLTree.parse_from_bytes(b, "utf-8", errors="replace"))
    tree_of = dict(zip([u for u, _ in bodies], trees, strict=True))
    timed("  of which: extract_plain_text (main content)",
          lambda u, b: extract_plain_text(tree_of[u], main_content=True,
                                          preserve_formatting=True, list_bullets=False,
                                          alt_texts=False))
    del trees
    texts = {u: m.text for (u, _), m in zip(bodies, mains, strict=True)}
    words = dict(zip(texts, timed("words of the main text (read once)",
                                  lambda u, b: read_words(texts[u])), strict=True))
    timed("yield shingles", lambda u, b: shingles(texts[u], words[u]))
    timed("fingerprints (hash + SimHash)", lambda u, b: fingerprints(texts[u], words[u]))
    with tempfile.TemporaryDirectory() as tmp:
        store = PageStore(lambda: SQLitePageBackend(f"{tmp}/s.sqlite3"))
        cpu0 = _cpu()
        futures = [store.save(PageRecord(u, u, u, 200, 0.0, text=texts[u], body=b,
                                         revisit_interval=1, due_at=1)) for u, b in bodies]
        for f in futures:
            f.result()
        store.close()
        out.append(("storage (zstd + SQLite, writer thread)",
                    (_cpu() - cpu0) / len(bodies) * 1000))
    return out


def _steady(run: dict[str, Any]) -> float:
    """Responses per CPU-second after the first response (start-up left out)."""
    return (run["responses"] - 1) / max(run["steady_cpu"], 1e-9)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--serve"]:
        return serve_main(argv[1:])
    if argv[:1] == ["--crawl"]:
        return crawl_main(argv[1:])
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=Path, default=DOCS)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--skip-stock", action="store_true")
    ap.add_argument("--stages", action="store_true", help="the stages alone, no crawl")
    a = ap.parse_args(argv)
    files = sorted(a.docs.resolve().rglob("*.html"))
    if not files:
        print(f"no HTML under {a.docs}: apt-get install python3-doc", file=sys.stderr)
        return 1
    if a.stages:
        _print_stages(files)
        return 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen([sys.executable, "-m", "bench.cpu_per_page", "--serve",
                               str(a.docs)], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    runs: dict[str, list[dict[str, Any]]] = {}
    kinds = ("polite",) if a.skip_stock else ("stock", "polite")
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        url = f"http://127.0.0.1:{port}/index.html"
        for _ in range(max(a.repeat, 1)):
            for kind in kinds:
                with tempfile.TemporaryDirectory(prefix="cpu-") as state:
                    done = subprocess.run([sys.executable, "-m", "bench.cpu_per_page", "--crawl",
                                           kind, url, state], cwd=ROOT, env=env, check=True,
                                          capture_output=True, text=True)
                runs.setdefault(kind, []).append(
                    json.loads(done.stdout.strip().splitlines()[-1]))
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=30)
    kb = sum(f.stat().st_size for f in files) / len(files) / 1024
    print(f"{len(files)} HTML files, {kb:.0f} KiB on average ({a.docs})")
    print(f"{'crawl':<10}{'responses':>10}{'html':>6}{'items':>7}{'CPU s':>8}{'ms/resp':>9}"
          f"{'resp/CPU-s':>11}{'steady':>8}{'wall s':>8}{'RSS MB':>8}")
    rates: dict[str, float] = {}
    steady: dict[str, float] = {}
    for kind, kind_runs in runs.items():
        for r in kind_runs:
            per = r["cpu"] / max(r["responses"], 1)
            print(f"{kind:<10}{r['responses']:>10}{r['html']:>6}{r['items']:>7}{r['cpu']:>8.2f}"
                  f"{per * 1000:>9.2f}{1 / per:>11.1f}{_steady(r):>8.1f}{r['wall']:>8.1f}"
                  f"{r['rss_mb']:>8.0f}")
        rates[kind] = statistics.median(r["responses"] / r["cpu"] for r in kind_runs)
        steady[kind] = statistics.median(_steady(r) for r in kind_runs)
    n = len(runs["polite"])
    if "stock" in rates:
        print(f"polite_crawler / stock, responses per CPU-second (median of {n}): "
              f"{rates['polite'] / rates['stock']:.2f}x whole run, "
              f"{steady['polite'] / steady['stock']:.2f}x after start-up")
    else:
        print(f"polite_crawler, responses per CPU-second (median of {n}): "
              f"{rates['polite']:.1f} whole run, {steady['polite']:.1f} after start-up")
    _print_stages(files)
    return 0


def _print_stages(files: list[Path]) -> None:
    print("stages alone, ms CPU per page:")
    for name, ms in stages(files):
        print(f"  {name:<46}{ms:7.2f}")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
