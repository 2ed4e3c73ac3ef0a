"""The ``site`` spider's per-link work for the links of pages, as the sitemap crawl runs it.

``python -m bench.page_links_queue [LABEL] [--sites 4] [--repeat 3] [--profile]``: the
links :func:`extract_links` finds on every page of /usr/share/doc/python3/html under
``--sites`` hosts, in scope, handed to ``SiteSpider.queue_pages`` page by page (URL
rules, the trap memory's link check, the frontier's ``enqueue_urls``: seen set,
origin checks, rows), with a real frontier scheduler on a real SQLite file (a crawler
of the project's settings; no network) and the transaction committed after each page
as the frontier does when a response is done. Every page is listed first, as a
sitemap would (so most links are in the seen set already, as in the sitemap-heavy
crawl), then the pages' links are queued; a second pass queues the same links again
(every one seen). ``--budget N``: only each site's first N pages in its sitemap's own
order (:func:`bench.realweb_nginx.host_order`), as the sitemap-heavy crawl fetches them
(``--sites 200 --budget 9``: its links repeat far less). Process time, milliseconds a
page and microseconds a link, best of ``--repeat``; the stats the pass counted are
printed so two trees can be compared for the same answers. Run it from two trees in
turn (``PYTHONPATH=<tree>``) to compare versions (bench/PROFILE.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DOCS = Path("/usr/share/doc/python3/html")


def run_once(files: list[Path], sites: int, profile: bool = False,
             budget: int = 0) -> dict[str, Any]:
    from scrapy.utils.reactor import install_reactor, is_reactor_installed

    if not is_reactor_installed():  # the scheduler's timers need one (it is never run)
        install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from scrapy import Request
    from scrapy.http import HtmlResponse
    from scrapy.utils.test import get_crawler

    from bench.realweb_nginx import host_order
    from polite_crawler.frontier.scheduler import FrontierScheduler
    from polite_crawler.policy.links import extract_links
    from polite_crawler.spiders.site import SiteSpider, _Discovery
    from tests.crawl import project_settings_dict

    hosts = [f"http://site-{i:03d}.test" for i in range(sites)]
    pages: list[tuple[str, bytes]] = []
    listed: list[tuple[str, None]] = []
    bodies = {f"/{f.relative_to(DOCS)}": f for f in files}
    for host in hosts:
        paths = sorted(bodies)
        listed.extend((f"{host}{path}", None) for path in paths)
        if budget:  # the pages a crawl with this budget fetches: the sitemap's first
            paths = host_order(host, paths)[:budget]
        pages.extend((f"{host}{path}", bodies[path].read_bytes()) for path in paths)
    with tempfile.TemporaryDirectory() as tmp:
        Path(f"{tmp}/job").mkdir()
        crawler = get_crawler(SiteSpider, project_settings_dict(
            POLITE_STATE_DIR=tmp, JOBDIR=f"{tmp}/job", LOG_LEVEL="WARNING"))
        spider = SiteSpider.from_crawler(crawler, url=",".join(h + "/" for h in hosts))
        crawler.spider = spider
        scheduler = FrontierScheduler.from_crawler(crawler)
        scheduler.open(spider)
        try:
            for host in hosts:
                spider._discovery[host] = _Discovery(started=True, done=True)
            assert scheduler.frontier is not None
            queue = scheduler.frontier.queue
            spider.queue_pages([(spider.canonical(u) or u, None) for u, _ in listed], depth=0,
                               source="sitemap", canonical_form=True)
            queue.commit()
            responses = []
            links = 0
            for url, body in pages:
                request = Request(url, meta={"polite_depth": 1})
                response = HtmlResponse(url, body=body, request=request, encoding="utf-8")
                page = extract_links(body, url, "utf-8", max_links=5000)
                found = [(k.url, None) for k in page.links]
                found = [f for f, ok in zip(found, spider._in_scope_under(
                    (u for u, _ in found), url), strict=True) if ok]
                links += len(found)
                responses.append((response, found))
            assert crawler.stats is not None
            before = dict(crawler.stats.get_stats())
            times = []
            prof = None
            if profile:
                import cProfile
                prof = cProfile.Profile()
            for _pass in range(2):
                t0 = time.process_time()
                if prof is not None:
                    prof.enable()
                for response, found in responses:
                    spider.queue_pages(found, depth=2, source="link", parent=response)
                    queue.commit()
                if prof is not None:
                    prof.disable()
                times.append(time.process_time() - t0)
            after = crawler.stats.get_stats()
            counted = {k: v - before.get(k, 0) for k, v in after.items()
                       if isinstance(v, int) and v != before.get(k, 0)}
        finally:
            scheduler.close("finished")
    if prof is not None:
        import pstats
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    return {"pages": len(pages), "links": links, "first": times[0], "second": times[1],
            "counted": counted}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("label", nargs="?", default="this tree")
    ap.add_argument("--sites", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--budget", type=int, default=0,
                    help="queue the links of each site's first N pages in its own sitemap "
                         "order (bench.realweb's sitemap workload: --sites 200 --budget 9) "
                         "instead of every page's")
    args = ap.parse_args(argv)
    files = sorted(DOCS.rglob("*.html"))
    if not files:
        print(f"no HTML under {DOCS}: apt-get install python3-doc", file=sys.stderr)
        return 1
    runs = [run_once(files, args.sites, args.profile, args.budget)
            for _ in range(args.repeat)]
    pages, links = runs[0]["pages"], runs[0]["links"]
    first = min(r["first"] for r in runs)
    second = min(r["second"] for r in runs)
    print(f"{args.label}: {pages} pages, {links / pages:.1f} links a page; "
          f"first pass {first / pages * 1e3:.3f} ms a page ({first / links * 1e6:.1f} us a link), "
          f"second {second / pages * 1e3:.3f} ms a page ({second / links * 1e6:.1f} us a link)")
    print("counted:", json.dumps(dict(sorted(runs[0]["counted"].items()))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
