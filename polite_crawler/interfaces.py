"""The storage the crawl's rules run on, declared once: what each store must do.

Two backends implement these (chosen by :func:`polite_crawler.backend.backend_of`
from ``POLITE_FRONTIER`` and ``POLITE_STORE``, nowhere else):

- *embedded*: the queue and seen set in ``JOBDIR`` (SQLite,
  :class:`~polite_crawler.frontier.store.QueueStore`), origin state, leases, the
  robots.txt cache and the opt-out list in the state directory's origin store
  (:class:`~polite_crawler.frontier.store.OriginStore`,
  :class:`~polite_crawler.store.robots.SQLiteRobotsStore`,
  :class:`~polite_crawler.store.optout.OptOutList`,
  :class:`~polite_crawler.store.blocks.SQLiteBlockStore`), pages in SQLite;
- *cluster*: the same in Redis, shared by every worker
  (:class:`~polite_crawler.frontier.redis_frontier.RedisQueue` and
  :class:`~polite_crawler.frontier.redis_frontier.LocalLeases` over
  :mod:`~polite_crawler.frontier.redis_shared`,
  :class:`~polite_crawler.store.redis_robots.RedisRobotsStore`,
  :class:`~polite_crawler.store.redis_optout.RedisOptOutList`,
  :class:`~polite_crawler.store.redis_blocks.RedisBlockStore`), pages in PostgreSQL.

The rules (rests, robots.txt, budget, stops, the opt-out's acknowledgement) are the
callers': :class:`~polite_crawler.frontier.core.Frontier`,
:class:`~polite_crawler.store.robots.RobotsBook`, the opt-out middleware and the
commands. A store keeps what it is given and answers what it holds. Nothing here
imports a backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

    from scrapy import Request

    from polite_crawler.policy.blocks import Block
    from polite_crawler.policy.rest import OriginState, Rest
    from polite_crawler.policy.robots import ContentSignals, RobotsRules
    from polite_crawler.policy.verdicts import FailureState
    from polite_crawler.records import (
        FetchRecord,
        HostRecord,
        Job,
        OptOut,
        OwnerRecord,
        PageRecord,
        RobotsState,
        Row,
        ServerRecord,
    )


class LeaseAnswer(Enum):
    """Why an origin store gave or refused a lease (:attr:`Lease.answer`)."""

    GRANTED = "granted"
    # The origin's rest (or a wait the server asked for) is not over by the time the
    # request would be sent; ``retry_at`` is the origin's eligible time.
    RESTING = "resting"
    # Another process holds the origin's lease; ``retry_at`` is when to look again
    # (its lease end, or sooner).
    HELD = "held"
    # Not this worker's origin (a cluster: not owned, being given back, or this worker's
    # own lease as last confirmed has run out); ``retry_at`` is when to look again.
    NOT_OWNED = "not_owned"


@dataclass(frozen=True)
class Lease:
    """What :meth:`OriginLeases.try_lease` answers."""

    answer: LeaseAnswer
    state: OriginState  # the origin's state as stored (fresh from the shared DB)
    retry_at: float  # when not taken: when to look again

    @property
    def taken(self) -> bool:
        return self.answer is LeaseAnswer.GRANTED


class URLQueue(Protocol):
    """One crawl's queued rows per origin and its seen set (the frontier's queue store)."""

    run_id: str  # the crawl this queue belongs to (a JOBDIR's run, or POLITE_CRAWL)
    # False: a pushed row is queued at once (head() may return it). True: pushes go out
    # with the backend's next batch, and the frontier learns where they went from it
    # (Frontier.set_queued): the rows of origins another process owns are not its own.
    deferred: bool

    def push(self, origin: str, prio: int, url: str, data: bytes) -> int:
        """Queue one row (``url`` canonical, ``data`` a pickled request or a URL row);
        return its id (an id the core may later pass to :meth:`delete`)."""

    def push_many(self, rows: list[tuple[str, int, str, bytes]]) -> None:
        """Queue ``(origin, prio, url, data)`` rows in one write."""

    def head(self, origin: str) -> Row | None:
        """The origin's next row (highest priority, then first in) not in flight, or None."""

    def mark_in_flight(self, row_id: int) -> None:
        """The row was handed out: :meth:`head` no longer returns it; it stays stored
        (a crash puts it back: :meth:`requeue_in_flight`)."""

    def unmark_in_flight(self, row_id: int) -> bool:
        """The row handed out was not sent after all (:meth:`Frontier.put_back`): it is
        queued again, :meth:`head` returns it first. False when this store no longer
        holds it for this process (an origin another process took: the row is queued
        there, not here)."""

    def delete(self, row_id: int) -> None:
        """The spider is done with the row: it leaves the store (with what was queued
        before it, in the same commit)."""

    def drop_origin(self, origin: str) -> int:
        """Every row of the origin leaves the store; return how many there were."""

    def requeue_in_flight(self) -> int:
        """After a restart: rows marked in flight are queued again; return how many."""

    def counts(self) -> Iterator[tuple[str, int]]:
        """``(origin, queued rows)`` of every origin with rows, for a restart."""

    def commit(self) -> None:
        """Make every change so far durable (a no-op where each batch is)."""

    def close(self) -> None:
        """Release the store's connections; nothing is lost that was committed."""

    def add_seen(self, fp: bytes) -> bool:
        """Add a canonical URL's fingerprint to the seen set; False if it was there."""

    def add_seen_many(self, fps: list[bytes]) -> list[bool]:
        """:meth:`add_seen` for many, in order, in one write."""

    def is_seen(self, fp: bytes) -> bool:
        """Whether the fingerprint is in the seen set (the embedded store only; a store
        that decides at push time answers False)."""

    def template_id(self, data: bytes) -> int:
        """The id of a URL-row template (stored once, shared by many rows)."""

    def template(self, tid: int) -> bytes | None:
        """The template of that id, or None if it was never stored."""

    def stop(self, origin: str, reason: str) -> None:
        """The crawl stopped the origin: remember why (no row of it is queued again)."""

    def stopped(self) -> dict[str, str]:
        """The origins this crawl stopped, with why (read when the crawl resumes)."""

    def unstop(self, origin: str) -> None:
        """The origin's stop ends (its owner's stop was lifted): forgotten, so a
        resumed crawl does not take it on again."""


