"""Every request signed (Web Bot Auth, RFC 9421), so a site can prove it is this crawler.

Order 995: after the identity middleware (980) and the gate (990), so the
signature is made when every header the request carries is final and the
request is about to leave; robots.txt requests, sitemaps, pages, redirect hops
and retries all come this way (each is a request of its own through the
frontier). Nothing below it changes a header: the download handler adds only
the Host header, from the URL, and ``@authority`` is computed the same way (or
taken from a Host header the request already carries).

Without POLITE_SIGNING_KEY the middleware is not installed (``NotConfigured``)
and no request changes. The rules live in :mod:`polite_crawler.policy.signing`.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import IgnoreRequest, NotConfigured

from polite_crawler.defaults import polite_settings
from polite_crawler.middlewares.identity import LOCAL_BOT_URL
from polite_crawler.policy.signing import (
    SigningError,
    describe,
    parse_key_paths,
    signer_from_settings,
)

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

    from polite_crawler.policy.signing import KeyRing, RequestSigner

logger = logging.getLogger(__name__)


def signer_for(settings: BaseSettings) -> tuple[RequestSigner, KeyRing, bool] | None:
    """The signer, key ring and whether the key directory file was checked, as the
    settings name them; None without POLITE_SIGNING_KEY. Raises :class:`SigningError`
    (the middleware at start, and ``scrapy crawl`` before it, refuse on it)."""
    settings = polite_settings(settings)
    paths = parse_key_paths(settings.get("POLITE_SIGNING_KEY"))
    if not paths:
        return None
    directory_path = settings.get("POLITE_SIGNATURE_DIRECTORY") or ""
    directory = None
    if directory_path and os.path.exists(directory_path):
        try:
            with open(directory_path, encoding="utf-8") as fh:
                directory = (directory_path, fh.read())
        except (OSError, UnicodeDecodeError) as exc:
            raise SigningError(f"cannot read the key directory {directory_path}: {exc}") \
                from None
    signer, ring = signer_from_settings(
        paths,
        settings.get("POLITE_SIGNATURE_AGENT") or "",
        settings.get("POLITE_BOT_URL") or LOCAL_BOT_URL,
        ttl=settings.getint("POLITE_SIGNATURE_TTL"),
        directory=directory,
    )
    return signer, ring, directory is not None


class SigningMiddleware:
    """Adds Signature-Agent, Signature-Input and Signature to every request."""

    def __init__(self, crawler: Crawler) -> None:
        found = signer_for(crawler.settings)
        if found is None:
            raise NotConfigured  # off by default: not worth a warning
        self.signer, self.ring, self.directory_checked = found
        self.crawler = crawler
        self.clock = time.time  # epoch seconds: created and expires are absolute
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SigningMiddleware:
        return cls(crawler)

    def spider_opened(self, spider: Spider) -> None:
        info = describe(self.ring, self.signer.agent)
        logger.info(
            "Signing every request (Web Bot Auth): keyid %(keyid)s, key directory "
            "%(directory)s%(checked)s",
            {**info, "checked": "" if self.directory_checked else
             " (no local copy to check the key against; POLITE_SIGNATURE_DIRECTORY)"},
        )

    def process_request(self, request: Request) -> None:
        host = request.headers.get(b"Host")
        authority = host.decode("latin-1").strip().lower() if host else None
        stats = self.crawler.stats
        assert stats is not None
        try:
            fields = self.signer.headers(request.method, request.url, self.clock(),
                                         authority=authority)
        except SigningError as exc:
            stats.inc_value("polite/signing/unsignable")
            logger.warning("Not sending %(request)s: it cannot be signed (%(why)s)",
                           {"request": request, "why": exc})
            raise IgnoreRequest(f"cannot sign {request.url}") from None
        for name, value in fields.items():
            request.headers[name] = value  # replaces a retry's earlier signature
        stats.inc_value("polite/signing/signed")


__all__ = ["SigningError", "SigningMiddleware", "signer_for"]
