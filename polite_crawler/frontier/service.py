"""The frontier service: what the crawl's components call on the scheduler.

:class:`polite_crawler.interfaces.FrontierService` declares it; the scheduler
(:class:`polite_crawler.frontier.scheduler.FrontierScheduler`) serves it through
:class:`FrontierServiceMixin` and puts itself on the context
(``polite_context(crawler).frontier``). The gate middleware
(:mod:`polite_crawler.middlewares.gate`) settles, releases, holds back, retries and
stops through it; the download handlers ask :meth:`~FrontierServiceMixin.may_send`
as an exchange starts; the spider side marks rows done or held.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from polite_crawler.policy.network import is_test_host

if TYPE_CHECKING:
    from scrapy import Request

    from polite_crawler.frontier.core import Frontier
    from polite_crawler.frontier.wake import EngineWake
    from polite_crawler.interfaces import FrontierDriver
    from polite_crawler.policy.network import Network
    from polite_crawler.policy.rest import Rest
    from polite_crawler.policy.verdicts import FailureState

# Meta flag of a request held back before the network (FrontierServiceMixin.hold_back).
HELD = "polite_held"

# Meta keys the frontier sets on a request it hands out; a copy of the request
# (a redirect, a retry) carries them back in and they are cleared there.
DISPATCH_KEYS = ("polite_origin", "polite_token", "polite_row", "polite_dispatched",
                 "polite_start", "download_slot")


class FrontierServiceMixin:
    """:class:`polite_crawler.interfaces.FrontierService`'s methods, over the members
    the scheduler declares here (the core while the crawl is open, its driver, the
    engine's wake-up, the requests kept in memory by row id)."""

    frontier: Frontier | None
    driver: FrontierDriver | None
    wake: EngineWake
    test_networks: list[Network]
    _memory: dict[int, Request]  # rows whose request is kept here, not in the store
    _test_origins: dict[str, bool]

    @property
    def shared(self) -> Any:
        """The cluster's shared state (None on the embedded backend)."""
        return self.driver.shared if self.driver is not None else None

    def mark_seen(self, canonical: str) -> None:
        """A canonical URL known without a fetch of its own (a page's rel=canonical)."""
        if self.driver is not None:
            self.driver.mark_seen(canonical)

    def may_send(self, request: Request) -> bool:
        """Whether a request the frontier handed out may still go to the network now.

        On a cluster, a worker may have been frozen (SIGSTOP, a long pause) between the
        frontier handing a request out and the request reaching the socket; by then its
        lease may have run out and another worker may own the origin. The gate asks this
        before the request goes on and the download handler again as it starts the
        exchange (its timeout starts in the same call). False: this worker no longer
        holds the request's origin with a valid lease (by the frontier's clock), and the
        request must not be sent; :meth:`hold_back` undoes its dispatch. The embedded
        backend answers True. A request not handed out by the frontier (no origin in its
        meta) is not this check's business: True.
        """
        origin = request.meta.get("polite_origin")
        if origin is None or self.driver is None:
            return True
        return self.driver.may_send(origin)

    @staticmethod
    def hold_back(request: Request) -> Request:
        """The request failed :meth:`may_send`: returned by a downloader middleware, it
        comes back to the scheduler's ``enqueue_request``, which puts its dispatch back
        (:meth:`_put_back`: the row to the head of its origin's queue here, or to Redis's
        queue for the origin's owner; the origin freed with no rest; nothing done,
        nothing fetched). No errback runs and no middleware below sees a failure."""
        request.meta[HELD] = True
        return request

    def _put_back(self, request: Request) -> None:
        f = self.frontier
        assert f is not None
        meta = request.meta
        origin, token, row = meta.get("polite_origin", ""), meta.get("polite_token"), \
            meta.get("polite_row")
        for key in DISPATCH_KEYS:
            meta.pop(key, None)
        if not f.put_back(origin, token, obj=request) and row is not None:
            self._memory.pop(row, None)
        self.wake.arm()

    def owns(self, request: Request) -> bool:
        """Whether the request is the one the frontier handed out for its origin."""
        f = self.frontier
        meta = request.meta
        origin, token = meta.get("polite_origin", ""), meta.get("polite_token")
        return f is not None and f.in_flight(origin, token)

    def is_test_origin(self, origin: str) -> bool:
        """Loopback or in POLITE_TEST_NETWORKS: lower numbers than the public floor apply."""
        known = self._test_origins.get(origin)
        if known is None:
            known = self._test_origins[origin] = self._is_test_host(origin)
        return known

    def _is_test_host(self, origin: str) -> bool:
        return is_test_host(urlsplit(origin).hostname or "", self.test_networks)

    def failure(self, origin: str) -> FailureState:
        assert self.frontier is not None
        return self.frontier.state(origin).failure

    def settle(
        self, request: Request, *, start: float, end: float, failure: FailureState | None,
        observe: bool,
    ) -> Rest | None:
        f = self.frontier
        if f is None:
            return None
        meta = request.meta
        rest = f.settle(
            meta.get("polite_origin", ""), meta.get("polite_token", -1), start=start, end=end,
            api=bool(meta.get("polite_api")), failure=failure, observe=observe,
        )
        self.wake.arm()
        return rest

    def release(self, request: Request) -> None:
        """The request left without reaching the network: no rest."""
        if self.frontier is not None:
            self.frontier.release(request.meta.get("polite_origin", ""),
                                  request.meta.get("polite_token"))
            self.wake.arm()

    def done(self, request: Request) -> None:
        """The spider is finished with the request (see :meth:`Frontier.done`)."""
        row = request.meta.get("polite_row")
        if self.frontier is not None and row is not None:
            self._memory.pop(row, None)
            self.frontier.done(row)
            request.meta.pop("polite_row", None)

    def hold(self, request: Request, key: str) -> None:
        """The spider keeps part of what it made of the request's response in memory
        until ``key`` is released: the row stays (see :meth:`Frontier.hold`)."""
        row = request.meta.get("polite_row")
        if self.frontier is not None and row is not None:
            self._memory.pop(row, None)
            self.frontier.hold(row, key)
            request.meta.pop("polite_row", None)

    def release_held(self, key: str) -> None:
        if self.frontier is not None:
            self.frontier.release_held(key)

    def stop(self, origin: str, reason: str) -> None:
        if self.frontier is not None:
            self.frontier.stop(origin, reason)
