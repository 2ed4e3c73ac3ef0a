"""The host gate: per-origin queues, an eligibility heap, and every request's timing.

An origin is *eligible* when nothing of its host is in flight, its rest and its
host's are over, any wait the server asked for is over, its robots.txt is known (or
this dispatch is its robots.txt), it is not stopped, and its daily budget is not spent.

A host is its name (:func:`polite_crawler.policy.urls.host_of_origin`: no scheme, no
port): one request in flight and the whole rest between requests hold per host, across
its schemes and ports (``http://a``, ``https://a`` and ``http://a:8080`` are one host);
the queue, robots.txt (RFC 9309 section 2.3: per scheme, host and port), the stop, the
budget, the latency watch and the breaker stay per origin (docs/ARCHITECTURE.md, "Host
and origin"). An origin whose host is busy waits in the host's list, out of the heap,
and is placed again when the host is freed.

A server is the address a host's name resolves to (``address_of``, the resolver's
answer, asked when the origin is first dispatched and followed as DNS changes): its
bound (:mod:`polite_crawler.policy.servers`: requests in rounds of up to its limit,
then a rest) holds every origin of every host on it. An origin whose host's address is
not known yet waits for it (``address_known``); one held by its server's full round
waits in the server's list and is placed again when a place frees.

An owner is a host's registrable domain (:func:`polite_crawler.policy.owners.owner_of`):
its hosts share one daily budget (so wildcard subdomains cannot multiply it) and at most
``owner_concurrency`` requests at once across them; an origin held by that cap waits in
the owner's list. :meth:`Frontier.pop`
hands out a request of whichever origin became eligible first; an origin is in the
heap exactly once, at the time it becomes eligible, so ``pop`` and ``push`` cost
O(log origins) plus one indexed SQLite lookup.

This module knows nothing of Scrapy, nor of where its state is kept: the queue and
the origin store are the interfaces :class:`polite_crawler.interfaces.URLQueue` and
:class:`polite_crawler.interfaces.OriginLeases` (SQLite, or Redis for a cluster);
requests are opaque (serialised bytes on disk,
or objects for the few transient ones), the robots.txt book is duck-typed
(``needs_fetch``, ``ready``, ``retry_at``, ``allowed``, ``crawl_delay``) and stats go
through a callback. :mod:`polite_crawler.frontier.scheduler` is the Scrapy glue.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import random
from collections import Counter
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from polite_crawler.interfaces import Lease, LeaseAnswer, OriginLeases, OwnerRows, SharedRows
from polite_crawler.policy.blocks import is_refusal
from polite_crawler.policy.network import Network, is_test_host
from polite_crawler.policy.owners import budget_spent, owner_of
from polite_crawler.policy.rest import (
    OriginState,
    Rest,
    RestParams,
    charge_budget,
    dispatch_lead,
    floor_params,
    settle,
    uncharge_budget,
)
from polite_crawler.policy.robots import MAX_UNUSABLE_FETCHES
from polite_crawler.policy.servers import (
    ServerParams,
    ServerState,
    answered,
    held_back,
    latency,
    load_share,
    next_send,
    released,
    sent,
    shared_limit,
)
from polite_crawler.policy.urls import host_of_origin

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from polite_crawler.interfaces import URLQueue
    from polite_crawler.policy.verdicts import FailureState
    from polite_crawler.records import Row

logger = logging.getLogger(__name__)

CONTENT, ROBOTS, TRANSIENT = "content", "robots", "transient"
# The request meta key of Dispatch.not_before (read by the download handlers).
NOT_BEFORE = "polite_not_before"

# No request starts before this long after its origin's eligible time: the server
# stamps the end of an answer after its write returns, which can be a little after
# the crawler has read it; a few milliseconds keep the rest the server sees whole.
DISPATCH_MARGIN = 0.01
# An origin served this much after it became eligible counts as a late dispatch.
LATE = 0.5
# How long a settled request may wait for the spider to finish with it before the
# frontier counts it done anyway (a path that never reports back).
DONE_GRACE = 300.0
# The stop of an origin whose owner (another of its hosts) refused the crawler.
OWNER_REFUSED = "owner_refused"
# Owner rows written this long before a checkpoint's look at their stops are looked
# at again by the next: a job's write is stamped when it begins and may wait for
# another job's transaction (store.paths.connect waits 30 s) before it lands.
OWNER_STOPS_MARGIN = 60.0


@dataclass
class FrontierConfig:
    params: RestParams = field(default_factory=RestParams)
    test_networks: list[Network] = field(default_factory=list)
    budget: int = 10_000
    lease_ttl: float = 60.0
    in_flight_timeout: float = 600.0  # an exchange never settled frees its origin after this
    # Seconds before its origin's time a request may be handed out (at most a quarter of
    # the origin's base rest): it then carries the time (Dispatch.not_before) and the
    # download handler holds it until then, so the steps between the scheduler and the
    # socket (Scrapy's downloader, a busy event loop's queue) are taken before the time,
    # not after it. 0: handed out at the time.
    dispatch_lead: float = 0.0
    servers: ServerParams = field(default_factory=ServerParams)
    # Requests at once across one owner's hosts (its registrable domain; 0: no cap).
    owner_concurrency: int = 2


@dataclass
class Dispatch:
    """What :meth:`Frontier.pop` hands out."""

    kind: str  # CONTENT (a queued row), ROBOTS (fetch robots.txt), TRANSIENT (an object)
    origin: str
    token: int
    row: Row | None = None
    obj: Any = None
    # Not to be sent before this time (the frontier's clock; 0: at once). Set when the
    # request is handed out ahead of its origin's time (FrontierConfig.dispatch_lead).
    not_before: float = 0.0


@dataclass(slots=True)
class _Host:
    """One host name's gate: the request in flight on any of its origins, and the end
    of its rest (``state.next_allowed``: the latest end-of-rest any of its origins set,
    waits the server asked for included).

    On the embedded backend the same state is a row with a lease in the shared state DB
    (``Frontier.host_store``), the one lease jobs sharing the state directory take, so
    they keep one request per host between them; the rows of its origins keep their
    state only. A job holds the lease across the host's requests while it has work for
    the host, renewed at the checkpoints, and gives it back (its row and its origins'
    rows written) when it has none, at its turn's end (``Frontier.config.lease_ttl``
    after taking it: another job waiting for the host gets it then) and as it closes.
    A job killed with the lease is taken over as a dead holder's: the host rests from
    then, ``dead_rest``. On a cluster a worker owns all of a host's origins or none
    (docs/CLUSTER.md), and the host stays in memory."""

    state: OriginState  # keyed by the host name
    in_flight: str | None = None  # the origin whose request is out
    # Origins parked until it is freed, in the order they came (a dict: an empty set
    # takes 216 bytes, an empty dict 64, one a host).
    waiting: dict[str, None] = field(default_factory=dict)
    origins: list[str] = field(default_factory=list)  # its origins this frontier knows
    leased: bool = False  # this process holds the host's row lease (host_store)
    leased_at: float = 0.0  # when it took the lease (its turn's start)
    lease_until: float = 0.0  # the lease's end as last taken or renewed
    # It gave the lease back at its turn's end: it asks again a margin after the
    # host's rest, so a job that waits for the host (and asks at the rest's end) gets it.
    yielded: bool = False


@dataclass(slots=True)
class _Owner:
    """One registrable domain: its hosts' shared daily budget (``state.budget_*``) and
    their requests open at once."""

    state: OriginState  # keyed by the owner's domain; its budget and its stop are used
    in_flight: int = 0
    waiting: dict[str, None] = field(default_factory=dict)  # origins its cap holds
    # A refusal from one of its hosts stopped them all this run (why). Kept in the
    # owner's stored state too (``state.failure.stopped``, a run's): the processes of
    # the run that share the owner's row learn it from there.
    refused: str = ""
    # When this process recorded the refusal itself (0: none, or one read from the
    # row): a stop ``scrapy unblock`` lifted after it is not written back.
    refused_at: float = 0.0
    # When this process took the stop on (its own refusal, or one read from the shared
    # store): a lift later than it ends the stop here (Frontier.lift_owner_stop).
    stopped_at: float = 0.0
    # The budget day and count as last read from or merged into the shared row: the
    # pages since are this process's, added to the row's (OwnerRows.merge_owners).
    read_day: str = ""
    read_used: int = 0


@dataclass(slots=True)
class _Server:
    """One address's bound (policy.servers) and the origins its full round holds.

    On a cluster the address's limit is shared by the workers (docs/CLUSTER.md,
    "Servers"): ``granted`` is how many places of it this worker holds (its rounds are
    no larger), ``contended`` that another worker waits for places (this one gives its
    own back when its round is over). None: this process's bound alone."""

    state: ServerState
    in_flight: int = 0
    waiting: dict[str, None] = field(default_factory=dict)  # in the order they came
    granted: int | None = None
    contended: bool = False
    others: int = 0  # other processes waiting for places, as last told
    origins: set[str] = field(default_factory=set)  # origins of its hosts seen here


