"""The records the storage interfaces (:mod:`polite_crawler.interfaces`) pass: declared
here, with the interfaces, so the interfaces import no store that implements them.

:class:`Row` (a queued URL of a job's frontier), :class:`RobotsState` (an origin's
robots.txt entry), :class:`PageRecord` and :class:`FetchRecord` (a stored page, and a
fetch of a URL that is not a page), :class:`OptOut` and :class:`Job` (an opt-out list
entry, a job that honours the list). The stores import them from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Row:
    """One queued row of a crawl's frontier (:class:`~polite_crawler.interfaces.URLQueue`)."""

    id: int
    origin: str
    url: str
    data: bytes
    prio: int = 0


@dataclass
class RobotsState:
    """What the book knows of one origin's robots.txt."""

    origin: str
    url: str | None = None
    kind: str | None = None  # store.robots.KIND_RULES, KIND_ALLOW_ALL, or None: no usable copy
    status: int | None = None
    body: bytes = b""
    truncated: bool = False
    fetched_at: float | None = None
    failures: int = 0
    outage_since: float | None = None
    retry_at: float = 0.0
    last_error: str | None = None
    checked_at: float | None = None

    @property
    def has_copy(self) -> bool:
        return self.kind is not None

    @property
    def in_outage(self) -> bool:
        return self.failures > 0


@dataclass
class PageRecord:
    """One stored page (a row of ``pages``)."""

    canonical_url: str
    url: str
    final_url: str
    status: int
    fetched_at: float
    etag: str | None = None
    last_modified: str | None = None
    lastmod: str | None = None
    title: str = ""
    text: str = ""
    text_hash: str | None = None
    simhash: int | None = None  # unsigned 64-bit
    words: int = 0
    near_duplicate_of: str | None = None
    signals: dict[str, Any] = field(default_factory=dict)
    noindex: bool = False
    ai_input: bool = True
    language: str | None = None
    links: int = 0
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    body: bytes | None = None  # the copy, uncompressed; None: not loaded or not kept
    body_length: int = 0
    fresh_until: float | None = None
    no_store: bool = False
    revisit_interval: float = 0.0
    due_at: float = 0.0
    visits: int = 1
    changes: int = 0
    id: int | None = None

    @property
    def has_copy(self) -> bool:
        return self.body_length > 0 or self.body is not None

    @property
    def has_validators(self) -> bool:
        return bool(self.etag or self.last_modified)


@dataclass
class FetchRecord:
    """What a fetch of a URL that is not a stored page left (a row of ``url_fetches``).

    ``kind``: ``sitemap`` (a sitemap or feed), ``duplicate`` (an exact duplicate
    of ``canonical_url``), ``canonical`` (a page whose rel=canonical names
    ``canonical_url``). Its validators, freshness and revisit time are its own.
    """

    url: str  # canonical form
    kind: str
    status: int
    final_url: str
    fetched_at: float
    canonical_url: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    body_length: int = 0
    body_hash: str | None = None
    fresh_until: float | None = None
    no_store: bool = False
    revisit_interval: float = 0.0
    due_at: float = 0.0
    visits: int = 1
    changes: int = 0

    @property
    def has_copy(self) -> bool:
        return self.body_length > 0 or self.body is not None

    @property
    def has_validators(self) -> bool:
        return bool(self.etag or self.last_modified)


@dataclass(frozen=True)
class OptOut:
    origin: str
    reason: str
    added_at: float


@dataclass(frozen=True)
class Job:
    owner: str
    spider: str
    queue_path: str | None
    opened_at: float
    closed_at: float | None
    version: int
    acked_at: float
    crawl: str | None = None  # with the frontier on Redis: POLITE_CRAWL of the job
    worker: str | None = None  # and its frontier worker id (whose lease shows it alive)


@dataclass(frozen=True)
class HostRecord:
    """A host name's shared gate as stored (``StateReader.host_state``): on one machine
    the ``polite_host`` row (its rest's end and the lease the job crawling it holds
    while it has work for the host, a turn of POLITE_LEASE_TTL at most); on a cluster
    the host's part of its owner's group (the worker that holds every origin of the
    owner, the rest's end its last holder left)."""

    host: str
    next_allowed: float  # the end of the host's rest as stored (0: none)
    holder: str | None  # the process leasing it, or the worker holding its owner's group
    lease_until: float | None  # the process's lease end (one machine; None on a cluster)
    origins: tuple[str, ...] = ()  # on a cluster: the host's origins the worker holds
    waiting: tuple[str, ...] = ()  # on a cluster: its origins another worker found held


@dataclass(frozen=True)
class OwnerRecord:
    """An owner's (registrable domain's) shared daily budget as stored
    (``StateReader.owner_state``): one count on one machine (``polite_owner``), each of
    its origins' counts on a cluster (kept with its group, written with their states)."""

    owner: str
    counts: tuple[tuple[str, int], ...]  # (UTC day, pages) per stored count
    holder: str | None = None  # on a cluster: the worker holding the owner's group
    # (run, or a cluster's crawl; "<reason> from <origin>"): a refusal from one of its
    # hosts stopped them all in that run.
    stops: tuple[tuple[str, str], ...] = ()
    lifted: float | None = None  # when ``scrapy unblock`` last lifted its stop (one machine)

    def used_on(self, day: str) -> int:
        """Pages counted against the owner's budget on ``day``."""
        return sum(n for d, n in self.counts if d == day)


@dataclass(frozen=True)
class ServerRecord:
    """A server address's places as a cluster's workers share them
    (``StateReader.server_state``; one machine keeps its servers' bounds in memory only)."""

    address: str
    limit: int  # requests of the crawl at once on it, all workers together
    places: tuple[tuple[str, int], ...]  # (worker, places it holds)
    waiting: tuple[str, ...]  # workers waiting for places
    rest_until: float  # the rest a worker's last round left with the places it gave back
    wait_until: float  # a failure of the machine: no site of it before this

    @property
    def held(self) -> int:
        """Places held, all workers together."""
        return sum(n for _w, n in self.places)
