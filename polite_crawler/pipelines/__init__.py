"""Item pipelines: canonical identity and fingerprints, duplicates, storage.

Only :class:`polite_crawler.items.PageItem` items are pages; any other item
passes through untouched.

* 100 :class:`.identity.PageIdentityPipeline`: canonical URL, text hash, SimHash.
* 200 :class:`.duplicates.DuplicatesPipeline`: an exact duplicate (same
  normalised main text as a stored page under another URL) is recorded as an
  alias of the first canonical URL (with its own validators, freshness and copy, in
  ``url_fetches``) and dropped; a near duplicate is linked to
  the first page of its cluster (``near_duplicate_of``) and kept.
* 300 :class:`.store.PageStorePipeline`: the page store (validators, copy,
  revisit interval), or, for a 304, only the visit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polite_crawler.backend import page_store
from polite_crawler.context import polite_context

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from polite_crawler.store.pages import PageStore

# Pages that were not requested (served from the store): nothing to store or compare.
NOT_REQUESTED = frozenset({"fresh", "not_due", "lastmod"})
# The answer for an alias (an exact duplicate, a rel=canonical alias) from its own fetch
# record: the conditional-request middleware recorded the visit; dropped again.
ALIAS = "alias"


class PagePipeline:
    """Shared set-up: the crawl's page store, clock and stats."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.ctx = polite_context(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        return cls(crawler)

    @property
    def store(self) -> PageStore:
        return page_store(self.crawler)

    def inc(self, key: str, n: int = 1) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(f"polite/pages/{key}", n)