class FrontierDriver(Protocol):
    """How the frontier scheduler opens, runs and closes its backend
    (:class:`polite_crawler.frontier.embedded.EmbeddedDriver`,
    :class:`polite_crawler.frontier.redis_scheduler.ClusterDriver`); the scheduler's
    rules (admission, URL rows, the gate's side, waking the engine) are the same."""

    shared: Any  # the cluster's shared state (RedisShared), or None
    # Whether the seen set only grows while this job holds it (nothing else takes from
    # it meanwhile): then a URL it answered "seen" for stays seen for the rest of the run,
    # and the scheduler keeps such answers in memory rather than asking again.
    seen_set_only_grows: bool

    def open(self, spider: Any) -> Any:
        """Open the stores and return the :class:`~polite_crawler.frontier.core.Frontier`
        over them (resumed: what was in flight is queued again)."""

    def close(self, finished: bool) -> None:
        """Store everything and release the stores (``finished``: nothing is left)."""

    def outbox(self) -> int:
        """Requests queued here and not yet in the store (a batch not sent yet)."""

    def mark_seen(self, canonical: str) -> None:
        """A canonical URL known without a fetch of its own joins the seen set."""

    def may_send(self, origin: str) -> bool:
        """Whether a request of ``origin`` this process handed out may still be sent now:
        on a cluster, whether this worker still owns the origin with its lease (as last
        confirmed) not run out, by the frontier's clock; the embedded backend: always."""


