"""The robots.txt book's numbers a test builds one with: the crawl's declared defaults."""

from __future__ import annotations

from typing import Any

from polite_crawler.defaults import POLITE_DEFAULTS

ROBOTS_NUMBERS: dict[str, Any] = {
    "ttl": POLITE_DEFAULTS["POLITE_ROBOTS_TTL"],
    "max_bytes": POLITE_DEFAULTS["POLITE_ROBOTS_MAX_BYTES"],
    "retry_min": POLITE_DEFAULTS["POLITE_ROBOTS_RETRY_MIN"],
    "retry_max": POLITE_DEFAULTS["POLITE_ROBOTS_RETRY_MAX"],
}
