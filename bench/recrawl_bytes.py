"""Recrawl cost: what a second crawl asks of the sites, as a share of the first.

A test web of ``--hosts`` sites (loopback addresses), each a
:class:`demo.web.recrawl.RecrawlSite` of ``--articles`` articles:
robots.txt naming a sitemap index (a plain and a gzipped sitemap) and an RSS
feed, exact-duplicate (print), rel=canonical (AMP) and near-duplicate (reprint)
aliases, a page refusing AI input, a noindex page, a no-store page,
``max-age=86400`` pages and a calendar trap; ETag and Last-Modified on every
answer. Beside them (unless ``--no-traps``) a
:class:`demo.web.traps.SessionTrapSite` (ordinary pages and a catalogue
that mints a new session token in every link's path) and a
:class:`demo.web.traps.HashPathSite` (git hashes and dates in ordinary
paths, to be crawled whole). Three crawls with one state directory (each in its
own process, each with a fresh JOBDIR, ``-a recrawl=all`` for the revisits):

1. the first crawl;
2. the same sites, unchanged;
3. ``--changed`` (10 %) of the articles changed: only those transfer bodies.

Figures come from the sites' own request log and what they answered: body
bytes on the wire (gzip when the crawler asks for it, as it does; robots.txt,
sitemaps and feeds included), requests without validators for a URL that had
them, requests for a URL still fresh by its max-age, requests for calendar
pages other than the one the home page links (the trap), requests under a
session token (the session trap), and the ordinary pages of the hash-path site
that were not requested (``missed``: must stay 0).

    .venv/bin/python -m bench.recrawl_bytes [--hosts 3] [--articles 40] [--changed 0.1]
                                            [--no-traps]
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
    from demo.web.recrawl import RecrawlSite
    from demo.web.server import Site, TestWeb
    from demo.web.traps import HashPathSite, SessionTrapSite

    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--articles", type=int, default=40)
    ap.add_argument("--changed", type=float, default=0.1)
    ap.add_argument("--no-traps", action="store_true",
                    help="the article sites only (no session-trap and hash-path sites)")
    a = ap.parse_args(argv)
    hosts = [f"127.0.9.{i + 1}" for i in range(a.hosts)]
    sites = {h: RecrawlSite(articles=a.articles, seed=f"bench{i}") for i, h in enumerate(hosts)}
    others: dict[str, Site] = {}
    if not a.no_traps:
        others = {"127.0.9.101": SessionTrapSite(), "127.0.9.102": HashPathSite()}
    hashes = others.get("127.0.9.102")
    answered: dict[tuple[str, str], dict[str, str]] = {}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with TestWeb({**sites, **others}) as web, \
            tempfile.TemporaryDirectory(prefix="recrawl-") as tmp:
        urls = Path(tmp) / "urls.txt"
        urls.write_text("".join(web.url(h) + "\n" for h in [*hosts, *others]))

        def crawl(n: int, recrawl: str = "") -> dict[str, Any]:
            start = len(web.log)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "bench.recrawl_bytes", "--crawl", "--urls",
                            str(urls), "--state", tmp, "--job", f"{tmp}/job{n}", "--recrawl",
                            recrawl], cwd=ROOT, env=env, check=True)
            log = web.log[start:]

            def had(e: Any, name: str) -> str:
                return answered.get((e.host, e.path), {}).get(name, "")

            out = {
                "wall": time.perf_counter() - t0,
                "requests": len(log),
                "bytes": sum(e.bytes_sent for e in log),
                "s200": sum(e.status == 200 for e in log),
                "s304": sum(e.status == 304 for e in log),
                "unconditional": sum(bool(had(e, "etag") or had(e, "last-modified"))
                                     and "if-none-match" not in e.headers
                                     and "if-modified-since" not in e.headers for e in log),
                "fresh": sum("max-age" in had(e, "cache-control") for e in log),
                "trap": sum(RecrawlSite.is_trap(e.path) for e in log),
                "session": sum(SessionTrapSite.is_trap(e.path) for e in log
                               if e.host == "127.0.9.101"),
                "missed": 0 if hashes is None else len(set(hashes.real) - {
                    e.path for e in log if e.host == "127.0.9.102"}),
            }
            for host, site in sites.items():
                answered.update({(host, p): h for p, h in site.answered.items()})
            return out

        first = crawl(1)
        second = crawl(2, "all")
        rng = random.Random(7)
        changed = 0
        for site in sites.values():
            paths = [f"/article/{i}" for i in range(len(site.articles))]
            for path in rng.sample(paths, round(a.changed * len(paths))):
                site.change(path)
                changed += 1
        third = crawl(3, "all")

    print(f"{a.hosts} sites x {a.articles} articles (+ aliases, sitemaps, feed, trap)"
          + ("" if a.no_traps else ", a session-trap site, a hash-path site")
          + f"; {changed} articles changed before crawl 3")
    print(f"{'crawl':<18}{'requests':>9}{'200':>6}{'304':>6}{'uncond.':>8}{'fresh':>6}"
          f"{'trap':>6}{'session':>8}{'missed':>7}{'body bytes':>12}{'% of 1':>8}{'wall s':>8}")
    for name, r in (("1 first", first), ("2 unchanged", second), ("3 10 % changed", third)):
        share = 100.0 * r["bytes"] / first["bytes"]
        print(f"{name:<18}{r['requests']:>9}{r['s200']:>6}{r['s304']:>6}"
              f"{r['unconditional']:>8}{r['fresh']:>6}{r['trap']:>6}{r['session']:>8}"
              f"{r['missed']:>7}{r['bytes']:>12}{share:>7.2f}%{r['wall']:>8.1f}")
    print("uncond.: requests without validators for a URL that had them; fresh: requests "
          "for a URL\nits max-age said was fresh; trap: calendar pages past the linked one; "
          "session: requests\nunder a session token; missed: pages of the hash-path site "
          "not requested.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
