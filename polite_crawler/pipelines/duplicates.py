"""Exact duplicates become aliases and are dropped; near duplicates are linked."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import DropItem

from polite_crawler.items import PageItem
from polite_crawler.pipelines import ALIAS, NOT_REQUESTED, PagePipeline
from polite_crawler.pipelines.store import fetch_record, revisit_bounds
from polite_crawler.store.aio import result
from polite_crawler.store.pages import PageStoreDown

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class DuplicatesPipeline(PagePipeline):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.bounds = revisit_bounds(crawler.settings)

    async def process_item(self, item: Any) -> Any:
        if not isinstance(item, PageItem):
            return item
        revisit = item.get("revisit")
        if revisit == ALIAS:
            self.inc("alias_revisited")
            raise DropItem("an alias, revisited", log_level="DEBUG")
        if revisit == "not_modified" or revisit in NOT_REQUESTED:
            return item
        simhash = item.get("simhash")
        try:
            found = await result(self.store.dedupe(
                item["canonical_url"], item.get("text_hash"),
                int(simhash, 16) if simhash else None, int(item.get("words") or 0),
                float(item.get("fetched_at") or self.ctx.clock())))
        except PageStoreDown:
            return item  # the store gave up: the page goes to its spill file unjudged

        if found.duplicate_of is not None:
            self.inc("duplicate")
            # Its own validators, freshness and copy: the next crawl revalidates it.
            rec = fetch_record(item, "duplicate", found.duplicate_of, self.ctx.clock())
            if rec is not None:
                await result(self.store.record_fetch(rec, self.bounds))
            logger.debug("%(url)s duplicates %(first)s: stored as an alias",
                         {"url": item["canonical_url"], "first": found.duplicate_of})
            raise DropItem(f"duplicate of {found.duplicate_of}", log_level="DEBUG")
        item["near_duplicate_of"] = found.near_duplicate_of
        if found.near_duplicate_of is not None:
            self.inc("near_duplicate")
        return item
