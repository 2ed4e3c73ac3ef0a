"""The frontier on Redis: the embedded frontier's rules over origins this worker owns.

The rules (the eligibility heap, rests, robots.txt, budget, stops) are the core's:
:class:`RedisFrontier` runs an unchanged :class:`~polite_crawler.frontier.core.Frontier`
(``.frontier``) over two in-memory stand-ins for its stores, the declared interfaces of
:mod:`polite_crawler.interfaces`, kept in step with Redis in batches
(:mod:`polite_crawler.frontier.redis_shared`); it reaches the core only through its
public methods (``set_queued``, ``forget_origin``, ``take_state``, ``busy``, ...):

- :class:`RedisQueue` (a :class:`~polite_crawler.interfaces.URLQueue`, ``deferred``):
  rows of owned origins claimed into memory (two lease periods of rests at a time, or
  with their own push); new rows, done rows, seen fingerprints, stops and templates
  gathered in an outbox; the fingerprints Redis acknowledged for owned origins.
- :class:`LocalLeases` (an :class:`~polite_crawler.interfaces.OriginLeases`): an origin
  may be dispatched only while this worker owns it and its own lease, as last
  confirmed, has time left.

A batch is planned on the reactor (:meth:`RedisFrontier.plan`), executed on a thread
(:func:`execute`) and applied on the reactor (:meth:`RedisFrontier.apply`); nothing
else waits on Redis. docs/CLUSTER.md gives the rules.
"""

from __future__ import annotations

import heapq
import logging
import math
import os
import socket
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from polite_crawler.frontier.core import OWNER_REFUSED, Frontier
from polite_crawler.frontier.dupefilter import url_fingerprint
from polite_crawler.frontier.redis_shared import (
    OriginSync,
    RedisShared,
    ServerCall,
    ServerGrant,
    SyncResult,
    Taken,
    parse_row,
    row_body,
    row_template,
    template_id,
)
from polite_crawler.interfaces import Lease, LeaseAnswer
from polite_crawler.policy.owners import owner_used_today
from polite_crawler.policy.rest import OriginState, utc_day
from polite_crawler.policy.urls import canonicalize
from polite_crawler.records import Row

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from polite_crawler.frontier.core import FrontierConfig, ServerDemand

logger = logging.getLogger(__name__)


