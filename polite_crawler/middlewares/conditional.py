"""Conditional requests: a revisit costs the site a 304, or nothing at all.

Downloader middleware, order 900. When the store has a copy of a page, the request
carries its ETag and its Last-Modified date (RFC 9110 section 13.1: If-None-Match,
If-Modified-Since); a site that answers 304 Not Modified sends no body, and the
stored copy is read again. For every GET of a page the store knows (by canonical URL, or an
alias of it), :func:`polite_crawler.policy.revisit.decide` says:

* ``conditional``: the request carries ``If-None-Match`` (the stored ETag,
  strong or weak as stored) and ``If-Modified-Since`` (the stored
  Last-Modified). A 304 comes back as the stored copy (status, headers updated
  from the 304 as RFC 9111 section 4.3.4 says, body), marked
  ``meta["polite_not_modified"] = True``, ``meta["polite_revisit"] =
  "not_modified"``: the pipelines record the visit without storing the page
  again, and the spider follows its links as usual. A 304 for which the store
  has no copy leads to exactly one unconditional request (``meta
  ["polite_unconditional"]``), never a loop.
* ``fresh`` (Cache-Control max-age / Expires still running), ``not_due`` (its
  revisit interval has not passed) or ``lastmod`` (the sitemap's lastmod is not
  newer than the copy): the request is not sent at all. The stored copy is
  handed to the spider instead (marked as above, ``polite_revisit`` the
  reason), so discovery still walks through the page's links and a new crawl of
  a known site sends only what is due. The gate sees a response it never
  dispatched and frees the origin without a rest. Without a stored copy
  (``no-store``) the request is dropped (IgnoreRequest), counted.
* ``fetch``: nothing usable is stored; the request goes out unchanged. That
  includes a URL stored only as an exact duplicate or a rel=canonical alias of
  another page: the other page's validators and copy are not this URL's (a
  redirect alias is followed: the redirect lands on the stored page).

URLs fetched that are not stored pages keep their own fetch state
(``url_fetches``, :class:`polite_crawler.store.pages.FetchRecord`): sitemaps and
feeds (recorded here, their body as it came, so a 304 hands the stored sitemap
to the spider, which reads it again and its lastmod entries decide which pages
are due), and exact duplicates and rel=canonical aliases (recorded by the
pipelines, with their own copy). They are revalidated like pages; the answer
for an alias is marked ``polite_revisit = "alias"`` and the pipelines drop it
again. A page the site said ``no-store`` is revalidated too: a 304 records the
visit and nothing goes to the spider (``polite/conditional/not_modified_no_copy``).

``-a recrawl=all`` (the spider's ``recrawl`` attribute, or POLITE_RECRAWL =
"all") revisits every page that is revalidatable, whether due or not; never
one the site said is still fresh, nor one its sitemap says is unchanged.

Remembered traps (:mod:`polite_crawler.store.traps`): a URL a former crawl
judged a trap page is not requested (IgnoreRequest,
``polite/traps/remembered/<reason>``), wherever it was queued from; nor a new
query string of a path whose query pages brought no new text
(``polite/traps/query_variants``, :mod:`polite_crawler.middlewares.trapmemory`).

Stats: ``polite/conditional/<decision>`` for every decision,
``polite/conditional/not_modified`` (304s), ``polite/conditional/modified``
(a new body came), ``polite/conditional/bytes_saved`` (stored body bytes a 304
or a skipped request did not transfer), ``polite/conditional/unconditional_retry``.
``meta["polite_saved_bytes"]`` is the stored copy's size, for the access log.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest
from scrapy.http import Headers
from scrapy.responsetypes import responsetypes

from polite_crawler.backend import page_store
from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings
from polite_crawler.items import FETCHED_AT, LASTMOD, NOT_MODIFIED, REVISIT, copy_headers
from polite_crawler.middlewares.trapmemory import TRAIL, learn, query_variants
from polite_crawler.middlewares.traps import DISCOVERY  # robots.txt / sitemap requests
from polite_crawler.pipelines import ALIAS  # an alias's answer (the pipelines drop it)
from polite_crawler.pipelines.store import revisit_bounds
from polite_crawler.policy.revisit import Decision, Known, decide, freshness, parse_lastmod
from polite_crawler.policy.traps import query_path
from polite_crawler.policy.urls import URLError, canonicalize
from polite_crawler.store.aio import result
from polite_crawler.store.pages import FetchRecord
from polite_crawler.store.traps import trap_book

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from polite_crawler.store.pages import PageRecord, PageStore

logger = logging.getLogger(__name__)

CONDITIONAL = "polite_conditional"  # canonical URL of the stored page a request revalidates
CONDITIONAL_FETCH = "polite_conditional_fetch"  # URL of the fetch record it revalidates
UNCONDITIONAL = "polite_unconditional"  # never add validators (the retry after a 304 without copy)
SAVED_BYTES = "polite_saved_bytes"
_CONDITIONAL_HEADERS = (b"If-None-Match", b"If-Modified-Since")
# Aliases whose page's copy and validators stand for the URL: a redirect lands on
# that page. An exact duplicate or a rel=canonical alias is another resource (its
# own validators, its own base for links): it is fetched as unknown.
# A "migrated" alias is a spelling an earlier version of the canonical form stored as
# this page (polite_crawler.frontier.migrate).
FOLLOW = ("redirect", "migrated")
# Headers a 304 updates in the stored copy (RFC 9111 section 4.3.4; the others stay).
_UPDATED_BY_304 = ("cache-control", "expires", "date", "etag", "last-modified", "age", "vary")


class ConditionalRequestMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.ctx = polite_context(crawler)
        settings = polite_settings(crawler.settings)
        self.recrawl_setting = str(settings.get("POLITE_RECRAWL") or "")
        self.bounds = revisit_bounds(settings)
        self.queries = query_variants(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ConditionalRequestMiddleware:
        return cls(crawler)

    @property
    def store(self) -> PageStore:
        return page_store(self.crawler)

    def _inc(self, key: str, n: int = 1) -> None:
        if self.crawler.stats is not None and n:
            self.crawler.stats.inc_value(f"polite/conditional/{key}", n)

    def _force(self) -> bool:
        spider = getattr(self.crawler, "spider", None)
        value = getattr(spider, "recrawl", None) or self.recrawl_setting
        return str(value).lower() == "all"

    # --- requests ---------------------------------------------------------------
    async def process_request(self, request: Request) -> Response | None:
        meta = request.meta
        if meta.pop(CONDITIONAL, None) is not None or meta.pop(CONDITIONAL_FETCH, None):
            # A copy of a request revalidated before (a redirect, a retry): decide afresh,
            # the validators were another URL's or another time's.
            for h in _CONDITIONAL_HEADERS:
                request.headers.pop(h, None)
        if (request.method != "GET" or meta.get("polite_robots") or meta.get(UNCONDITIONAL)
                or any(h in request.headers for h in _CONDITIONAL_HEADERS)):
            return None
        try:
            canonical = canonicalize(request.url)
        except URLError:
            return None
        if not meta.get(DISCOVERY):
            now = self.ctx.clock()
            reason = trap_book(self.crawler).remembered(canonical, now)
            if reason is not None:
                self._inc_key(f"polite/traps/remembered/{reason}")
                raise IgnoreRequest(f"remembered trap ({reason})")
            # A URL the site itself lists (a sitemap, a start URL) is its own statement.
            listed = meta.get("polite_link", True) is False
            reason = None if listed else self.queries.allows(canonical)
            if reason is not None:
                self._inc_key(f"polite/traps/{reason}")
                key = query_path(canonical)
                if key is not None:
                    trap_book(self.crawler).remember_path(key, reason, now)
                if meta.get(TRAIL):
                    learn(self.crawler, meta[TRAIL], canonical, reason, now)
                raise IgnoreRequest(f"trap ({reason})")
        rec, fetch = await result(self.store.get_page_or_fetch(canonical, follow=FOLLOW))
        if rec is None and fetch is None and meta.get("polite_link", True) is not False:
            # A path whose new query strings a former crawl judged a trap: only what
            # the store knows is revisited.
            reason = trap_book(self.crawler).path_remembered(canonical, self.ctx.clock())
            if reason is not None:
                self._inc_key(f"polite/traps/remembered/{reason}")
                raise IgnoreRequest(f"remembered trap path ({reason})")
        src = rec or fetch
        known = None
        if src is not None:
            known = Known(fetched_at=src.fetched_at, due_at=src.due_at,
                          fresh_until=src.fresh_until, has_copy=src.has_copy,
                          has_validators=src.has_validators, no_store=src.no_store)
        decision = decide(known, self.ctx.clock(), lastmod=parse_lastmod(meta.get(LASTMOD)),
                          force=self._force())
        self._inc(decision.value)
        if decision is Decision.FETCH or src is None:
            return None
        meta[SAVED_BYTES] = src.body_length
        if decision is Decision.CONDITIONAL:
            if src.etag:
                request.headers[b"If-None-Match"] = src.etag
            if src.last_modified:
                request.headers[b"If-Modified-Since"] = src.last_modified
            if rec is not None:
                meta[CONDITIONAL] = rec.canonical_url
            elif fetch is not None:
                meta[CONDITIONAL_FETCH] = fetch.url
            return None
        if fetch is not None:
            full_fetch = await result(self.store.get_fetch(fetch.url, body=True))
            if full_fetch is None or full_fetch.body is None:
                self._inc(f"dropped/{decision.value}")
                raise IgnoreRequest(f"not requested ({decision.value}) and no stored copy")
            self._inc("bytes_saved", full_fetch.body_length)
            return self._fetch_response(request, full_fetch, decision.value,
                                        full_fetch.headers, fetched_at=full_fetch.fetched_at)
        full = await result(self.store.get(canonical, body=True, follow=FOLLOW))
        if full is None or full.body is None:
            self._inc(f"dropped/{decision.value}")
            raise IgnoreRequest(f"not requested ({decision.value}) and no stored copy")
        self._inc("bytes_saved", full.body_length)
        logger.debug("Not requesting %(url)s (%(why)s): the stored copy serves",
                     {"url": request.url, "why": decision.value})
        return self._stored_response(request, full, decision.value, full.headers,
                                     fetched_at=full.fetched_at)

    # --- responses --------------------------------------------------------------
    async def process_response(self, request: Request, response: Response) -> Request | Response:
        meta = request.meta
        fetch_url = meta.get(CONDITIONAL_FETCH)
        if fetch_url:
            if response.status == 304:
                return await self._fetch_not_modified(request, response, fetch_url)
            self._inc("modified")
        stored_url = meta.get(CONDITIONAL)
        if not stored_url:
            if (response.status == 200 and request.method == "GET"
                    and meta.get(DISCOVERY) == "sitemap" and "stored" not in response.flags):
                await self._record_sitemap(request, response)
            return response
        if response.status != 304:
            self._inc("modified")
            return response
        rec = await result(self.store.get(stored_url, body=True))
        if rec is not None and rec.body is None and rec.no_store:
            # No copy by the site's wish: the 304 is the visit; nothing to hand on.
            fresh = copy_headers(response.headers)
            await result(self.store.record_not_modified(
                stored_url, fetched_at=self.ctx.clock(), headers={**rec.headers, **fresh},
                fresh_until=None, bounds=self.bounds))
            self._inc("not_modified")
            self._inc("not_modified_no_copy")
            raise IgnoreRequest("304 for a no-store page: unchanged, no copy to hand on")
        if rec is None or rec.body is None:
            # A 304 with nothing to reuse: ask once without validators.
            self._inc("unconditional_retry")
            logger.info("304 for %(url)s but no stored copy: fetching it once unconditionally",
                        {"url": request.url})
            retry = request.replace(dont_filter=True)
            for h in _CONDITIONAL_HEADERS:
                retry.headers.pop(h, None)
            retry.meta.pop(CONDITIONAL, None)
            retry.meta[UNCONDITIONAL] = True
            return retry
        self._inc("not_modified")
        self._inc("bytes_saved", rec.body_length)
        headers = dict(rec.headers)
        fresh = copy_headers(response.headers)
        for name in _UPDATED_BY_304:
            if name in fresh:
                headers[name] = fresh[name]
        return self._stored_response(request, rec, "not_modified", headers,
                                     fetched_at=self.ctx.clock())

    async def _fetch_not_modified(self, request: Request, response: Response,
                                  url: str) -> Response:
        now = self.ctx.clock()
        rec = await result(self.store.get_fetch(url, body=True))
        if rec is None:  # gone meanwhile: the 304 cannot be used
            raise IgnoreRequest("304 for a URL whose fetch record is gone")
        headers = dict(rec.headers)
        fresh = copy_headers(response.headers)
        for name in _UPDATED_BY_304:
            if name in fresh:
                headers[name] = fresh[name]
        await result(self.store.record_fetch_not_modified(
            url, fetched_at=now, headers=headers,
            fresh_until=freshness(headers, now).fresh_until, bounds=self.bounds))
        self._inc("not_modified")
        if rec.body is None:
            self._inc("not_modified_no_copy")
            raise IgnoreRequest("304 and no copy kept: unchanged, nothing to hand on")
        self._inc("bytes_saved", rec.body_length)
        return self._fetch_response(request, rec, "not_modified", headers, fetched_at=now)

    async def _record_sitemap(self, request: Request, response: Response) -> None:
        """A sitemap or feed that came whole: its validators, freshness and body (as sent)."""
        try:
            url = canonicalize(request.url)
        except URLError:
            return
        headers = copy_headers(response.headers)
        coding = response.headers.get(b"Content-Encoding")
        if coding:  # the body is kept as it came; the size cap decodes it when reused
            headers["content-encoding"] = coding.decode("latin-1")
        now = self.ctx.clock()
        fresh = freshness(headers, now)
        rec = FetchRecord(url=url, kind="sitemap", status=response.status,
                          final_url=response.url, fetched_at=now,
                          etag=(headers.get("etag") or "").strip() or None,
                          last_modified=(headers.get("last-modified") or "").strip() or None,
                          headers=headers, body=response.body if fresh.store else None,
                          fresh_until=fresh.fresh_until, no_store=not fresh.store)
        outcome = await result(self.store.record_fetch(rec, self.bounds))
        self._inc(f"sitemap/{outcome}")

    def _inc_key(self, key: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key)

    def _fetch_response(self, request: Request, rec: FetchRecord, revisit: str,
                        headers: dict[str, str], *, fetched_at: float) -> Response:
        """The stored copy of a sitemap or an alias, as the answer to ``request``."""
        assert rec.body is not None
        if rec.kind != "sitemap":
            revisit = ALIAS
        request.meta[NOT_MODIFIED] = True
        request.meta[REVISIT] = revisit
        request.meta[FETCHED_AT] = fetched_at
        hdrs = Headers(headers)
        cls: Any = responsetypes.from_args(headers=hdrs, url=rec.final_url, body=rec.body)
        response: Response = cls(url=rec.final_url, status=rec.status, headers=hdrs,
                                 body=rec.body, request=request, flags=["stored", revisit])
        return response

    def _stored_response(self, request: Request, rec: PageRecord, revisit: str,
                         headers: dict[str, str], *, fetched_at: float) -> Response:
        assert rec.body is not None
        request.meta[NOT_MODIFIED] = True
        request.meta[REVISIT] = revisit
        request.meta[FETCHED_AT] = fetched_at
        hdrs = Headers({k: v for k, v in headers.items() if k != "content-encoding"})
        cls: Any = responsetypes.from_args(headers=hdrs, url=rec.final_url, body=rec.body)
        response: Response = cls(url=rec.final_url, status=rec.status, headers=hdrs,
                                 body=rec.body, request=request, flags=["stored", revisit])
        return response
