"""Canonical identity and content fingerprints of every page item."""

from __future__ import annotations

from typing import Any

from polite_crawler.items import PageItem
from polite_crawler.pipelines import PagePipeline
from polite_crawler.policy.simhash import fingerprints
from polite_crawler.policy.urls import URLError, canonicalize


class PageIdentityPipeline(PagePipeline):
    """Fills ``canonical_url`` (when the spider did not), ``text_hash``, ``simhash``, ``words``."""

    def process_item(self, item: Any) -> Any:
        if not isinstance(item, PageItem):
            return item
        if not item.get("canonical_url"):
            url = item.get("final_url") or item.get("url", "")
            try:
                item["canonical_url"] = canonicalize(url)
            except URLError:
                item["canonical_url"] = url
        text = item.get("text") or ""
        if text.strip():
            # The words the item was built with, when its text is still theirs.
            item["text_hash"], h, n = fingerprints(text, getattr(item, "_polite_words", None))
            item["simhash"] = f"{h:016x}"
            item["words"] = n
        else:  # no text (or a noindex page): nothing to compare
            item["text_hash"] = None
            item["simhash"] = None
            item["words"] = 0
        return item
