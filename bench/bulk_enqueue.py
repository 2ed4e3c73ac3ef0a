"""Listed URLs per second, from a parsed sitemap into the durable frontier.

The ``site`` spider's path for a sitemap's entries, as the crawl runs it: the
sitemap parsed (:func:`polite_crawler.policy.sitemaps.parse_sitemap`), every entry
judged by the URL rules (:class:`polite_crawler.frontier.admission.UrlRules`) and
queued in bulk by the frontier scheduler (``enqueue_urls``: the seen set, the
origins' stop and budget, robots.txt where known, one ``executemany`` into the
job's SQLite queue, committed). A real scheduler on a real SQLite file, opened
with a crawler of the project's settings; no network.

    .venv/bin/python -m bench.bulk_enqueue [--urls 50000] [--files 4] [--repeat 3]

Reported: the parse alone, the rules and the queue alone, the two together
(``whole``), and the ``site`` spider's own sitemap callback on the same files
(``spider_callback``: parse, scope, held links, URL rules, queue), in URLs per
second (CPU time of this process), median of the repeats.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
from pathlib import Path
from typing import Any


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def sitemap(origin: str, n: int, offset: int) -> bytes:
    rows = "".join(
        f"<url><loc>{origin}/library/page{offset + i}.html</loc>"
        f"<lastmod>2024-01-{1 + i % 28:02d}</lastmod></url>\n"
        for i in range(n)
    )
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            f"{rows}</urlset>\n").encode()


def run_once(n_urls: int, n_files: int) -> dict[str, float]:
    from scrapy.utils.reactor import install_reactor, is_reactor_installed

    if not is_reactor_installed():  # the scheduler's timers need one (it is never run)
        install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from scrapy import Request
    from scrapy.http import XmlResponse
    from scrapy.utils.test import get_crawler

    from polite_crawler.frontier.scheduler import FrontierScheduler
    from polite_crawler.middlewares.traps import url_rules
    from polite_crawler.policy.sitemaps import parse_sitemap
    from polite_crawler.spiders.site import SiteSpider
    from tests.crawl import project_settings_dict

    per_file = n_urls // n_files
    origins = [f"http://127.0.0.{1 + i}:8080" for i in range(n_files)]
    files = [(f"{o}/sitemap.xml", sitemap(o, per_file, i * per_file))
             for i, o in enumerate(origins)]
    with tempfile.TemporaryDirectory() as tmp:
        crawler = get_crawler(SiteSpider, project_settings_dict(
            POLITE_STATE_DIR=tmp, JOBDIR=f"{tmp}/job", LOG_LEVEL="WARNING"))
        Path(f"{tmp}/job").mkdir(exist_ok=True)
        spider = SiteSpider.from_crawler(crawler, urls=None, url=",".join(
            [*origins, *(o.replace(":8080", ":8081") for o in origins)]))
        crawler.spider = spider
        scheduler = FrontierScheduler.from_crawler(crawler)
        rules = url_rules(crawler)
        scheduler.open(spider)
        try:
            c0 = _cpu()
            parsed = [parse_sitemap(body, url, scope=url.rsplit("/", 1)[0] + "/",
                                    max_urls=50_000, max_bytes=50 << 20)
                      for url, body in files]
            c1 = _cpu()
            queued = 0
            for result in parsed:
                rows: list[tuple[str, str, dict[str, Any] | None]] = []
                for entry in result.pages:
                    judged = rules.judge(entry.url, 0, canonical_form=True)
                    if judged.reason is None:
                        rows.append((judged.canonical, judged.origin,
                                     {"polite_lastmod": entry.lastmod} if entry.lastmod else None))
                queued += scheduler.enqueue_urls(
                    rows, callback="parse", errback="page_failed",
                    meta={"polite_depth": 0, "polite_source": "sitemap", "polite_link": False},
                    priority=0)
            assert scheduler.frontier is not None
            scheduler.frontier.queue.commit()
            c2 = _cpu()
            # The spider's own callback on the same files (another origin each, so new
            # URLs): parse, scope, URL rules, queue, as the crawl runs it.
            spider_files = [(url.replace(":8080", ":8081"), body.replace(b":8080/", b":8081/"))
                            for url, body in files]
            before = int(crawler.stats.get_value("scheduler/enqueued", 0))  # type: ignore[union-attr]
            c3 = _cpu()
            for url, body in spider_files:
                request = Request(url, meta={"polite_sitemap_scope": url.rsplit("/", 1)[0] + "/",
                                             "polite_discovery": "sitemap"})
                response = XmlResponse(url, body=body, request=request)
                for _ in spider.parse_sitemap(response):
                    pass
            scheduler.frontier.queue.commit()
            c4 = _cpu()
            by_spider = int(crawler.stats.get_value("scheduler/enqueued", 0)) - before  # type: ignore[union-attr]
        finally:
            scheduler.close("finished")
    total = sum(len(r.pages) for r in parsed)
    assert queued == total == per_file * n_files == by_spider, (queued, total, by_spider)
    return {"parse": total / (c1 - c0), "rules_and_queue": total / (c2 - c1),
            "whole": total / (c2 - c0), "spider_callback": total / (c4 - c3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--urls", type=int, default=50_000)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    runs = [run_once(args.urls, args.files) for _ in range(args.repeat)]
    report = {k: round(statistics.median(r[k] for r in runs)) for k in runs[0]}
    print(json.dumps({"urls": args.urls, "files": args.files, "urls_per_cpu_s": report,
                      "runs": runs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
