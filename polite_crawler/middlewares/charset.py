"""A charset label that cannot decode text is dropped before anyone reads the page.

``Content-Type: text/html; charset=base64`` (or uu, zlib, rot13, hex, idna ...)
makes Scrapy's ``response.text``, ``.css`` and ``.xpath`` raise, so the page would
be lost without a word. The label is removed and the encoding sniffed from the
body as if none had been sent; the decision is counted
(``polite/charset/unusable_label``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.http import TextResponse

from polite_crawler.policy.charset import strip_unusable_charset

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)


class CharsetMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CharsetMiddleware:
        return cls(crawler)

    def process_response(self, request: Request, response: Response) -> Response:
        if not isinstance(response, TextResponse):
            return response
        raw = response.headers.get(b"Content-Type")
        if not raw:
            return response
        fixed = strip_unusable_charset(raw.decode("latin-1"))
        if fixed is None:
            return response
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value("polite/charset/unusable_label")
        logger.debug("Ignoring the charset label of %(url)s (%(ct)r): not a text encoding",
                     {"url": response.url, "ct": raw})
        headers = response.headers.copy()
        headers[b"Content-Type"] = fixed.encode("latin-1")
        return response.replace(headers=headers, encoding=None)
