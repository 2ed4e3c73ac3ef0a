"""The descriptor budget extension with a real crawler (the add-on's settings): what it
plans at start, and an error the crawl's work logs for want of a descriptor (here, as a
spider's or a middleware's would be, through Scrapy's logging) closes the crawl once and
stays out of the log."""

from __future__ import annotations

import errno
import logging
import resource
from typing import TYPE_CHECKING, Any

from scrapy import Spider
from scrapy.utils.test import get_crawler

from polite_crawler.extensions.descriptors import DescriptorBudget, descriptor_plan
from tests.crawl import project_settings_dict

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


class _Spider(Spider):
    name = "descriptors"


def _budget(tmp_path: Path, **settings: Any) -> tuple[Any, DescriptorBudget]:
    crawler = get_crawler(_Spider, project_settings_dict(POLITE_STATE_DIR=str(tmp_path),
                                                         **settings))
    crawler._apply_settings()
    found = [m for m in crawler.extensions.middlewares if isinstance(m, DescriptorBudget)]
    return crawler, found[0]


def test_the_plan_counts_the_requests_asked_for_under_the_limit(tmp_path: Path) -> None:
    crawler, budget = _budget(tmp_path, CONCURRENT_REQUESTS=64, POLITE_KEEPALIVE_MAX=32)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft == hard or soft >= 1 << 20  # raised to the hard limit
    plan = descriptor_plan(crawler)
    assert plan is budget.plan
    assert (plan.limit, plan.requests, plan.idle) == (soft, 64, 32)
    assert crawler.settings.getint("CONCURRENT_REQUESTS") == 64


def test_an_exhaustion_logged_anywhere_closes_the_crawl_once_and_is_not_logged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    crawler, budget = _budget(tmp_path)
    budget.spider_opened()
    try:
        log = logging.getLogger("scrapy.core.scraper")
        with caplog.at_level(logging.INFO):
            for _ in range(3):
                try:
                    raise OSError(errno.EMFILE, "Too many open files")
                except OSError:
                    log.exception("Spider error processing <GET http://127.0.0.1/>")
            log.error("Another error", exc_info=ConnectionResetError(errno.ECONNRESET, "r"))
    finally:
        budget.spider_closed()
        from polite_crawler.context import polite_context

        pages = polite_context(crawler).pages
        if pages is not None:
            pages.close()
    assert budget.closing
    assert budget.errors == 3
    messages = [r.getMessage() for r in caplog.records]
    assert "Spider error processing <GET http://127.0.0.1/>" not in messages
    assert "Another error" in messages  # other errors are logged as before
    assert crawler.stats is not None
    assert crawler.stats.get_value("polite/descriptors/errors") == 3
