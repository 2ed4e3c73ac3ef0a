"""Recrawl cost: body bytes the sites send on a second crawl, as a share of the first.

A test web of ``--hosts`` sites (loopback addresses) with ``--pages`` articles
each, every answer with an ETag and a Last-Modified. Three crawls with one page
store (each in its own process, ``-a recrawl=all`` for the revisits):

1. the first crawl: every page transfers its body;
2. the same sites, unchanged: every page revalidated, answered 304;
3. ``--changed`` (10 %) of the articles changed: only those transfer bodies.

Bytes are the body bytes on the wire from the server's own log (gzip when the
crawler asks for it, as it does), robots.txt and sitemap requests included.

    .venv/bin/python -m bench.recrawl_bytes [--hosts 3] [--pages 100] [--changed 0.1]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def crawl_main(argv: list[str]) -> int:
    from scrapy.crawler import CrawlerProcess

    from tests.crawl import project_settings_dict
    from tests.pages_web import PageSpider

    ap = argparse.ArgumentParser()
    ap.add_argument("--urls")
    ap.add_argument("--state")
    ap.add_argument("--job")
    ap.add_argument("--recrawl", default="")
    a = ap.parse_args(argv)
    process = CrawlerProcess(project_settings_dict(
        POLITE_STATE_DIR=a.state, JOBDIR=a.job, LOG_LEVEL="WARNING"))
    process.crawl(PageSpider, urls=a.urls, recrawl=a.recrawl)
    process.start()
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--crawl"]:
        return crawl_main(argv[1:])
    from polite_crawler.web.server import TestWeb
    from tests.pages_web import ArticleSite

    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--pages", type=int, default=100)
    ap.add_argument("--changed", type=float, default=0.1)
    a = ap.parse_args(argv)
    hosts = [f"127.0.9.{i + 1}" for i in range(a.hosts)]
    sites = {h: ArticleSite(n=a.pages, seed=100 + i) for i, h in enumerate(hosts)}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with TestWeb(sites) as web, tempfile.TemporaryDirectory(prefix="recrawl-") as tmp:
        urls = Path(tmp) / "urls.txt"
        urls.write_text("".join(web.url(h) + "\n" for h in hosts))

        def crawl(n: int, recrawl: str = "") -> dict[str, Any]:
            start = len(web.log)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "bench.recrawl_bytes", "--crawl", "--urls",
                            str(urls), "--state", tmp, "--job", f"{tmp}/job{n}", "--recrawl",
                            recrawl], cwd=ROOT, env=env, check=True)
            log = web.log[start:]
            pages = [e for e in log if e.path == "/" or e.path.startswith("/a/")]
            return {
                "wall": time.perf_counter() - t0,
                "requests": len(log),
                "bytes": sum(e.bytes_sent for e in log),
                "page_bytes": sum(e.bytes_sent for e in pages),
                "s200": sum(e.status == 200 for e in pages),
                "s304": sum(e.status == 304 for e in pages),
                "conditional": sum("if-none-match" in e.headers for e in pages),
            }

        first = crawl(1)
        second = crawl(2, "all")
        rng = random.Random(7)
        changed = 0
        for site in sites.values():
            for path in rng.sample(sorted(site.texts), round(a.changed * len(site.texts))):
                site.change(path)
                changed += 1
        third = crawl(3, "all")

    print(f"{a.hosts} sites x {a.pages} articles (+ index); {changed} articles changed "
          "before crawl 3")
    print(f"{'crawl':<28}{'requests':>9}{'200':>6}{'304':>6}{'cond.':>7}{'body bytes':>12}"
          f"{'% of 1':>8}{'wall s':>8}")
    for name, r in (("1 first", first), ("2 unchanged", second), ("3 10 % changed", third)):
        share = 100.0 * r["bytes"] / first["bytes"]
        print(f"{name:<28}{r['requests']:>9}{r['s200']:>6}{r['s304']:>6}{r['conditional']:>7}"
              f"{r['bytes']:>12}{share:>7.2f}%{r['wall']:>8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
