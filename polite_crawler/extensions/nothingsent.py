"""A crawl that sent nothing because a rule refused it all ends saying so.

When the spider goes idle with no response received at all and at least one request
refused by one of the crawler's own rules, the crawl closes with the reason
:data:`polite_crawler.closing.NOTHING_SENT` (``scrapy crawl`` exits with its status,
:data:`polite_crawler.closing.EXIT_STATUS`) instead of "finished", and one WARNING line
names the rule and the setting or command that governs it. A site that did not answer
(connection refused, timeouts) is not a rule: that crawl ends as before.

The rules, read from their stats: the address policy (``polite/addresses/refused/*``,
POLITE_ALLOW_NETWORKS), the opt-out list (``polite/optout/dropped``, ``scrapy forget``),
a site's remembered refusal (``polite/blocks/dropped``, ``scrapy unblock``), no bot page
(``polite/identity/refused_no_bot_url``, POLITE_BOT_URL).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import CloseSpider

from polite_crawler.closing import NOTHING_SENT

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

_ADDRESSES = "polite/addresses/refused/"


def nothing_sent_line(stats: dict[str, Any]) -> str | None:
    """The one line for a crawl that received nothing, or None (something came back,
    or no rule refused anything).

    >>> nothing_sent_line({"polite/addresses/refused/loopback": 2})  # doctest: +ELLIPSIS
    'Nothing was sent: the address policy refused every host (loopback, 2 requests)...'
    >>> nothing_sent_line({"downloader/response_count": 1, "polite/optout/dropped": 1})
    """
    if stats.get("downloader/response_count"):
        return None
    said = []
    reasons = {k[len(_ADDRESSES):]: int(v) for k, v in stats.items() if k.startswith(_ADDRESSES)}
    if reasons:
        which = ", ".join(f"{r}, {n} request{'s' if n != 1 else ''}"
                          for r, n in sorted(reasons.items()))
        said.append(f"the address policy refused every host ({which}): name the host in "
                    "the spider (start_urls, sitemap_urls, start(), -a url) or list its "
                    "network in POLITE_ALLOW_NETWORKS")
    if stats.get("polite/blocks/dropped"):
        said.append("every site asked refused the crawler before (402, 403 or a challenge "
                    "page) and is not asked again yet: scrapy explain <url> says until "
                    "when, scrapy unblock <origin> lifts it")
    if stats.get("polite/optout/dropped"):
        said.append("its sites are on the opt-out list (scrapy forget; scrapy forget --undo "
                    "lifts it)")
    if stats.get("polite/identity/refused_no_bot_url"):
        said.append("POLITE_BOT_URL is not set, and a public host needs the bot page "
                    "(set POLITE_BOT_URL and POLITE_CONTACT)")
    if not said:
        return None
    return "Nothing was sent: " + "; ".join(said)


class NothingSent:
    """Closes an idle crawl that sent nothing with :data:`NOTHING_SENT` (module doc)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._said = False
        crawler.signals.connect(self.spider_idle, signal=signals.spider_idle)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NothingSent:
        return cls(crawler)

    def spider_idle(self, spider: Spider) -> None:
        stats, engine = self.crawler.stats, self.crawler.engine
        if stats is None or engine is None or not engine.spider_is_idle():
            return  # work is still queued (a rest, a wait): not the end yet
        line = nothing_sent_line(stats.get_stats())
        if line is None:
            return
        if not self._said:
            self._said = True
            logger.warning(line)
        raise CloseSpider(NOTHING_SENT)


__all__ = ["NothingSent", "nothing_sent_line"]
