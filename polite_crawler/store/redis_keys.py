"""Every Redis key the crawl uses, and the one way to open a Redis client.

The frontier (:mod:`polite_crawler.frontier.redis_shared`), the robots.txt cache
(:mod:`polite_crawler.store.redis_robots`), the opt-out list
(:mod:`polite_crawler.store.redis_optout`), the remembered refusals
(:mod:`polite_crawler.store.redis_blocks`) and the operator's commands (through
:mod:`polite_crawler.store.reader`) all name keys through these functions; this module
imports nothing of the project, so none of them imports another for a key's name.

``P`` is the prefix (``polite``), ``C`` a crawl's name, ``O`` an origin, ``W`` a
worker. Every key of one origin carries the hash tag ``{O}`` (one Redis Cluster slot
for a script over an origin's keys); the opt-out list's keys share ``{optout}``.
docs/CLUSTER.md says what each holds.
"""

from __future__ import annotations

from typing import Any

PREFIX = "polite"
# The shared state's small calls (the robots.txt cache, the opt-out list, the
# commands): short timeouts, since some run on the reactor thread.
TIMEOUT = 2.0


def redis_client(url: str, timeout: float = TIMEOUT) -> Any:
    """A client of the Redis at ``url`` (``redis://`` or ``rediss://``).

    ``timeout`` bounds the connection and every call: a failure is the caller's
    decision, never a wait. redis-py's clients are thread-safe (a connection pool).
    """
    import redis

    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout,
                                health_check_interval=30)


def redis_errors() -> tuple[type[Exception], ...]:
    """What a Redis call raises when Redis does not answer or refuses."""
    import redis

    return (redis.RedisError, OSError)


# --- the frontier (one crawl's queues, seen set and completion; shared origin state) -----
def origin_key(origin: str, prefix: str = PREFIX) -> str:
    """``P:o:{O}`` hash, shared by every crawl: state, run, owner, ``seq:C``, ``stop:C``."""
    return f"{prefix}:o:{{{origin}}}"


def queue_key(origin: str, crawl: str, prefix: str = PREFIX) -> str:
    """``P:q:{O}:C`` sorted set: the crawl's queued rows of the origin."""
    return f"{prefix}:q:{{{origin}}}:{crawl}"


def claimed_key(origin: str, crawl: str, prefix: str = PREFIX) -> str:
    """``P:f:{O}:C`` hash seq -> row: rows the owner has claimed."""
    return f"{prefix}:f:{{{origin}}}:{crawl}"


def seen_key(origin: str, crawl: str, prefix: str = PREFIX) -> str:
    """``P:s:{O}:C`` set of 64-bit fingerprints: the crawl's seen set for the origin."""
    return f"{prefix}:s:{{{origin}}}:{crawl}"


def group_key(owner: str, prefix: str = PREFIX) -> str:
    """``P:g:{O}`` hash, shared by every crawl: the group of origins of one owner (its
    registrable domain: its host names, their schemes and ports), held by one worker at
    a time: ``owner``, ``m:<origin>`` for each origin the holder holds, ``w:<origin>``
    for each origin another worker found held, ``u:<host>`` (a host's rest end as its
    last holder left it), ``b:<origin>`` (the origin's budget count, "<day> <used>",
    for the owner's daily budget) and ``s:<crawl>`` (why a refusal stopped the owner in
    that crawl)."""
    return f"{prefix}:g:{{{owner}}}"


def server_key(address: str, prefix: str = PREFIX) -> str:
    """``P:srv:{A}`` hash, shared by every crawl: the places of one server address that
    the workers share: ``lim`` (its limit), ``h:<W>`` the places worker W holds,
    ``d:<W>`` W's unmet demand ("<want> <since>"), ``u`` the rest end left with places
    given back, ``x`` a failure's wait every worker's sites wait out, ``t`` the last
    call's time, ``r`` Redis's start as of the last write and ``p`` a start the hash
    outlived (docs/CLUSTER.md, "Servers")."""
    return f"{prefix}:srv:{{{address}}}"


