"""Scrapy's per-page log records, built only when their level is logged.

Scrapy's engine asks its log formatter for a "Crawled" record for every response
and its scraper for a "Scraped" record for every item, and drops both afterwards
when DEBUG is not logged. Building them (the Referer lookup, the flags, the
dict) is work on the hot path that the log level discards; a formatter method
that returns ``None`` logs nothing, so these return ``None`` below DEBUG.

The "Dropped" record of an item a pipeline drops (an exact duplicate, an alias)
names the exception by its text, not the exception itself: Scrapy's scraper keeps
the record in the frame that the exception's traceback points back to, a
reference cycle that held the item, its response and the page's readings (body,
main text, word hashes) until a full collection of the cyclic garbage collector.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.logformatter import LogFormatter, LogFormatterResult

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.http import Response
    from twisted.python.failure import Failure

# The loggers Scrapy logs these records with (scrapy/core/engine.py, scraper.py).
_ENGINE = logging.getLogger("scrapy.core.engine")
_SCRAPER = logging.getLogger("scrapy.core.scraper")


class PoliteLogFormatter(LogFormatter):
    """Scrapy's log formatter, minus the per-page records nobody will read."""

    def crawled(  # type: ignore[override]
        self, request: Request, response: Response, spider: Spider
    ) -> LogFormatterResult | None:
        if not _ENGINE.isEnabledFor(logging.DEBUG):
            return None
        return super().crawled(request, response, spider)

    def scraped(  # type: ignore[override]
        self, item: Any, response: Response | Failure | None, spider: Spider
    ) -> LogFormatterResult | None:
        if not _SCRAPER.isEnabledFor(logging.DEBUG):
            return None
        return super().scraped(item, response, spider)

    def dropped(  # type: ignore[override]
        self, item: Any, exception: BaseException, response: Response | Failure | None,
        spider: Spider,
    ) -> LogFormatterResult | None:
        record = super().dropped(item, exception, response, spider)
        if not _SCRAPER.isEnabledFor(record["level"]):
            return None
        return {"level": record["level"], "msg": record["msg"],
                "args": {"exception": str(exception), "item": item}}