class FrontierView(Protocol):
    """The frontier's core (:class:`~polite_crawler.frontier.core.Frontier`) as the
    components read it: read only, on the reactor thread, never kept past the crawl's
    close (:attr:`FrontierService.frontier` turns None then)."""

    @property
    def stopped(self) -> Mapping[str, str]:
        """The origins this crawl stopped, with why (``refused:...``, a 403's reason)."""

    @property
    def stops_made(self) -> int:
        """How many stops this process made (a stop lifted and made again counts
        again): ``stopped`` changed when it moved (its size may not have: an owner's
        stop lifted takes origins out of it)."""

    @property
    def queue(self) -> URLQueue:
        """The crawl's queue store (its JOBDIR file, or the Redis queue)."""

    def state(self, origin: str) -> OriginState:
        """The origin's timing, budget and failure state as this process holds it."""

    def finished(self, origin: str) -> bool:
        """Nothing of the origin is queued, waiting or in flight, and nothing of it is
        held by the spider (an origin this process does not hold: True)."""

    def in_flight_origins(self) -> list[str]:
        """The origins with a request handed out and not settled yet."""

    def next_request_at(self, origin: str) -> float:
        """The soonest the origin's next request may go (epoch seconds): its rest and
        waits, its host's rest, its server's round's rest; ``math.inf`` once stopped."""

    def next_eligible(self) -> float | None:
        """When the frontier's next request may be handed out (epoch seconds, its
        dispatch lead and margin applied); None: nothing waits."""


@runtime_checkable
class FrontierService(Protocol):
    """What the crawl's components call on the frontier (``polite_context(crawler)
    .frontier``): the Scrapy scheduler,
    :class:`~polite_crawler.frontier.scheduler.FrontierScheduler`, serves it.

    Every method runs on the reactor thread. Its callers: the gate (a downloader
    middleware: :meth:`owns`, :meth:`may_send`, :meth:`hold_back`, :meth:`failure`,
    :meth:`settle`, :meth:`release`, :meth:`done`, :meth:`stop`,
    :meth:`is_test_origin`), the download handlers (:meth:`may_send`, as the exchange
    starts), the opt-out, block and address middlewares (:meth:`stop`, :meth:`owns`,
    :meth:`release`, :meth:`done`), the spider-side done middleware (:meth:`done`,
    :meth:`hold`), the site spider (:meth:`enqueue_urls`, :meth:`mark_seen`,
    :meth:`release_held`), and the extensions, which read :attr:`frontier` and
    :attr:`shared`. A request here is one the frontier handed out (its dispatch is in
    ``request.meta``); one it did not hand out is answered as each method says.
    """

    @property
    def frontier(self) -> FrontierView | None:
        """The frontier's core while the crawl is open; None before ``open`` and after
        ``close``."""

    @property
    def shared(self) -> Any:
        """The cluster's shared state (:class:`FrontierDriver.shared`), or None on the
        embedded backend."""

    def owns(self, request: Request) -> bool:
        """Whether the request is the one the frontier handed out for its origin (and
        has not settled): the gate refuses a request that did not come through it."""

    def may_send(self, request: Request) -> bool:
        """Whether the request may still go to the network now: on a cluster, whether
        this worker still holds its origin with a lease not run out (by the frontier's
        clock). Asked by the gate before the request goes on and by the download
        handler as the exchange starts. True for a request not handed out by the
        frontier, and on the embedded backend."""

    def hold_back(self, request: Request) -> Request:
        """The request failed :meth:`may_send`: mark it and return it (from a downloader
        middleware) so it comes back to the scheduler, which puts its dispatch back;
        nothing fetched, no rest, no errback."""

    def failure(self, origin: str) -> FailureState:
        """The origin's failure state (backoff, breaker, stop) the gate's verdict is
        applied to; only while the crawl is open."""

    def settle(self, request: Request, *, start: float, end: float,
               failure: FailureState | None, observe: bool) -> Rest | None:
        """The exchange ended (``start``, ``end``: the frontier's clock): store
        ``failure``, set the origin's rest (``observe``: the duration counts in the
        latency watch) and free it. The rest set, or None when the crawl is closed."""

    def release(self, request: Request) -> None:
        """The request left without reaching the network (a cache, a refusal before
        sending): the origin is free with no rest."""

    def done(self, request: Request) -> None:
        """The spider is finished with the request: its row leaves the queue (a request
        with no row: nothing to do)."""

    def hold(self, request: Request, key: str) -> None:
        """The spider keeps part of what it made of the response in memory until
        :meth:`release_held` of ``key``: the row stays queued until then."""

    def release_held(self, key: str) -> None:
        """Every row held under ``key`` is done."""

    def stop(self, origin: str, reason: str) -> None:
        """Stop the origin for the rest of the crawl (its queued rows dropped, nothing
        of it dispatched again); a no-op once the crawl is closed."""

    def is_test_origin(self, origin: str) -> bool:
        """Loopback or in ``POLITE_TEST_NETWORKS``: the lower test floors apply."""

    def mark_seen(self, canonical: str) -> None:
        """A canonical URL known without a fetch of its own (a page's rel=canonical)
        joins the seen set."""

    def enqueue_urls(
        self,
        urls: Iterable[tuple[str, str, Mapping[str, Any] | None]],
        *,
        callback: str,
        errback: str | None = None,
        meta: Mapping[str, Any] | None = None,
        priority: Callable[[str], int] | int = 0,
    ) -> int:
        """Queue ``(canonical URL, origin, extra meta or None)`` as URL rows in bulk, no
        Request made until each is dispatched (``callback``, ``errback``: the spider's
        method names); the frontier's admission checks run. How many were queued."""


