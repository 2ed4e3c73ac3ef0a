"""The stored item: one page.

:class:`PageItem` is a plain Scrapy item, so feed exports work as usual
(``scrapy crawl site -a url=... -O pages.jsonl``). :func:`page_item` builds it
from a response; the pipelines (:mod:`polite_crawler.pipelines`) fill in the
fingerprints, the duplicate links and the revisit outcome, and store it.

The page's copy (body and headers, kept for 304 reuse) travels with the item
as the private attribute ``_polite_copy``: it is never exported.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import scrapy

from polite_crawler.analysis import page_text, page_words
from polite_crawler.policy.urls import URLError, canonicalize

if TYPE_CHECKING:
    from collections.abc import Mapping

    from scrapy.http import Response

# Meta keys the conditional-request middleware sets on a response it made from the store.
NOT_MODIFIED = "polite_not_modified"  # True: the body is the stored copy
REVISIT = "polite_revisit"  # "not_modified" (a 304 came), "fresh", "not_due", "lastmod"
FETCHED_AT = "polite_fetched_at"  # epoch seconds of the exchange
LASTMOD = "polite_lastmod"  # the sitemap's lastmod of the URL (discovery)

# Response headers not kept with the copy: the transfer's, not the content's.
_NOT_KEPT = frozenset({
    "connection", "keep-alive", "transfer-encoding", "content-encoding", "content-length",
    "set-cookie", "proxy-authenticate", "trailer", "upgrade", "te",
})


class PageRulesItem(scrapy.Item):
    """An item that asks for its page's rules: the page-rules middleware fills these
    fields (from meta robots, X-Robots-Tag and content signals) on every item of this
    class (or any scrapy.Item declaring them) that a callback yields, and clears its
    text fields on a noindex page. Other items are left as the spider yielded them."""

    polite_noindex = scrapy.Field()
    polite_nofollow = scrapy.Field()
    polite_signals = scrapy.Field()  # {"search", "ai_input", "ai_train": True/False/None}
    polite_ai_input = scrapy.Field()  # False: text held back from AI-input exports


class PageItem(PageRulesItem):
    """One page, as stored and exported."""

    url = scrapy.Field()  # as requested (the first URL of a redirect chain)
    final_url = scrapy.Field()  # after redirects
    canonical_url = scrapy.Field()  # identity: canonical form, or the same-host rel=canonical
    status = scrapy.Field()
    fetched_at = scrapy.Field()  # epoch seconds
    etag = scrapy.Field()
    last_modified = scrapy.Field()
    lastmod = scrapy.Field()  # the sitemap's
    title = scrapy.Field()
    text = scrapy.Field()  # main text, no navigation or boilerplate
    text_hash = scrapy.Field()  # of the normalised main text (exact duplicates)
    simhash = scrapy.Field()  # 16 hex digits (near duplicates)
    words = scrapy.Field()
    near_duplicate_of = scrapy.Field()  # first page of its near-duplicate cluster
    language = scrapy.Field()
    links = scrapy.Field()  # out-links on the page
    # Page rules and content signals (PageRulesItem's fields, set by middlewares.pagerules).
    # "new", "changed", "unchanged" (fetched), "not_modified" (304), or, when the
    # page was not requested: "fresh", "not_due", "lastmod".
    revisit = scrapy.Field()


@dataclass(frozen=True)
class PageCopy:
    """What the store keeps to answer a later 304: the headers and the decoded body."""

    headers: dict[str, str]
    body: bytes


def copy_headers(headers: Any) -> dict[str, str]:
    """A response's headers worth keeping with its copy, lower-case names."""
    out: dict[str, str] = {}
    for raw_name, values in headers.items():
        name = (raw_name.decode("latin-1") if isinstance(raw_name, bytes) else raw_name).lower()
        if name in _NOT_KEPT:
            continue
        out[name] = ", ".join(
            v.decode("latin-1") if isinstance(v, bytes) else str(v) for v in values)
    return out


def page_copy(item: Any) -> PageCopy | None:
    copy = getattr(item, "_polite_copy", None)
    return copy if isinstance(copy, PageCopy) else None


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    return value.strip() if value else None


def page_item(response: Response, *, canonical_url: str | None = None, title: str | None = None,
              links: int | None = None, **fields: Any) -> PageItem:
    """The item for an HTML response, its copy attached.

    ``canonical_url``, ``title`` and ``links`` are taken when the caller knows
    them already (the ``site`` spider's link parse does); any other field can
    be passed as a keyword.
    """
    meta = response.meta
    redirects = meta.get("redirect_urls") or []
    body = response.body
    main = page_text(response)
    headers = copy_headers(response.headers)
    if canonical_url is None:
        try:
            canonical_url = canonicalize(response.url)
        except URLError:
            canonical_url = response.url
    item = PageItem(
        url=redirects[0] if redirects else response.url,
        final_url=response.url,
        canonical_url=canonical_url,
        status=response.status,
        # The exchange's end as the gate measured it, else now.
        fetched_at=float(meta.get(FETCHED_AT) or meta.get("polite_end") or time.time()),
        etag=_header(headers, "etag"),
        last_modified=_header(headers, "last-modified"),
        lastmod=meta.get(LASTMOD),
        title=title if title is not None else main.title,
        text=main.text,
        language=main.language,
        links=links or 0,
        revisit=meta.get(REVISIT, ""),
    )
    for name, value in fields.items():
        item[name] = value
    item._polite_copy = PageCopy(headers, body)
    item._polite_words = page_words(response)  # the fingerprints read them (pipelines.identity)
    return item