@dataclass(slots=True)
class _Origin:
    state: OriginState
    params: RestParams
    host: _Host
    owner: _Owner | None = None  # its host's registrable domain's
    owner_counted: bool = False  # its request in flight counts in the owner's
    server: _Server | None = None  # its host's address's, once known
    sent_at: int = 0  # the concurrency its request in flight was sent at (0: none counted)
    queued: int = 0  # rows in state QUEUED on disk
    # A list, not a deque: it holds a redirected robots.txt fetch or two, and an empty
    # deque takes 760 bytes (a list 56), one an origin (bench.site_memory).
    transient: list[Any] = field(default_factory=list)
    in_flight: int | None = None  # dispatch token
    in_flight_since: float = 0.0
    in_flight_row: int | None = None
    in_flight_kind: str = CONTENT
    heap_seq: int | None = None  # sequence number of this origin's live heap entry
    robots_fetches: int = 0
    stored: bool = False  # its shared row written by this process (with host rows)


class Frontier:
    def __init__(
        self,
        queue: URLQueue,
        origins: OriginLeases,
        config: FrontierConfig,
        *,
        clock: Callable[[], float],
        rng: random.Random | None = None,
        robots: Callable[[], Any] = lambda: None,
        count: Callable[[str, int], None] = lambda key, n: None,
        hosts: SharedRows | None = None,
        address_of: Callable[[str], str | None] | None = None,
        owners: OwnerRows | None = None,
        shared_servers: bool = False,
    ) -> None:
        self.queue = queue
        self.origin_store = origins
        # Host rows with leases shared by processes (the embedded backend); None: the
        # host gate is this process's alone (a cluster worker owns whole hosts).
        self.host_store = hosts
        self._hosts: dict[str, _Host] = {}
        self._leased: dict[str, _Host] = {}  # hosts whose row lease this process holds
        # With host rows the host's lease is the one lease: the origin rows keep state
        # only, written at each checkpoint when it changed (``_dirty``), at once when
        # what the server said changed, and before the host's lease goes back.
        self.origin_rows: SharedRows | None = None
        if hosts is not None:
            if not isinstance(origins, SharedRows):
                raise TypeError("host rows need origin rows of the same kind (SharedRows)")
            self.origin_rows = origins
        self._dirty: set[str] = set()
        # Host name -> the address it connects to (None: not known yet, asked now);
        # None: no server bound (tests of the host rules alone).
        self.address_of = address_of
        self._servers: dict[str, _Server] = {}
        # Whether the servers' limits are shared with other processes (a cluster): a
        # server's places are then granted (server_granted), none before the first
        # grant, and the addresses whose grant should be asked again are collected
        # here (server_asks) for the backend's next batch.
        self.shared_servers = shared_servers
        self.server_asks: set[str] = set()
        self._unresolved: dict[str, set[str]] = {}  # host name -> origins waiting for it
        # Owner rows (their budget) shared by processes (the embedded backend), written
        # at each checkpoint; None: this process's count alone (on a cluster a worker
        # holds every host of an owner, and takes its count with its group:
        # take_owner_budget).
        self.owner_store = owners
        self._owners: dict[str, _Owner] = {}
        self._owners_dirty: set[str] = set()
        # When the owner rows' stops were last read (a row met later is read whole).
        self._owner_stops_read = clock()
        self.config = config
        self.clock = clock
        self.rng = rng or random.Random()
        self._robots = robots
        self.count = count
        self._origins: dict[str, _Origin] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._tokens = itertools.count(1)
        self.stopped: dict[str, str] = dict(queue.stopped())
        self.stops_made = 0  # stop() calls that stopped an origin (FrontierView.stops_made)
        self.pending = 0  # queued rows plus transient objects, over origins not stopped
        self._settled_rows: dict[int, float] = {}  # row id -> settle time, until done
        # Row id -> the host whose lease waits for the spider to be done with that row:
        # what its response queues (links, a sitemap's pages) may be the host's next
        # work, so the lease is not given back and taken again in between.
        self._awaited: dict[int, _Host] = {}
        self._held: dict[str, list[tuple[int, float]]] = {}  # key -> (row, since): see hold
        self._floor_warned = False
        self._opened = clock()
        self._public_params, raised = floor_params(config.params)
        self._raised = raised

    # --- origins -------------------------------------------------------------
    def _params_for(self, origin: str) -> RestParams:
        if is_test_host(urlsplit(origin).hostname or "", self.config.test_networks):
            return self.config.params
        if self._raised and not self._floor_warned:
            self._floor_warned = True
            logger.warning(
                "Rest settings below the public floor (%(names)s) apply only to loopback and "
                "POLITE_TEST_NETWORKS; %(origin)s and every other public host get the floor",
                {"names": ", ".join(self._raised), "origin": origin},
            )
        return self._public_params

    @staticmethod
    def _stored(store: OriginLeases | None, name: str) -> OriginState:
        """A host's or an owner's state as its shared row holds it (a new one without)."""
        return store.load(name)[0] if store is not None else OriginState(name)

    def _host(self, origin: str) -> _Host:
        name = host_of_origin(origin)
        host = self._hosts.get(name)
        if host is None:
            host = self._hosts[name] = _Host(self._stored(self.host_store, name))
        return host

    def _owner(self, host: str) -> _Owner:
        name = owner_of(host)
        owner = self._owners.get(name)
        if owner is None:
            state = self._stored(self.owner_store, name)
            # A stop its shared row holds (another process of the run saw the refusal).
            owner = self._owners[name] = _Owner(state, refused=state.failure.stopped or "",
                                                read_day=state.budget_day,
                                                read_used=state.budget_used)
            if owner.refused:
                owner.stopped_at = self.clock()
        return owner

    def _new(self, origin: str, state: OriginState) -> _Origin:
        host = self._host(origin)
        rec = _Origin(state, self._params_for(origin), host, self._owner(host.state.origin))
        self._origins[origin] = rec
        if origin not in host.origins:
            host.origins.append(origin)
        self._host_learns(rec)
        return rec

    @staticmethod
    def _host_learns(rec: _Origin) -> None:
        """The host's rest ends no sooner than the origin's own (its rest, a wait the
        server asked for): a rest set on one origin holds every origin of the host."""
        hs = rec.host.state
        hs.next_allowed = max(hs.next_allowed, min(rec.state.eligible_at(), 1e18))

    @staticmethod
    def _eligible(rec: _Origin) -> float:
        """When the origin may be dispatched: its own rest and its host's both over."""
        return max(rec.state.eligible_at(), rec.host.state.next_allowed)

    def _get(self, origin: str) -> _Origin:
        rec = self._origins.get(origin)
        if rec is None:
            state, _owner, _taken = self.origin_store.load(origin)
            rec = self._new(origin, state)
        return rec

    def host_state(self, origin: str) -> OriginState:
        """The state of the origin's host (its rest's end, across its origins)."""
        return self._get(origin).host.state

    def state(self, origin: str) -> OriginState:
        return self._get(origin).state

    def next_request_at(self, origin: str) -> float:
        """The soonest the origin's next request may go, as this process knows it now:
        its own rest and waits, its host's rest (any origin of the host may have set a
        longer one) and its server's round's rest; ``math.inf`` for a stopped origin. A
        server whose round is full is not counted (its round's last answer sets the
        time). Read only; a dictionary lookup and a few comparisons."""
        rec = self._origins.get(origin)
        if rec is None or origin in self.stopped:
            return math.inf
        at = self._eligible(rec)
        server = rec.server
        if server is not None:
            found = next_send(server.state, server.in_flight)
            if found is not None:
                at = max(at, found)
        return at

    def params(self, origin: str) -> RestParams:
        return self._get(origin).params

    def _lead(self, rec: _Origin) -> float:
        """How long before its origin's time a request may be handed out
        (:func:`polite_crawler.policy.rest.dispatch_lead`)."""
        return dispatch_lead(self.config.dispatch_lead, rec.params)

    def _reheap(self, origin: str, rec: _Origin, at: float, *, ahead: bool = True,
                after: float | None = None) -> None:
        """Place the origin in the heap at the time its next request may be handed out:
        ``at`` plus :data:`DISPATCH_MARGIN`, less its lead when ``ahead`` (not for a retry
        the frontier must not ask before its time: a busy lease, robots.txt awaited).

        ``after``: the time of a dispatch that just found the origin not ready (its
        callers' ``at`` is never before it). The lead is then left out where it would
        place the origin at or before that time: a place already due would be popped
        again at once, without end."""
        if rec.in_flight is not None or origin in self.stopped or not (rec.queued or rec.transient):
            rec.heap_seq = None
            return
        host = rec.host
        if host.in_flight is not None:
            # Another origin of the host has a request out: placed when it ends (_free).
            rec.heap_seq = None
            host.waiting[origin] = None
            return
        at = max(at, host.state.next_allowed)
        if host.yielded:
            at += DISPATCH_MARGIN
        seq = next(self._seq)
        rec.heap_seq = seq
        place = at + DISPATCH_MARGIN
        if ahead:
            led = place - self._lead(rec)
            if after is None or led > after:
                place = led
        heapq.heappush(self._heap, (place, seq, origin))

    def next_eligible(self) -> float | None:
        """When the next request may be handed out (None: nothing waits).

        That is its origin's eligible time plus :data:`DISPATCH_MARGIN`, less its
        dispatch lead (:meth:`_lead`).
        """
        heap = self._heap
        while heap:
            at, seq, origin = heap[0]
            rec = self._origins.get(origin)
            if rec is not None and rec.heap_seq == seq:
                return at
            heapq.heappop(heap)
        return None

    def restore(self, stopped_at: Mapping[str, float] | None = None) -> int:
        """After a restart: rows in flight go back to the queue; every origin waits its
        rest; a saved stop for an owner whose stop was lifted since is not taken on
        again (``stopped_at``: when the queue recorded its stops, the embedded backend's
        :meth:`QueueStore.stopped_times`; :meth:`_drop_lifted_owner_stops`)."""
        requeued = self.queue.requeue_in_flight()
        self._drop_lifted_owner_stops(stopped_at or {})
        self.queue.commit()
        for origin, n in self.queue.counts():
            if origin in self.stopped:
                self.queue.drop_origin(origin)
                continue
            rec = self._get(origin)
            if rec.owner is not None and rec.owner.refused:
                # Its owner refused the crawler earlier in the run (its stored state).
                self.stop(origin, OWNER_REFUSED)
                continue
            rec.queued = n
            self.pending += n
            self._reheap(origin, rec, rec.state.eligible_at())
        self.queue.commit()
        return requeued

    def _drop_lifted_owner_stops(self, stopped_at: Mapping[str, float]) -> None:
        """The saved stops for an owner's refusal (``owner_refused``) a restarted job
        takes on again are those whose owner's stop still stands: its row keeps a stop
        for this run (a lift clears the row, so a stop there is later than any lift),
        or this queue saved a refusal by one of the owner's origins after the owner's
        last lift (``scrapy unblock``; with no lift kept, any refusal). Otherwise the
        operator lifted it since, or the rows no longer hold it for this run (the
        owner forgotten, a stop another job stored and another run's job replaced):
        its origins are asked again, forgotten by the queue, in one line an owner and
        ``polite/owner/restored_stop_dropped`` an origin. The refusing origin's own stop
        stays for the run, as a running job that takes the lift on keeps it."""
        if self.owner_store is None:
            return
        held: dict[str, list[str]] = {}
        refused: dict[str, list[float]] = {}
        for origin, why in self.stopped.items():
            if why == OWNER_REFUSED:
                held.setdefault(owner_of(host_of_origin(origin)), []).append(origin)
            elif is_refusal(why):
                refused.setdefault(owner_of(host_of_origin(origin)), []).append(
                    stopped_at.get(origin, 0.0))
        if not held:
            return
        lifts = dict(self.owner_store.owner_lifts(0.0))
        for name, origins in held.items():
            lift = lifts.get(name)
            if (any(lift is None or at > lift for at in refused.get(name, ()))
                    or self._owner(host_of_origin(origins[0])).refused):
                continue  # the owner's stop stands
            lifted = lift is not None and any(stopped_at.get(o, 0.0) < lift for o in origins)
            for origin in origins:
                self._get(origin)  # its row read, to be written without the stop
                self._unstop_for_owner(origin)
            self.count("polite/owner/restored_stop_dropped", len(origins))
            logger.warning(
                "The saved stop of %(n)d origins for owner %(owner)s's refusal is not "
                "taken on again (%(why)s): they are asked again",
                {"n": len(origins), "owner": name,
                 "why": "scrapy unblock lifted it since" if lifted
                 else "the owner's row no longer keeps it for this run"})

    def _unstop_for_owner(self, origin: str) -> None:
        """The origin's stop for its owner's refusal ends: not stopped here, in its
        row or in the queue (a restart does not take it on again)."""
        del self.stopped[origin]
        self.queue.unstop(origin)
        rec = self._origins.get(origin)
        if rec is not None and rec.state.failure.stopped == OWNER_REFUSED:
            rec.state.failure.stopped = None  # its row no longer says stopped
            if self.origin_rows is not None:
                self._dirty.add(origin)

    # --- enqueue -------------------------------------------------------------
    def admit(self, origin: str) -> str | None:
        """Why a new request for the origin is refused now (None: it may be queued)."""
        if origin in self.stopped:
            return "stopped"
        rec = self._get(origin)
        if rec.owner is not None and rec.owner.refused:
            self.stop(origin, OWNER_REFUSED)  # another host of its owner refused the crawler
            return "stopped"
        owner = rec.owner.state if rec.owner is not None else None
        if budget_spent(rec.state, owner, self.config.budget, self.clock()):
            return "budget_exhausted"  # the origin's, or its owner's: shared by its hosts
        return None

    def push(self, origin: str, prio: int, url: str, data: bytes) -> int:
        row_id = self.queue.push(origin, prio, url, data)
        if self.queue.deferred:
            return row_id  # counted when its batch says where it went (set_queued)
        rec = self._get(origin)
        rec.queued += 1
        self.pending += 1
        if rec.heap_seq is None:
            self._reheap(origin, rec, rec.state.eligible_at())
        return row_id

    def push_many(self, rows: list[tuple[str, int, str, bytes]]) -> None:
        """Queue ``(origin, prio, url, data)`` rows in one statement (:meth:`push` for many)."""
        if not rows:
            return
        self.queue.push_many(rows)
        if self.queue.deferred:
            return
        for origin, n in Counter(map(itemgetter(0), rows)).items():
            rec = self._get(origin)
            rec.queued += n
            self.pending += n
            if rec.heap_seq is None:
                self._reheap(origin, rec, rec.state.eligible_at())

    def push_transient(self, origin: str, obj: Any) -> None:
        """A request that bypasses the robots.txt wait (a redirected robots.txt fetch)."""
        if origin in self.stopped:
            return
        rec = self._get(origin)
        rec.transient.append(obj)
        self.pending += 1
        if rec.heap_seq is None:
            self._reheap(origin, rec, rec.state.eligible_at())

    # --- dispatch ------------------------------------------------------------
    def pop(self) -> Dispatch | None:
        now = self.clock()
        heap = self._heap
        while heap and heap[0][0] <= now:
            at, seq, origin = heapq.heappop(heap)
            rec = self._origins.get(origin)
            if rec is None or rec.heap_seq != seq:
                continue
            rec.heap_seq = None
            if now - at > LATE and at > self._opened:
                # The process did not keep up (a blocked reactor, too many origins).
                self.count("polite/frontier/late_dispatch", 1)
            found = self._dispatch(origin, rec, now)
            if found is not None:
                return found
        return None

    def _dispatch(self, origin: str, rec: _Origin, now: float) -> Dispatch | None:
        if rec.in_flight is not None or origin in self.stopped:
            return None
        host = rec.host
        if host.in_flight is not None:
            self.count("polite/frontier/host_busy", 1)
            host.waiting[origin] = None
            return None
        owner = rec.owner
        cap = self.config.owner_concurrency
        if owner is not None and cap > 0 and owner.in_flight >= cap:
            self.count("polite/frontier/owner_busy", 1)
            owner.waiting[origin] = None
            rec.heap_seq = None
            return None
        server = None
        server_at = 0.0
        if self.address_of is not None:
            server = self._server_of(origin, rec)
            if server is None:
                return None  # its address is asked for: placed when it is known
            found_at = next_send(server.state, server.in_flight, server.granted)
            if found_at is None:
                # The server's round is full: placed again when a place frees.
                held_back(server.state)
                server.waiting[origin] = None
                rec.heap_seq = None
                self.count("polite/frontier/server_busy", 1)
                if server.granted is not None and server.granted < server.state.limit:
                    self.server_asks.add(server.state.address)  # more places wanted
                return None
            server_at = found_at
        robots = self._robots()
        if robots is not None:
            self._learn_crawl_delay(origin, rec, robots)
        at = self._eligible(rec)
        if server is not None and server_at > at:
            held_back(server.state)  # the server's bound, not the site's rest, holds it
            at = server_at
        lead = self._lead(rec)
        if at > now + lead:
            self._reheap(origin, rec, at, after=now)
            return None
        # The time the request may be sent: now, or (handed out ahead) its origin's time
        # with the margin (the store judges the rest at that time).
        send_at = max(now, at + DISPATCH_MARGIN) if lead > 0 else now
        kind = CONTENT
        row: Row | None = None
        if rec.transient:
            kind = TRANSIENT
        elif robots is not None and robots.needs_fetch(origin):
            rec.robots_fetches += 1
            if rec.robots_fetches > MAX_UNUSABLE_FETCHES:
                self.stop(origin, "robots_unreachable")
                return None
            kind = ROBOTS
        elif robots is not None and not robots.ready(origin):
            # Outage without a usable copy, or the robots.txt is being fetched elsewhere.
            retry = max(float(robots.retry_at(origin) or 0.0), now + min(rec.params.rest_page, 1.0))
            self.count("polite/frontier/robots_wait", 1)
            self._reheap(origin, rec, retry, ahead=False, after=now)
            return None
        else:
            row = self._content_row(origin, rec, owner, robots, now)
            if row is None:
                return None
        if not self._lease(origin, rec, kind, now, send_at):
            return None
        return self._hand_out(origin, rec, kind, row, server=server, owner=owner, now=now,
                              send_at=send_at)

    def _content_row(self, origin: str, rec: _Origin, owner: _Owner | None, robots: Any,
                     now: float) -> Row | None:
        """The origin's next row its robots.txt allows, within the daily budgets of
        the origin and its owner (None: nothing to send; a spent budget drops the
        queue, a disallowed row is deleted)."""
        rec.robots_fetches = 0  # robots.txt is usable: the fetch streak ends
        if budget_spent(rec.state, owner.state if owner is not None else None,
                        self.config.budget, now):
            self._drop_all(origin, rec, "budget_exhausted")
            logger.info("Daily budget of %(origin)s is spent; its queue is dropped",
                        {"origin": origin})
            return None
        while True:
            row = self.queue.head(origin)
            if row is None:
                self.pending -= rec.queued
                rec.queued = 0
                return None
            if robots is not None and not robots.allowed(row.url):
                self.queue.delete(row.id)
                rec.queued -= 1
                self.pending -= 1
                self.count("polite/robots/disallowed", 1)
                logger.debug("Forbidden by robots.txt: %(url)s", {"url": row.url})
                continue
            return row

    def _lease(self, origin: str, rec: _Origin, kind: str, now: float,
               send_at: float) -> bool:
        """Take the lease that lets this process send to the origin (processes sharing
        the state DB: its host's, held across the host's requests; a cluster: the
        origin's); refused, the origin is placed again at the time the answer gives."""
        if self.host_store is not None:
            lease = self._lease_host(rec, now, send_at)
            if lease is None:
                if not rec.stored:
                    # Its row from its first request on, as when each request leased
                    # it: the operator's commands know the origin (forget, explain).
                    self.origin_store.save(rec.state, now)
                    rec.stored = True
                return True
        else:
            lease = self.origin_store.try_lease(
                origin, now, self.config.lease_ttl, rec.params.base(False), state=rec.state,
                send_at=send_at,
            )
            rec.state = lease.state
            if lease.taken:
                return True
        if kind == ROBOTS:
            rec.robots_fetches -= 1
        self.count("polite/frontier/lease_busy", 1)
        retry = max(lease.retry_at, now + 0.001)
        # The shared row's rest is what waits (another process fetched meanwhile):
        # asked again ahead, as that process asks, so neither always wins. A lease
        # another process holds (or, on a cluster, an origin not this worker's) is
        # asked again at its time.
        ahead = lease.answer is LeaseAnswer.RESTING
        self._reheap(origin, rec, retry, ahead=ahead, after=now)
        return False

    def _lease_host(self, rec: _Origin, now: float, send_at: float) -> Lease | None:
        """The host's row lease for a request of ``rec`` (None: held, the request may
        go; else the refusal). Held already, nothing is asked: the host's rest and its
        origins' are in this process's memory while it holds the lease."""
        host = rec.host
        if host.leased:
            if host.lease_until > now:
                return None
            # Not renewed in time (the process was frozen past its lease's end): another
            # job may have taken the host since; asked of the row again.
            host.leased = False
            self._leased.pop(host.state.origin, None)
        assert self.host_store is not None
        name = host.state.origin
        lease, other = self.host_store.take(
            name, now, self.config.lease_ttl, rec.params.base(False), state=host.state,
            send_at=send_at,
        )
        host.state = lease.state
        host.yielded = False
        if not lease.taken:
            return lease
        host.leased, host.leased_at = True, now
        host.lease_until = now + self.config.lease_ttl
        self._leased[name] = host
        if other:
            # Another process held the host since this one last wrote its row: its
            # origins' rows are newer than the states held here.
            self._read_origins(host)
            at = max(rec.state.eligible_at(), host.state.next_allowed)
            if at > send_at:
                return Lease(LeaseAnswer.RESTING, rec.state, at)
        return None

    def _read_origins(self, host: _Host) -> None:
        """The host's origins' states as their rows hold them (none is in flight)."""
        for origin in host.origins:
            rec = self._origins.get(origin)
            if rec is None or rec.in_flight is not None:
                continue
            rec.state = self.origin_store.load(origin)[0]
            self._dirty.discard(origin)
            self._host_learns(rec)

    def _hand_out(self, origin: str, rec: _Origin, kind: str, row: Row | None, *,
                  server: _Server | None, owner: _Owner | None, now: float,
                  send_at: float) -> Dispatch:
        """The leases taken: the request goes out, counted where it is bounded."""
        token = next(self._tokens)
        rec.host.in_flight = origin
        if server is not None:
            rec.sent_at = sent(server.state, server.in_flight)
            server.in_flight += 1
        if owner is not None:
            owner.in_flight += 1
            rec.owner_counted = True
        rec.in_flight, rec.in_flight_since, rec.in_flight_kind = token, now, kind
        rec.in_flight_row = None
        obj = None
        if kind == CONTENT:
            assert row is not None
            self.queue.mark_in_flight(row.id)
            rec.in_flight_row = row.id
            rec.queued -= 1
            self.pending -= 1
            charge_budget(rec.state, now)
            if owner is not None:
                charge_budget(owner.state, now)
                self._owners_dirty.add(owner.state.origin)
        elif kind == TRANSIENT:
            obj = rec.transient.pop(0)
            self.pending -= 1
        self.count(f"polite/frontier/dispatched/{kind}", 1)
        return Dispatch(kind, origin, token, row, obj, send_at if send_at > now else 0.0)

    def _learn_crawl_delay(self, origin: str, rec: _Origin, robots: Any) -> None:
        """A Crawl-delay read since the last exchange settled lengthens the current rest.

        The gate settles an exchange before the robots.txt middleware has recorded
        the file it carried, so the rest after robots.txt itself is set without the
        Crawl-delay; it is added here, before the first page goes.
        """
        delay = robots.crawl_delay(origin)
        new = float(delay) if delay is not None else None
        if new == rec.state.crawl_delay:
            return
        rec.state.crawl_delay = new
        if new and rec.state.last_end:
            rest = min(new, rec.params.crawl_delay_max)
            rec.state.next_allowed = max(rec.state.next_allowed, rec.state.last_end + rest)

    def put_back(self, origin: str, token: int | None, obj: Any = None) -> bool:
        """A request handed out that must not be sent after all (the process no longer
        holds the origin: the gate's lease check, :meth:`FrontierScheduler.may_send`):
        undone as if it had never been handed out. Its row goes back to the head of the
        origin's queue in the store (:meth:`URLQueue.unmark_in_flight`: unless the store
        no longer holds the origin for this process, whose next owner fetches it), the
        budget it was charged is given back, and the origin is freed with no rest and
        without a settled row (nothing was fetched, nothing is done). A transient request
        (``obj``) goes back first in line; a robots.txt fetch is simply asked again.
        False when ``token`` is not the origin's request in flight."""
        rec = self._origins.get(origin)
        if rec is None or token is None or rec.in_flight != token:
            return False
        kind, row_id = rec.in_flight_kind, rec.in_flight_row
        rec.in_flight = None
        rec.in_flight_row = None
        if kind == CONTENT and row_id is not None:
            uncharge_budget(rec.state, self.clock())
            if rec.owner is not None:
                uncharge_budget(rec.owner.state, self.clock())
                self._owners_dirty.add(rec.owner.state.origin)  # the row's count too
            if self.queue.unmark_in_flight(row_id):
                if origin in self.stopped:  # stopped meanwhile: dropped as its queue was
                    self.queue.delete(row_id)
                else:
                    rec.queued += 1
                    self.pending += 1
        elif kind == TRANSIENT and obj is not None and origin not in self.stopped:
            rec.transient.insert(0, obj)
            self.pending += 1
        elif kind == ROBOTS:
            rec.robots_fetches = max(rec.robots_fetches - 1, 0)
        self.count("polite/frontier/put_back", 1)
        now = self.clock()
        self._store_origin(origin, rec, now)
        self._free_host(rec, now)
        self._reheap(origin, rec, rec.state.eligible_at())
        return True

    def drop_dispatch(self, d: Dispatch, reason: str) -> None:
        """A dispatched request could not be sent at all (e.g. it cannot be deserialised)."""
        if d.row is not None:
            self.queue.delete(d.row.id)
        self.count(f"polite/frontier/dropped/{reason}", 1)
        self.release(d.origin, d.token)

    # --- the end of an exchange ----------------------------------------------
    def in_flight(self, origin: str, token: int | None) -> bool:
        rec = self._origins.get(origin)
        return rec is not None and token is not None and rec.in_flight == token

    def settle(
        self,
        origin: str,
        token: int,
        *,
        start: float,
        end: float,
        api: bool = False,
        failure: FailureState | None = None,
        observe: bool = True,
    ) -> Rest | None:
        """The exchange ended: fold it into the origin's state, store it, free the origin."""
        rec = self._origins.get(origin)
        if rec is None or rec.in_flight != token:
            return None
        server = rec.server
        if server is not None and rec.sent_at:
            # A 503, a timeout, a refused connection (a failure that is not a 429) is
            # the machine's: every site on the address waits. A 429 stays the site's.
            old = rec.state.failure
            machine = failure is not None and (
                failure.consecutive_failures > old.consecutive_failures
                and failure.rate_limit_hits == old.rate_limit_hits)
            wait = max(failure.wait_until - end, 0.0) if failure is not None else 0.0
            server.in_flight -= 1
            probing = server.state.probing
            changed = answered(server.state, self.config.servers,
                               duration=max(end - start, 0.0), end=end,
                               concurrency=rec.sent_at, in_flight=server.in_flight,
                               failure=machine, wait=wait, observe=observe,
                               cap=server.granted)
            rec.sent_at = 0
            if server.granted is not None and (
                    changed or machine or probing != server.state.probing
                    or (server.contended and server.in_flight == 0)):
                # The shared limit moved or its probe was judged, the machine failed
                # (every worker's sites wait), or the round is over while another
                # worker waits for places.
                self.server_asks.add(server.state.address)
        state = rec.state
        # What the server said (a wait, a failure, a stop) and the latency factor are
        # stored at once; the rest of the state at the next checkpoint (_store_origin).
        said = failure is not None and failure != state.failure
        factor = state.latency_factor
        if failure is not None:
            state.failure = failure
        robots = self._robots()
        if robots is not None:
            delay = robots.crawl_delay(origin)
            state.crawl_delay = float(delay) if delay is not None else None
        rest, doubled = settle(state, rec.params, start=start, end=end, api=api,
                               rng=self.rng, observe=observe)
        if doubled:
            self.count("polite/frontier/latency_doubled", 1)
            logger.info(
                "%(origin)s answers slower than when the crawl began: its rest doubles (x%(f)g)",
                {"origin": origin, "f": state.latency_factor},
            )
        self._free(origin, rec, end, at_once=said or state.latency_factor != factor)
        return rest

    def release(self, origin: str, token: int | None) -> None:
        """The request never reached the network: free the origin with no rest."""
        rec = self._origins.get(origin)
        if rec is None or token is None or rec.in_flight != token:
            return
        self.count("polite/frontier/released", 1)
        self._free(origin, rec, self.clock())

    def _free(self, origin: str, rec: _Origin, now: float, *, at_once: bool = False) -> None:
        row = rec.in_flight_row
        if row is not None:
            self._settled_rows[row] = now
        rec.in_flight = None
        rec.in_flight_row = None
        self._store_origin(origin, rec, now, at_once=at_once)
        self._free_host(rec, now, row=row)
        self._reheap(origin, rec, rec.state.eligible_at())

    def _store_origin(self, origin: str, rec: _Origin, now: float, *,
                      at_once: bool = False) -> None:
        """The origin's exchange is over: its state goes to its store. With host rows
        (its host's lease held still) its row is written at the next checkpoint, or
        before the host's lease goes back; ``at_once`` (what the server said changed:
        a wait, a failure, the latency factor) now, so a kill -9 keeps it."""
        rows = self.origin_rows
        if rows is None:
            self.origin_store.release(rec.state, now)
        elif at_once:
            rows.save(rec.state, now)
            self._dirty.discard(origin)
        else:
            self._dirty.add(origin)

    def _has_work(self, host: _Host) -> bool:
        """Whether an origin of the host has a request out or waiting."""
        origins = self._origins
        for origin in host.origins:
            rec = origins.get(origin)
            if rec is not None and origin not in self.stopped and (
                    rec.queued or rec.transient or rec.in_flight is not None):
                return True
        return False

    def _give_back(self, hosts: list[_Host], now: float) -> None:
        """The hosts' leases go back: their origins' rows written first (whoever takes
        a host next reads them), then the hosts' rows with the rest's end."""
        if not hosts or self.host_store is None:
            return
        origins = [o for host in hosts for o in host.origins if o in self._dirty]
        self._write_origins(origins, now)
        self.host_store.give_back([host.state for host in hosts], now)
        for host in hosts:
            host.leased = False
            self._leased.pop(host.state.origin, None)

    def _write_origins(self, names: list[str] | set[str], now: float) -> None:
        """The origin rows of ``names`` written, in one transaction."""
        if self.origin_rows is None or not names:
            return
        known = self._origins
        self.origin_rows.write([known[o].state for o in names if o in known], now)
        self._dirty.difference_update(names)

    def _free_server(self, rec: _Origin, now: float) -> None:
        """The origin's request left its server (answered, or never sent: its place in
        the round is given back); the origins its full round held are placed again,
        as many as there is room for."""
        server = rec.server
        if server is None:
            return
        if rec.sent_at:
            server.in_flight = max(server.in_flight - 1, 0)
            released(server.state, server.in_flight)
            rec.sent_at = 0
            if server.granted is not None and server.contended and server.in_flight == 0:
                self.server_asks.add(server.state.address)
        self._place_waiting(server, rec)

    def _place_waiting(self, server: _Server, rec: _Origin | None = None) -> None:
        """Origins the server's full round held are placed again, as many as there is
        room for."""
        waiting = server.waiting
        if not waiting or next_send(server.state, server.in_flight, server.granted) is None:
            return
        room = server.state.limit if server.granted is None else min(server.state.limit,
                                                                     server.granted)
        for _ in range(max(room - server.in_flight, 1)):
            if not waiting:
                break
            other = next(iter(waiting))
            del waiting[other]
            orec = self._origins.get(other)
            if orec is not None and orec.heap_seq is None and orec is not rec:
                self._reheap(other, orec, orec.state.eligible_at())

    def _free_owner(self, rec: _Origin) -> None:
        """The origin's request no longer counts in its owner's; origins its cap held
        are placed again, as many as there is room for."""
        owner = rec.owner
        if owner is None or not rec.owner_counted:
            return
        rec.owner_counted = False
        owner.in_flight = max(owner.in_flight - 1, 0)
        room = self.config.owner_concurrency - owner.in_flight
        while owner.waiting and room > 0:
            other = next(iter(owner.waiting))
            del owner.waiting[other]
            orec = self._origins.get(other)
            if orec is not None and orec.heap_seq is None and orec is not rec:
                self._reheap(other, orec, orec.state.eligible_at())
                room -= 1

    def _server_of(self, origin: str, rec: _Origin) -> _Server | None:
        """The origin's server as its host's name resolves now (None: asked, not known
        yet; the origin waits for :meth:`address_known`)."""
        assert self.address_of is not None
        name = rec.host.state.origin
        address = self.address_of(name)
        if address is None:
            self._unresolved.setdefault(name, set()).add(origin)
            rec.heap_seq = None
            self.count("polite/frontier/address_wait", 1)
            return None
        server = rec.server
        if server is None or server.state.address != address:
            if server is not None:
                server.origins.discard(origin)
            server = self._servers.get(address)
            if server is None:
                server = self._servers[address] = _Server(
                    ServerState(address, since=self.clock()),
                    granted=0 if self.shared_servers else None)
            rec.server = server
            server.origins.add(origin)
        return server

    def address_known(self, name: str) -> None:
        """The address of the host ``name`` is known now: its origins that waited for
        it are placed."""
        for origin in self._unresolved.pop(name, ()):
            rec = self._origins.get(origin)
            if rec is not None and rec.heap_seq is None:
                self._reheap(origin, rec, rec.state.eligible_at())

    def server_of(self, origin: str) -> ServerState | None:
        """The bound of the origin's server (None: its address is not known yet)."""
        rec = self._origins.get(origin)
        return rec.server.state if rec is not None and rec.server is not None else None

    def servers(self) -> dict[str, ServerState]:
        """Every server's bound, by address (read only: metrics, report)."""
        return {a: s.state for a, s in self._servers.items()}

    # --- a server's limit shared with other processes (a cluster's batches) ----------
    def server_demand(self, address: str) -> ServerDemand | None:
        """What this process holds of the server's places and wants of them now (None:
        no such server, or its limit is not shared)."""
        server = self._servers.get(address)
        if server is None or server.granted is None:
            return None
        st = server.state
        working = 0
        for origin in server.origins:
            rec = self._origins.get(origin)
            if rec is not None and rec.server is server and origin not in self.stopped and (
                    rec.queued or rec.transient or rec.in_flight is not None):
                working += 1
        want = min(st.limit, working)
        return ServerDemand(address, server.granted, server.in_flight, want, st.limit,
                            st.next_allowed, st.wait_until,
                            server.in_flight == 0 and st.round_n == 0, server.contended,
                            server.others, st.probing, st.no_probe_until)

    def shared_servers_held(self) -> list[str]:
        """The addresses this process holds places of."""
        return [a for a, s in self._servers.items() if s.granted]

    def server_granted(self, address: str, granted: int, *, limit: int, until: float,
                       wait: float, others: int, no_probe: float = 0.0) -> None:
        """The shared store's answer for the server: ``granted`` places are this
        process's now, of a shared ``limit``; ``until``: the rest another process left
        with the places it gave back (waited before a place newly granted is used);
        ``wait``: a failure of the machine every process waits out; ``others``: how
        many other processes wait for places; ``no_probe``: a probe of a larger limit waits
        until then (another process's probe found the machine queue ours)."""
        server = self._servers.get(address)
        if server is None or server.granted is None:
            return
        st = server.state
        if granted > server.granted:
            st.next_allowed = max(st.next_allowed, until)
        st.wait_until = max(st.wait_until, wait)
        st.no_probe_until = max(st.no_probe_until, no_probe)
        shared_limit(st, limit)
        server.granted = granted
        server.contended = others > 0
        server.others = others
        self._place_waiting(server)

    def server_contended(self, address: str) -> None:
        """Another process waits for places of the server: this one gives its own back
        when its round is over (asked at once when it is over already)."""
        server = self._servers.get(address)
        if server is None or not server.granted:
            return
        server.contended = True
        server.others = max(server.others, 1)
        if server.in_flight == 0:
            self.server_asks.add(address)

    def servers_lost(self) -> None:
        """Every place this process held is gone (its cluster lease ran out)."""
        for server in self._servers.values():
            if server.granted is not None:
                server.granted = 0
                server.contended = False

    def _free_host(self, rec: _Origin, now: float, *, row: int | None = None) -> None:
        """The host's request ended (or never went): its rest is the latest the origin
        set, its lease goes back where the job has no work for the host (once the
        spider is done with ``row``, the settled request's, whose response may bring
        more), and the origins that waited for it are placed again."""
        host = rec.host
        self._host_learns(rec)
        self._free_server(rec, now)
        self._free_owner(rec)
        host.in_flight = None
        if host.leased:
            if now - host.leased_at >= self.config.lease_ttl:
                # This process's turn is over: a job sharing the state directory that
                # waits for the host takes it at the end of its rest.
                self._give_back([host], now)
                host.yielded = True
            elif not self._has_work(host):
                if row is None:
                    self._give_back([host], now)
                else:
                    self._awaited[row] = host  # asked again when it is done (_done_with)
        if host.waiting:
            waiting, host.waiting = host.waiting, {}
            for other in waiting:
                orec = self._origins.get(other)
                if orec is not None and orec.heap_seq is None and orec is not rec:
                    self._reheap(other, orec, orec.state.eligible_at())

    def done(self, row_id: int | None) -> None:
        """The spider is finished with a request (its children are queued): forget its row.

        The row's removal commits together with everything queued before it, so a
        crash either keeps both (the page is fetched again) or neither is lost.
        """
        if row_id is None:
            return
        self._settled_rows.pop(row_id, None)
        self.queue.delete(row_id)
        self.queue.commit()
        self._done_with(row_id)

    def _done_with(self, row_id: int) -> None:
        """The spider is done with the row's response: the host's lease goes back if the
        job has still no work for the host (what the response queued is in by now)."""
        host = self._awaited.pop(row_id, None)
        if host is not None and host.leased and host.in_flight is None \
                and not self._has_work(host):
            self._give_back([host], self.clock())

    def hold(self, row_id: int | None, key: str) -> None:
        """The spider is finished with the row's response but keeps some of what it made
        of it in memory (a page's links, held until its origin's sitemaps are read): the
        row stays until :meth:`release_held` of ``key``, so a crash keeps the page queued
        (fetched again, conditionally) rather than losing its links."""
        if row_id is None:
            return
        self._settled_rows.pop(row_id, None)
        self._held.setdefault(key, []).append((row_id, self.clock()))
        self._done_with(row_id)

    def release_held(self, key: str) -> None:
        """What the spider kept for ``key`` is queued now: the rows held for it go."""
        held = self._held.pop(key, None)
        if not held:
            return
        for row_id, _since in held:  # as done() each, in one commit
            self._settled_rows.pop(row_id, None)
            self.queue.delete(row_id)
        self.queue.commit()

    def _done_all(self) -> None:
        for row_id in list(self._settled_rows):
            self.done(row_id)
        for key in list(self._held):
            self.release_held(key)

    # --- stopping --------------------------------------------------------------
    def stop(self, origin: str, reason: str) -> None:
        """Nothing more from the origin this run: its queue is dropped."""
        if origin in self.stopped:
            return
        self.stopped[origin] = reason
        self.stops_made += 1
        self.queue.stop(origin, reason)
        rec = self._get(origin)
        rec.state.failure.stopped = rec.state.failure.stopped or reason
        if self.origin_rows is not None:
            self._dirty.add(origin)
        dropped = self._drop_all(origin, rec, "stopped")
        self.queue.commit()
        self.count(f"polite/origin/stopped/{reason}", 1)
        logger.warning(
            "Stopped %(origin)s for this run (%(reason)s); %(n)d queued requests dropped",
            {"origin": origin, "reason": reason, "n": dropped},
        )
        if is_refusal(reason) or reason == OWNER_REFUSED:
            # An owner's stop learnt from the shared store (a cluster worker that took
            # the owner's group) stops the owner here as the refusal did there.
            self._stop_owner(origin, rec, reason)

    def _stop_owner(self, origin: str, rec: _Origin, reason: str) -> None:
        """A refusal (402, 403, a challenge page) is the owner's answer: every host of
        its registrable domain is stopped for the run, those known now and any found
        later (:meth:`admit`), so a wildcard's names do not each refuse again
        (docs/ARCHITECTURE.md, "Owner")."""
        owner = rec.owner
        if owner is None or owner.refused:
            return
        owner.refused = f"{reason} from {origin}"
        owner.refused_at = owner.stopped_at = self.clock()
        # Part of the owner's stored state: written with its row at the next checkpoint
        # (the embedded backend; a run's, reset for another run), so a resumed job or
        # another process of the run stops the owner's hosts without asking them again.
        owner.state.failure.stopped = owner.refused
        self._owners_dirty.add(owner.state.origin)
        self._stop_owners_hosts(owner)

    def _stop_owners_hosts(self, owner: _Owner) -> None:
        """Every origin of the refused owner this process knows is stopped."""
        others = [o for o, r in self._origins.items()
                  if r.owner is owner and o not in self.stopped]
        if others:
            logger.warning("The crawler was refused (%(reason)s): every host of its "
                           "owner %(owner)s stops for this run (%(n)d origins)",
                           {"reason": owner.refused, "owner": owner.state.origin,
                            "n": len(others)})
        for other in others:
            self.stop(other, OWNER_REFUSED)

    def refused_owners(self, before: float) -> list[str]:
        """The owners this process holds stopped for a refusal, the stop taken on no
        later than ``before``: those a lift seen after then may end (on a cluster, the
        owners whose group to read for its stop: :meth:`lift_owner_stop`)."""
        return [name for name, o in self._owners.items()
                if o.refused and o.stopped_at <= before]

    def lift_owner_stop(self, name: str, lifted: float) -> list[str]:
        """The operator lifted the owner's stop at ``lifted`` (``scrapy unblock`` of one
        of its origins; the shared store says so: a lift on the embedded backend, the
        owner's group without its stop on a cluster). A stop this process took on
        before then ends: the origins it stopped for the owner (``owner_refused``) are
        asked again, those found later are admitted. The refusing origin's own stop
        stays for this run, as any origin's stop does. A stop taken on after ``lifted``
        (a refusal since) stands. Returns the origins no longer stopped."""
        owner = self._owners.get(name)
        if owner is None or not owner.refused or owner.stopped_at > lifted:
            return []
        was = owner.refused
        owner.refused, owner.refused_at, owner.stopped_at = "", 0.0, 0.0
        owner.state.failure.stopped = None
        freed = [o for o, why in self.stopped.items()
                 if why == OWNER_REFUSED and owner_of(host_of_origin(o)) == name]
        for origin in freed:
            self._unstop_for_owner(origin)
        self.count("polite/owner/stop_lifted", 1)
        logger.warning("The stop of owner %(owner)s (%(stop)s) was lifted (scrapy "
                       "unblock): %(n)d of its origins are asked again",
                       {"owner": name, "stop": was, "n": len(freed)})
        return freed

    def _drop_all(self, origin: str, rec: _Origin, reason: str) -> int:
        self.release_held(origin)  # nothing more of the origin: what was held goes too
        n = self.queue.drop_origin(origin)
        self.pending -= rec.queued + len(rec.transient)
        rec.queued = 0
        rec.transient.clear()
        rec.heap_seq = None
        if n:
            self.count(f"polite/frontier/{reason}", n)
        return n

    # --- upkeep ----------------------------------------------------------------
    def checkpoint(self) -> None:
        """Commit the queue, renew this process's leases, and free what never reported back."""
        now = self.clock()
        for row_id, since in list(self._settled_rows.items()):
            if now - since > DONE_GRACE:
                self.done(row_id)
        for key, rows in list(self._held.items()):
            if rows and now - rows[0][1] > DONE_GRACE:
                # Never released (a sitemap the frontier dropped, say): the rows go, so
                # a crawl is not kept open by what its spider forgot.
                self.count("polite/frontier/hold_expired", len(rows))
                self.release_held(key)
        busy = []
        for origin, rec in list(self._origins.items()):
            if rec.in_flight is None:
                continue
            if now - rec.in_flight_since > self.config.in_flight_timeout:
                logger.warning("%(origin)s: an exchange never ended; freeing the origin",
                               {"origin": origin})
                self.count("polite/frontier/in_flight_timeout", 1)
                rec.state.next_allowed = max(rec.state.next_allowed, now + rec.params.rest_page)
                self._free(origin, rec, now)
            else:
                busy.append(origin)
        if self.origin_rows is None:
            self.origin_store.renew(busy, now, self.config.lease_ttl)
        self._write_origins(self._dirty, now)
        self._save_owners(now)
        self._renew_hosts(now)
        self.queue.commit()

    def _renew_hosts(self, now: float) -> None:
        """The host leases this process holds: given back where it has no work for the
        host any more (a stop dropped its queue) or its turn is over with nothing in
        flight; renewed where they would run out before two more checkpoints could
        renew them (half their time left)."""
        if self.host_store is None or not self._leased:
            return
        ttl = self.config.lease_ttl
        done, renew = [], []
        for name, host in self._leased.items():
            if host.in_flight is None and (now - host.leased_at >= ttl
                                           or not self._has_work(host)):
                done.append(host)
                host.yielded = now - host.leased_at >= ttl
            elif host.lease_until - now < ttl / 2:
                renew.append(name)
                host.lease_until = now + ttl
        self._give_back(done, now)
        self.host_store.renew(renew, now, ttl)

    def _save_owners(self, now: float) -> None:
        """The owners' budget counts and stops go to their shared rows (once a
        checkpoint), merged with what other jobs of the run wrote there
        (:meth:`OwnerRows.merge_owners`): this process then counts from the rows' sum,
        and a stop another job stored stops its hosts of the owner here too."""
        if self.owner_store is None:
            return
        # Stops other jobs stored since the last look (a margin for a write stamped
        # before it and committed after; adopting one again changes nothing).
        since, self._owner_stops_read = self._owner_stops_read - OWNER_STOPS_MARGIN, now
        for name, lifted in self.owner_store.owner_lifts(since):
            self.lift_owner_stop(name, lifted)  # a stop from before an unblock ends
        for name, stop in self.owner_store.owner_stops(since):
            known = self._owners.get(name)
            if known is not None and not known.refused:
                known.refused = known.state.failure.stopped = stop
                known.stopped_at = now
                self._stop_owners_hosts(known)
        if not self._owners_dirty:
            return
        owners = [self._owners[name] for name in self._owners_dirty]
        self._owners_dirty = set()
        rows = self.owner_store.merge_owners(
            [(o.state, o.read_day, o.read_used, o.refused_at) for o in owners], now)
        for owner, row in zip(owners, rows, strict=True):
            owner.state.budget_day, owner.state.budget_used = row.budget_day, row.budget_used
            owner.read_day, owner.read_used = row.budget_day, row.budget_used
            if row.failure.stopped and not owner.refused:
                owner.refused = owner.state.failure.stopped = row.failure.stopped
                owner.stopped_at = now
                self._stop_owners_hosts(owner)

    def close(self, finished: bool) -> None:
        """Store everything; a finished crawl has no request left in flight."""
        now = self.clock()
        self._save_owners(now)
        if finished:
            self._done_all()
        self.queue.commit()
        self._write_origins(self._dirty, now)
        self._give_back(list(self._leased.values()), now)
        self.origin_store.release_all()
        if self.host_store is not None:
            self.host_store.release_all()

    def in_flight_origins(self) -> list[str]:
        return [o for o, rec in self._origins.items() if rec.in_flight is not None]

    # --- what a backend that syncs in batches uses (frontier.redis_frontier) ----------------
    # The rules stay here; such a backend learns from its store which origins this process
    # holds and how many rows each has queued, and tells the core.
    def params_for(self, origin: str) -> RestParams:
        """The rest numbers that apply to the origin (the public floor, or the test ones)."""
        return self._params_for(origin)

    def robots_book(self) -> Any:
        """The robots.txt book the frontier judges with (None in tests without one)."""
        return self._robots()

    def known(self, origin: str) -> bool:
        """Whether the frontier holds the origin's record now."""
        return origin in self._origins

    def finished(self, origin: str) -> bool:
        """Nothing of the origin is queued, waiting or in flight, and the spider holds
        nothing of it (read only): its crawl is over unless a page brings more. So is an
        origin this process does not hold (never seen, or given to another)."""
        if origin in self._held:
            return False
        rec = self._origins.get(origin)
        return rec is None or (not rec.queued and not rec.transient and rec.in_flight is None)

    def busy(self, origin: str) -> bool:
        """A request of the origin is out, or a transient one waits: it must not go elsewhere."""
        rec = self._origins.get(origin)
        return rec is not None and (rec.in_flight is not None or bool(rec.transient))

    def ready_origins(self, now: float) -> Iterator[str]:
        """Origins the frontier's own rules would let send at ``now``: not stopped, nothing
        in flight, a row or a transient request waiting, neither waiting on the server (a
        backoff, a Retry-After) nor resting (read only, as :func:`frontier_snapshot` reads
        them)."""
        for origin, rec in self._origins.items():
            if origin in self.stopped or rec.in_flight is not None \
                    or not (rec.queued or rec.transient):
                continue
            state = rec.state
            if state.failure.wait_until > now or state.next_allowed > now:
                continue
            yield origin

    def origins_with_transient(self) -> list[str]:
        """Origins with a transient request waiting (a redirected robots.txt fetch)."""
        return [o for o, rec in self._origins.items() if rec.transient]

    def set_queued(self, origin: str, n: int) -> None:
        """The store holds ``n`` rows of the origin for this process now."""
        rec = self._get(origin)
        self.pending += n - rec.queued
        rec.queued = n
        if rec.heap_seq is None:
            self._reheap(origin, rec, rec.state.eligible_at())

    def forget_origin(self, origin: str) -> None:
        """The origin is no longer this process's (given back, or taken by another): its
        queued rows are not counted; its record goes unless a request of it is out."""
        rec = self._origins.get(origin)
        if rec is not None:
            self.pending -= rec.queued
            rec.queued = 0
            rec.heap_seq = None
            rec.host.waiting.pop(origin, None)
            if rec.server is not None:
                rec.server.waiting.pop(origin, None)
            if rec.owner is not None:
                rec.owner.waiting.pop(origin, None)
            if rec.in_flight is None:
                del self._origins[origin]  # read afresh if it comes back

    def take_state(self, origin: str, state: OriginState) -> None:
        """The origin's state as its store holds it (an origin this process now owns):
        it replaces what the frontier held, and its place in the heap is set afresh by
        :meth:`set_queued`."""
        rec = self._origins.get(origin)
        if rec is None:
            rec = self._new(origin, state)
        else:
            rec.state = state
            self._host_learns(rec)
        rec.heap_seq = None

    def take_owner_budget(self, origin: str, day: str, used: int) -> None:
        """The daily count of the origin's owner as its shared store holds it (a group
        of owners this process now holds): it replaces what the frontier counted."""
        owner = self._get(origin).owner
        if owner is not None:
            owner.state.budget_day, owner.state.budget_used = day, used

    def done_all(self) -> None:
        """Every settled and held row is done (a finished crawl)."""
        self._done_all()


