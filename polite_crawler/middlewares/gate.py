"""The gate: the last downloader middleware before the network, the first after it.

Order 990. ``process_request`` marks the request dispatched (only a request the
frontier handed out for its origin passes: nothing reaches the network around the
frontier). ``process_response`` and ``process_exception`` take the exchange's
duration (for a response, the transport's: request sent to last byte received, as the
download handler read it from the kernel, ``meta["polite_transfer"]``; otherwise the
gate's own timestamps, body included), ask
:mod:`polite_crawler.policy.verdicts` for the verdict, fold it into the origin's
failure state and settle the origin in the frontier (end time + rest; the end is when
the response's last byte arrived, ``meta["polite_received"]``, where the handler read
it from the kernel, else the gate's own time). Then:

* RETRY_LATER: a copy of the request goes back to the frontier, behind the wait
  (``meta["polite_retry_times"]``, at most POLITE_RETRY_TIMES);
* STOP_ORIGIN (402, 403, challenge page), the breaker, a parked origin: the frontier
  stops the origin for the run and the request is dropped (IgnoreRequest);
* GIVE_UP and OK: the response goes on.

robots.txt requests (``meta["polite_robots"]``) are settled like any other, but a 4xx
answer never stops the origin: RFC 9309 section 2.3.1.3 says it means "no
restrictions". Their retries are the robots.txt book's business, not the gate's.

A request released without having been dispatched (a middleware below the gate
dropped it or answered it) frees its origin with no rest. One that failed because the
page store's database stayed away (``PageStoreDown``: the crawl is closing) keeps its
row queued for the next run.

A request whose origin the frontier no longer holds (``FrontierScheduler.may_send``: a
cluster worker frozen or stalled past its lease since the frontier handed the request
out) is not sent: the gate checks as the request reaches it, and the download handler
again as it starts the exchange (``handlers.LeaseLapsedError``, which reaches the gate
first). Either way the request is held back (``FrontierScheduler.hold_back``): its row
goes back to the origin's queue, the origin is freed with no rest and nothing is done;
counted ``polite/redis/held_at_gate`` (``.../handler`` for the handler's check), one INFO
line each, and an access-log line with ``sent`` null and verdict ``held:lease_lapsed``.

A request the handler could not send because the process ran out of file descriptors
(``handlers.DescriptorsExhaustedError``) is not a lapsed lease and not the site's
failure: it is held back the same way (row back to the queue, origin freed with no
rest), counted ``polite/descriptors/not_sent``, one DEBUG line saying so (the crawl's
one ERROR line is the descriptor budget's), and an access-log line with verdict
``held:descriptors_exhausted``; the crawl closes (``descriptors_exhausted``,
``extensions.descriptors``).

After settling an exchange the gate tells the download handlers when the origin's next
request may go (the frontier's time for it: the rest, a Crawl-delay, a backoff or
Retry-After wait; never, for a stopped origin): an idle kept-alive connection that would
wait longer than POLITE_KEEPALIVE_IDLE for it is closed at once
(``handlers.KeptConnections``).

For the access log and other components the gate leaves on the request's meta:
``polite_start`` and ``polite_end`` (epoch seconds), ``polite_duration`` (gate to gate),
``polite_verdict`` (the verdict's label) and ``polite_rest`` (seconds).
"""

from __future__ import annotations

import logging
import math
import random
import time
from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.misc import load_object

from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings
from polite_crawler.frontier.scheduler import FrontierScheduler
from polite_crawler.handlers import DescriptorsExhaustedError, LeaseLapsedError, kept_connections
from polite_crawler.middlewares.sizecap import response_decodings
from polite_crawler.policy.codings import Decoding
from polite_crawler.policy.verdicts import (
    Action,
    HeaderView,
    Verdict,
    VerdictParams,
    apply_verdict,
    classify_exception,
    classify_response,
    describe_stop,
    for_robots_txt,
    may_retry,
)
from polite_crawler.store.pages import PageStoreDown

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from polite_crawler.interfaces import FrontierService

logger = logging.getLogger(__name__)

# The kernel's TCP timestamps count in jiffies (10 ms at most): the rest runs from the
# last byte's arrival as the kernel tells it plus this, never from before it.
RECEIVED_RESOLUTION = 0.010


class GateMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.ctx = polite_context(crawler)
        self.clock = self.ctx.clock
        self.rng = random.Random()
        settings = polite_settings(crawler.settings)
        self._params = {
            test: VerdictParams.from_settings(settings, test_origin=test) for test in (False, True)
        }
        scheduler = load_object(settings["SCHEDULER"])
        if not (isinstance(scheduler, type) and issubclass(scheduler, FrontierScheduler)):
            raise NotConfigured("the gate works with polite_crawler's FrontierScheduler only")
        # Idle kept-alive connections, closed when the origin's next request is further
        # away than the keep-alive time (handlers.KeptConnections).
        self._kept = kept_connections(crawler)
        # The body decodings begun here for the challenge check, which the size cap
        # (590) carries on with: a body is decoded once.
        self._decodings = response_decodings(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> GateMiddleware:
        return cls(crawler)

    @property
    def frontier(self) -> FrontierService:
        frontier = self.ctx.frontier
        if frontier is None:
            raise IgnoreRequest("no frontier: nothing is sent around it")
        return frontier

    def _inc(self, key: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key)

    # --- out -------------------------------------------------------------------
    def process_request(self, request: Request) -> Request | None:
        frontier = self.frontier
        if not frontier.owns(request):
            self._inc("polite/gate/bypass")
            logger.warning("Refusing %(request)s: it did not come through the frontier",
                           {"request": request})
            raise IgnoreRequest("request did not come through the frontier")
        if not frontier.may_send(request):
            return self._hold(request, "gate")
        request.meta["polite_dispatched"] = True
        request.meta["polite_start"] = self.clock()
        return None

    # --- back --------------------------------------------------------------------
    def process_response(self, request: Request, response: Response) -> Request | Response:
        if not request.meta.get("polite_dispatched"):
            # Answered below the gate (a cache): the origin is free, no rest.
            self.frontier.release(request)
            return response
        end = self.clock()
        origin = request.meta.get("polite_origin", "")
        # The whole body: the policy reads as much of it as challenge markers are
        # searched in (policy.challenges.BODY_HEAD_BYTES, decoded), no more.
        headers = HeaderView(response.headers)  # only the names the rules ask, as asked
        body = Decoding.of(response.body, headers.get("content-encoding"))
        verdict = classify_response(response.status, headers, body, end,
                                    params=self._params_for(origin))
        self._inc(f"polite/verdicts/{verdict.reason}")
        if request.meta.get("polite_robots"):
            verdict = for_robots_txt(verdict, response.status)
        outcome = self._settle(request, verdict, end, observe=True, status=response.status)
        if outcome is not None:
            return outcome
        if verdict.action is Action.STOP_ORIGIN or self._stopped(origin):
            self.frontier.done(request)
            raise IgnoreRequest(f"origin stopped: {verdict.reason}")
        if body.codings:
            self._decodings.keep(response, body)
        return response

    def process_exception(self, request: Request, exception: Exception) -> Request | None:
        if isinstance(exception, DescriptorsExhaustedError) and self.frontier.owns(request):
            return self._not_sent(request)
        if isinstance(exception, LeaseLapsedError) and self.frontier.owns(request):
            return self._hold(request, "handler")
        if not request.meta.get("polite_dispatched"):
            if self.frontier.owns(request):
                self.frontier.release(request)
                if isinstance(exception, PageStoreDown):
                    # Its stored copy could not be read: the crawl is closing, and the
                    # row stays queued for the next run (not done: never fetched).
                    return None
                self.frontier.done(request)
                if request.meta.get("polite_robots"):
                    # robots.txt could not even be sent: nothing may be fetched from the origin.
                    self._stop(request.meta.get("polite_origin", ""), "robots-unsendable")
            return None
        end = self.clock()
        verdict = classify_exception(exception)
        self._inc(f"polite/verdicts/{verdict.reason}")
        outcome = self._settle(request, verdict, end, observe=False)
        if outcome is None:
            # The errback gets the failure; spider middlewares never see it.
            self.frontier.done(request)
        return outcome

    # --- shared --------------------------------------------------------------------
    def _hold(self, request: Request, where: str) -> Request:
        """Not sent: the frontier no longer holds the origin (see the module doc)."""
        self._inc("polite/redis/held_at_gate")
        if where != "gate":
            self._inc(f"polite/redis/held_at_gate/{where}")
        origin = request.meta.get("polite_origin", "")
        logger.info("Held back %(request)s at the %(where)s: this worker no longer holds "
                    "%(origin)s with a valid lease (it stalled since the frontier handed the "
                    "request out); not sent, its row goes back to the origin's queue",
                    {"request": request, "where": where, "origin": origin})
        if self.ctx.access_log is not None:
            self.ctx.access_log.record(request=request, verdict="held:lease_lapsed",
                                       sent=None, duration=None)
        return self.frontier.hold_back(request)

    def _not_sent(self, request: Request) -> Request:
        """Not sent: the process ran out of file descriptors making the request's
        connection (``handlers.DescriptorsExhaustedError``). Not the site's failure and
        not a lapsed lease: the crawl closes (``descriptors_exhausted``, the descriptor
        budget's extension), the request's row goes back to its origin's queue for the
        next run and the origin is freed with no rest."""
        self._inc("polite/descriptors/not_sent")
        # One line a request, at DEBUG: up to CONCURRENT_REQUESTS of them fail at once,
        # and the descriptor budget's extension says it once, at ERROR.
        logger.debug("Not sent %(request)s: the process has no file descriptor left for "
                     "its connection; the crawl closes (descriptors_exhausted) and the "
                     "request goes back to %(origin)s's queue",
                     {"request": request, "origin": request.meta.get("polite_origin", "")})
        if self.ctx.access_log is not None:
            self.ctx.access_log.record(request=request, verdict="held:descriptors_exhausted",
                                       sent=None, duration=None)
        return self.frontier.hold_back(request)

    def _params_for(self, origin: str) -> VerdictParams:
        frontier = self.ctx.frontier
        test = frontier is not None and frontier.is_test_origin(origin)
        return self._params[test]

    def _stopped(self, origin: str) -> bool:
        core = self.frontier.frontier  # the core as read (interfaces.FrontierView)
        return core is not None and origin in core.stopped

    def _stop(self, origin: str, reason: str) -> None:
        self.frontier.stop(origin, reason)
        logger.warning("%(origin)s: %(why)s", {"origin": origin, "why": describe_stop(reason)})

    def _settle(
        self, request: Request, verdict: Verdict, end: float, *, observe: bool,
        status: int | None = None,
    ) -> Request | None:
        """Settle the origin; a retry copy when the verdict asks for one."""
        meta = request.meta
        origin = meta.get("polite_origin", "")
        start = float(meta.get("polite_start", end))
        params = self._params_for(origin)
        frontier = self.frontier
        failure = apply_verdict(frontier.failure(origin), verdict, end, params, self.rng)
        # The rest and the latency watch take the transport's duration when the handler
        # measured one: the time the reactor was busy elsewhere is the crawler's, not
        # the server's. A rendered page's duration is the render handler's (it moved
        # polite_start), and its rest runs from the gate's end.
        transfer = meta.pop("polite_transfer", None)  # never carried into a retry's copy
        received = meta.pop("polite_received", None)
        if not observe or "polite_render_wire_duration" in meta:
            transfer = received = None
        # The rest runs from the end of the response: when its last byte arrived (the
        # kernel's time, less its resolution), not when the reactor got round to the
        # gate, which on a busy crawler is tenths of a second later and would make
        # every rest that much longer than the policy's.
        rest_from = end
        if received is not None:
            lag = time.time() - float(received) - RECEIVED_RESOLUTION
            if 0.0 < lag < end - start:
                rest_from = end - lag
        timed_from = rest_from - float(transfer) if transfer is not None else start
        core = frontier.frontier  # the core as read (interfaces.FrontierView)
        state = core.state(origin) if core is not None else None
        factor = state.latency_factor if state is not None else 1.0
        rest = frontier.settle(request, start=timed_from, end=rest_from, failure=failure,
                               observe=observe and verdict.success)
        if core is not None:
            # The origin's next request, as the frontier now knows it (its host's rest
            # and its server's round included): its idle connection is closed at once
            # when that is beyond the keep-alive time.
            self._kept.next_request_in(
                origin, math.inf if failure.stopped is not None
                else core.next_request_at(origin) - end)
        if state is not None and state.latency_factor < factor:
            self._inc("polite/frontier/latency_eased")
            logger.info("%(origin)s answers as fast as when the crawl began again: its rest "
                        "eases (x%(f)g)", {"origin": origin, "f": state.latency_factor})
        meta.update(polite_end=end, polite_duration=end - start, polite_verdict=verdict.label,
                    polite_rest=rest.total if rest is not None else None)
        metrics = self.ctx.metrics
        if metrics is not None:  # POLITE_METRICS_PORT: the rest and factor distributions
            metrics.settled(verdict.action.value, status, verdict.wait is not None,
                            rest.total if rest is not None else None,
                            state.latency_factor if state is not None else None)
        self._inc(f"polite/gate/verdict/{verdict.action.value}")
        if failure.stopped is not None:
            self._stop(origin, failure.stopped)
            return None
        if verdict.action is not Action.RETRY_LATER or meta.get("polite_robots"):
            return None
        retries = int(meta.get("polite_retry_times", 0))
        if not may_retry(retries, params):
            self._inc("polite/gate/retry/exhausted")
            logger.info("Gave up on %(request)s after %(n)d retries (%(reason)s)",
                        {"request": request, "n": retries, "reason": verdict.reason})
            return None
        self._inc("polite/gate/retry/count")
        retry = request.replace(dont_filter=True)
        retry.meta["polite_retry_times"] = retries + 1
        logger.debug("Retrying %(request)s after %(wait).1fs (%(reason)s)",
                     {"request": request, "wait": failure.last_wait, "reason": verdict.reason})
        return retry

