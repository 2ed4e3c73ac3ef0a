"""Hosts the spider's author names in code are the author's choice, as ``-a url`` is.

A spider middleware (order 900, next to the spider) with only ``process_start``: every
request the spider's ``start()`` yields (``start_urls``, a ``SitemapSpider``'s
``sitemap_urls``, an ``XMLFeedSpider``'s feeds, requests a spider builds itself there)
has its host and port allowed by the address policy
(:meth:`polite_crawler.policy.addresses.AddressPolicy.add_start_url`), exactly as a
start URL given with ``-a url`` is: a loopback or private test web named by the author
is crawled without POLITE_ALLOW_NETWORKS.

What arrives from the web (a link on a page, a redirect, an entry of a sitemap or a
feed, a callback's request) is not in ``start()``'s output and is judged by the
address policy as before: the SSRF guard does not weaken. A start request's host the
author named by a *name* is still held to the address it first resolved to
(:class:`~polite_crawler.policy.addresses.AddressPolicy`).

Start requests only: nothing here runs per response.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import Request

from polite_crawler.context import polite_context
from polite_crawler.middlewares.addresses import address_policy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from scrapy.crawler import Crawler


class AuthoredHostsMiddleware:
    """Allows the hosts of the requests ``start()`` yields (see the module docstring)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AuthoredHostsMiddleware:
        return cls(crawler)

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        policy = address_policy(self.crawler)
        hosts = polite_context(self.crawler).start_hosts
        async for item in start:
            if isinstance(item, Request):
                host = policy.add_start_url(item.url)
                if host is not None:
                    hosts.add(host)
            yield item


__all__ = ["AuthoredHostsMiddleware"]
