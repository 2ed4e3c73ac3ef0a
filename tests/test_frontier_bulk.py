"""URLs queued in bulk (URL rows): the same admission as a Request, the same Request after.

The same cases go through the two ways into the frontier, each with its own real
scheduler on its own SQLite file: a Request through the trap middleware and
``enqueue_request``, and the ``site`` spider's bulk path (``queue_pages`` ->
``enqueue_urls``). The outcome and every admission stat must be equal.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

import pytest
import pytest_twisted
import scrapy
from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy.http import HtmlResponse

from demo.web.server import Site, page
from polite_crawler.backend import backend_of
from polite_crawler.context import polite_context
from polite_crawler.frontier.admission import canonical_origin
from polite_crawler.frontier.url_rows import URL_ROW
from polite_crawler.middlewares.trapmemory import TRAIL, TrapMemoryMiddleware
from polite_crawler.middlewares.traps import DEPTH, TrapMiddleware
from polite_crawler.policy.rest import charge_budget
from polite_crawler.policy.sitemaps import _resolve
from polite_crawler.policy.urls import URLError, canonicalize, origin_of
from polite_crawler.spiders.site import SiteSpider
from polite_crawler.store.traps import trap_book
from tests.crawl import run_crawl
from tests.frontier_fixtures import open_scheduler, site_crawler, without_open_collection

if TYPE_CHECKING:
    from pathlib import Path

A = "http://127.0.0.1:8001"
B = "http://127.0.0.2:8001"  # stopped for low yield
C = "http://127.0.0.3:8001"  # stopped in the frontier (a 403, say)
D = "http://127.0.0.4:8001"  # daily budget spent
E = "http://127.0.0.5:8001"  # robots.txt known: Disallow: /private
F = "http://127.0.0.6:8001"  # robots.txt not fetched yet: judged at dispatch

# (url, depth): every admission rule, and URLs that pass.
CASES: list[tuple[str, int]] = [
    (f"{A}/a", 1),
    (f"{A}/b?y=2&x=1", 1),
    (f"{A}/b?x=1&y=2", 1),  # the same canonical URL: a duplicate
    (f"{A}/A/../a", 2),  # a again
    (f"{A}/deep", 11),  # depth
    (f"{A}/shop?a=1&b=2&c=3&d=4&e=5&f=6", 1),  # query_params
    (f"{A}/x/y/x/y/x/z", 1),  # repeated_segment
    (f"{A}/{'l' * 2100}", 1),  # url_length
    ("http:///no-host", 1),  # bad_url (no canonical form)
    (f"{B}/page", 1),  # low_yield
    (f"{C}/page", 1),  # stopped
    (f"{D}/page", 1),  # budget_exhausted
    (f"{E}/private/page", 1),  # disallowed
    (f"{E}/public/page", 1),
    (f"{F}/private/page", 1),  # queued: robots.txt not known yet
    (f"{A}/c", 10),  # the deepest allowed
    (f"{A}/cal/2024?m=1", 1),  # remembered as a trap page by an earlier crawl
    (f"{A}/list?p=1&p=2&p=3&p=4&p=5&p=6", 1),  # query_params on the parent's trail: learnt
]

ADMISSION_STATS = ("polite/traps/", "polite/frontier/duplicate", "polite/frontier/stopped",
                   "polite/frontier/budget_exhausted", "polite/robots/disallowed",
                   "scheduler/enqueued")


class _Setup:
    def __init__(self, tmp: Path, **extra: Any) -> None:
        self.crawler, self.spider = site_crawler(tmp, ",".join((A, B, C, D, E, F)),
                                                 POLITE_HOST_BUDGET=5, **extra)
        self.ctx = polite_context(self.crawler)
        self.ctx.robots = backend_of(self.crawler.settings).robots_book(self.crawler.settings)
        self.ctx.robots.record_answer(E, 200, b"User-agent: *\nDisallow: /private\n")
        self.traps = TrapMiddleware(self.crawler)
        self.memory = TrapMemoryMiddleware(self.crawler)
        trap_book(self.crawler).remember([f"{A}/cal/2024?m=1"], "repeated_segment",
                                         self.ctx.clock())
        self.scheduler = open_scheduler(self.crawler, self.spider)
        f = self.scheduler.frontier
        assert f is not None
        self.traps.monitor._stopped.add(B)  # as the yield monitor does
        f.stop(C, "forbidden")
        now = f.clock()
        for _ in range(5):
            charge_budget(f.state(D), now)

    def stats(self) -> dict[str, Any]:
        assert self.crawler.stats is not None
        return {k: v for k, v in self.crawler.stats.get_stats().items()
                if k.startswith(ADMISSION_STATS)}

    def queued(self) -> set[str]:
        f = self.scheduler.frontier
        assert f is not None
        f.queue.commit()
        rows = f.queue.conn.execute("SELECT url FROM frontier_queue").fetchall()
        return {canonicalize(r[0]) for r in rows}

    def close(self) -> None:
        self.scheduler.close("finished")
        self.ctx.robots.close()


def _response(url: str, depth: int) -> HtmlResponse:
    # A page on a trail of query pages of one path (the trap memory's).
    request = scrapy.Request(url, meta={DEPTH: depth, TRAIL: (f"{A}/list?p=0",)})
    return HtmlResponse(url, body=b"<html></html>", request=request)


PARENT = f"{A}/list?p=1"


def _through_requests(tmp: Path, cases: list[tuple[str, int]] = CASES,
                      ) -> tuple[set[str], dict[str, Any]]:
    s = _Setup(tmp)
    try:
        for url, depth in cases:
            parent = _response(PARENT, depth - 1)
            # Spider middlewares on the way out: trap memory (75), then the trap rules (70).
            request = s.memory.get_processed_request(
                scrapy.Request(url, callback=s.spider.parse), parent)
            if request is not None:
                request = s.traps.get_processed_request(request, parent)
            if request is not None:
                s.scheduler.enqueue_request(request)
        return s.queued(), s.stats()
    finally:
        s.close()


def _through_bulk(tmp: Path, cases: list[tuple[str, int]] = CASES,
                  ) -> tuple[set[str], dict[str, Any]]:
    s = _Setup(tmp)
    try:
        for url, depth in cases:
            parent = _response(PARENT, depth - 1)
            requests, _n = s.spider.queue_pages([(url, None)], depth=depth, source="link",
                                                parent=parent)
            assert requests == []  # all went in as rows
        return s.queued(), s.stats()
    finally:
        s.close()


def test_bulk_path_applies_every_admission_rule_of_the_request_path(tmp_path) -> None:
    by_request = _through_requests(tmp_path / "request")
    by_bulk = _through_bulk(tmp_path / "bulk")
    assert by_bulk == by_request
    queued, stats = by_bulk
    assert queued == {f"{A}/a", f"{A}/b?x=1&y=2", f"{E}/public/page", f"{F}/private/page",
                      f"{A}/c"}
    assert stats == {
        "polite/traps/depth": 1, "polite/traps/query_params": 2,
        "polite/traps/repeated_segment": 1, "polite/traps/url_length": 1,
        "polite/traps/bad_url": 1, "polite/traps/low_yield": 1,
        "polite/frontier/duplicate": 2, "polite/frontier/stopped": 1,
        "polite/frontier/budget_exhausted": 1, "polite/robots/disallowed": 1,
        "scheduler/enqueued": 5, "polite/traps/remembered/repeated_segment": 1,
        "polite/traps/learned/query_params": 1,
    }


_segments = st.sampled_from(["a", "b", "A", ".", "..", "x y", "%41", "c;p=1", "é", ""])
_queries = st.sampled_from(["", "?a=1", "?b=2&a=1", "?a=1&b=2", "?a&b&c&d&e&f", "?utm_source=x",
                            "?q=%7e", "?"])
_origins = st.sampled_from([A, B, C, D, E, F, "HTTP://127.0.0.1:8001", "http:"])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(_origins, st.lists(_segments, max_size=7), _queries,
                          st.integers(0, 12)), min_size=1, max_size=12))
def test_generated_cases_through_both_paths_are_equal(
        found: list[tuple[str, list[str], str, int]]) -> None:
    import tempfile
    from pathlib import Path

    cases = [(f"{origin}/{'/'.join(segments)}{query}", depth)
             for origin, segments, query, depth in found]
    with tempfile.TemporaryDirectory() as tmp, without_open_collection():
        by_request = _through_requests(Path(tmp) / "request", cases)
        by_bulk = _through_bulk(Path(tmp) / "bulk", cases)
    assert by_bulk == by_request


def test_bulk_path_in_one_batch_equals_one_by_one(tmp_path) -> None:
    # One call with every case (the seen set looked up in one statement).
    s = _Setup(tmp_path)
    try:
        by_depth: dict[int, list[tuple[str, str | None]]] = {}
        for url, depth in CASES:
            by_depth.setdefault(depth, []).append((url, None))
        for depth, found in by_depth.items():
            s.spider.queue_pages(found, depth=depth, source="link",
                                 parent=_response(PARENT, depth - 1))
        batched = s.queued(), s.stats()
    finally:
        s.close()
    assert batched == _through_requests(tmp_path / "request")


def test_a_url_row_becomes_the_request_the_spider_would_have_made(tmp_path) -> None:
    s = _Setup(tmp_path, POLITE_REST_PAGE=0.0)
    try:
        s.ctx.robots.record_answer(A, 200, b"User-agent: *\nAllow: /\n")
        requests, n = s.spider.queue_pages([(f"{A}/listed?b=1&a=2", "2024-05-01")], depth=0,
                                           source="sitemap")
        assert (requests, n) == ([], 1)
        f = s.scheduler.frontier
        assert f is not None
        row = f.queue.head(A)
        assert row is not None and row.data.startswith(URL_ROW)
        assert row.url == f"{A}/listed?a=2&b=1" and row.prio == SiteSpider.priority(row.url, 0)
        request = s.scheduler.next_request()
        assert request is not None
        assert request.url == f"{A}/listed?a=2&b=1"
        assert request.callback == s.spider.parse and request.errback == s.spider.page_failed
        assert request.priority == row.prio
        assert {k: request.meta[k] for k in (DEPTH, "polite_source", "polite_link",
                                             "polite_lastmod", "polite_row")} == {
            DEPTH: 0, "polite_source": "sitemap", "polite_link": False,
            "polite_lastmod": "2024-05-01", "polite_row": row.id}
        assert request.meta["polite_origin"] == A and request.meta["download_slot"] == A
    finally:
        s.close()


def test_url_rows_survive_a_crash_before_their_parent_is_done(tmp_path) -> None:
    # Rows are in the queue's open transaction: committed with their parent's done
    # (or a checkpoint); a process that dies before keeps the parent queued instead.
    s = _Setup(tmp_path)
    f = s.scheduler.frontier
    assert f is not None
    parent = f.push(A, 0, f"{A}/parent", b"")
    f.queue.commit()
    s.spider.queue_pages([(f"{A}/p{i}", None) for i in range(50)], depth=1, source="link")
    path = f.queue.path
    f.done(parent)  # the parent's removal commits its children with it
    # No close: the process "dies" here; another connection reads what is on disk.
    rows = sqlite3.connect(path).execute("SELECT url FROM frontier_queue").fetchall()
    assert {r[0] for r in rows} == {f"{A}/p{i}" for i in range(50)}
    s.close()


# --- the pieces the bulk path reads off the canonical form ------------------------------

_hosts = st.sampled_from(["example.org", "EXAMPLE.org.", "127.0.0.1", "[::1]", "bücher.example",
                          "u:p@example.org", "xn--bcher-kva.example"])
_ports = st.sampled_from(["", ":80", ":443", ":8080", ":0"])
_paths = st.text(alphabet="/abc.%?=&;#~ é\t\\@:[]\x00\x7f\u3000", max_size=20)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["http", "https", "HTTP"]), _hosts, _ports, _paths)
def test_canonical_origin_is_origin_of(scheme: str, host: str, port: str, path: str) -> None:
    try:
        canonical = canonicalize(f"{scheme}://{host}{port}/{path}")
    except URLError:
        return
    assert canonical_origin(canonical) == origin_of(canonical)


@settings(max_examples=1000, deadline=None)
@given(st.sampled_from(["http", "https", "HTTP", "hTTps"]), _hosts, _ports, _paths)
def test_sitemap_entry_without_urljoin_reads_as_with_it(scheme: str, host: str, port: str,
                                                         path: str) -> None:
    raw = f"{scheme}://{host}{port}/{path}"
    base = "http://example.org/sitemaps/sitemap.xml"
    try:
        joined = canonicalize(urljoin(base, raw))
    except ValueError:
        joined = None
    try:
        alone = canonicalize(_resolve(base, raw))
    except ValueError:
        alone = None
    assert alone == joined


# --- a spider of its own: Requests, as before --------------------------------------------

class LinkSpider(scrapy.Spider):
    """A plain spider: follows every link with a Request of its own."""

    name = "links"

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [url]

    def parse(self, response: Any, **kwargs: Any) -> Any:
        yield {"url": response.url}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_a_spider_yielding_plain_requests_still_works(web_factory, tmp_path) -> None:
    paths = ["/"] + [f"/p{i}" for i in range(1, 6)]
    routes: dict[str, Any] = {"/robots.txt": "User-agent: *\nDisallow: /p5\n"}
    for i, path in enumerate(paths):
        routes[path] = page(path, f"text of page {i}", [*paths[i + 1:i + 3], "/p1"])
    web = web_factory({"127.0.0.1": Site(routes)})
    result = await run_crawl(LinkSpider, {"POLITE_STATE_DIR": str(tmp_path)},
                             url=web.url("127.0.0.1"))
    got = {urljoin(web.url("127.0.0.1"), p) for p in paths[:5]}
    assert {i["url"] for i in result.items} == got
    fetched = [e.path for e in web.log if e.path != "/robots.txt"]
    assert sorted(fetched) == sorted(paths[:5])  # each once; /p5 disallowed
    assert result.stats["polite/frontier/duplicate"] >= 4
    assert result.stats["polite/robots/disallowed"] == 1
    assert "polite/frontier/bulk_enqueued" not in result.stats


def test_a_url_row_follows_a_change_of_canonical_form(tmp_path) -> None:
    # A URL row's URL is its column (no pickled Request): the frontier migration
    # respells the column and the origin, and keeps the row's data as it was.
    from polite_crawler.frontier.store import QueueStore

    path = tmp_path / "frontier.sqlite3"
    store = QueueStore(path)
    data = URL_ROW + b"1\x002024-05-01"  # template 1 and a lastmod: not read
    store.push("http://example%2ecom", 0, "http://example%2ecom/a", data)
    store.commit()
    store.conn.execute("DELETE FROM frontier_meta WHERE key='canonical_form'")  # form 1
    store.close()
    again = QueueStore(path)  # opening it migrates it
    try:
        row = again.head("http://example.com")
        assert row is not None
        assert (row.url, row.data) == ("http://example.com/a", data)
    finally:
        again.close()


def test_url_row_meta_of_its_own_and_its_template_after_a_restart(tmp_path) -> None:
    s = _Setup(tmp_path, POLITE_REST_PAGE=0.0)
    s.ctx.robots.record_answer(A, 200, b"User-agent: *\nAllow: /\n")
    n = s.scheduler.enqueue_urls(
        [(f"{A}/one", A, {"polite_lastmod": "2024-01-02", "polite_note": [1, 2]}),
         (f"{A}/two", A, None)],
        callback="parse", errback=None, meta={DEPTH: 3, "polite_source": "link"}, priority=7)
    assert n == 2
    f = s.scheduler.frontier
    assert f is not None
    f.queue.commit()
    s.scheduler.url_rows._by_id.clear()  # as a restarted process: read from the file
    got = {}
    for _ in range(2):
        request = s.scheduler.next_request()
        assert request is not None
        got[request.url] = request
        s.scheduler.settle(request, start=0.0, end=0.0, failure=None, observe=False)
    s.close()
    one, two = got[f"{A}/one"], got[f"{A}/two"]
    assert one.meta["polite_note"] == [1, 2] and one.meta["polite_lastmod"] == "2024-01-02"
    assert "polite_lastmod" not in two.meta and "polite_note" not in two.meta
    for request in (one, two):
        assert request.meta[DEPTH] == 3 and request.priority == 7
        assert request.callback == s.spider.parse and request.errback is None


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(["http://", "https://", "HTTP://", "ftp://", "http:", ""]),
       st.text(alphabet="ab.:@[]%é﹖ \t", max_size=8),
       st.text(alphabet="/ab.?=&;#%é \t\x00", max_size=16))
def test_url_trap_reads_path_and_query_as_urlsplit_does(scheme: str, netloc: str,
                                                        tail: str) -> None:
    from urllib.parse import urlsplit

    from polite_crawler.policy.traps import path_and_query

    url = scheme + netloc + tail
    try:
        parts = urlsplit(url)
        want: tuple[str, str] | None = (parts.path, parts.query)
    except ValueError:
        want = None
    try:
        got: tuple[str, str] | None = path_and_query(url)
    except ValueError:
        got = None
    assert got == want