class RobotsService(Protocol):
    """The crawl's robots.txt book (:class:`~polite_crawler.store.robots.RobotsBook`,
    ``polite_context(crawler).robots``) as the components ask it, on the reactor
    thread (RFC 9309: nothing of an origin is fetched before its answer is ready)."""

    @property
    def remote(self) -> bool:
        """Whether an entry not held here is read across the network (then by the
        frontier's batch, never on the reactor)."""

    def robots_url(self, origin: str) -> str:
        """The origin's robots.txt URL."""

    def cached(self, origin: str) -> bool:
        """Whether an answer for the origin is held here (no store read needed)."""

    def ready(self, origin: str) -> bool:
        """Whether the origin's answer may be used now (a fresh copy, or the last good
        one within its grace)."""

    def retry_at(self, origin: str) -> float:
        """When the origin's robots.txt may be asked for again (an outage's backoff)."""

    def allowed(self, url: str) -> bool:
        """Whether the crawler may fetch ``url`` (False while its origin's answer is not
        ready)."""

    def rules(self, origin: str) -> RobotsRules | None:
        """The origin's parsed rules, or None (not known, or an allow-all answer)."""

    def sitemaps(self, origin: str) -> list[str]:
        """The origin's Sitemap lines."""

    def signals(self, url: str) -> ContentSignals:
        """The content signals the origin's robots.txt gives ``url``."""


class AccessLogSink(Protocol):
    """The access log (``polite_context(crawler).access_log``), on the reactor thread."""

    def record(self, request: Request | None = None, **fields: Any) -> None:
        """Add ``fields`` (``verdict``, anything else) to the request's exchange and
        write its line; a request never sent is written at once; ``request`` None: a
        line of its own (a render's sub-request)."""


class MetricsSink(Protocol):
    """What the request path reports to the metrics (``polite_context(crawler).metrics``,
    set only when ``POLITE_METRICS_PORT`` is): cheap, on the reactor thread."""

    def settled(self, action: str, status: int | None, retry_after: bool,
                rest: float | None, factor: float | None) -> None:
        """One exchange the gate settled: its verdict's action, status, whether a 429
        or 503 carried a Retry-After, the rest set and the origin's latency factor."""

    def page_written(self, seconds: float) -> None:
        """One page written to the page store, in ``seconds``."""


