"""Discovery and trap defences in real crawls against the test web (server log asserts)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import pytest_twisted

from demo.web.server import LogEntry, Site, TestWeb, overlaps
from demo.web.traps import AliasPortSite, DiscoverySite, FallbackSite, TrapSite
from polite_crawler.policy.urls import canonicalize
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import run_crawl

A, FOREIGN, B, T = "127.0.6.1", "127.0.6.9", "127.0.6.2", "127.0.6.3"


class StockSchedulerAddon:
    """Puts Scrapy's own scheduler back (and what depends on the frontier out)."""

    def update_settings(self, settings: Any) -> None:
        settings.set("SCHEDULER", "scrapy.core.scheduler.Scheduler", priority=200)
        settings.set("DUPEFILTER_CLASS", "scrapy.dupefilters.RFPDupeFilter", priority=200)
        mws = dict(settings.getdict("DOWNLOADER_MIDDLEWARES"))
        mws["polite_crawler.middlewares.robotstxt.RobotsTxtMiddleware"] = None
        mws["polite_crawler.middlewares.gate.GateMiddleware"] = None
        settings.set("DOWNLOADER_MIDDLEWARES", mws, priority=200)


# Scrapy's own scheduler hands the downloader up to CONCURRENT_REQUESTS requests at
# once, past every downloader middleware: a stopped origin can take back only what
# has not left the scheduler. Few places keep that small (the frontier has no such gap).
SCHEDULERS = {
    "frontier": {},
    "stock": {"ADDONS": {"polite_crawler.addon.PoliteAddon": 0,
                         "tests.test_discovery_crawl.StockSchedulerAddon": 10},
              "CONCURRENT_REQUESTS": 4},
}


def _settings(tmp_path: Any, scheduler: str, **extra: Any) -> dict[str, Any]:
    return {"POLITE_STATE_DIR": str(tmp_path), "JOBDIR": str(tmp_path / "job"),
            "LOG_LEVEL": "INFO", **SCHEDULERS[scheduler], **extra}


def _content(entries: list[LogEntry]) -> list[LogEntry]:
    return [e for e in entries if e.path != "/robots.txt"]


def _fetched_once(web: TestWeb, host: str) -> Counter[str]:
    counts = Counter(canonicalize(web.url(host, e.path)) for e in web.entries(host))
    twice = {u: n for u, n in counts.items() if n > 1}
    assert not twice, f"fetched more than once: {twice}"
    return counts


