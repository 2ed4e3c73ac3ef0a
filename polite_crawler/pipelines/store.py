"""Storage: the page, its copy and validators, and when to visit it again."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polite_crawler.defaults import polite_settings
from polite_crawler.items import PageItem, page_copy
from polite_crawler.pipelines import NOT_REQUESTED, PagePipeline
from polite_crawler.policy.revisit import Bounds, freshness
from polite_crawler.policy.urls import URLError, canonicalize
from polite_crawler.store.aio import result
from polite_crawler.store.pages import FetchRecord, PageRecord, PageStoreDown

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings


def revisit_bounds(settings: BaseSettings) -> Bounds:
    settings = polite_settings(settings)
    return Bounds(settings.getfloat("POLITE_REVISIT_DEFAULT"),
                  settings.getfloat("POLITE_REVISIT_MIN"), settings.getfloat("POLITE_REVISIT_MAX"))


def aliases_of(item: PageItem) -> list[tuple[str, str]]:
    """Other URLs of the page, as ``(canonical form, reason)``: the URL requested
    (``redirect`` when it was redirected) and its own URL when rel=canonical named another."""
    canonical = item["canonical_url"]
    requested, final = item.get("url") or "", item.get("final_url") or ""
    out: dict[str, str] = {}
    for url, reason in ((requested, "redirect" if requested != final else "canonical"),
                        (final, "canonical")):
        try:
            form = canonicalize(url)
        except URLError:
            continue
        if form != canonical:
            out.setdefault(form, reason)
    return list(out.items())


def fetch_record(item: PageItem, kind: str, target: str, now: float) -> FetchRecord | None:
    """The fetch state of an alias item (the URL it came from), to be revalidated later."""
    final = item.get("final_url") or item.get("url") or ""
    try:
        url = canonicalize(final)
    except URLError:
        return None
    copy = page_copy(item)
    headers = dict(copy.headers) if copy is not None else {}
    fetched_at = float(item.get("fetched_at") or now)
    fresh = freshness(headers, fetched_at)
    return FetchRecord(url=url, kind=kind, canonical_url=target,
                       status=int(item.get("status") or 200), final_url=final,
                       fetched_at=fetched_at, etag=item.get("etag"),
                       last_modified=item.get("last_modified"), headers=headers,
                       body=copy.body if copy is not None and fresh.store else None,
                       fresh_until=fresh.fresh_until, no_store=not fresh.store)


def _own(url: str) -> str | None:
    try:
        return canonicalize(url)
    except URLError:
        return None


class PageStorePipeline(PagePipeline):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.bounds = revisit_bounds(crawler.settings)

    async def process_item(self, item: Any) -> Any:
        if not isinstance(item, PageItem):
            return item
        revisit = item.get("revisit")
        if revisit in NOT_REQUESTED:
            self.inc(f"skipped/{revisit}")
            return item
        copy = page_copy(item)
        headers = dict(copy.headers) if copy is not None else {}
        fetched_at = float(item.get("fetched_at") or self.ctx.clock())
        fresh = freshness(headers, fetched_at)
        if revisit == "not_modified":
            known = await result(self.store.record_not_modified(
                item["canonical_url"], fetched_at=fetched_at, headers=headers,
                fresh_until=fresh.fresh_until, bounds=self.bounds))
            self.inc("not_modified" if known else "not_modified_unknown")
            return item
        alias = fetch_record(item, "canonical", item["canonical_url"], fetched_at)
        if alias is not None and alias.url != item["canonical_url"]:
            # A page whose rel=canonical names another URL: its own fetch state, and the
            # named page's record is not overwritten when that page was fetched itself.
            await result(self.store.record_fetch(alias, self.bounds))
            self.inc("alias/canonical")
            stored = await result(self.store.get(item["canonical_url"], follow=()))
            if stored is not None and _own(stored.final_url) == stored.canonical_url:
                for url, reason in aliases_of(item):
                    await result(self.store.add_alias(url, stored.canonical_url, reason,
                                                      fetched_at))
                item["revisit"] = "alias"
                return item
        simhash = item.get("simhash")
        signals = item.get("polite_signals") or {}
        rec = PageRecord(
            canonical_url=item["canonical_url"],
            url=item.get("url") or item["canonical_url"],
            final_url=item.get("final_url") or item.get("url") or item["canonical_url"],
            status=int(item.get("status") or 200),
            fetched_at=fetched_at,
            etag=item.get("etag"),
            last_modified=item.get("last_modified"),
            lastmod=item.get("lastmod"),
            title=item.get("title") or "",
            text=item.get("text") or "",
            text_hash=item.get("text_hash"),
            simhash=int(simhash, 16) if simhash else None,
            words=int(item.get("words") or 0),
            near_duplicate_of=item.get("near_duplicate_of"),
            signals=dict(signals),
            noindex=bool(item.get("polite_noindex")),
            ai_input=item.get("polite_ai_input") is not False,
            language=item.get("language"),
            links=int(item.get("links") or 0),
            headers=headers,
            body=copy.body if copy is not None and fresh.store else None,
            fresh_until=fresh.fresh_until,
            no_store=not fresh.store,
        )
        metrics = self.ctx.metrics
        began = self.ctx.clock() if metrics is not None else 0.0
        try:
            outcome = await result(self.store.record_visit(rec, aliases_of(item), self.bounds))
        except PageStoreDown:
            # The store gave up on its database (the crawl is closing): the page is in
            # its spill file, written when a store opens on this state directory next.
            self.inc("spilled")
            item["revisit"] = "spilled"
            return item
        if metrics is not None:  # POLITE_METRICS_PORT: the page store's write latency
            metrics.page_written(self.ctx.clock() - began)
        item["revisit"] = outcome
        self.inc(f"stored/{outcome}")
        return item

    async def close_spider(self) -> None:
        if self.ctx.pages is not None and self.ctx.pages.down is None:
            await result(self.store.flush())
