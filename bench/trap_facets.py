"""Faceted navigation against a catalogue: what the query-variant cap costs and saves.

Two test-web sites (:mod:`demo.web.traps`): :class:`FacetSite` (a shop's
five filters of six options, every listing linking every two-filter combination) at
``--products`` 8 and 60, and :class:`CatalogueSite` (60 ``/item?id=N`` pages, genuinely
distinct). Each is crawled once with the query-variant cap off (POLITE_MAX_QUERY_VARIANTS
very large: only the yield monitor and the URL rules) and once at the defaults. Figures
from the sites' own request log: requests, query-string requests, real pages found.

    .venv/bin/python -m bench.trap_facets
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def crawl_main(argv: list[str]) -> int:
    from scrapy.crawler import CrawlerProcess

    from polite_crawler.spiders.site import SiteSpider
    from tests.crawl import project_settings_dict

    ap = argparse.ArgumentParser()
    ap.add_argument("--url")
    ap.add_argument("--state")
    ap.add_argument("--cap", type=int)
    a = ap.parse_args(argv)
    settings = project_settings_dict(POLITE_STATE_DIR=a.state, LOG_LEVEL="WARNING")
    if a.cap:
        settings["POLITE_MAX_QUERY_VARIANTS"] = a.cap
    process = CrawlerProcess(settings)
    process.crawl(SiteSpider, url=a.url)
    process.start()
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--crawl"]:
        return crawl_main(argv[1:])
    from demo.web.server import Site, TestWeb
    from demo.web.traps import CatalogueSite, FacetSite

    sites: dict[str, Site] = {"127.0.9.31": FacetSite(8), "127.0.9.32": FacetSite(60),
                              "127.0.9.33": CatalogueSite(60)}
    names = {"127.0.9.31": "facets, 8 products", "127.0.9.32": "facets, 60 products",
             "127.0.9.33": "catalogue, 60 items"}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    print(f"{'site':<22}{'cap':>9}{'requests':>10}{'query':>7}{'real found':>12}{'wall s':>8}")
    with TestWeb(sites) as web, tempfile.TemporaryDirectory(prefix="facets-") as tmp:
        for host, site in sites.items():
            for cap in (10**9, 0):
                start = len(web.entries(host))
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "bench.trap_facets", "--crawl", "--url",
                                web.url(host), "--state", f"{tmp}/{host}-{cap}",
                                *(["--cap", str(cap)] if cap else [])],
                               cwd=ROOT, env=env, check=True)
                log = web.entries(host)[start:]
                got = {e.path for e in log}
                real: list[str] = getattr(site, "real", [])
                print(f"{names[host]:<22}{'off' if cap else 'default':>9}{len(log):>10}"
                      f"{sum('?' in e.path for e in log):>7}"
                      f"{sum(p in got for p in real):>6}/{len(real):<5}"
                      f"{time.perf_counter() - t0:>8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
