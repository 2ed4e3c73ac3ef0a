"""Duplicate requests by canonical URL, remembered on disk across restarts."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from polite_crawler.policy.urls import canonicalize

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from polite_crawler.interfaces import URLQueue


def url_fingerprint(canonical: str) -> bytes:
    """16 bytes naming a GET of a URL already in canonical form (the seen set's key)."""
    return hashlib.blake2b(canonical.encode("utf-8"), digest_size=16).digest()


def canonical_fingerprint(request: Request) -> bytes:
    """16 bytes naming the request by its canonical URL (and method and body, if not GET)."""
    canonical = canonicalize(request.url)
    if request.method in ("GET", "HEAD"):
        return url_fingerprint(canonical)
    h = hashlib.blake2b(digest_size=16)
    h.update(canonical.encode("utf-8"))
    h.update(b"\0" + request.method.encode("ascii") + b"\0" + request.body)
    return h.digest()


class CanonicalDupeFilter:
    """Scrapy's dupefilter interface over the frontier's durable seen set.

    The frontier scheduler builds it around its own queue store, so a request is
    marked seen in the same transaction that queues it.
    """

    def __init__(self, store: URLQueue | None = None) -> None:
        self.store = store

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CanonicalDupeFilter:
        return cls()

    def open(self) -> None:
        return None

    def close(self, reason: str) -> None:
        return None

    def request_seen(self, request: Request) -> bool:
        if self.store is None:
            raise RuntimeError("CanonicalDupeFilter works inside the frontier scheduler")
        return not self.store.add_seen(canonical_fingerprint(request))

    def seen_url(self, canonical: str) -> bool:
        """Mark a canonical URL seen (a redirect's target, a page's rel=canonical)."""
        if self.store is None:
            raise RuntimeError("CanonicalDupeFilter works inside the frontier scheduler")
        return not self.store.add_seen(url_fingerprint(canonical))

    def log(self, request: Request, spider: object) -> None:
        return None