def worker_id() -> str:
    """``host:pid:token``: unique per process start."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


# Fingerprints of one owned origin known to be in Redis's seen set, at most (a larger
# site's later links go to Redis's seen check as before).
SEEN_HERE_MAX = 20_000


def _fp64(fp: bytes) -> int:
    return int.from_bytes(fp[:8], "big", signed=True)


@dataclass
class _Own:
    """An origin this worker owns."""

    buffer: deque[Row] = field(default_factory=deque)  # claimed, not dispatched
    remote: int = 0  # rows queued in Redis beyond the buffer
    releasing: bool = False
    refreshed: float = 0.0  # last batch that asked Redis about its queue
    empty_since: float = 0.0  # nothing here, in Redis or out since (0: not empty)
    written: float = 0.0  # last batch that wrote its state (0: none in this ownership)
    written_key: tuple[Any, ...] = ()  # what of the state must not wait (see _state_due)
    verify_until: float = 0.0  # taken over: confirm claimed rows until the first dispatch
    ids: set[int] = field(default_factory=set)  # rows claimed in this ownership, not done
    orphans: bool = False  # Redis holds claims this worker does not know (a lost reply)
    wake: float = 0.0  # the earliest visit planned in the timer heap (0: none)


class RedisQueue:
    """The queue store's interface over claimed rows and an outbox (see the module doc)."""

    def __init__(self, crawl: str, shared: RedisShared) -> None:
        self.run_id = crawl
        self.shared = shared
        self.rows: dict[int, tuple[str, bytes, bytes]] = {}  # local id -> origin, seq, row
        self.own: dict[str, _Own] = {}
        self._ids = 0
        self.pushes: dict[str, list[tuple[int | None, int, bytes]]] = {}
        self.pushed_n = 0
        self.seen: dict[str, list[int]] = {}
        self.templates: dict[int, bytes] = {}  # new templates, for the next batch
        self.known: dict[int, bytes] = {}  # every template this worker has seen
        self.stops: dict[str, str] = {}
        self.unstops: set[str] = set()  # origins whose stop ended (an owner's stop lifted)
        self.drops: list[str] = []
        self.done_out: dict[str, list[tuple[bytes, bytes]]] = {}
        self._fresh: dict[bytes, int] = {}  # fingerprints admitted, waiting for their push
        # Owned origins -> fingerprints their seen set in Redis holds, as pushes of this
        # worker were acknowledged: a link found again is not sent (counted a duplicate
        # here). Forgotten with the origin, and all of it when Redis is found to have
        # lost the end of its log (RedisShared.kept): a row lost with its fingerprint is
        # pushed again by the page that found it, fetched again as its done was lost too.
        self.seen_here: dict[str, set[int]] = {}
        self.dups = 0
        # Origins something happened to since the last batch was planned (a row handed
        # out, done or put back, a stop, a batch's reply): the plan visits them, with
        # those whose state was saved (LocalLeases.dirty). A request of another kind
        # (robots.txt, transient) goes out only for an origin with rows or a transient
        # one waiting: its origin has work already (see RedisFrontier._visits).
        self.touched: set[str] = set()
        # Whether this worker holds the origin now (owned, its lease as last confirmed
        # not run out): RedisFrontier.holds. A row it never handed out is reported done
        # (dropped: robots.txt, a stop, the budget) only while it does.
        self.holds: Callable[[str], bool] = lambda origin: True

    # --- what the core calls -------------------------------------------------------
    def commit(self) -> None:
        return None

    def close(self) -> None:
        return None

    def requeue_in_flight(self) -> int:
        return 0  # a takeover requeues what the last owner had claimed

    def counts(self) -> Iterator[tuple[str, int]]:
        return iter(())

    def _fp_for(self, url: str) -> int | None:
        fp = url_fingerprint(url)
        n = self._fresh.get(fp)
        if n is None:
            try:
                fp = url_fingerprint(canonicalize(url))
            except ValueError:
                return None
            n = self._fresh.get(fp)
            if n is None:
                return None  # not admitted through the seen set (dont_filter, a retry)
        if n <= 1:
            del self._fresh[fp]
        else:
            self._fresh[fp] = n - 1
        return _fp64(fp)

    def _out(self, origin: str, prio: int, url: str, data: bytes) -> None:
        fp = self._fp_for(url)
        if fp is not None:
            known = self.seen_here.get(origin)
            if known is not None and fp in known:
                self.dups += 1
                return
        body = row_body(origin, url, data)
        self.pushes.setdefault(origin, []).append((fp, prio, body))
        self.pushed_n += 1

    def learn_seen(self, origin: str, rows: list[tuple[int | None, int, bytes]]) -> None:
        """A push of an owned origin was acknowledged: its fingerprints are in Redis."""
        known = self.seen_here.setdefault(origin, set())
        if len(known) < SEEN_HERE_MAX:
            known.update(fp for fp, _p, _b in rows if fp is not None)

    def push(self, origin: str, prio: int, url: str, data: bytes) -> int:
        self._out(origin, prio, url, data)
        self._ids += 1
        return -self._ids  # never a claimed row's id

    def push_many(self, rows: list[tuple[str, int, str, bytes]]) -> None:
        for origin, prio, url, data in rows:
            self._out(origin, prio, url, data)

    def head(self, origin: str) -> Row | None:
        own = self.own.get(origin)
        return own.buffer[0] if own is not None and own.buffer else None

    def mark_in_flight(self, row_id: int) -> None:
        origin = self.rows[row_id][0]
        self.touched.add(origin)
        own = self.own.get(origin)
        if own is not None and own.buffer and own.buffer[0].id == row_id:
            own.buffer.popleft()

    def unmark_in_flight(self, row_id: int) -> bool:
        found = self.rows.get(row_id)
        if found is None:
            return False
        origin, _seq, raw = found
        self.touched.add(origin)
        own = self.own.get(origin)
        if own is None or row_id not in own.ids:
            # Lost or given back (and perhaps taken again since: then it is claimed anew
            # under another id): the row is in Redis's queue again (put back by the
            # takeover or the give back), for whoever owns the origin.
            del self.rows[row_id]
            return False
        prio, _s, url, data = parse_row(raw, origin)
        own.buffer.appendleft(Row(row_id, origin, url, data, prio))
        return True

    def delete(self, row_id: int) -> None:
        found = self.rows.pop(row_id, None)
        if found is None:
            return
        origin, seq, raw = found
        self.touched.add(origin)
        own = self.own.get(origin)
        if own is not None:
            own.ids.discard(row_id)
        if own is not None and own.buffer and any(r.id == row_id for r in own.buffer):
            own.buffer = deque(r for r in own.buffer if r.id != row_id)
            if not self.holds(origin):
                # Never handed out, and the origin may be another worker's by now (this
                # one's lease ran out): not fetched, so not done here; its owner judges it.
                return
        self.done_out.setdefault(origin, []).append((seq, raw))

    def drop_origin(self, origin: str) -> int:
        self.touched.add(origin)
        own = self.own.get(origin)
        n = 0
        if own is not None:
            for row in list(own.buffer):
                self.delete(row.id)
            n = len(own.buffer) + own.remote
            own.buffer.clear()
            own.remote = 0
        self.drops.append(origin)
        return n

    def claimed(self, origin: str, raw: bytes) -> Row:
        prio, seq, url, data = parse_row(raw, origin)
        own = self.own.get(origin)
        self._ids += 1
        if own is not None:
            own.ids.add(self._ids)
        self.rows[self._ids] = (origin, seq, raw)
        return Row(self._ids, origin, url, data, prio)

    def forget_claims(self, origin: str) -> None:
        """The origin was given back or lost: its buffered rows are no longer ours."""
        self.seen_here.pop(origin, None)
        own = self.own.pop(origin, None)
        if own is not None:
            for row in own.buffer:
                self.rows.pop(row.id, None)

    # URL-row templates: the id is a hash of the bytes, the same in every worker.
    def template_id(self, data: bytes) -> int:
        tid = template_id(data)
        self.templates[tid] = data
        self.known[tid] = data
        return tid

    def template(self, tid: int) -> bytes | None:
        """A URL row's template: the batch that claimed the row read every template this
        worker did not know (no Redis call on the reactor, and none that an outage of
        Redis could fail, dropping the row)."""
        found = self.known.get(tid)
        if found is None:
            found = self.shared.template(tid)
            if found is not None:
                self.known[tid] = found
        return found

    # The seen set: decided in Redis when the row is pushed (one script per origin).
    # Fingerprints admitted wait here for their push, in the same reactor call; what is
    # left when a batch is planned was refused after the seen check, and is forgotten.
    def clear_fresh(self) -> None:
        self._fresh.clear()

    def add_seen(self, fp: bytes) -> bool:
        return True  # a URL marked seen without its origin: see mark_seen

    def add_seen_many(self, fps: list[bytes]) -> list[bool]:
        fresh = self._fresh
        for fp in fps:
            fresh[fp] = fresh.get(fp, 0) + 1
        return [True] * len(fps)

    def mark_seen(self, origin: str, fp: bytes) -> None:
        self.seen.setdefault(origin, []).append(_fp64(fp))

    def is_seen(self, fp: bytes) -> bool:
        return False

    def stop(self, origin: str, reason: str) -> None:
        self.stops[origin] = reason
        self.unstops.discard(origin)
        self.touched.add(origin)

    def unstop(self, origin: str) -> None:
        """The origin's stop for the crawl ends (its owner's stop was lifted): its
        ``stop:<crawl>`` goes with the next batch, before the batch's pushes."""
        self.stops.pop(origin, None)
        self.unstops.add(origin)
        self.touched.add(origin)

    def stopped(self) -> dict[str, str]:
        return {}

    # Rows pushed go out with the next batch; their count comes back with it
    # (Frontier.set_queued), not at the push.
    deferred = True


