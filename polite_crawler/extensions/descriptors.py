"""The crawl's file descriptors: the limit raised, the budget kept, running out an error.

At start (the add-on's ``update_settings``, :func:`fit_descriptors`) the process's soft
RLIMIT_NOFILE is raised to its hard limit, as servers do, and the crawl's needs are
counted against it (:func:`polite_crawler.policy.descriptors.plan_descriptors`): when
they do not fit, Scrapy's CONCURRENT_REQUESTS comes down to what does (the crawl slows)
and the download handler keeps fewer idle connections; when not even a few requests in
flight fit, the crawl closes as it opens (``descriptors_short``) with one line naming
the limit and what it needs.

Running out anyway (EMFILE, "Too many open files", or ENFILE: another process took the
system's) is an error of the crawl, not of a site: wherever it is raised (the download
handler's connect, a store, the spider, a middleware), the :class:`DescriptorBudget`
extension logs one line and closes the crawl (``descriptors_exhausted``, exit status 1).
The page store's open batch is committed as the crawl closes and a request not sent goes
back to its queue, so nothing already fetched is lost. Scrapy reports every error of a
crawl's work through logging: a filter on the log's handlers sees each of them, closes
the crawl at the first and keeps the tracebacks of the same error out of the log
(counted, ``polite/descriptors/errors``).
"""

from __future__ import annotations

import contextlib
import logging
import resource
import threading
from typing import TYPE_CHECKING, Any

from scrapy import signals

