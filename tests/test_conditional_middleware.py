"""The conditional-request middleware with an injected clock: floors, no-store, lastmod, 304s."""

from __future__ import annotations

import email.utils
from typing import TYPE_CHECKING, Any

import pytest
import pytest_twisted
from scrapy import Request, Spider
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse, Response
from scrapy.utils.test import get_crawler

from polite_crawler.context import PoliteContext, polite_context
from polite_crawler.items import FETCHED_AT, page_item
from polite_crawler.middlewares.conditional import CONDITIONAL, ConditionalRequestMiddleware
from polite_crawler.pipelines.identity import PageIdentityPipeline
from polite_crawler.pipelines.store import PageStorePipeline
from polite_crawler.store.aio import result
from tests.clock import Clock

if TYPE_CHECKING:
    from collections.abc import Iterator

URL = "http://127.0.0.1:9/page"
BODY = b"<html><head><title>A page</title></head><body><main><p>" + b"words " * 50 + \
    b"</p></main></body></html>"
T0 = 1_000_000.0


class Env:
    def __init__(self, tmp_path: Any) -> None:
        self.clock = Clock(T0)
        self.crawler = get_crawler(Spider, {
            "POLITE_STATE_DIR": str(tmp_path),
            "POLITE_REVISIT_DEFAULT": 60.0, "POLITE_REVISIT_MIN": 10.0,
            "POLITE_REVISIT_MAX": 1000.0,
        })
        self.crawler.spider = Spider("t")
        self.crawler._polite_context = PoliteContext(self.crawler, clock=self.clock)  # type: ignore[attr-defined]
        self.mw = ConditionalRequestMiddleware(self.crawler)
        self.identity = PageIdentityPipeline(self.crawler)
        self.storage = PageStorePipeline(self.crawler)

    async def store(self, headers: dict[str, str], url: str = URL) -> Any:
        """A page fetched now with these response headers, through the pipelines."""
        request = Request(url, meta={FETCHED_AT: self.clock.t})
        response = HtmlResponse(url, body=BODY, headers=headers, request=request)
        item = self.identity.process_item(page_item(response))
        return await self.storage.process_item(item)

    def close(self) -> None:
        ctx = polite_context(self.crawler)
        if ctx.pages is not None:
            ctx.pages.close()


@pytest.fixture
def env(tmp_path: Any) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    e.close()


def _http_date(ts: float) -> str:
    return email.utils.formatdate(ts, usegmt=True)


async def _ask(env: Env, url: str = URL, **meta: Any) -> tuple[Request, Response | None]:
    request = Request(url, meta=meta)
    return request, await env.mw.process_request(request)


@pytest_twisted.ensureDeferred
async def test_strong_etag_and_last_modified_round_trip(env: Env) -> None:
    lm = _http_date(T0 - 3600)
    await env.store({"ETag": '"abc"', "Last-Modified": lm})
    env.clock.t = T0 + 61  # due (60 s)
    request, answer = await _ask(env)
    assert answer is None
    assert request.headers[b"If-None-Match"] == b'"abc"'
    assert request.headers[b"If-Modified-Since"] == lm.encode()
    assert request.meta[CONDITIONAL] == URL
    # 304: the stored copy, with the 304's new validators and caching headers.
    not_modified = Response(URL, status=304, request=request,
                            headers={"ETag": '"abd"', "Cache-Control": "max-age=5"})
    out = await env.mw.process_response(request, not_modified)
    assert isinstance(out, HtmlResponse) and out.status == 200 and out.body == BODY
    assert out.headers[b"ETag"] == b'"abd"' and out.headers[b"Cache-Control"] == b"max-age=5"
    assert out.headers[b"Last-Modified"] == lm.encode()
    assert out.meta["polite_not_modified"] and out.meta["polite_revisit"] == "not_modified"
    stats = env.crawler.stats.get_stats()  # type: ignore[union-attr]
    assert stats["polite/conditional/not_modified"] == 1
    assert stats["polite/conditional/bytes_saved"] == len(BODY)
    # The visit is recorded; the interval grew; the 304's validators are kept.
    item = env.identity.process_item(page_item(out))
    assert (await env.storage.process_item(item))["revisit"] == "not_modified"
    rec = await result(env.mw.store.get(URL))
    assert rec is not None and rec.etag == '"abd"' and rec.revisit_interval == 90.0
    assert rec.fetched_at == T0 + 61 and rec.visits == 2
    assert rec.fresh_until == T0 + 61 + 5


