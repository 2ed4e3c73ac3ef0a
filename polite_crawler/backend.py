"""Which storage the crawl runs on: decided here, from two settings, and nowhere else.

As Scrapy's HTTP cache keeps its policy apart from its storages (one setting picks
the storage class), the crawl's rules (:mod:`polite_crawler.frontier.core`,
:class:`~polite_crawler.store.robots.RobotsBook`, the opt-out middleware, the
commands) run over stores declared in :mod:`polite_crawler.interfaces`, and
:func:`backend_of` picks them:

- ``POLITE_FRONTIER`` empty: *embedded*: the queue and seen set in ``JOBDIR``, origin
  state, leases, the robots.txt cache and the opt-out list in the state directory
  (SQLite), for one process or the processes of one machine;
  ``POLITE_FRONTIER=redis://HOST:PORT/DB``: *cluster*: all of that in Redis, shared by
  workers on any number of machines (docs/CLUSTER.md).
- ``POLITE_STORE`` empty: the page store in the state directory (SQLite);
  ``postgresql://...``: in PostgreSQL (what a cluster uses); ``sqlite:///PATH``: there.

Every other module asks the :class:`Backend` for its store; none reads the two
settings itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

    from polite_crawler.interfaces import BlockStore, OptOutStore, StateReader
    from polite_crawler.store.page_backend import SQLPageBackend
    from polite_crawler.store.pages import PageStore
    from polite_crawler.store.redis_optout import RedisOptOutList
    from polite_crawler.store.robots import RobotsBook

REDIS_SCHEMES = ("redis://", "rediss://")
POSTGRES_SCHEMES = ("postgresql://", "postgres://")

# One scheduler for both backends; each backend is a driver it runs.
SCHEDULER = "polite_crawler.frontier.scheduler.FrontierScheduler"
EMBEDDED_DRIVER = "polite_crawler.frontier.embedded.EmbeddedDriver"
CLUSTER_DRIVER = "polite_crawler.frontier.redis_scheduler.ClusterDriver"

# Seconds an operator's command waits for Redis at least: it is not on a crawl's event
# loop, which POLITE_REDIS_STATE_TIMEOUT keeps short.
COMMAND_REDIS_TIMEOUT = 5.0


def _settings(settings: BaseSettings) -> BaseSettings:
    """The settings read bare: with every POLITE_* default present, add-on or not
    (:func:`polite_crawler.defaults.polite_settings`)."""
    from polite_crawler.defaults import polite_settings

    return polite_settings(settings)


def command_redis_timeout(settings: BaseSettings) -> float:
    """Seconds a command's Redis call may take: POLITE_REDIS_STATE_TIMEOUT, at least
    :data:`COMMAND_REDIS_TIMEOUT`."""
    return max(_settings(settings).getfloat("POLITE_REDIS_STATE_TIMEOUT"),
               COMMAND_REDIS_TIMEOUT)


def redis_lease_ttl(settings: BaseSettings) -> float:
    """Seconds a cluster worker's lease lasts: POLITE_REDIS_LEASE_TTL, at least 1 s. The
    driver renews its leases by it, and a worker is judged alive by it (the metrics'
    workers-alive figure), so both read it here."""
    return max(_settings(settings).getfloat("POLITE_REDIS_LEASE_TTL"), 1.0)


def page_backend_factory(uri: str, sqlite_path: str) -> Callable[[], SQLPageBackend]:
    """A factory of page-store connections for ``uri`` (a ``POLITE_STORE`` value; empty:
    SQLite at ``sqlite_path``)."""
    if uri.startswith(POSTGRES_SCHEMES):
        from polite_crawler.store.postgres import PostgresPageBackend

        return lambda: PostgresPageBackend(uri)
    from polite_crawler.store.sqlite import SQLitePageBackend

    path = uri.removeprefix("sqlite:///") if uri.startswith("sqlite:///") else sqlite_path
    return lambda: SQLitePageBackend(path)


@dataclass(frozen=True)
class Backend:
    """The crawl's storage, as the settings name it (see the module docstring)."""

    frontier_url: str = ""  # the Redis URL of a cluster, or '' (embedded)
    store_uri: str = ""  # POLITE_STORE as given

    @property
    def cluster(self) -> bool:
        """Whether the frontier, the robots.txt cache and the opt-out list are in Redis."""
        return self.frontier_url.startswith(REDIS_SCHEMES)

    @property
    def kind(self) -> str:
        return "cluster" if self.cluster else "embedded"

    @property
    def pages_on_postgres(self) -> bool:
        return self.store_uri.startswith(POSTGRES_SCHEMES)

    @property
    def scheduler(self) -> str:
        """The import path of the Scrapy scheduler (the same for both backends)."""
        return SCHEDULER

    @property
    def frontier_driver(self) -> str:
        """The import path of the driver the scheduler opens its frontier with (a path,
        as Scrapy names a storage: the scheduler loads it, this module imports neither)."""
        return CLUSTER_DRIVER if self.cluster else EMBEDDED_DRIVER

    # --- the page store -----------------------------------------------------------------
    def pages_path(self, state: Path) -> Path | None:
        """The SQLite page store's file (None: the page store is PostgreSQL)."""
        from pathlib import Path as _Path

        from polite_crawler.store.paths import STATE_DB

        if self.pages_on_postgres:
            return None
        if self.store_uri.startswith("sqlite:///"):
            return _Path(self.store_uri.removeprefix("sqlite:///"))
        return state / STATE_DB

    def page_backends(self, state: Path) -> Callable[[], SQLPageBackend]:
        """Connections to the page store (``state``: the state directory)."""
        path = self.pages_path(state)
        return page_backend_factory(self.store_uri, str(path) if path else "")

    def open_page_store(self, settings: BaseSettings,
                        on_state: Callable[[str, str], None] | None = None) -> PageStore:
        """The crawl's page store, written in batches by its thread; ``on_state`` hears
        when its database goes away and comes back."""
        from polite_crawler.store.pages import SPILL_FILE, PageStore
        from polite_crawler.store.paths import state_dir

        state = state_dir(settings)
        s = _settings(settings)
        return PageStore(self.page_backends(state),
                         batch_size=s.getint("POLITE_STORE_BATCH"),
                         flush_interval=s.getfloat("POLITE_STORE_FLUSH"),
                         max_distance=s.getint("POLITE_SIMHASH_DISTANCE"),
                         buffer=s.getint("POLITE_STORE_BUFFER"),
                         give_up=s.getfloat("POLITE_STORE_GIVE_UP"),
                         spill=state / SPILL_FILE, on_state=on_state)

    # --- the robots.txt cache and the opt-out list --------------------------------------
    def robots_book(self, settings: BaseSettings, *, clock: Callable[[], float] | None = None,
                    count: Callable[[str], None] | None = None) -> RobotsBook:
        """The crawl's robots.txt cache: the book's rules over this backend's store."""
        import time

        from polite_crawler.store.robots import RobotsBook

        s = _settings(settings)
        store: Any
        if self.cluster:
            from polite_crawler.store.redis_robots import RedisRobotsStore

            store = RedisRobotsStore(
                self.frontier_url, keep=s.getfloat("POLITE_ROBOTS_REDIS_KEEP"),
                timeout=s.getfloat("POLITE_REDIS_STATE_TIMEOUT"))
        else:
            from polite_crawler.store.paths import origins_db_path

            store = origins_db_path(settings)
        return RobotsBook(
            store,
            str(s.get("POLITE_BOT_NAME")),
            ttl=s.getfloat("POLITE_ROBOTS_TTL"),
            max_bytes=s.getint("POLITE_ROBOTS_MAX_BYTES"),
            retry_min=s.getfloat("POLITE_ROBOTS_RETRY_MIN"),
            retry_max=s.getfloat("POLITE_ROBOTS_RETRY_MAX"),
            clock=clock or time.time,
            count=count or (lambda key: None),
        )

    def cluster_optout(self, settings: BaseSettings,
                       timeout: float | None = None) -> RedisOptOutList | None:
        """The cluster's opt-out list in Redis; None on the embedded backend (the list
        is then in the origin store: :class:`~polite_crawler.store.optout.OptOutList`)."""
        if not self.cluster:
            return None
        from polite_crawler.store.redis_optout import RedisOptOutList

        wait = timeout if timeout is not None else \
            _settings(settings).getfloat("POLITE_REDIS_STATE_TIMEOUT")
        return RedisOptOutList(self.frontier_url, timeout=wait)

    def optout_store(self, settings: BaseSettings, state: Path | None, *,
                     timeout: float) -> OptOutStore:
        """The opt-out list as ``scrapy forget`` changes it: in Redis on a cluster
        (POLITE_CRAWL: one more crawl whose rows it drops), else in the state directory's
        origin store (``timeout``: seconds to wait for another process's lock; JOBDIR:
        one more job frontier it cleans)."""
        if self.cluster:
            from polite_crawler.store.redis_optout import RedisOptOutList

            return RedisOptOutList(self.frontier_url, timeout=command_redis_timeout(settings),
                                   crawl=settings.get("POLITE_CRAWL") or "default")
        from polite_crawler.store.optout import OptOutList
        from polite_crawler.store.paths import ORIGINS_DB

        if state is None:
            raise ValueError("the embedded opt-out list is in a state directory: none given")
        return OptOutList(state / ORIGINS_DB, timeout=timeout,
                          jobdir=settings.get("JOBDIR") or None)

    def block_store(self, settings: BaseSettings, state: Path | None = None, *,
                    readonly: bool = False) -> BlockStore:
        """The sites that refused the crawler, remembered across runs and jobs: in Redis
        on a cluster, else in the state directory's origin store (``state``: the
        commands' directory; default the crawl's; ``readonly``: opened for reading)."""
        if self.cluster:
            from polite_crawler.store.redis_blocks import RedisBlockStore

            return RedisBlockStore(self.frontier_url, timeout=_settings(settings).getfloat(
                "POLITE_REDIS_STATE_TIMEOUT"))
        from polite_crawler.store.blocks import SQLiteBlockStore
        from polite_crawler.store.paths import ORIGINS_DB, origins_db_path

        path = origins_db_path(settings) if state is None else state / ORIGINS_DB
        return SQLiteBlockStore(path, readonly=readonly)

    # --- the commands' view -------------------------------------------------------------
    def reader(self, settings: BaseSettings, state: Path | None) -> StateReader:
        """A read-only view of everything the crawl holds (``state``: the state
        directory, or None where a cluster's machine has none)."""
        from polite_crawler.store.reader import ClusterReader, EmbeddedReader, PageReader

        path = self.pages_path(state) if state is not None else None
        if self.pages_on_postgres:
            pages = PageReader(self.page_backends(state or _here()), self.store_uri)
        elif path is not None and path.is_file():
            pages = PageReader(page_backend_factory(f"sqlite:///{path}", str(path)), str(path))
        else:
            pages = PageReader(None, None)
        if self.cluster:
            return ClusterReader(self.frontier_url, pages,
                                 timeout=command_redis_timeout(settings))
        from polite_crawler.store.paths import ORIGINS_DB

        return EmbeddedReader(state / ORIGINS_DB if state is not None else None, pages)