from polite_crawler.closing import DESCRIPTORS_EXHAUSTED, DESCRIPTORS_SHORT
from polite_crawler.policy.descriptors import (
    DescriptorPlan,
    is_exhaustion,
    plan_descriptors,
    soft_limit_to_ask,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

_ATTR = "_polite_descriptors"
_BUDGET_ATTR = "_polite_descriptor_budget"
_SEEN = "polite_descriptors_exhausted"  # on a log record the filter kept out


class Found:
    """The limits the crawl found at start and the plan made under them."""

    def __init__(self, soft: int, hard: int, limit: int, plan: DescriptorPlan) -> None:
        self.soft = soft  # the soft limit as the process started
        self.hard = hard
        self.limit = limit  # the soft limit after raising it
        self.plan = plan


def _soft_limit() -> int:
    """The soft open-file limit now (an unlimited one counted as 1,048,576)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


def _raise_soft_limit() -> tuple[int, int, int]:
    """(soft limit found, hard limit, soft limit now): raised toward the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = soft_limit_to_ask(soft, hard, resource.RLIM_INFINITY)
    if target != soft:
        # A hard limit above fs.nr_open cannot be reached: the soft one stays as it is.
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return soft, hard, _soft_limit()


def fit_descriptors(settings: BaseSettings, crawler: Any, priority: int) -> Found:
    """Raise the soft limit and fit the crawl's requests and kept connections under it:
    CONCURRENT_REQUESTS is set lower (at ``priority``) when it does not fit. Called by
    the add-on before the settings freeze; the plan is kept on the crawler for the
    extension and the download handler (:func:`descriptor_plan`)."""
    soft, hard, limit = _raise_soft_limit()
    plan = plan_descriptors(limit, settings.getint("CONCURRENT_REQUESTS"),
                            settings.getint("POLITE_KEEPALIVE_MAX"),
                            browser=bool(settings.get("POLITE_RENDER")))
    if plan.slowed and plan.refusal is None:
        settings.set("CONCURRENT_REQUESTS", plan.requests, priority=priority)
    found = Found(soft, hard, limit, plan)
    if crawler is not None:
        setattr(crawler, _ATTR, found)
    return found


def descriptor_plan(crawler: Crawler) -> DescriptorPlan:
    """The crawl's descriptor plan (made at start by the add-on; without it, made now
    from the settings and the limit as it is)."""
    found: Found | None = getattr(crawler, _ATTR, None)
    if found is not None:
        return found.plan
    settings = crawler.settings
    return plan_descriptors(_soft_limit(), settings.getint("CONCURRENT_REQUESTS"),
                            settings.getint("POLITE_KEEPALIVE_MAX"),
                            browser=bool(settings.get("POLITE_RENDER")))


def walk_causes(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc`` and every exception inside it: its causes and contexts, and the reasons
    and failures Twisted wraps (a Failure's value read through)."""
    seen: set[int] = set()
    todo: list[Any] = [exc]
    while todo:
        item = todo.pop()
        item = getattr(item, "value", item)  # a Failure
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        todo.extend(getattr(item, "reasons", None) or [])
        todo.extend(getattr(item, "failures", None) or [])
        todo.extend([item.__cause__, item.__context__])


def exhaustion_in(exc: BaseException | None) -> BaseException | None:
    """The error inside ``exc`` (:func:`walk_causes`) that says the descriptors ran out,
    or None: an OSError with errno EMFILE or ENFILE, or Twisted's ConnectError carrying
    one (a socket that could not be made)."""
    for item in walk_causes(exc):
        if isinstance(item, OSError) and is_exhaustion(item.errno):
            return item
        code = getattr(item, "osError", None)  # twisted.internet.error.ConnectError
        if isinstance(code, int) and is_exhaustion(code):
            return item
    return None


class _ExhaustionFilter(logging.Filter):
    """On the log's handlers: a record carrying a descriptor exhaustion closes the
    crawl, and is kept out of the log (the extension's own line says it once)."""

    def __init__(self, budget: DescriptorBudget) -> None:
        super().__init__()
        self.budget = budget

    def filter(self, record: logging.LogRecord) -> bool:
        info = record.exc_info
        if not info or info[1] is None or record.name == __name__:
            return True
        if record.__dict__.get(_SEEN):  # judged by the filter of another handler
            return False
        found = exhaustion_in(info[1])
        if found is None:
            return True
        record.__dict__[_SEEN] = True
        self.budget.exhausted(found, f"{record.name}: {record.getMessage()}")
        return False


class DescriptorBudget:
    """Says the limit and the budget at start; closes the crawl when descriptors run
    out (module doc)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.found: Found | None = getattr(crawler, _ATTR, None)
        self.plan = descriptor_plan(crawler)
        self._lock = threading.Lock()
        self.closing = False
        self.errors = 0
        self._filter = _ExhaustionFilter(self)
        self._handlers: list[logging.Handler] = []
        setattr(crawler, _BUDGET_ATTR, self)
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DescriptorBudget:
        return cls(crawler)

    def spider_opened(self) -> None:
        found, plan = self.found, self.plan
        if found is not None and found.limit > found.soft >= 0:
            logger.info("Open-file limit raised from %(soft)d to %(limit)d (the hard limit)",
                        {"soft": found.soft, "limit": found.limit})
        if plan.refusal is not None:
            logger.error("Not crawling: %(why)s", {"why": plan.refusal})
            self._close(DESCRIPTORS_SHORT)
            return
        if plan.slowed:
            logger.warning("Fewer requests in flight (%(n)d, not %(asked)d) to stay under the "
                           "open-file limit: %(plan)s",
                           {"n": plan.requests, "asked": plan.asked_requests,
                            "plan": plan.describe()})
        else:
            logger.info("Descriptor budget: %(plan)s", {"plan": plan.describe()})
        for handler in logging.getLogger().handlers:
            handler.addFilter(self._filter)
            self._handlers.append(handler)
        # The page store's files are counted among the crawl's own: opened now, not on
        # first use, when every other descriptor may be taken.
        from polite_crawler.backend import page_store

        try:
            page_store(self.crawler)
        except Exception as exc:  # opened again on first use, which reports it as before
            exhausted = exhaustion_in(exc)
            if exhausted is not None:
                self.exhausted(exhausted, "opening the page store")
                return
            logger.warning("The page store did not open as the crawl opened (%(error)s); it "
                           "is opened again when first used", {"error": str(exc).strip()})

    def spider_closed(self) -> None:
        for handler in self._handlers:
            handler.removeFilter(self._filter)
        self._handlers.clear()
        if self.errors and self.crawler.stats is not None:
            self.crawler.stats.set_value("polite/descriptors/errors", self.errors)

    def exhausted(self, error: BaseException, where: str) -> None:
        """Descriptors ran out (any thread): close the crawl, once, in one line."""
        with self._lock:
            self.errors += 1
            if self.closing:
                return
            self.closing = True
        from twisted.internet import reactor

        reactor.callFromThread(self._exhausted, str(error), where)

    def _exhausted(self, error: str, where: str) -> None:
        limit = _soft_limit()
        logger.error("Closing the crawl: the process ran out of file descriptors (%(error)s, "
                     "in %(where)s; limit %(limit)d, %(plan)s); what was fetched is kept, "
                     "what was not goes back to its queue",
                     {"error": error, "where": where, "limit": limit,
                      "plan": self.plan.describe()})
        self._close(DESCRIPTORS_EXHAUSTED)

    def _close(self, reason: str) -> None:
        self.closing = True
        try:
            engine = self.crawler.engine
        except RuntimeError:  # not crawling yet: nothing to close
            return
        if engine is None:
            return
        from scrapy.utils.defer import deferred_from_coro

        engine.unpause()
        deferred_from_coro(engine.close_spider_async(reason=reason))


def descriptor_budget(crawler: Crawler) -> DescriptorBudget | None:
    """The crawl's :class:`DescriptorBudget` extension (None when it is not installed)."""
    budget: DescriptorBudget | None = getattr(crawler, _BUDGET_ATTR, None)
    return budget


__all__ = ["DescriptorBudget", "descriptor_budget", "descriptor_plan", "exhaustion_in",
           "fit_descriptors", "walk_causes"]
