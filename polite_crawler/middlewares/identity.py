"""Every request says who sent it: User-Agent with token and +URL, and From."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from scrapy import signals
from scrapy.exceptions import IgnoreRequest
from scrapy.settings import SETTINGS_PRIORITIES

from polite_crawler import __version__
from polite_crawler.defaults import DEMO_PORT, polite_settings
from polite_crawler.policy.identity import (
    Identity,
    IdentityError,
    build_identity,
    check_user_agent,
)
from polite_crawler.policy.network import is_test_host, parse_networks

if TYPE_CHECKING:
    from collections.abc import Sequence

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

    from polite_crawler.policy.network import Network

logger = logging.getLogger(__name__)

LOCAL_BOT_URL = f"http://127.0.0.1:{DEMO_PORT}/bot/"


def identity_from_settings(settings: BaseSettings) -> Identity:
    """The crawl's identity; a missing POLITE_BOT_URL falls back to the local bot page."""
    settings = polite_settings(settings)
    return build_identity(
        settings.get("POLITE_BOT_NAME"),
        __version__,
        settings.get("POLITE_BOT_URL") or LOCAL_BOT_URL,
        settings.get("POLITE_CONTACT"),
    )


def needs_bot_url(url: str, test_networks: Sequence[Network]) -> bool:
    """Whether fetching ``url`` needs POLITE_BOT_URL: any host but the operator's own."""
    return not is_test_host(urlsplit(url).hostname or "", test_networks)


def no_bot_url_message(url: str) -> str:
    """The refusal of a crawl of ``url`` without POLITE_BOT_URL (at start, and in ``scrapy
    crawl`` before it)."""
    return (f"refusing to crawl {url}: POLITE_BOT_URL is not set. Publish bot_page/ "
            "(make bot-page writes bot_page/index.html) where site owners can read it, "
            "and set POLITE_BOT_URL (and POLITE_CONTACT) to its address "
            "(-s POLITE_BOT_URL=... -s POLITE_CONTACT=...)")


class IdentityMiddleware:
    """Sets User-Agent and From on every request, and refuses a hidden identity.

    The crawl refuses to start when a setting or the spider asks for another
    User-Agent (a browser string above all), and when it would reach a host
    that is not loopback without a published bot page (POLITE_BOT_URL).
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        settings = polite_settings(crawler.settings)
        self.identity = identity_from_settings(settings)
        self.has_bot_url = bool(settings.get("POLITE_BOT_URL"))
        self.test_networks = parse_networks(settings.getlist("POLITE_TEST_NETWORKS"))
        self._bot_url_needed: dict[str, bool] = {}
        ua_priority = settings.getpriority("USER_AGENT") or 0
        user_set = ua_priority > SETTINGS_PRIORITIES["default"]
        configured = settings.get("USER_AGENT") if user_set else None
        spider = crawler.spider
        spider_ua = getattr(spider, "user_agent", None) if spider is not None else None
        for candidate in (configured, spider_ua):
            check_user_agent(candidate, self.identity)
        if spider is not None:
            for url in _start_urls(spider):
                self._check_bot_url(url)
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdentityMiddleware:
        return cls(crawler)

    def spider_opened(self, spider: Spider) -> None:
        logger.info("Crawling as %(ua)s", {"ua": self.identity.user_agent})

    def _needs_bot_url(self, url: str) -> bool:
        # Per request: with POLITE_BOT_URL set (every public crawl) no URL is parsed;
        # without it, each host is judged once (the answer is the host's alone).
        if self.has_bot_url:
            return False
        host = urlsplit(url).hostname or ""
        known = self._bot_url_needed.get(host)
        if known is None:
            if len(self._bot_url_needed) >= 65536:
                self._bot_url_needed.clear()
            known = self._bot_url_needed[host] = not is_test_host(host, self.test_networks)
        return known

    def _check_bot_url(self, url: str) -> None:
        if self._needs_bot_url(url):
            raise IdentityError(no_bot_url_message(url))

    def process_request(self, request: Request) -> None:
        if self._needs_bot_url(request.url):
            assert self.crawler.stats is not None
            self.crawler.stats.inc_value("polite/identity/refused_no_bot_url")
            raise IgnoreRequest(f"POLITE_BOT_URL is not set; not fetching {request.url}")
        sent = request.headers.get(b"User-Agent")
        if sent is not None and sent.decode("latin-1") != self.identity.user_agent:
            assert self.crawler.stats is not None
            self.crawler.stats.inc_value("polite/identity/user_agent_overridden")
            logger.warning(
                "Replaced the User-Agent a request carried (%(ua)r) with the crawler's own",
                {"ua": sent},
            )
        request.headers[b"User-Agent"] = self.identity.user_agent
        if self.identity.from_header:
            request.headers[b"From"] = self.identity.from_header
        elif b"From" in request.headers:
            del request.headers[b"From"]


def _start_urls(spider: Spider) -> list[str]:
    urls = list(getattr(spider, "start_urls", None) or [])
    urls.extend(getattr(spider, "polite_start_urls", None) or [])
    return [u for u in urls if isinstance(u, str)]


__all__ = ["IdentityError", "IdentityMiddleware", "identity_from_settings"]