class PageStoreView(Protocol):
    """The crawl's page store as the context holds it (``polite_context(crawler).pages``;
    :func:`polite_crawler.backend.page_store` opens it and gives the full store)."""

    @property
    def down(self) -> str | None:
        """Why the store gave up on its database (the crawl is closing), or None."""

    @property
    def committed(self) -> int:
        """Writes committed so far (the metrics' counter)."""

    @property
    def waiting(self) -> int:
        """Jobs queued for the store's thread and not taken yet (the metrics' gauge)."""

    def close(self) -> None:
        """Commit the pending writes and close the store."""


@dataclass(frozen=True)
class DriverHooks:
    """What a :class:`FrontierDriver` may call back on the scheduler that opened it,
    on the reactor thread: the scheduler's members stay its own."""

    count: Callable[[str, int], None]  # add n to a stats key of the crawl
    rearm: Callable[[], None]  # the frontier changed: wake the engine at its next eligible time


class OriginLeases(Protocol):
    """Every origin's timing state and who may dispatch to it (the origin store)."""

    def load(self, origin: str) -> tuple[OriginState, str | None, float]:
        """``(state, lease owner or None, lease end)`` of the origin (a new state if none)."""

    def try_lease(self, origin: str, now: float, ttl: float, dead_rest: float,
                  state: OriginState | None = None, *, send_at: float | None = None,
                  ) -> Lease:
        """Whether this process may dispatch to the origin now, and why not
        (:class:`LeaseAnswer`); the state to use and, when not, when to ask again.
        An origin whose holder died waits ``dead_rest`` after the holder's lease end;
        nobody else holds it while this lease runs. ``send_at`` (at least ``now``;
        default ``now``): the request handed out will not be sent before then, so the
        origin's rest is judged at that time; the lease's own times (its end, a
        holder's death) are judged at ``now``."""

    def release(self, state: OriginState, now: float) -> None:
        """The exchange ended (or never started): store the state, the lease ends."""

    def save(self, state: OriginState, now: float) -> None:
        """Store the state without touching the lease."""

    def renew(self, origins: list[str], now: float, ttl: float) -> None:
        """Extend this process's leases of ``origins`` (each has a request in flight)."""

    def release_all(self) -> None:
        """The crawl closes: every lease of this process ends."""

    def close(self) -> None:
        """Release the store's connections."""


@runtime_checkable
class SharedRows(OriginLeases, Protocol):
    """Rows the jobs of one state directory share, written in batches too (the embedded
    backend's origin, host and owner rows: :class:`polite_crawler.frontier.store.OriginStore`).
    With them the host's row is the one lease (see
    :class:`polite_crawler.frontier.core._Host`)."""

    def take(self, origin: str, now: float, ttl: float, dead_rest: float,
             state: OriginState | None = None, *, send_at: float | None = None,
             ) -> tuple[Lease, bool]:
        """:meth:`OriginLeases.try_lease`, and whether another process wrote the row
        since this one last did (the rows kept under it may be newer than ours)."""

    def write(self, states: list[OriginState], now: float) -> None:
        """Store the states in one transaction, keeping whoever holds their leases."""

    def give_back(self, states: list[OriginState], now: float) -> None:
        """Store the states and end this process's leases of them, in one transaction."""