class LocalLeases:
    """The origin store's interface: leases are this worker's, timing stays in memory."""

    def __init__(self, frontier_owned: dict[str, _Own]) -> None:
        self.own = frontier_owned
        self.valid_until = 0.0  # this worker's lease as last confirmed, less a margin
        self.retry = 0.5
        self.dirty: set[str] = set()

    def close(self) -> None:
        return None

    def load(self, origin: str) -> tuple[OriginState, str | None, float]:
        # An origin this worker takes gets its state from the take (Frontier.take_state);
        # any other starts afresh (it is not dispatched before it is taken).
        return OriginState(origin), None, 0.0

    def try_lease(self, origin: str, now: float, ttl: float, dead_rest: float,
                  state: OriginState | None = None, *, send_at: float | None = None,
                  ) -> Lease:
        st = state if state is not None else OriginState(origin)
        own = self.own.get(origin)
        if own is None or own.releasing or now >= self.valid_until:
            return Lease(LeaseAnswer.NOT_OWNED, st, now + self.retry)
        at = st.eligible_at()
        if at > (now if send_at is None else max(now, send_at)):
            return Lease(LeaseAnswer.RESTING, st, at)
        return Lease(LeaseAnswer.GRANTED, st, now)

    def release(self, state: OriginState, now: float) -> None:
        self.dirty.add(state.origin)

    def save(self, state: OriginState, now: float) -> None:
        self.dirty.add(state.origin)

    def renew(self, origins: list[str], now: float, ttl: float) -> None:
        return None

    def release_all(self) -> None:
        return None

    def holds(self, origin: str, now: float) -> bool:
        """Whether this worker may send a request of ``origin`` at ``now``: it owns the
        origin, is not giving it back, and its lease as last confirmed has not run out
        (the same test as :meth:`try_lease`, for a request already handed out)."""
        own = self.own.get(origin)
        return own is not None and not own.releasing and now < self.valid_until


@dataclass
class Plan:
    now: float
    pushes: dict[str, list[tuple[int | None, int, bytes]]]
    pushed_n: int
    seen: dict[str, list[int]]
    templates: dict[int, bytes]
    stops: dict[str, str]
    drops: list[str]
    syncs: list[OriginSync]
    room: int  # origins this worker may take
    want: list[str]  # origins to try first (transient work waits for them)
    owned: set[str]
    sample: bool = True  # also look for origins of dead workers
    known: frozenset[int] = frozenset()  # template ids this worker holds
    robots: bool = False  # read the robots.txt entries of the origins taken
    push_claims: dict[str, int] = field(default_factory=dict)  # owned origin -> rows
    servers: list[ServerCall] = field(default_factory=list)  # server places to ask for
    unstops: list[str] = field(default_factory=list)  # origins whose stop ended
    # Owners held stopped whose group is read for its stop (the lifts' count moved to
    # ``lifts``; checked when the plan was made).
    owner_checks: list[str] = field(default_factory=list)
    lifts: int = -1


@dataclass
class Outcome:
    plan: Plan
    renewed: bool
    pushed: dict[str, tuple[int, int]]
    results: list[SyncResult]
    taken: list[Taken]
    active: int
    workers: int
    still_active: list[str]
    templates: dict[int, bytes] = field(default_factory=dict)  # read for claimed rows
    robots: dict[str, Any] = field(default_factory=dict)  # origin taken -> RobotsState|None
    kept: bool = True  # Redis still holds all it acknowledged (RedisShared.kept)
    nudged: list[str] = field(default_factory=list)  # owned origins others queued rows for
    grants: list[ServerGrant] = field(default_factory=list)  # the servers' answers
    server_nudged: list[str] = field(default_factory=list)  # servers others wait for
    lifts: int = 0  # the lifts' count as read (RedisShared.lifts)
    owner_stops_kept: list[bool] = field(default_factory=list)  # per plan.owner_checks


def execute(shared: RedisShared, plan: Plan, ttl: float) -> Outcome:
    """The batch's I/O (on a thread): write, renew, claim, then take origins."""
    renewed, pushed, results, active, workers = shared.batch(
        now=plan.now, ttl=ttl, pushes=plan.pushes, seen=plan.seen, templates=plan.templates,
        stops=plan.stops, drops=plan.drops, owned=plan.syncs, push_claims=plan.push_claims,
        servers=plan.servers, unstops=plan.unstops, owner_checks=plan.owner_checks)
    grants, server_nudged = shared.grants, shared.server_nudged
    wanted = {tid for r in results for raw in r.rows
              if (tid := row_template(raw)) is not None and tid not in plan.known}
    templates = shared.templates(sorted(wanted))
    empty = [r.origin for r in results if r.status in (1, 2) and r.queued == 0
             and r.claimed_total == 0]
    still = shared.drop_empty(empty)
    taken: list[Taken] = []
    if renewed and plan.room > 0:
        # Origins nobody owns first (popped: one worker each), then a sample of the
        # active ones for owners that died.
        # Only as many are popped as there is room for: an origin popped from the free
        # set and not tried would be left with work and no owner, out of the free set,
        # found again only by the sample.
        cands = [o for o in dict.fromkeys(plan.want) if o not in plan.owned]
        if len(cands) < plan.room:
            popped = shared.free(plan.room - len(cands))
            cands += [o for o in popped if o not in plan.owned and o not in cands]
            # One this worker gave back in this very batch goes back for another worker.
            shared.make_free([o for o in popped if o in plan.owned])
        if len(cands) < plan.room and plan.sample:
            dead = shared.dead_owned(plan.room - len(cands), plan.now, ttl)
            cands += [o for o in dead if o not in plan.owned and o not in cands]
        if len(cands) < plan.room and plan.sample:
            sampled = shared.candidates(min(plan.room, 50))
            cands += [o for o in sampled if o not in plan.owned and o not in cands]
        taken = shared.take(cands[:max(plan.room, len(plan.want))])
    robots: dict[str, Any] = {}
    if plan.robots and taken:
        from polite_crawler.store.redis_robots import load_many

        robots = load_many(shared.r, [t.origin for t in taken], shared.p)
    return Outcome(plan, renewed, pushed, results, taken, active, workers, still, templates,
                   robots, shared.kept, shared.nudged, grants, server_nudged, shared.lifts,
                   shared.owner_stops_kept)


