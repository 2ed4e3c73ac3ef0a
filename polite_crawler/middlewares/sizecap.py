"""Body size cap and content decoding: a body beyond the cap is cut and kept.

Replaces Scrapy's HttpCompressionMiddleware (same place, 590): it asks for
``Accept-Encoding: gzip, deflate, br, zstd`` and decodes all four, but never
inflates more than the cap (a gzip bomb stops at POLITE_MAX_BYTES of output).

Scrapy's own DOWNLOAD_MAXSIZE cancels a download that grows too large and
drops what came; here the body is *cut* and the first part kept (a response size
cap, so one pathological file cannot exhaust memory, and what came is still
read), which also keeps the first 500 KiB of an oversized robots.txt
(RFC 9309 section 2.5: a crawler must parse at least 500 kibibytes).

* On the wire: a ``bytes_received`` handler stops the transfer
  (``StopDownload(fail=False)``) once a response passes its cap; the
  response arrives with what was received and the ``download_stopped`` flag.
* Decoded: each content coding is decoded in bounded steps and stops at the
  cap. The gate (990, before this on the way back) has decoded the head of the
  body for its challenge check; it keeps that :class:`Decoding` for the response
  (:func:`response_decodings`) and the decoding goes on from there: a body is
  decoded once.

A cut response carries the ``polite_truncated`` flag and
``meta["polite_truncated"] = "wire" | "decoded"``; stats
``polite/sizecap/cut/wire`` and ``polite/sizecap/cut/decoded`` count them.
Caps: ``meta["polite_max_bytes"]`` for one request, else robots.txt requests
(``meta["polite_robots"]``) get ``max(POLITE_ROBOTS_MAX_BYTES, 500 KiB)``, else
POLITE_MAX_BYTES.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import StopDownload
from scrapy.http import TextResponse
from scrapy.responsetypes import responsetypes

from polite_crawler.defaults import polite_settings
from polite_crawler.policy.codings import (
    ACCEPT_ENCODING,
    DECODED,
    Decoding,
    split_encodings,
)

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

ROBOTS_MIN_BYTES = 500 * 1024  # RFC 9309 section 2.5
_RX_KEY = "_polite_rx_bytes"
_DECODINGS_ATTR = "_polite_response_decodings"


class ResponseDecodings:
    """The body decodings the gate began, each kept with its response for the size cap.

    Weak on the response: a response dropped on the way (a redirect, a stop) takes its
    decoding with it; and never in the request's meta, which a redirect or retry copies.
    """

    def __init__(self) -> None:
        self._kept: weakref.WeakKeyDictionary[Response, Decoding] = weakref.WeakKeyDictionary()

    def keep(self, response: Response, decoding: Decoding) -> None:
        self._kept[response] = decoding

    def take(self, response: Response) -> Decoding | None:
        return self._kept.pop(response, None)


def response_decodings(crawler: Crawler) -> ResponseDecodings:
    """The crawl's :class:`ResponseDecodings` (made on first use, kept on the crawler)."""
    kept: ResponseDecodings | None = getattr(crawler, _DECODINGS_ATTR, None)
    if kept is None:
        kept = ResponseDecodings()
        setattr(crawler, _DECODINGS_ATTR, kept)
    return kept


class SizeCapMiddleware:
    """Cut bodies at the cap (on the wire and decoded) and decode content codings."""

    def __init__(self, crawler: Crawler) -> None:
        settings = polite_settings(crawler.settings)
        self.crawler = crawler
        self.max_bytes = max(1, settings.getint("POLITE_MAX_BYTES"))
        self.robots_max_bytes = max(
            ROBOTS_MIN_BYTES,
            settings.getint("POLITE_ROBOTS_MAX_BYTES"),
        )
        crawler.signals.connect(self.bytes_received, signal=signals.bytes_received)
        self._decodings = response_decodings(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SizeCapMiddleware:
        return cls(crawler)

    def cap_for(self, request: Request) -> int:
        explicit = request.meta.get("polite_max_bytes")
        if explicit:
            return int(explicit)
        if request.meta.get("polite_robots"):
            return self.robots_max_bytes
        return self.max_bytes

    def bytes_received(self, data: bytes, request: Request, spider: Any = None) -> None:
        got = request.meta.get(_RX_KEY, 0) + len(data)
        request.meta[_RX_KEY] = got
        if got > self.cap_for(request):
            raise StopDownload(fail=False)

    def process_request(self, request: Request) -> None:
        request.meta.pop(_RX_KEY, None)
        request.headers.setdefault(b"Accept-Encoding", ACCEPT_ENCODING)

    def process_response(self, request: Request, response: Response) -> Response:
        request.meta.pop(_RX_KEY, None)
        cap = self.cap_for(request)
        body = response.body
        cut: str | None = None
        if len(body) > cap:
            body = body[:cap]
            cut = "wire"
        codings = split_encodings(response.headers.getlist(b"Content-Encoding"))
        left = codings
        if codings and request.method != "HEAD":
            # The gate's decoding of this very body, when it began one (not of a body
            # cut here on the wire, nor of another response a middleware put instead).
            decoding = self._decodings.take(response)
            if decoding is None or decoding.body is not body or decoding.codings != codings:
                decoding = Decoding(body, codings)
            body, left, truncated = decoding.capped(cap)
            if truncated and cut is None:
                cut = "decoded"
            if left:
                # Counted: the body goes on encoded (an unknown coding, a corrupt
                # stream, or br on a brotli that cannot decode under the cap).
                logger.debug(
                    "Could not decode %(codings)r of %(url)s",
                    {"codings": left, "url": response.url},
                )
                if self.crawler.stats is not None:
                    self.crawler.stats.inc_value("polite/sizecap/undecoded")
                    # Named when it is one the crawler decodes (a server names any).
                    coding = left[-1].decode("latin-1") if left[-1] in DECODED else "other"
                    self.crawler.stats.inc_value(f"polite/sizecap/undecoded/{coding}")
        if body is response.body and left == codings:
            return response
        stats = self.crawler.stats
        kwargs: dict[str, Any] = {"body": body}
        if left != codings:
            headers = response.headers.copy()
            if left:
                headers[b"Content-Encoding"] = b", ".join(left)
            else:
                del headers[b"Content-Encoding"]
            kwargs["headers"] = headers
            respcls = responsetypes.from_args(headers=headers, url=response.url, body=body)
            kwargs["cls"] = respcls
            if issubclass(respcls, TextResponse):
                kwargs["encoding"] = None
        if cut is not None:
            kwargs["flags"] = [*response.flags, "polite_truncated"]
            request.meta["polite_truncated"] = cut
            if stats is not None:
                stats.inc_value("polite/sizecap/cut")
                stats.inc_value(f"polite/sizecap/cut/{cut}")
            logger.info(
                "Cut %(url)s at %(cap)d bytes (%(where)s)",
                {"url": response.url, "cap": cap, "where": cut},
            )
        return _replace(response, kwargs)


def _replace(response: Response, kwargs: dict[str, Any]) -> Response:
    """``response.replace(**kwargs)`` that reads none of the attributes given anew.

    ``replace`` reads every attribute of the old response, and the ``encoding`` of a
    TextResponse whose body is still gzip is guessed from those bytes (charset
    auto-detection over binary: milliseconds a page, for an answer thrown away).
    """
    cls = kwargs.pop("cls", response.__class__)
    for name in response.attributes:
        if name not in kwargs:
            kwargs[name] = getattr(response, name)
    replaced: Response = cls(**kwargs)
    return replaced