@pytest_twisted.ensureDeferred
async def test_weak_etag_round_trip_and_a_new_body(env: Env) -> None:
    await env.store({"ETag": 'W/"v1"'})
    env.clock.t = T0 + 100
    request, answer = await _ask(env)
    assert answer is None and request.headers[b"If-None-Match"] == b'W/"v1"'
    assert b"If-Modified-Since" not in request.headers
    fresh = HtmlResponse(URL, body=BODY + b"<p>more</p>", headers={"ETag": 'W/"v2"'},
                         request=request)
    assert await env.mw.process_response(request, fresh) is fresh
    assert env.crawler.stats.get_value("polite/conditional/modified") == 1  # type: ignore[union-attr]


@pytest_twisted.ensureDeferred
async def test_max_age_is_a_floor(env: Env) -> None:
    await env.store({"ETag": '"a"', "Cache-Control": "public, max-age=600"})
    for now in (T0 + 61, T0 + 599):  # past the revisit interval, still fresh: not requested
        env.clock.t = now
        request, answer = await _ask(env)
        assert answer is not None and answer.body == BODY
        assert answer.meta["polite_revisit"] == "fresh"
        assert b"If-None-Match" not in request.headers
    env.clock.t = T0 + 601
    request, answer = await _ask(env)
    assert answer is None and request.headers[b"If-None-Match"] == b'"a"'
    assert env.crawler.stats.get_value("polite/conditional/fresh") == 2  # type: ignore[union-attr]


@pytest_twisted.ensureDeferred
async def test_expires_minus_date_and_age(env: Env) -> None:
    # Lifetime 500 s (Expires - Date), already 200 s old (Age): fresh for 300 s more.
    await env.store({"ETag": '"a"', "Date": _http_date(T0), "Expires": _http_date(T0 + 500),
                     "Age": "200"})
    env.clock.t = T0 + 299
    _, answer = await _ask(env)
    assert answer is not None and answer.meta["polite_revisit"] == "fresh"
    env.clock.t = T0 + 301
    request, answer = await _ask(env)
    assert answer is None and CONDITIONAL in request.meta


@pytest_twisted.ensureDeferred
async def test_no_cache_gives_no_floor_and_invalid_expires_is_expired(env: Env) -> None:
    await env.store({"ETag": '"a"', "Cache-Control": "no-cache, max-age=600"})
    await env.store({"ETag": '"b"', "Expires": "0"}, url=URL + "2")
    env.clock.t = T0 + 61
    for url in (URL, URL + "2"):
        request, answer = await _ask(env, url)
        assert answer is None and CONDITIONAL in request.meta


@pytest_twisted.ensureDeferred
async def test_no_store_keeps_no_copy(env: Env) -> None:
    await env.store({"ETag": '"a"', "Cache-Control": "no-store"})
    rec = await result(env.mw.store.get(URL, body=True))
    assert rec is not None and rec.body is None and rec.no_store
    env.clock.t = T0 + 30  # not due, and no copy to hand over: dropped, counted
    with pytest.raises(IgnoreRequest):
        await _ask(env)
    assert env.crawler.stats.get_value("polite/conditional/dropped/not_due") == 1  # type: ignore[union-attr]
    env.clock.t = T0 + 61  # due: its validators still save the body
    request, answer = await _ask(env)
    assert answer is None and request.headers[b"If-None-Match"] == b'"a"'
    # The 304 is the visit (recorded); there is no copy to hand on, so nothing is.
    with pytest.raises(IgnoreRequest):
        await env.mw.process_response(request, Response(URL, status=304, request=request))
    stats = env.crawler.stats
    assert stats.get_value("polite/conditional/not_modified_no_copy") == 1  # type: ignore[union-attr]
    rec = await result(env.mw.store.get(URL))
    assert rec is not None and rec.visits == 2 and rec.fetched_at == T0 + 61


@pytest_twisted.ensureDeferred
async def test_sitemap_lastmod(env: Env) -> None:
    await env.store({"ETag": '"a"'})
    env.clock.t = T0 + 30  # not due yet
    _, answer = await _ask(env, polite_lastmod="1970-01-01T00:00:00Z")
    assert answer is not None and answer.meta["polite_revisit"] == "lastmod"
    # lastmod after our copy: changed since, requested (conditionally) although not due.
    request, answer = await _ask(env, polite_lastmod=T0 + 10)
    assert answer is None and request.headers[b"If-None-Match"] == b'"a"'
    env.clock.t = T0 + 1000  # due, but the sitemap says unchanged: not requested
    _, answer = await _ask(env, polite_lastmod=T0 - 5)
    assert answer is not None and answer.meta["polite_revisit"] == "lastmod"