def _here() -> Path:
    from pathlib import Path as _Path

    return _Path(".")


def backend_of(settings: BaseSettings) -> Backend:
    """The crawl's backend, from ``POLITE_FRONTIER`` and ``POLITE_STORE`` (the one place
    they are read)."""
    return Backend(str(settings.get("POLITE_FRONTIER") or ""),
                   str(settings.get("POLITE_STORE") or ""))


def page_store(crawler: Crawler) -> PageStore:
    """The crawl's page store (``polite_context(crawler).pages``), opened on first use.

    Closed (pending writes committed) when the spider closes. While its database is
    away the crawl fetches on until ``POLITE_STORE_BUFFER`` writes wait, then pauses
    until they are made; a database away for ``POLITE_STORE_GIVE_UP`` seconds closes
    the crawl (reason ``page_store_down``), the writes not made kept in the spill file: the
    store says so with the ``page_store_state`` signal (:mod:`polite_crawler.signals`),
    and the :class:`~polite_crawler.extensions.storewatch.StoreWatch` extension pauses,
    resumes and closes the crawl.
    """
    from scrapy import signals

    from polite_crawler.context import polite_context
    from polite_crawler.signals import page_store_state

    ctx = polite_context(crawler)
    if ctx.pages is not None:
        # Set only below: the context declares the slot as the view the other components
        # read (interfaces.PageStoreView); the full store is this one.
        return cast("PageStore", ctx.pages)
    def on_state(state: str, why: str) -> None:  # on the store's thread
        from twisted.internet import reactor

        reactor.callFromThread(crawler.signals.send_catch_log, signal=page_store_state,
                               state=state, why=why)

    store = backend_of(crawler.settings).open_page_store(crawler.settings, on_state)
    ctx.pages = store

    async def _close() -> None:
        from scrapy.utils.asyncio import run_in_thread

        await run_in_thread(store.close)  # commits the open batch without blocking

    crawler.signals.connect(_close, signal=signals.spider_closed, weak=False)
    return store