def active_key(crawl: str, prefix: str = PREFIX) -> str:
    """``P:active:C`` set: origins with rows queued or claimed."""
    return f"{prefix}:active:{crawl}"


def free_key(crawl: str, prefix: str = PREFIX) -> str:
    """``P:free:C`` set: active origins nobody owns."""
    return f"{prefix}:free:{crawl}"


def workers_key(crawl: str, prefix: str = PREFIX) -> str:
    """``P:workers:C`` sorted set worker -> last heartbeat."""
    return f"{prefix}:workers:{crawl}"


def templates_key(crawl: str, prefix: str = PREFIX) -> str:
    """``P:tpl:C`` hash id -> URL-row template."""
    return f"{prefix}:tpl:{crawl}"


def seed_key(crawl: str, prefix: str = PREFIX) -> str:
    """``P:seed:C``: the first worker of the crawl."""
    return f"{prefix}:seed:{crawl}"


def seeded_key(crawl: str, prefix: str = PREFIX) -> str:
    """``P:seeded:C``: set once a worker's whole start list is in."""
    return f"{prefix}:seeded:{crawl}"


def alive_key(worker: str, prefix: str = PREFIX) -> str:
    """``P:alive:W``: the worker's lease (a TTL key)."""
    return f"{prefix}:alive:{worker}"


def owned_key(worker: str, crawl: str, prefix: str = PREFIX) -> str:
    """``P:owned:C:W`` set: the origins the worker took (a hint for takeover)."""
    return f"{prefix}:owned:{crawl}:{worker}"


def nudge_key(worker: str, crawl: str, prefix: str = PREFIX) -> str:
    """``P:nudge:C:W`` set: origins the worker owns that another worker queued rows for
    (read and emptied in the owner's next batch: it claims them then)."""
    return f"{prefix}:nudge:{crawl}:{worker}"


def mark_key(worker: str, prefix: str = PREFIX) -> str:
    """``P:n:W``: the worker's batch counter (one INCR a batch: a Redis that restarted
    without the end of its log counts from less)."""
    return f"{prefix}:n:{worker}"


def until_key(worker: str, prefix: str = PREFIX) -> str:
    """``P:w:W``: the end of the worker's last lease."""
    return f"{prefix}:w:{worker}"


# --- the robots.txt cache ------------------------------------------------------------------
def robots_key(origin: str, prefix: str = PREFIX) -> str:
    """``P:robots:{O}`` hash: the origin's robots.txt entry, shared by every crawl."""
    return f"{prefix}:robots:{{{origin}}}"


# --- the opt-out list ----------------------------------------------------------------------
def optout_key(part: str, prefix: str = PREFIX) -> str:
    """``P:{optout}:<part>``: ``list``, ``version``, ``log``, ``jobs``, ``acks``, or
    ``alive:<job>`` (a job's heartbeat)."""
    return f"{prefix}:{{optout}}:{part}"


def blocks_key(prefix: str = PREFIX) -> str:
    """The one hash of every remembered refusal (field: the origin; not an origin's
    key: read whole, it is small)."""
    return f"{prefix}:blocks"


def lifts_key(prefix: str = PREFIX) -> str:
    """``P:lifts``: a counter ``scrapy unblock`` adds one to after it deleted owners'
    stops (``s:<crawl>`` of a group): a worker reads it in each batch, and only when it
    moved reads the groups of the owners it holds stopped (a lift ends their stop)."""
    return f"{prefix}:lifts"


def origin_of_key(key: bytes | str) -> str:
    """The origin a per-origin key names (its hash tag), or '' for another key."""
    text = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
    start = text.find("{")
    end = text.find("}", start + 1)
    return text[start + 1:end] if 0 <= start < end else ""