class RedisFrontier:
    """The frontier's cluster backend: :class:`Frontier` (every rule) over a
    :class:`RedisQueue` and :class:`LocalLeases`, kept in step with Redis in batches
    (see the module doc). The core is used as it is, through its public methods; this
    class only plans, executes and applies the batches."""

    def __init__(
        self,
        shared: RedisShared,
        config: FrontierConfig,
        *,
        clock: Callable[[], float],
        ttl: float,
        interval: float,
        exchange_timeout: float,
        clock_skew: float = 1.0,
        **kwargs: Any,
    ) -> None:
        self.queue = RedisQueue(shared.crawl, shared)
        self.origin_store = LocalLeases(self.queue.own)
        self.queue.holds = self.holds
        self.origin_store.retry = interval
        self.frontier = Frontier(self.queue, self.origin_store, config, clock=clock,
                                 shared_servers=True, **kwargs)
        self.clock = clock
        self.shared = shared
        self.ttl = ttl
        self.interval = interval
        self.exchange_timeout = exchange_timeout
        # Seconds after Redis's start in which an origin state from before it is taken
        # as one the log may have lost the last second of (see _adopt).
        self.restart_window = ttl + exchange_timeout
        self.clock_skew = clock_skew
        self.margin = min(ttl / 3, max(2 * interval, 0.5))
        self.claim_horizon = max(3 * interval, 2 * ttl)
        # A dirty origin state that no other part of a batch carries waits up to one
        # lease period (it matters only to a worker taking the origin over after this one
        # died: the takeover waits the lease, the timeout and the last rest written);
        # what a takeover must not miss goes with the next batch (see _state_due).
        self.state_every = max(ttl, interval)
        self.active = 0
        self.workers = 1
        self.lost_lease = False
        self._sampled = 0.0
        # Whether the spider holds state of its own for an origin (links held until the
        # origin's sitemaps are read): such an origin is not given back to balance shares.
        self.keep: Callable[[str], bool] = lambda origin: False
        # A batch visits only the owned origins something happened to (RedisQueue.touched,
        # the states saved, the rows done), those whose planned time came (the heap
        # below), and those that must be asked about every batch (``_again``: a give
        # back under way, a takeover's verify window, one held by the spider); only a
        # batch that must give origins back, and the closing one, walks them all.
        self._wakes: list[tuple[float, str]] = []  # (time, origin): a visit planned
        self._again: set[str] = set()  # visited in the next batch whatever happens
        self._deferred: set[str] = set()  # dirty states waiting for a later batch
        self._working: set[str] = set()  # owned origins with work (_has_work), as visited
        self._group_want: set[str] = set()  # origins of owners held here, to take
        # Servers' places (docs/CLUSTER.md, "Servers"): the shared limit each answer
        # gave, the machine's wait last reported, the addresses asked again in the next
        # batch (places wanted and not granted, or given back with demand left), and
        # whether every place held must be asserted again (Redis lost a log's end).
        self._srv_lim: dict[str, int] = {}
        self._srv_wait: dict[str, float] = {}
        self._srv_again: set[str] = set()
        self._srv_unmet: set[str] = set()  # a demand not met is recorded in Redis
        self._srv_probing: dict[str, bool] = {}  # a raise reported, not judged yet
        self._srv_idle: dict[str, float] = {}  # held with no work since
        # A turn: places newly granted while another worker waits are kept until a
        # round of them is over (the rounds' rest end moves past this) or, unused, a
        # third of a lease after they could first be used; (rest end, granted at).
        self._srv_turn: dict[str, tuple[float, float]] = {}
        self._srv_reassert = False
        # Addresses a failed batch asked about: told again in the next batch, whatever
        # changed since (a place asked for, or given back and already not counted here).
        self._srv_tell: set[str] = set()
        self._srv_swept = 0.0
        shared.server_grace = exchange_timeout + clock_skew
        self.walk_all = False  # visit every owned origin (the reference, in tests)
        # ``scrapy unblock``'s lifts of owners' stops (lifts_key): the count as last read,
        # and as last acted on (-1: none read yet). When they differ, the next batch
        # reads the groups of the owners this worker holds stopped (apply: _lift_owners).
        self._lifts_read = -1
        self._lifts_done = -1

    def count(self, key: str, n: int) -> None:
        self.frontier.count(key, n)

    @property
    def outbox(self) -> int:
        return self.queue.pushed_n

    def owned(self) -> list[str]:
        return list(self.queue.own)

    def holds(self, origin: str) -> bool:
        """Whether a request of ``origin`` handed out earlier may be sent now, by the
        frontier's clock (:meth:`LocalLeases.holds`): the gate asks before the request
        goes on, and again as the download handler starts it."""
        return self.origin_store.holds(origin, self.clock())

    # --- a batch ---------------------------------------------------------------------
    def _has_work(self, origin: str, own: _Own) -> bool:
        return bool(own.buffer or own.remote) or self.frontier.busy(origin)

    def _claim_size(self, origin: str) -> int:
        # Rows for a few lease periods of rests at once: on small sites one claim serves
        # the whole site (a claimed row stays in the claimed hash until done, so a
        # takeover puts it back as it would one claimed for the next batch alone).
        base = max(self.frontier.params(origin).base(False), 0.01)
        return max(2, min(50, math.ceil(self.claim_horizon / base) + 1))

    def _state_due(self, own: _Own, st: OriginState, now: float) -> bool:
        """Whether a dirty state is written in this batch though nothing else of the
        origin goes: its last write is a lease period old, or it holds what a worker
        taking over after this one's death must know: a rest grown by more than a tenth,
        a wait beyond the takeover's own bound (a Retry-After), or a change of the
        verdicts' state, the latency factor, the Crawl-delay or the budget's day. Only
        the budget count and the timing of plain rests may lag (by a lease period)."""
        if now - own.written >= self.state_every:
            return True
        if st.eligible_at() > now + self.ttl + self.exchange_timeout:
            return True
        key = self._state_key(st)
        return (not own.written_key or key[1:] != own.written_key[1:]
                or key[0] > 1.1 * float(own.written_key[0]))

    @staticmethod
    def _state_key(st: OriginState) -> tuple[Any, ...]:
        """The rest, then the fields whose every change is written at once."""
        return (st.last_rest, st.crawl_delay, st.latency_factor, st.budget_day,
                *[v for k, v in vars(st.failure).items() if k != "last_wait"])

    def _empty_for(self, origin: str) -> float:
        """How long an owned origin stays empty before it is given back: long enough
        for the requests it is waiting on (a sitemap, the page whose links are held)
        to come back with more rows, so that it is not given back and taken again."""
        base = self.frontier.params(origin).base(False)
        return max(4 * self.interval, 2 * base + 2 * self.interval)

    def _visits(self, now: float, dirty: set[str], transient: list[str]) -> set[str]:
        """The origins this batch must look at (see ``__init__``); rows done were
        touched as they were (RedisQueue.delete)."""
        q = self.queue
        visit, q.touched = q.touched, set()
        visit |= dirty
        visit |= self._again
        self._again = set()
        visit.update(transient)  # a transient request waiting makes its origin busy
        wakes = self._wakes
        while wakes and wakes[0][0] <= now:
            at, origin = heapq.heappop(wakes)
            own = q.own.get(origin)
            if own is not None and own.wake == at:
                own.wake = 0.0
                visit.add(origin)
        return visit

    def _wake_at(self, origin: str, own: _Own, at: float) -> None:
        if not own.wake or at < own.wake:
            own.wake = at
            heapq.heappush(self._wakes, (at, origin))

    def plan(self, *, closing: bool = False) -> Plan:
        now = self.clock()
        f = self.frontier
        q = self.queue
        pushes, q.pushes = q.pushes, {}
        pushed_n, q.pushed_n = q.pushed_n, 0
        seen, q.seen = q.seen, {}
        templates, q.templates = q.templates, {}
        stops, q.stops = q.stops, {}
        drops, q.drops = q.drops, []
        done_out, q.done_out = q.done_out, {}
        dirty, self.origin_store.dirty = self.origin_store.dirty, set()
        q.clear_fresh()
        transient = f.origins_with_transient()
        visit = self._visits(now, dirty, transient)
        working = self._working
        for origin in visit:
            own = q.own.get(origin)
            if own is not None and self._has_work(origin, own):
                working.add(origin)
            else:
                working.discard(origin)
        share = max(1, math.ceil(self.active / max(self.workers, 1)))
        # Room above the share: an origin nobody owns always finds a taker (every
        # worker may hold share + slack); only above that are origins given back.
        slack = max(2, share // 10)
        # The share counts origins with work (rows here or in Redis, or a request out):
        # an owned origin that ran empty waits to be given back, and neither holds a
        # share nor stops this worker from taking an origin with work.
        busy = len(working)
        excess = busy - (share + slack)
        deferred = self._deferred
        if closing or excess > 0 or self.walk_all:
            visiting = list(q.own.items())  # in the order taken: the oldest go back first
        else:
            visiting = [(o, own) for o in visit if (own := q.own.get(o)) is not None]
        self.count("polite/redis/plan_visits", len(visiting))
        syncs = []
        for origin, own in visiting:
            known = f.known(origin)
            idle = not f.busy(origin)
            give_back = own.releasing
            if own.buffer or own.remote or own.ids or not idle:
                own.empty_since = 0.0
            elif not own.empty_since:
                own.empty_since = now  # as this worker knows: the give back reads Redis
            empty = 0 < own.empty_since <= now - self._empty_for(origin)
            if not give_back and idle and (closing or (
                    (excess > 0 or empty or own.orphans)
                    and not self.keep(origin))):
                give_back = own.releasing = True
                if own.buffer or own.remote:
                    excess -= 1
            # Given back only for the spider's sake (self.keep): asked again next batch.
            kept = (not give_back and idle and not closing
                    and (excess > 0 or empty or own.orphans))
            claim = 0
            stale_at = own.refreshed + max(2 * self.ttl, self.interval)
            soon_at = 0.0
            claimable = not give_back and known and origin not in f.stopped
            if claimable:
                soon_at = f.state(origin).eligible_at() - 3 * self.interval
                soon = soon_at <= now
                need = self._claim_size(origin) - len(own.buffer)
                # Rows queued by others are known from their nudge (RedisShared.nudged);
                # asking Redis again is only a safety net, for an origin about to run
                # dry (nothing buffered, a request out). An origin empty here is not
                # asked before it is given back (the give back reads its queue; rows
                # found then go to the free set).
                stale = now >= stale_at and not own.buffer and not own.empty_since
                if soon and need > 0 and len(own.buffer) <= 1 and (own.remote > 0 or stale):
                    claim = need
            done = done_out.pop(origin, [])
            check = []
            if own.buffer and now <= own.verify_until and not give_back:
                check = [q.rows[r.id][1] for r in own.buffer if r.id in q.rows]
            state = ""
            st = f.state(origin) if known else None
            is_dirty = origin in dirty or origin in deferred
            if st is not None and (
                    (give_back and (is_dirty or not own.written))
                    or (is_dirty and (claim or check or self._state_due(own, st, now)))):
                state = st.to_json()
                own.written = now
                own.written_key = self._state_key(st)
                deferred.discard(origin)
            elif is_dirty:
                deferred.add(origin)  # goes with a later batch
                self._wake_at(origin, own, own.written + self.state_every)
            if claim or done or state or give_back or check:
                if claim:
                    own.refreshed = now
                    stale_at = now + max(2 * self.ttl, self.interval)
                held = not own.releasing and now < self.origin_store.valid_until
                sync = OriginSync(origin, state, claim, give_back, done, check, held)
                if state and st is not None and st.budget_day:
                    sync.budget = f"{st.budget_day} {st.budget_used}"
                if give_back and known:
                    sync.host_until = f.host_state(origin).next_allowed
                syncs.append(sync)
            # When time alone could change this origin's answer: visited again then.
            # Everything else that changes it touches it (RedisQueue.touched).
            if give_back or check or kept:
                self._again.add(origin)
                continue
            if own.empty_since:
                self._wake_at(origin, own, own.empty_since + self._empty_for(origin))
            if claimable:
                if soon_at > now:
                    self._wake_at(origin, own, soon_at)
                elif not own.buffer and not own.empty_since:
                    self._wake_at(origin, own, stale_at)
        for origin, done in done_out.items():  # rows of origins given back or lost
            syncs.append(OriginSync(origin, done=done, held=False))
        room = 0 if closing or self.lost_lease else max(0, share + slack - busy)
        # Origins of a host this worker holds that another worker found held (its nudge):
        # this worker takes them, as it holds every origin of the host or none.
        grouped, self._group_want = self._group_want, set()
        want = [o for o in (*transient, *sorted(grouped))
                if o not in q.own and o not in f.stopped]
        if want and not closing:
            room = max(room, len(want))
        # Rows this worker found for an origin it owns with nothing queued in Redis are
        # claimed with their push (the same order: nothing queued to come first).
        push_claims = {}
        for origin in pushes:
            mine = q.own.get(origin)
            if (mine is not None and not mine.releasing and not mine.remote
                    and not mine.orphans and f.known(origin) and origin not in f.stopped):
                n = self._claim_size(origin) - len(mine.buffer)
                if n > 0:
                    push_claims[origin] = n
        sample = now - self._sampled >= max(self.ttl / 3, self.interval)
        if sample:
            self._sampled = now
        unstops, q.unstops = sorted(q.unstops), set()
        checks = f.refused_owners(now) if self._lifts_read != self._lifts_done else []
        return Plan(now, pushes, pushed_n, seen, templates, stops, drops, syncs, room, want,
                    set(q.own), sample, frozenset(q.known), self._robots_remote(), push_claims,
                    [] if closing else self._server_calls(now), unstops, checks,
                    self._lifts_read)

    def _server_calls(self, now: float) -> list[ServerCall]:
        """The servers whose places this batch asks for: those the core asked about
        (places wanted, the limit moved, the machine failed, a round over while another
        worker waits), those asked again, those a failed batch asked about, every one
        held after Redis lost a log's end, and, every third of a lease, those held with
        no work left (given back)."""
        f = self.frontier
        self.shared.server_window = self.restart_window
        ask, f.server_asks = f.server_asks, set()
        ask |= self._srv_again
        ask |= self._srv_unmet  # asked again until met, or withdrawn (no stale demand)
        self._srv_again = set()
        reassert = set(f.shared_servers_held()) if self._srv_reassert else set()
        self._srv_reassert = False
        reassert |= self._srv_tell
        self._srv_tell = set()
        ask |= reassert
        if now - self._srv_swept >= max(self.ttl / 3, self.interval):
            self._srv_swept = now
            ask.update(f.shared_servers_held())
        calls = []
        for address in sorted(ask):
            d = f.server_demand(address)
            if d is None:
                continue
            want, limit, probing = d.want, d.limit, d.probing
            if want == 0 and d.granted > 0 and not d.contended and address not in reassert:
                # No work on it now: the places are kept a while (an origin's rows come
                # in waves: robots.txt, its sitemaps, the pages they list), then given back.
                idle = self._srv_idle.setdefault(address, now)
                if now - idle < 2 * max(self.ttl / 3, self.interval):
                    continue
            self._srv_idle.pop(address, None)
            # Another worker waits: when its round is over it gives back the places
            # above its fair share of the limit (all of them when the limit is smaller
            # than the workers that want places: they take turns), asked for again next
            # batch; a probe keeps its places until judged (a few rounds), and one its
            # demand cannot fill is given up with the limit it tried.
            if (d.contended and d.round_over and d.granted > 0 and not probing
                    and self._turn_had(address, d, now)):
                fair = d.limit // (d.others + 1)
                if d.granted > fair:
                    want = fair
                    self._srv_again.add(address)
                    self._srv_turn.pop(address, None)
            if probing and want < limit:
                limit, probing = max(limit - 1, 1), False
            known = self._srv_lim.get(address)
            # A raise its own demand cannot use (fewer origins with work than the new
            # limit: a server of one host) is not worth a call; it goes with the next.
            report = limit if known is not None and limit != known and (
                limit < known or want >= limit) else 0
            waited = d.wait > self._srv_wait.get(address, 0.0)
            judged = self._srv_probing.get(address, False) and not probing
            # (A failed probe's wait goes with the next call; alone it is not worth one:
            # at a limit of one, a single slow answer counts as a failed probe.)
            if (want == d.granted and not report and not waited and not judged
                    and address not in reassert and address not in self._srv_unmet):
                continue  # nothing to tell (an unmet demand recorded is withdrawn)
            if want < d.granted:
                # Places given back stop counting here now, as the plan is made: the
                # batch goes out on a thread, and a request dispatched meanwhile on a
                # place Redis then grants another worker was a second one at once.
                f.server_granted(address, want, limit=d.limit, until=0.0, wait=0.0,
                                 others=d.others)
            if waited:
                self._srv_wait[address] = d.wait
            self._srv_probing[address] = probing
            calls.append(ServerCall(address, d.in_flight, want, report, d.until, d.wait,
                                    d.granted, probing, d.no_probe))
        return calls

    def _turn_had(self, address: str, d: ServerDemand, now: float) -> bool:
        """Whether places granted to this worker had their turn: a round of them is
        over (the rounds' rest end moved past the one at the grant), or they stayed
        unused a third of a lease after they could first be used (its origins rest).
        Given back before, a place granted while both workers wait went back and forth
        between them in the batches, each giving it back before its rest let it send."""
        turn = self._srv_turn.get(address)
        if turn is None:
            return True
        until, at = turn
        return d.until > until or now - max(until, at) >= max(self.ttl / 3, self.interval)

    def _apply_grants(self, out: Outcome) -> None:
        """The servers' answers: places granted (a rest another worker left is waited,
        plus the clock skew), the shared limit, a failure's wait every worker's sites
        wait out; a server another worker waits for is given back at its round's end."""
        f = self.frontier
        now = out.plan.now
        asked = {c.address: c.want for c in out.plan.servers}
        for g in out.grants:
            d = f.server_demand(g.address)
            if d is None:
                continue
            until = g.until + self.clock_skew if g.until > now else 0.0
            wait = g.wait + self.clock_skew if g.wait > max(d.wait, now) else g.wait
            f.server_granted(g.address, g.granted, limit=g.limit, until=until, wait=wait,
                             others=g.waiting, no_probe=g.no_probe)
            if g.granted > d.granted:  # a turn starts: its rounds' rest end as granted
                after = f.server_demand(g.address)
                self._srv_turn[g.address] = (after.until if after is not None else 0.0, now)
            elif g.granted == 0:
                self._srv_turn.pop(g.address, None)
            self._srv_lim[g.address] = g.limit
            if d.want > g.granted:
                self._srv_again.add(g.address)  # still waiting: asked again next batch
            if asked.get(g.address, 0) > g.granted:
                self._srv_unmet.add(g.address)  # Redis records the demand (d:<worker>)
            else:
                self._srv_unmet.discard(g.address)
        for address in out.server_nudged:
            f.server_contended(address)

    def unplan(self, plan: Plan) -> None:
        """A batch that failed: what it carried waits for the next one."""
        q = self.queue
        for origin, rows in plan.pushes.items():
            q.pushes.setdefault(origin, [])[:0] = rows
        q.pushed_n += plan.pushed_n
        for origin, fps in plan.seen.items():
            q.seen.setdefault(origin, []).extend(fps)
        q.templates.update(plan.templates)
        for origin, reason in plan.stops.items():
            q.stops.setdefault(origin, reason)
        q.drops.extend(plan.drops)
        q.unstops.update(o for o in plan.unstops if o not in q.stops)
        # Its server calls are made again: the origins of a server that waited for a
        # place wait out of the heap until one comes, and places it gave back stopped
        # counting here as it was planned, so Redis must be told, or it counts them
        # against every other worker while this one lives.
        self._srv_tell.update(c.address for c in plan.servers)
        for s in plan.syncs:
            q.touched.add(s.origin)  # planned again in the next batch
            if s.done:
                q.done_out.setdefault(s.origin, [])[:0] = s.done
            own = q.own.get(s.origin)
            if s.state:
                self.origin_store.dirty.add(s.origin)
                if own is not None:
                    own.written = 0.0
            if own is not None and s.give_back:
                own.releasing = False
                self.origin_store.dirty.add(s.origin)

    def run_batch(self, *, closing: bool = False) -> Outcome:
        """Plan, execute and apply on the calling thread (tests, the idle check, close)."""
        plan = self.plan(closing=closing)
        try:
            outcome = execute(self.shared, plan, self.ttl)
        except Exception:
            self.unplan(plan)  # what it carried goes with the next batch
            raise
        self.apply(outcome)
        return outcome

    def apply(self, out: Outcome) -> None:
        q = self.queue
        plan = out.plan
        self.active, self.workers = out.active, out.workers
        if not out.renewed:
            self._lose_all()
            return
        self.origin_store.valid_until = plan.now + self.ttl - self.margin
        q.known.update(out.templates)
        if not out.kept:
            q.seen_here.clear()  # what this worker learnt may be what the restart lost
        for origin, rows in plan.pushes.items():
            if origin in q.own and out.pushed[origin][0] >= 0:
                q.learn_seen(origin, rows)
        dups = sum(d for _a, d in out.pushed.values()) + q.dups
        q.dups = 0
        if dups:
            self.count("polite/frontier/duplicate", dups)
        for origin, (added, _d) in out.pushed.items():
            if added < 0:
                n = len(plan.pushes[origin])
                self.count("polite/frontier/stopped", n)
        self.count("polite/redis/batches", 1)
        still = set(out.still_active)
        for origin in out.nudged:
            own = q.own.get(origin)
            if own is None:
                self._group_want.add(origin)  # of a host this worker holds: taken next
                continue
            if not own.remote:
                own.remote = 1  # at least: the claim reads the count
                own.empty_since = 0.0
        touched = q.touched  # what the outcome changes is planned again next batch
        touched.update(out.nudged)
        touched.update(out.pushed)
        touched.update(r.origin for r in out.results)
        touched.update(t.origin for t in out.taken)
        claimed_n = {r.origin: len(r.rows) for r in out.results if r.status == 4}
        for origin, (added, _d) in out.pushed.items():
            own = q.own.get(origin)
            queued = added - claimed_n.get(origin, 0)
            if own is not None and queued > 0:
                # Rows this worker queued for an origin it owns: claimed without waiting
                # for a refresh (a claim in this batch reads the count again, below).
                own.remote += queued
                own.empty_since = 0.0
                self.frontier.set_queued(origin, len(own.buffer) + own.remote)
        for res in out.results:
            self._apply_result(res, plan.now, still)
        if out.taken:
            # The takes read Redis's uptime after the plan's time, by the batch's round
            # trips (on a busy machine, a while): the restart is counted from now, no
            # earlier than that reading.
            read = max(plan.now, self.clock())
            for t in out.taken:
                self._adopt(t, plan.now, read)
        if not out.kept:
            self._srv_reassert = True  # places granted in what Redis lost: asserted again
        self._apply_grants(out)
        self._lift_owners(out)
        if out.robots:
            book = self.frontier.robots_book()
            if book is not None:
                book.preload(out.robots, trust=max(2 * self.interval, 1.0))

    def _lift_owners(self, out: Outcome) -> None:
        """The owners' stops ``scrapy unblock`` lifted: an owner checked whose group no
        longer holds its stop for the crawl (``s:<crawl>``) ends its stop here, as taken
        on before the plan (a refusal since stands); the origins stopped for it are
        unstopped in Redis too (the core's lift unstops them in this queue). The lifts'
        count read in every batch: only when it moved are the groups read (the next
        batch)."""
        plan = out.plan
        for name, kept in zip(plan.owner_checks, out.owner_stops_kept, strict=True):
            if not kept:
                self.frontier.lift_owner_stop(name, plan.now)
        if plan.lifts >= 0 and self._lifts_read == plan.lifts:
            self._lifts_done = plan.lifts  # checked since the count last moved
        if self._lifts_done < 0:
            self._lifts_done = out.lifts  # the first read: no stop taken on before it
        self._lifts_read = out.lifts

    def _apply_result(self, res: SyncResult, now: float, still: set[str]) -> None:
        """One owned origin's answer from the batch: rows claimed, the origin lost or
        given back, rows done elsewhere dropped, the counts in Redis learnt (``still``:
        the origins Redis still counts active)."""
        q = self.queue
        own = q.own.get(res.origin)
        if own is None or res.status == 3:
            return
        if res.status == 4:
            # Claimed with their push: highest priority first, then first in.
            got = sorted(res.rows, key=lambda raw: -int(raw[:raw.index(b" ")]))
            own.buffer.extend(q.claimed(res.origin, raw) for raw in got)
            own.empty_since = 0.0
            self.frontier.set_queued(res.origin, len(own.buffer) + own.remote)
            return
        if res.status == 0:
            self.count("polite/redis/origin_lost", 1)
            logger.warning("%(origin)s: another worker owns it now", {"origin": res.origin})
            self._forget(res.origin)
            return
        if res.status == 2:
            self.count("polite/redis/origin_given_back", 1)
            self._forget(res.origin)
            return
        if res.gone:
            # Done by the last owner after it lost the origin: not fetched again.
            gone = set(res.gone)
            keep: deque[Row] = deque()
            for row in own.buffer:
                if q.rows.get(row.id, ("", b"", b""))[1] in gone:
                    q.rows.pop(row.id, None)
                    own.ids.discard(row.id)
                    self.count("polite/redis/done_elsewhere", 1)
                else:
                    keep.append(row)
            own.buffer = keep
        for raw in res.rows:
            own.buffer.append(q.claimed(res.origin, raw))
        if res.queued < 0:
            return  # no rows asked for: the counts were not read
        own.remote = res.queued
        # A batch whose reply was lost may have claimed rows this worker never saw:
        # giving the origin back (when idle) puts them back in the queue.
        own.orphans = res.claimed_total > len(own.ids)
        empty = res.queued == 0 and res.claimed_total == 0 and res.origin not in still
        if not empty:
            own.empty_since = 0.0
        elif not own.empty_since:
            own.empty_since = now
        self.frontier.set_queued(res.origin, len(own.buffer) + own.remote)

    def _robots_remote(self) -> bool:
        """Whether the robots.txt book keeps its entries in Redis (read in the batch)."""
        book = self.frontier.robots_book()
        return bool(getattr(getattr(book, "store", None), "remote", False))

    def _forget(self, origin: str) -> None:
        self._working.discard(origin)
        self._again.discard(origin)
        self._deferred.discard(origin)
        self.queue.forget_claims(origin)
        self.frontier.forget_origin(origin)

    def _lose_all(self) -> None:
        self.count("polite/redis/lease_lost", 1)
        for origin in list(self.queue.own):
            self._forget(origin)
        self.origin_store.valid_until = 0.0
        self.frontier.servers_lost()  # the old identity's places lapse with its lease
        self._srv_lim.clear()
        self._srv_again.clear()
        self._srv_unmet.clear()
        self._srv_probing.clear()
        self._srv_idle.clear()
        self._srv_turn.clear()
        old, self.shared.worker = self.shared.worker, worker_id()
        logger.error("The lease of worker %(old)s in Redis ran out (stalled, or Redis "
                     "restarted); its origins go to other workers, and it rejoins as worker "
                     "%(new)s", {"old": old, "new": self.shared.worker})
        self.shared.register(self.clock(), self.ttl)

    def _adopt(self, t: Taken, now: float, read: float) -> None:
        """Take an origin's state as the take found it (``now``: the batch's time;
        ``read``: a time no earlier than the take's reading of Redis's uptime)."""
        state = OriginState.from_json(t.state) if t.state else OriginState(t.origin)
        state.origin = t.origin
        saved = state.next_allowed
        if t.state and t.run != self.queue.run_id:
            state.reset_run()
        params = self.frontier.params_for(t.origin)
        if t.last_owner and t.last_owner != self.shared.worker:
            # The last owner did not give it back: a request of its may have been in
            # flight when its lease ran out; it ended by the lease end plus the timeout.
            bound = t.last_owner_until
            if math.isinf(bound):
                bound = now + self.ttl
            bound += self.exchange_timeout + self.clock_skew
            rest = max(params.base(False), state.last_rest)
            state.next_allowed = max(state.next_allowed, bound + rest)
            self.count("polite/redis/origin_taken_over", 1)
            logger.info("%(origin)s taken over from %(owner)s; first request not before "
                        "%(at).1f s from now", {"origin": t.origin, "owner": t.last_owner,
                                                 "at": state.next_allowed - now})
        elif t.state:
            state.next_allowed += self.clock_skew if state.next_allowed > now else 0.0
        # Redis keeps its start and its clock in whole seconds, so the uptime it reports
        # is off by up to one either way: the restart was before read - uptime + 1. The
        # bound takes that latest start (the lost take's request could end as late).
        started = read - t.redis_up + 1.0
        up_least = max(read - started, 0.0)
        rest = max(params.base(False), state.last_rest)
        if (t.state and 0 < saved < started and self.restart_window > 0
                and up_least < self.restart_window + rest):
            # Redis started moments ago and this state is from before: the log may have
            # lost its last second, this origin's last take and state with it, while the
            # worker that took it had a request out. That request ended by the restart
            # plus the timeout, and the whole rest follows it. The window (the lease + the
            # timeout) is this origin's rest longer: a rest longer than the lease (a long
            # Crawl-delay, a Retry-After) still binds after the lease's window ends. (A
            # state written since the start is not from before.)
            bound = started + self.exchange_timeout + self.clock_skew
            state.next_allowed = max(state.next_allowed, bound + rest)
            self.count("polite/redis/origin_taken_after_restart", 1)
        self.count("polite/redis/origin_taken", 1)
        logger.debug("%(origin)s taken by %(w)s at %(t).3f",
                     {"origin": t.origin, "w": self.shared.worker, "t": now})
        if t.host_until > 0:
            # The host's rest as the group's last owner left it: it holds this origin too.
            skew = self.clock_skew if t.host_until > now else 0.0
            state.next_allowed = max(state.next_allowed, min(t.host_until, 1e18) + skew)
        lifted = t.stop == OWNER_REFUSED and not t.owner_stop
        if lifted:
            # Stopped for its owner, whose stop ``scrapy unblock`` lifted since: asked again.
            self.queue.unstop(t.origin)
        elif t.stop:
            self.frontier.stopped[t.origin] = t.stop
        own = self.queue.own.setdefault(t.origin, _Own())
        own.remote = t.queued
        if t.last_owner and t.last_owner != self.shared.worker:
            own.verify_until = state.next_allowed + self.interval
        self.frontier.take_state(t.origin, state)
        if t.owner_budget is not None:
            # The owner's group taken afresh: its daily count is its origins' as Redis
            # holds them (written with their states), not what this worker counted before.
            today = utc_day(now)
            self.frontier.take_owner_budget(t.origin, today,
                                            owner_used_today(t.owner_budget, today))
        self.frontier.set_queued(t.origin, own.remote)
        if t.owner_stop and not t.stop:
            # Its owner refused the crawler earlier in the crawl (its group keeps the
            # stop): stopped as the holder that saw the refusal stopped its hosts.
            self.frontier.stop(t.origin, OWNER_REFUSED)

    # --- upkeep ----------------------------------------------------------------------
    def close(self, finished: bool) -> None:
        self.frontier.close(finished)  # a finished crawl: every row done, in the outbox
        for _ in range(3):
            self.run_batch(closing=True)
            if not self.queue.own:
                break
        self.shared.resign()
