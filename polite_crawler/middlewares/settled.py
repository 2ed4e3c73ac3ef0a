"""A failed exchange the gate has settled ends in one log line, not a traceback.

Order 40: the last downloader middleware to see an exception. By then the gate
(990) has classified the failure (a timeout, a reset, a malformed response, a
head too large ...), counted it, set the origin's backoff or stopped it, and
either re-queued a retry (then this middleware never sees the exception) or
given up. A failure it gave up on would reach Scrapy's scraper, which logs every
download error but an IgnoreRequest at ERROR with a full traceback: on the open
web that is one traceback per broken server, and hostile servers make many.

Here such a failure becomes :class:`DownloadGaveUp` (an IgnoreRequest whose
``__cause__`` is the original exception, so a spider's errback can still look
at it), logged once at INFO with the verdict, and counted
(``polite/settled/<exception class>``). A failure the gate did not settle is
left alone: it is not a verdict on a site but a fault worth its traceback.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class DownloadGaveUp(IgnoreRequest):
    """The exchange failed and the crawler is done with it (see ``__cause__``)."""

    def __init__(self, message: str, verdict: str) -> None:
        super().__init__(message)
        self.verdict = verdict


class SettledFailureMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SettledFailureMiddleware:
        return cls(crawler)

    def process_exception(self, request: Request, exception: Exception) -> None:
        meta = request.meta
        verdict = meta.get("polite_verdict")
        if isinstance(exception, IgnoreRequest) or verdict is None \
                or not meta.get("polite_dispatched"):
            return
        name = type(exception).__name__
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(f"polite/settled/{name}")
        message = str(exception).splitlines()[0][:300] if str(exception) else ""
        logger.info(
            "Download of %(url)s failed: %(error)s%(message)s (%(verdict)s)",
            {"url": request.url[:300], "error": name,
             "message": f": {message}" if message else "", "verdict": verdict},
        )
        raise DownloadGaveUp(f"{name}: {message}", str(verdict)) from exception


__all__ = ["DownloadGaveUp", "SettledFailureMiddleware"]
