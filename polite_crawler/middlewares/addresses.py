"""The SSRF guard's first check: the host as written, before anything is sent.

Order 50, the first downloader middleware a request meets. Every request (a
link, a redirect hop, a sitemap entry, a robots.txt request the frontier made
for a new origin) passes :meth:`AddressPolicy.check_url`: a host that is, in
any spelling, a loopback, private, link-local, CGNAT, multicast, unspecified
or reserved address, or a special-use name (``localhost``, ``*.internal`` ...),
is refused unless the operator allowed it (a start URL's host and port, or
POLITE_ALLOW_NETWORKS). A redirect to such an address is refused at this hop:
Scrapy's RedirectMiddleware hands the hop back to the scheduler, so it comes
through here like any request.

The second check, on the address DNS returned and the connection reached, is
in :mod:`polite_crawler.resolver` and :mod:`polite_crawler.handlers`; both use
the crawl's one :class:`AddressPolicy` (:func:`address_policy`). Every refusal,
whichever layer made it, goes through :func:`record_refusal`: logged at
WARNING, counted (``polite/addresses/refused/<reason>``), written to the access
log as ``refused:<reason>`` (``sent`` null: nothing was sent), and its origin
stopped for the run (``refused:<reason>``), so the frontier drops what it had
queued for it and does not ask again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import IgnoreRequest

from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings
from polite_crawler.policy.addresses import AddressPolicy, AddressRefused

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

    from polite_crawler.interfaces import FrontierService

logger = logging.getLogger(__name__)

_ATTR = "_polite_address_policy"
# Refusals that concern one URL, not its origin's address.
PER_URL_REASONS = frozenset({"url-too-long", "userinfo"})


class AddressRefusedError(AddressRefused, IgnoreRequest):
    """A request the address policy refused; Scrapy drops it without a traceback."""


def address_policy(crawler: Crawler) -> AddressPolicy:
    """The crawl's address policy (one per crawler, shared by every layer)."""
    policy = getattr(crawler, _ATTR, None)
    if policy is None:
        settings = polite_settings(crawler.settings)
        policy = AddressPolicy(
            allow_networks=settings.getlist("POLITE_ALLOW_NETWORKS"),
            max_url_length=settings.getint("POLITE_MAX_URL_LENGTH"),
        )
        setattr(crawler, _ATTR, policy)
    return policy


def start_urls_of(spider: Spider | None) -> list[str]:
    """The URLs the operator named: ``polite_start_urls`` (``-a url/urls``) and ``start_urls``."""
    if spider is None:
        return []
    urls = list(getattr(spider, "polite_start_urls", None) or [])
    urls.extend(getattr(spider, "start_urls", None) or [])
    return [u for u in urls if isinstance(u, str)]


def allow_start_urls(crawler: Crawler, spider: Spider | None) -> None:
    """Allow the hosts the operator named (idempotent)."""
    policy = address_policy(crawler)
    ctx = polite_context(crawler)
    for url in start_urls_of(spider):
        host = policy.add_start_url(url)
        if host is not None:
            ctx.start_hosts.add(host)


def record_refusal(crawler: Crawler, request: Request, refusal: AddressRefused) -> None:
    """Log, count and access-log one refusal, and stop its origin for the run.

    Called where the refusal is made (the middleware, the download handler):
    a later middleware may replace the exception (the robots.txt middleware
    turns any failure of a robots.txt request into its own IgnoreRequest).
    """
    if request.meta.get("polite_refused") == refusal.reason:
        return  # already recorded
    request.meta["polite_refused"] = refusal.reason
    stats = crawler.stats
    if stats is not None:
        stats.inc_value("polite/addresses/refused")
        stats.inc_value(f"polite/addresses/refused/{refusal.reason}")
    redirected = request.meta.get("redirect_urls")
    logger.warning(
        "Refused %(url)s%(address)s%(via)s: %(why)s; nothing was sent",
        {
            "url": _short(request.url),
            "why": refusal_text(refusal.reason),
            "address": f" (address {refusal.address})" if refusal.address else "",
            "via": f" (redirected from {_short(redirected[-1])})" if redirected else "",
        },
    )
    ctx = polite_context(crawler)
    if ctx.access_log is not None:
        ctx.access_log.record(
            request=request,
            sent=None,  # no byte of the request left the crawler
            verdict=f"refused:{refusal.reason}",
            rest=request.meta.get("polite_rest"),
        )
    origin = request.meta.get("polite_origin")
    frontier: FrontierService | None = ctx.frontier
    if origin and frontier is not None and refusal.reason not in PER_URL_REASONS:
        # The origin's address is refused: nothing from it can be fetched this run.
        frontier.stop(origin, f"refused:{refusal.reason}")


# Reasons that are about the URL's form, not about where its host is.
_FORM_REASONS = frozenset({"url-too-long", "userinfo", "scheme", "invalid-host"})


def refusal_text(reason: str) -> str:
    """One refusal said with its rule and the setting that governs it.

    >>> refusal_text("loopback")  # doctest: +ELLIPSIS
    'the address policy refuses loopback hosts (SSRF guard) unless the spider names...'
    """
    if reason in _FORM_REASONS:
        return f"the address policy refuses this URL ({reason})"
    return (f"the address policy refuses {reason} hosts (SSRF guard) unless the spider "
            "names them in code (start_urls, sitemap_urls, start(), -a url) or "
            "POLITE_ALLOW_NETWORKS lists their network")


def _short(url: str, limit: int = 200) -> str:
    return url if len(url) <= limit else f"{url[:limit]}... ({len(url)} characters)"


class AddressPolicyMiddleware:
    """Refuses requests to internal addresses before anything is sent."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.policy = address_policy(crawler)
        allow_start_urls(crawler, crawler.spider)
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AddressPolicyMiddleware:
        return cls(crawler)

    def spider_opened(self, spider: Spider) -> None:
        allow_start_urls(self.crawler, spider)
        if self.policy.allow_networks:
            logger.info("Internal networks the operator allowed: %(nets)s",
                        {"nets": ", ".join(map(str, self.policy.allow_networks))})

    def process_request(self, request: Request) -> None:
        reason = self.policy.check_url(request.url)
        if reason is not None:
            refusal = AddressRefusedError(reason, request.url)
            record_refusal(self.crawler, request, refusal)
            raise refusal

    def process_exception(self, request: Request, exception: Exception) -> None:
        if isinstance(exception, AddressRefused):
            record_refusal(self.crawler, request, exception)


__all__ = [
    "AddressPolicyMiddleware",
    "AddressRefusedError",
    "address_policy",
    "allow_start_urls",
    "record_refusal",
    "refusal_text",
    "start_urls_of",
]