@pytest_twisted.ensureDeferred
async def test_recrawl_all_revisits_what_is_not_due_never_what_is_fresh(env: Env) -> None:
    """recrawl=all overrides the revisit interval, not the site's max-age."""
    await env.store({"ETag": '"a"', "Cache-Control": "max-age=600"})
    await env.store({"ETag": '"b"'}, url=URL + "2")
    env.clock.t = T0 + 10
    env.crawler.spider.recrawl = "all"  # type: ignore[union-attr]
    _, answer = await _ask(env)
    assert answer is not None and answer.meta["polite_revisit"] == "fresh"
    request, answer = await _ask(env, URL + "2")  # not due, but revalidated
    assert answer is None and request.headers[b"If-None-Match"] == b'"b"'
    env.clock.t = T0 + 601  # the max-age has run out: revalidated
    request, answer = await _ask(env)
    assert answer is None and request.headers[b"If-None-Match"] == b'"a"'


@pytest_twisted.ensureDeferred
async def test_unknown_urls_and_stale_validators(env: Env) -> None:
    request, answer = await _ask(env, URL + "/new")
    assert answer is None and b"If-None-Match" not in request.headers
    # A redirect's copy carries the previous URL's validators: they are removed.
    copied = Request(URL + "/elsewhere", headers={"If-None-Match": '"x"'},
                     meta={CONDITIONAL: URL})
    assert await env.mw.process_request(copied) is None
    assert b"If-None-Match" not in copied.headers and CONDITIONAL not in copied.meta
    # A spider's own conditional headers are left alone; robots.txt is not this cache's.
    own = Request(URL, headers={"If-None-Match": '"mine"'})
    assert await env.mw.process_request(own) is None and CONDITIONAL not in own.meta
    await env.store({"ETag": '"a"'}, url="http://127.0.0.1:9/robots.txt")
    env.clock.t = T0 + 61
    robots = Request("http://127.0.0.1:9/robots.txt", meta={"polite_robots": True})
    assert await env.mw.process_request(robots) is None
    assert b"If-None-Match" not in robots.headers


@pytest_twisted.ensureDeferred
async def test_304_without_copy_retries_once_unconditionally(env: Env) -> None:
    await env.store({"ETag": '"a"'})
    store = env.mw.store
    await result(store.call(lambda b: b.execute("UPDATE pages SET body = NULL"), write=True))
    env.clock.t = T0 + 61
    request, _ = await _ask(env)
    assert CONDITIONAL in request.meta
    out = await env.mw.process_response(request, Response(URL, status=304, request=request))
    assert isinstance(out, Request) and out.dont_filter
    assert b"If-None-Match" not in out.headers and out.meta["polite_unconditional"]
    assert await env.mw.process_request(out) is None and b"If-None-Match" not in out.headers
    # A second 304 (a broken server) goes to the spider as it is: no loop.
    again = Response(URL, status=304, request=out)
    assert await env.mw.process_response(out, again) is again


@pytest_twisted.ensureDeferred
async def test_a_sitemap_is_revalidated_and_its_304_is_the_stored_file(env: Env) -> None:
    """A sitemap keeps its validators; on a 304 the spider reads the stored file
    (as it came: still gzip-encoded, for the size cap to decode), and no trap memory or
    query cap ever applies to it."""
    import gzip

    url = "http://127.0.0.1:9/sitemap.xml"
    xml = b'<?xml version="1.0"?><urlset><url><loc>http://127.0.0.1:9/a</loc></url></urlset>'
    meta = {"polite_discovery": "sitemap", "polite_link": False}
    request, answer = await _ask(env, url, **meta)
    assert answer is None and b"If-None-Match" not in request.headers  # never seen
    wire = gzip.compress(xml)
    came = Response(url, status=200, body=wire, request=request, headers={
        "ETag": '"s1"', "Content-Encoding": "gzip", "Content-Type": "application/xml"})
    assert await env.mw.process_response(request, came) is came
    env.clock.t = T0 + 61  # due
    request, answer = await _ask(env, url, **meta)
    assert answer is None and request.headers[b"If-None-Match"] == b'"s1"'
    out = await env.mw.process_response(request, Response(url, status=304, request=request))
    assert isinstance(out, Response) and out.status == 200 and out.body == wire
    assert out.headers[b"Content-Encoding"] == b"gzip" and "stored" in out.flags
    stats = env.crawler.stats
    assert stats.get_value("polite/conditional/not_modified") == 1  # type: ignore[union-attr]
    rec = await result(env.mw.store.get_fetch(url))
    assert rec is not None and rec.kind == "sitemap" and rec.visits == 2
    # Not due: not requested at all, the stored file serves.
    env.clock.t = T0 + 62
    _, answer = await _ask(env, url, **meta)
    assert answer is not None and answer.body == wire and answer.meta["polite_revisit"] == "not_due"