@pytest.fixture(params=["frontier", "stock"])
def scheduler(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest_twisted.ensureDeferred
async def test_sitemaps_first_then_unlisted_links(web_factory, tmp_path, scheduler) -> None:
    site = DiscoverySite(foreign_host=FOREIGN)
    web = web_factory({A: site, FOREIGN: Site({"/": b"never"})})
    result = await run_crawl(SiteSpider, _settings(tmp_path, scheduler), url=web.url(A))

    counts = _fetched_once(web, A)
    for path in site.real + site.sitemap_files:
        assert counts[canonicalize(web.url(A, path))] == 1, path
    assert web.entries(FOREIGN) == []  # cross-host sitemaps and entries never fetched
    if scheduler == "frontier":
        assert not overlaps(web.entries())
    # Sitemaps first: every sitemap file was asked for before any page no sitemap lists.
    paths = [e.path for e in _content(web.entries(A))]
    last_sitemap = max(paths.index(p) for p in site.sitemap_files)
    assert all(paths.index(p) > last_sitemap for p in site.UNLISTED)
    # Nothing but the real pages and the sitemap files (and robots.txt).
    assert set(counts) == {canonicalize(web.url(A, p))
                           for p in [*site.real, *site.sitemap_files, "/robots.txt"]}

    items = {i["url"]: i for i in result.items}
    assert set(items) == {web.url(A, p) for p in site.real}
    assert items[web.url(A, "/p/1")]["lastmod"] == "2026-05-01"
    assert items[web.url(A, "/posts/a")]["lastmod"] == "2026-05-06T00:00:00Z"
    assert items[web.url(A, "/hidden")]["lastmod"] is None
    assert all(i["canonical_url"] == i["url"] for i in items.values())
    stats = result.stats
    assert stats["polite/discovery/dropped/offsite"] >= 4  # index, gz, text entries elsewhere
    assert stats["polite/discovery/sitemap_offsite"] == 1  # robots.txt line for another host
    for kind in ("sitemapindex", "urlset", "text", "rss", "atom"):
        assert stats[f"polite/discovery/sitemap/{kind}"] == 1, kind


@pytest_twisted.ensureDeferred
async def test_robots_404_falls_back_to_sitemap_xml(web_factory, tmp_path, scheduler) -> None:
    site = FallbackSite()
    web = web_factory({B: site})
    result = await run_crawl(SiteSpider, _settings(tmp_path, scheduler), url=web.url(B))
    counts = _fetched_once(web, B)
    assert counts[web.url(B, "/sitemap.xml")] == 1
    assert {i["url"] for i in result.items} == {web.url(B, p) for p in site.real}
    assert result.stats["polite/discovery/sitemap_default"] == 1


TRAP_HOSTS = {"calendar": "127.0.6.3", "facets": "127.0.6.4", "paths": "127.0.6.5"}


@pytest_twisted.ensureDeferred
async def test_traps_end_within_budget(web_factory, tmp_path, scheduler) -> None:
    sites = {host: TrapSite((trap,)) for trap, host in TRAP_HOSTS.items()}
    web = web_factory(sites)
    budget = 100
    result = await run_crawl(
        SiteSpider, _settings(tmp_path, scheduler, POLITE_HOST_BUDGET=budget),
        url=",".join(web.url(h) for h in sites))
    for host, site in sites.items():
        counts = _fetched_once(web, host)
        for path in site.real:
            assert counts[canonicalize(web.url(host, path))] == 1, (host, path)
        assert len(web.entries(host)) < budget, host
    stats = result.stats
    for reason in ("depth", "repeated_segment", "url_length", "query_params"):
        assert stats.get(f"polite/traps/{reason}", 0) > 0, reason
    # The facets: their listings bring no new text, so the query-variant cap (or, were
    # it later, the yield monitor) ends them.
    assert stats.get("polite/traps/query_variants", 0) > 0 \
        or stats.get("polite/traps/stopped/low_yield") == 1
    # The calendar stopped at depth 10: months 2026-01 +- 9 at most.
    months = [e.path for e in web.entries(TRAP_HOSTS["calendar"]) if e.path != "/robots.txt"]
    assert 10 <= len([m for m in months if m.startswith("/calendar")]) <= 19
    # The path traps: each page once, the loop cut at its third /a/, growth at 2,000.
    paths = [e.path for e in web.entries(TRAP_HOSTS["paths"])]
    assert [p for p in paths if p.startswith("/loop")] == ["/loop/", "/loop/a/b/", "/loop/a/b/a/b/"]
    assert max(len(web.url(TRAP_HOSTS["paths"], p)) for p in paths) <= 2000
    if scheduler == "frontier":
        assert not overlaps(web.entries())
    urls = {i["url"] for i in result.items}
    for host, site in sites.items():
        assert urls >= {canonicalize(web.url(host, p)) for p in site.real}


@pytest_twisted.ensureDeferred
async def test_aliases_under_default_port_fetched_once(tmp_path) -> None:
    host = "127.0.6.80"
    try:
        web = TestWeb({host: AliasPortSite()}, port=80).start()
    except OSError as exc:
        pytest.skip(f"cannot serve on port 80 here: {exc}")
    try:
        result = await run_crawl(SiteSpider, _settings(tmp_path, "frontier"),
                                 url=f"http://{host}:80/")
        paths = Counter(e.path for e in web.entries(host) if e.path != "/robots.txt")
        assert paths == {"/": 1, "/x": 1, "/y": 1, "/sitemap.xml": 1}
        assert {i["url"] for i in result.items} == {f"http://{host}/{p}" for p in ("", "x", "y")}
    finally:
        web.stop()


@pytest_twisted.ensureDeferred
async def test_rel_canonical_is_the_identity(web_factory, tmp_path) -> None:
    from demo.web.server import page

    def with_canonical(href: str) -> bytes:
        # distinct texts: the same text twice is one page to the duplicate detection
        return page("P", f"text of the page that names {href}", ["/print", "/other"]).replace(
            b"</head>", f'<link rel="canonical" href="{href}"></head>'.encode())

    web = web_factory({B: Site({
        "/": with_canonical("/"),
        "/print": with_canonical("/article"),
        "/other": with_canonical(f"http://{A}/stolen"),
        "/article": page("never fetched", "x", []),
    })})
    result = await run_crawl(SiteSpider, _settings(tmp_path, "frontier"), url=web.url(B))
    items = {i["url"]: i for i in result.items}
    assert items[web.url(B, "/print")]["canonical_url"] == web.url(B, "/article")
    assert items[web.url(B, "/other")]["canonical_url"] == web.url(B, "/other")  # other host
    assert web.entries(B, "/article") == []


@pytest_twisted.ensureDeferred
async def test_host_case_aliases_fetched_once(web_factory, tmp_path) -> None:
    # "localhost" is a name with letters to spell in other cases (served on 127.0.0.1).
    def home(req: Any) -> Any:
        from demo.web.server import Resp, page

        port = req.port
        return Resp(200, page("Home", "home text", [
            f"http://LOCALHOST:{port}/x", f"http://LocalHost:{port}/x?utm_source=a",
            f"HTTP://localhost.:{port}/x#frag", f"http://localhost:{port}/y"]))

    from demo.web.server import page

    web = web_factory({"127.0.0.1": Site({"/": home, "/x": page("X", "x text", ["/"]),
                                          "/y": page("Y", "y text", ["/x"])})})
    result = await run_crawl(SiteSpider, _settings(tmp_path, "frontier"),
                             url=f"http://localhost:{web.port}/")
    paths = Counter(e.path for e in web.entries("127.0.0.1"))
    assert paths["/x"] == 1
    assert paths["/y"] == 1
    assert paths["/"] == 1
    assert {i["url"] for i in result.items} == {
        f"http://localhost:{web.port}{p}" for p in ("/", "/x", "/y")}


@pytest_twisted.ensureDeferred
async def test_sitemap_that_never_answers_does_not_stall_links(web_factory, tmp_path,
                                                               scheduler) -> None:
    # robots.txt disallows the sitemap it names: the request never leaves the frontier
    # (stock: robots.txt is only read for Sitemap lines, so it is fetched and 404s).
    from demo.web.server import page

    web = web_factory({B: Site({
        "/robots.txt": "User-agent: *\nDisallow: /private-sitemap.xml\n"
                       "Sitemap: /private-sitemap.xml\n",
        "/": page("Home", "home text", ["/a"]),
        "/a": page("A", "a text", ["/b"]),
        "/b": page("B", "b text", []),
    })})
    result = await run_crawl(SiteSpider, _settings(tmp_path, scheduler), url=web.url(B))
    assert {i["url"] for i in result.items} == {web.url(B, p) for p in ("/", "/a", "/b")}
    if scheduler == "frontier":
        assert web.entries(B, "/private-sitemap.xml") == []


# --- the trap middleware on its own --------------------------------------------------

def _middleware(**settings: Any) -> Any:
    from scrapy.utils.test import get_crawler

    from polite_crawler.middlewares.traps import TrapMiddleware
    from tests.crawl import project_settings_dict

    crawler = get_crawler(SiteSpider, project_settings_dict(**settings))
    crawler._apply_settings()
    return TrapMiddleware.from_crawler(crawler), crawler


def test_middleware_drops_by_reason_and_counts() -> None:
    from scrapy import Request
    from scrapy.http import HtmlResponse

    mw, crawler = _middleware(POLITE_MAX_DEPTH=2, POLITE_STRIP_PARAMS=["ref"])
    parent = HtmlResponse("http://e.org/p", body=b"<html><body>x</body></html>",
                          request=Request("http://e.org/p", meta={"polite_depth": 2}))
    ok = mw.get_processed_request(Request("http://e.org/q", meta={"polite_depth": 1}), parent)
    assert ok is not None and ok.meta["polite_depth"] == 1
    assert mw.get_processed_request(Request("http://e.org/deep"), parent) is None  # depth 3
    parent.meta["polite_depth"] = 0
    many = "&".join(f"p{i}=1" for i in range(6))
    cases = {
        "query_params": f"http://e.org/s?{many}",
        "repeated_segment": "http://e.org/a/b/a/b/a",
        "url_length": "http://e.org/" + "z" * 2000,
    }
    for url in cases.values():
        assert mw.get_processed_request(Request(url), parent) is None
    # Tracking and POLITE_STRIP_PARAMS parameters do not count.
    tracked = "http://e.org/s?a=1&b=2&c=3&d=4&e=5&utm_source=x&ref=y"
    assert mw.get_processed_request(Request(tracked), parent) is not None
    # Discovery requests (sitemaps) skip the URL rules; start requests are depth 0.
    sitemap = Request(f"http://e.org/s?{many}", meta={"polite_discovery": "sitemap"})
    assert mw.get_processed_request(sitemap, parent) is not None
    start = mw.get_processed_request(Request("http://e.org/a/a/a"), None)
    assert start is not None and start.meta["polite_depth"] == 0
    stats = crawler.stats.get_stats()
    assert stats["polite/traps/depth"] == 1
    for reason in cases:
        assert stats[f"polite/traps/{reason}"] == 1


def test_middleware_stops_an_origin_of_repeats() -> None:
    from scrapy import Request
    from scrapy.http import HtmlResponse

    mw, crawler = _middleware(POLITE_YIELD_WINDOW=10)
    body = b"<html><body><p>" + b"the same words on every page of this origin " * 20 + b"</p>"
    for i in range(12):
        response = HtmlResponse(f"http://loop.example/{i}", body=body,
                                request=Request(f"http://loop.example/{i}"))
        mw.process_spider_input(response)
    assert mw.monitor.stopped("http://loop.example")
    assert not mw.monitor.stopped("http://other.example")
    assert mw.get_processed_request(Request("http://loop.example/new"), response) is None
    stats = crawler.stats.get_stats()
    assert stats["polite/traps/stopped/low_yield"] == 1
    assert stats["polite/traps/low_yield"] == 1


@pytest_twisted.ensureDeferred
async def test_rel_nofollow_links_not_followed(web_factory, tmp_path) -> None:
    from demo.web.server import page

    home = page("Home", "home text", ["/a"]).replace(
        b"</main>", b'<a href="/secret" rel="nofollow">s</a><a href="/b" rel="nofollow">b</a>'
                    b'<a href="/b#again">b</a></main>')
    web = web_factory({B: Site({"/": home, "/a": page("A", "a", []), "/b": page("B", "b", []),
                                "/secret": page("S", "s", [])})})
    result = await run_crawl(SiteSpider, _settings(tmp_path, "frontier"), url=web.url(B))
    assert {i["url"] for i in result.items} == {web.url(B, p) for p in ("/", "/a", "/b")}
    assert web.entries(B, "/secret") == []
    assert result.stats["polite/discovery/rel_nofollow"] == 1



@pytest_twisted.ensureDeferred
async def test_start_url_redirected_to_another_host(web_factory, tmp_path) -> None:
    from demo.web.server import Resp

    old, new = "127.0.6.20", "127.0.6.21"
    web = web_factory({
        old: Site({"/": lambda req: Resp(301, headers={"Location": f"http://{new}:{req.port}/"})}),
        new: FallbackSite(),
    })
    result = await run_crawl(SiteSpider, _settings(tmp_path, "frontier", POLITE_ALLOW_NETWORKS=[
        "127.0.6.21/32"]), url=web.url(old))
    # url is what was requested, final_url where it landed
    assert {i["final_url"] for i in result.items} == {web.url(new, p) for p in FallbackSite().real}
    assert web.url(old) in {i["url"] for i in result.items}
    assert [e.path for e in web.entries(old) if e.path != "/robots.txt"] == ["/"]
    _fetched_once(web, new)


@pytest_twisted.ensureDeferred
async def test_a_sitemap_cut_off_lists_its_complete_entries_and_is_counted(web_factory,
                                                                          tmp_path) -> None:
    host = "127.0.6.7"
    page = "<html><head><title>{n}</title></head><body><p>Page {n} of a cut sitemap, " \
           "its own words {n}.</p></body></html>"
    routes: dict[str, Any] = {f"/p{n}": page.format(n=n) for n in range(4)}
    whole = ('<?xml version="1.0" encoding="UTF-8"?>\n'
             '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
             + "".join(f"<url><loc>http://{host}:{{port}}/p{n}</loc></url>" for n in range(4)))
    web = web_factory({host: Site(routes)})
    port = web.url(host).rsplit(":", 1)[1].strip("/")
    # Cut inside the fourth entry's <loc>: three complete entries, no closing </urlset>.
    body = whole.replace("{port}", port)
    routes["/sitemap.xml"] = body[: body.rindex("/p3") - 4]
    routes["/robots.txt"] = f"User-agent: *\nAllow: /\nSitemap: {web.url(host, '/sitemap.xml')}\n"
    result = await run_crawl(SiteSpider, _settings(tmp_path, "frontier"),
                             url=web.url(host, "/p0"))
    assert result.stats["polite/discovery/sitemap/truncated"] == 1
    paths = {e.path for e in web.entries(host)}
    assert {"/p0", "/p1", "/p2"} <= paths
    assert "/p3" not in paths  # listed only in the cut part, linked from nowhere