class OwnerRows(SharedRows, Protocol):
    """The owner rows jobs of one state directory share (the embedded backend's
    ``polite_owner``: :class:`polite_crawler.frontier.store.OriginStore`), written
    merged with what other jobs wrote there."""

    def merge_owners(self, drafts: list[tuple[OriginState, str, int, float]],
                     now: float) -> list[OriginState]:
        """Store the owners' rows merged (``(state, day read, count read, own stop's
        time)`` each: the budget pages since the read added, another job's stop kept,
        this one's written unless lifted since) in one transaction; the rows as stored."""

    def owner_stops(self, since: float) -> list[tuple[str, str]]:
        """``(owner, stop)`` of the run's rows written after ``since`` that keep a stop."""

    def owner_lifts(self, since: float) -> list[tuple[str, float]]:
        """``(owner, when)`` of the owners' stops ``scrapy unblock`` lifted after ``since``."""


class RobotsStore(Protocol):
    """Where :class:`~polite_crawler.store.robots.RobotsBook` keeps its entries."""

    errors: tuple[type[Exception], ...]  # what a read or write raises when the store fails
    reload_after: float  # seconds an entry read is trusted before reading it again
    # Read across the network (a round trip): the frontier's batch reads the entries of
    # the origins it takes instead of the reactor (RobotsBook.preload).
    remote: bool

    def load(self, origin: str) -> RobotsState | None:
        """The origin's entry (body, status, outage counters), or None."""

    def save(self, state: RobotsState) -> None:
        """Replace the origin's entry."""

    def close(self) -> None:
        """Release the store's connections."""


class OptOutStore(Protocol):
    """The opt-out list, its version and log, and the jobs that honour it; and what
    ``scrapy forget`` removes beside them (the origin's robots.txt copy, its rows in
    the job frontiers), so the command's one flow runs on either backend."""

    errors: tuple[type[Exception], ...]  # what a read or write raises when the store fails
    where: str  # the store, in words (for the command's output)

    def check_writable(self) -> None:
        """Raise one of :attr:`errors` unless the list can be written now (another
        process holds the store's lock, or the store does not answer)."""

    def version(self) -> int:
        """The list's version: raised by every change."""

    def entries(self) -> dict[str, OptOut]:
        """Every listed origin and why."""

    def get(self, origin: str) -> OptOut | None:
        """The origin's entry, or None."""

    def add(self, origin: str, reason: str, now: float) -> int:
        """List the origin; return the new version."""

    def remove(self, origin: str, reason: str, now: float) -> int:
        """Take the origin off the list; return the new version."""

    def record_removed(self, origin: str, removed: dict[str, Any]) -> None:
        """Keep what ``forget`` deleted with the list's log."""

    def log(self, origin: str | None = None) -> list[dict[str, Any]]:
        """The list's changes, newest first (one origin's, or all)."""

    def jobs(self, *, running: bool | None = None) -> list[Job]:
        """The jobs that registered, with the version each acknowledged."""

    def live(self, jobs: list[Job]) -> set[str]:
        """Owners of the running jobs among ``jobs`` that may still send a request, the
        one test of "live" ``forget`` waits on: on one machine the job's process lives
        (or is on another machine); on a cluster its heartbeat or its frontier worker's
        lease is there. A job that is not live sends nothing."""

    def known(self, origin: str) -> bool:
        """Whether the store's backend has the origin: its state or a robots.txt copy."""

    def forget_robots(self, origin: str) -> int:
        """Delete the origin's robots.txt copy; 1 if there was one."""

    def clear_frontiers(self, origin: str, live: list[Job],
                        also: Sequence[str] = ()) -> dict[str, int | str]:
        """Delete the origin's queued rows from every job frontier the backend can find
        (``also``: more places the operator names, JOBDIRs on one machine); a frontier
        that a ``live`` job holds on its own is left to it (it stops the origin). Per
        frontier, in words: rows deleted, or what was done instead."""

    def unstop_frontiers(self, origin: str, live: list[Job],
                         also: Sequence[str] = ()) -> dict[str, int | str]:
        """``--undo``: forget the frontiers' stops of the origin for the opt-out (a
        ``live`` job keeps it stopped until it ends). Per frontier: stops forgotten, or
        why it was left alone."""

    def close(self) -> None:
        """Release the store's connections."""