# --- a read-only view for the progress line (extensions/progress.py) ----------------------

@dataclass(frozen=True)
class ServerDemand:
    """One server's places as this process holds and wants them
    (:meth:`Frontier.server_demand`)."""

    address: str
    granted: int  # places held
    in_flight: int  # of ours open on it now (counted whatever the grant)
    want: int  # places wanted: its origins with work, up to its limit
    limit: int  # its limit as this process judges it (policy.servers)
    until: float  # the end of its rounds' rest
    wait: float  # a failure of the machine: nothing before this
    round_over: bool  # nothing of ours open on it, no round under way
    contended: bool  # another process waits for places
    others: int  # how many other processes wait for places, as last told
    probing: bool  # its limit just grew: not judged yet (policy.servers)
    no_probe: float  # no probe of a larger limit before this


def frontier_snapshot(frontier: Frontier, now: float) -> dict[str, float]:
    """Where the frontier's origins stand at ``now``; reads, changes nothing.

    An origin with work (queued, transient or in flight) and not stopped is *active*;
    each active one is in flight, resting (its rest not over), waiting on the server
    (a Retry-After or backoff wait), or ready (eligible now, waiting for a dispatch,
    its robots.txt or a lease). ``rate_ceiling`` is the sum over active origins of
    1 / rest (the last rest set, at least the base rest): the requests per second the
    rules allow right now.
    """
    out = {"active": 0.0, "in_flight": 0.0, "resting": 0.0, "server_wait": 0.0, "ready": 0.0,
           "stopped": float(len(frontier.stopped)), "queued": float(frontier.pending),
           "rate_ceiling": 0.0}
    for origin, rec in frontier._origins.items():
        if origin in frontier.stopped:
            continue
        if not (rec.queued or rec.transient or rec.in_flight is not None):
            continue
        out["active"] += 1
        state = rec.state
        if rec.in_flight is not None:
            out["in_flight"] += 1
        elif state.failure.wait_until > now:
            out["server_wait"] += 1
        elif max(state.next_allowed, rec.host.state.next_allowed) > now:
            out["resting"] += 1
        else:
            out["ready"] += 1
        rest = max(state.last_rest, rec.params.base(False))
        out["rate_ceiling"] += 1.0 / rest if rest > 0 else 0.0
    return out


@dataclass(frozen=True)
class ServerView:
    """Where one server stands (:func:`server_snapshot`)."""

    address: str
    share: float  # our load share of one of its workers since the crawl first knew it
    in_flight: int  # our requests open on it
    limit: int  # how many may be open at once (policy.servers)
    latency: float | None  # seconds: the window's median, or None before any answer
    hosts: tuple[str, ...]  # the host names on it this frontier knows


def server_snapshot(frontier: Frontier, now: float, top: int) -> list[ServerView]:
    """The ``top`` busiest servers (our load share, highest first) at ``now``. Reads,
    changes nothing."""
    hosts: dict[str, set[str]] = {}
    for rec in frontier._origins.values():
        if rec.server is not None:
            hosts.setdefault(rec.server.state.address, set()).add(rec.host.state.origin)
    rows = [ServerView(address, load_share(s.state, s.state.since, now), s.in_flight,
                       s.state.limit, latency(s.state), tuple(sorted(hosts.get(address, ()))))
            for address, s in frontier._servers.items()]
    rows.sort(key=lambda r: -r.share)
    return rows[:top]
