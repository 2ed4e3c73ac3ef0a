"""The robots.txt book's store in Redis: one cache for every worker on every machine.

With ``POLITE_FRONTIER=redis://...`` the :class:`~polite_crawler.store.robots.RobotsBook`
keeps its entries here instead of the state directory's SQLite file, so robots.txt is
fetched once per origin for the whole cluster (and for every crawl on the Redis, as
origin state is). The rules (freshness, outage backoff, the last good copy, a pending
redirect) stay in the book; this module only loads and saves.

One hash per origin, ``polite:robots:{ORIGIN}`` (the hash tag of the frontier's keys
of that origin, :mod:`polite_crawler.store.redis_keys`: one Redis Cluster slot),
with the fields of :class:`~polite_crawler.records.RobotsState` (a field absent
for None). A write replaces the hash in one ``MULTI`` and gives the key a Redis TTL of
``POLITE_ROBOTS_REDIS_KEEP`` (30 days by default), renewed by every write: an origin
nobody asked about for that long is forgotten (its copy was stale long ago), one in an
outage is written at every retry and keeps its last good copy.

The Redis frontier reads the hashes of the origins a worker takes in its batch, on its
thread (:func:`load_many`, :meth:`RobotsBook.preload`). The book itself reads an
origin's hash when it needs one it does not hold, and again before it would ask for a
fetch; it writes once per robots.txt answer. Those run on the calling (reactor) thread
with short socket timeouts (``POLITE_REDIS_STATE_TIMEOUT``); their
errors (:attr:`RedisRobotsStore.errors`) make the book fail safe.
"""

from __future__ import annotations

from typing import Any

from polite_crawler.records import RobotsState
from polite_crawler.store.redis_keys import (
    PREFIX,
    TIMEOUT,
    redis_client,
    redis_errors,
    robots_key,
)

KEEP = 30 * 86400.0

_TEXT = ("url", "kind", "last_error")
_INT = ("status", "failures")
_FLOAT = ("fetched_at", "outage_since", "retry_at", "checked_at")


def encode_state(state: RobotsState) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for name in _TEXT:
        value = getattr(state, name)
        if value is not None:
            out[name] = str(value).encode("utf-8")
    for name in _INT:
        value = getattr(state, name)
        if value is not None:
            out[name] = str(int(value)).encode()
    for name in _FLOAT:
        value = getattr(state, name)
        if value is not None:
            out[name] = repr(float(value)).encode()
    out["body"] = bytes(state.body)
    out["truncated"] = b"1" if state.truncated else b"0"
    return out


def decode_state(origin: str, raw: dict[Any, Any]) -> RobotsState | None:
    """The state stored in ``raw`` (an HGETALL answer); None when empty (never read)."""
    if not raw:
        return None
    fields = {bytes(k).decode(): bytes(v) for k, v in raw.items()}
    state = RobotsState(origin)
    for name in _TEXT:
        if name in fields:
            setattr(state, name, fields[name].decode("utf-8", errors="replace"))
    for name in _INT:
        if name in fields:
            setattr(state, name, int(fields[name]))
    for name in _FLOAT:
        if name in fields:
            setattr(state, name, float(fields[name]))
    state.failures = state.failures or 0
    state.retry_at = state.retry_at or 0.0
    state.body = fields.get("body", b"")
    state.truncated = fields.get("truncated") == b"1"
    return state


class RedisRobotsStore:
    """A :class:`~polite_crawler.store.robots.RobotsStore` on Redis (see the module doc)."""

    # Every time the book would ask for a fetch it reads the hash again first: another
    # worker (on another machine) may have fetched robots.txt since.
    reload_after = 0.0

    def __init__(self, url: str, *, keep: float = KEEP, timeout: float = TIMEOUT,
                 prefix: str = PREFIX) -> None:
        self.url = url
        self.r: Any = redis_client(url, timeout)
        self.keep = max(int(keep), 1)
        self.prefix = prefix
        self.errors = redis_errors()

    def key(self, origin: str) -> str:
        return robots_key(origin, self.prefix)

    # The book asks the frontier's batch to read the entries of origins taken (no read
    # on the reactor when one is first needed): see RobotsBook.preload.
    remote = True

    def load(self, origin: str) -> RobotsState | None:
        return decode_state(origin, self.r.hgetall(self.key(origin)))

    def save(self, state: RobotsState) -> None:
        key = self.key(state.origin)
        pipe = self.r.pipeline(transaction=True)  # one key: one slot, MULTI is fine
        pipe.delete(key)
        pipe.hset(key, mapping=encode_state(state))
        pipe.expire(key, self.keep)
        pipe.execute()

    def delete(self, origin: str) -> int:
        """Forget the origin's entry (``scrapy forget``); 1 if there was one."""
        return int(self.r.delete(self.key(origin)))

    def close(self) -> None:
        self.r.close()


def load_many(r: Any, origins: list[str], prefix: str = PREFIX) -> dict[str, RobotsState | None]:
    """The entries of ``origins`` in one pipeline (any client of the Redis)."""
    if not origins:
        return {}
    pipe = r.pipeline(transaction=False)
    for origin in origins:
        pipe.hgetall(robots_key(origin, prefix))
    return {o: decode_state(o, raw) for o, raw in zip(origins, pipe.execute(), strict=True)}


__all__ = ["TIMEOUT", "RedisRobotsStore", "decode_state", "encode_state", "load_many",
           "redis_client", "redis_errors", "robots_key"]