class BlockStore(Protocol):
    """The sites that refused the crawler (402, 403, a challenge page), remembered
    across runs and jobs: one :class:`~polite_crawler.policy.blocks.Block` an origin.
    How long a block lasts is the rule's (:mod:`polite_crawler.policy.blocks`); the
    store keeps the block it is given."""

    errors: tuple[type[Exception], ...]  # what a read or write raises when the store fails

    def load(self, origin: str) -> Block | None:
        """The origin's block (on or run out), or None."""

    def all(self) -> list[Block]:
        """Every stored block, by origin."""

    def save(self, block: Block) -> None:
        """Keep ``block`` as its origin's, in place of the one before."""

    def delete(self, origin: str) -> int:
        """Forget the origin's block; 1 if there was one, else 0."""

    def close(self) -> None:
        """Release the store's connections."""


class PageBackend(Protocol):
    """One connection to the page store (SQLite or PostgreSQL), used by one thread."""

    dialect: str  # "sqlite" or "postgres"

    def get(self, canonical_url: str, *, body: bool = False) -> PageRecord | None:
        """The page stored under this canonical URL, or None."""

    def resolve(self, canonical_url: str, *, body: bool = False,
                follow: Any = None) -> PageRecord | None:
        """The page, or the page it is an alias of (aliases of the ``follow`` reasons)."""

    def alias_of(self, alias_url: str) -> tuple[str, str] | None:
        """``(canonical URL, reason)`` the URL is an alias of, or None."""

    def get_fetch(self, url: str, *, body: bool = False) -> FetchRecord | None:
        """The fetch state of a URL that is not a page (sitemap, feed, alias), or None."""

    def close(self) -> None:
        """Close the connection."""


class StateReader(Protocol):
    """What the operator's commands read, the same on both backends (read only).

    Opened by :meth:`polite_crawler.backend.Backend.reader`; every method reads the
    crawl's shared state as the crawl sees it (every worker's, on a cluster).
    """

    where: str  # the stores read, in words (for the commands' output)

    def origin_state(self, origin: str) -> tuple[OriginState, str | None, float | None] | None:
        """``(state, lease owner or None, lease end or None)`` of the origin, or None."""

    def origin_states(self) -> Iterator[tuple[str, OriginState]]:
        """Every origin's state."""

    def host_state(self, host: str) -> HostRecord | None:
        """The host name's shared gate (its rest's end, who holds it), or None."""

    def owner_state(self, owner: str) -> OwnerRecord | None:
        """The owner's (registrable domain's) shared daily budget counts, or None."""

    def server_state(self, address: str) -> ServerRecord | None:
        """A server address's places as a cluster's workers share them, or None (one
        machine keeps its servers' bounds in the crawl's memory only)."""

    def robots(self, origin: str) -> RobotsState | None:
        """The origin's robots.txt entry, or None."""

    def robots_entries(self) -> Iterator[RobotsState]:
        """Every robots.txt entry."""

    def optout(self, origin: str) -> OptOut | None:
        """The origin's opt-out entry, or None."""

    def optouts(self) -> dict[str, OptOut]:
        """The opt-out list."""

    def jobs(self) -> list[Job]:
        """The jobs that registered with the opt-out list."""

    def page(self, canonical_url: str, *, follow: Any) -> PageRecord | None:
        """The stored page (or the page it is an alias of, for ``follow`` reasons)."""

    def alias_of(self, url: str) -> tuple[str, str] | None:
        """``(canonical URL, reason)`` the URL is an alias of, or None."""

    def fetch(self, url: str) -> FetchRecord | None:
        """The fetch state of a URL that is not a page (``url_fetches``), or None."""

    def has_pages(self, origin: str) -> bool:
        """Whether the page store holds a page of the origin."""

    def pages_where(self) -> str | None:
        """The page store read (a path or a URI), or None when there is none."""

    def close(self) -> None:
        """Release every connection."""
