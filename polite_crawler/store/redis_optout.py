"""The opt-out list in Redis: honoured by every worker on every machine (``scrapy forget``).

With ``POLITE_FRONTIER=redis://...`` the list, its version, its log and the jobs that
honour it live here instead of the state directory's SQLite file
(:mod:`polite_crawler.store.optout` has the same rules for one machine). Shared by
every crawl on the Redis, as origin state is. Keys (``P`` the prefix, ``polite``); the
hash tag ``{optout}`` puts them in one Redis Cluster slot, so a change of the list,
its log line and the version's bump are one ``MULTI``:

- ``P:{optout}:list`` hash origin -> JSON ``{"reason", "added_at"}``;
- ``P:{optout}:version`` integer, raised by every change;
- ``P:{optout}:log`` list of JSON lines ``{"origin", "action", "reason", "at", "removed"}``;
- ``P:{optout}:jobs`` hash owner -> JSON: the job's spider, crawl, frontier worker id,
  when it opened and closed;
- ``P:{optout}:acks`` hash owner -> the list version the job acknowledged;
- ``P:{optout}:alive:OWNER`` the job's heartbeat (a key with a TTL, renewed by every
  poll of the version).

A job is live for ``forget`` while it has not closed and its heartbeat or its
frontier worker's lease (``P:alive:W``, :mod:`polite_crawler.store.redis_keys`)
exists: a worker whose lease is gone dispatches nothing.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from polite_crawler.records import Job, OptOut
from polite_crawler.store.redis_keys import (
    PREFIX,
    TIMEOUT,
    active_key,
    alive_key,
    claimed_key,
    free_key,
    optout_key,
    origin_key,
    queue_key,
    redis_client,
    redis_errors,
    robots_key,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

STOP_REASON = "opted_out"  # a crawl's stop of a listed origin (the opt-out middleware's)


def _text(raw: Any) -> str:
    return bytes(raw).decode("utf-8") if raw is not None else ""


class RedisOptOutList:
    """The opt-out list, its version, log and jobs in Redis (see the module docstring).

    ``crawl``: the POLITE_CRAWL of the command using it, one more crawl whose frontier
    may hold an origin's rows (:meth:`clear_frontiers`).
    """

    def __init__(self, url: str, *, timeout: float = TIMEOUT, prefix: str = PREFIX,
                 crawl: str = "default") -> None:
        self.url = url
        self.where = f"Redis {url}"
        self.crawl = crawl
        self.r: Any = redis_client(url, timeout)
        self.p = prefix
        self.errors = redis_errors()
        self.list_key = optout_key("list", prefix)
        self.version_key = optout_key("version", prefix)
        self.log_key = optout_key("log", prefix)
        self.jobs_key = optout_key("jobs", prefix)
        self.acks_key = optout_key("acks", prefix)
        self._alive = optout_key("alive:", prefix)

    def close(self) -> None:
        self.r.close()

    def alive_key(self, owner: str) -> str:
        return self._alive + owner

    def worker_key(self, worker: str) -> str:
        """The frontier worker's lease (``RedisShared.alive_key``)."""
        return alive_key(worker, self.p)

    # --- reading -------------------------------------------------------------------
    def version(self) -> int:
        return int(self.r.get(self.version_key) or 0)

    def snapshot(self) -> tuple[int, frozenset[str]]:
        """The version and the origins, read together (one ``MULTI``)."""
        pipe = self.r.pipeline(transaction=True)
        pipe.get(self.version_key)
        pipe.hkeys(self.list_key)
        version, origins = pipe.execute()
        return int(version or 0), frozenset(_text(o) for o in origins)

    def entries(self) -> dict[str, OptOut]:
        out = []
        for origin, raw in self.r.hgetall(self.list_key).items():
            data = json.loads(raw)
            out.append(OptOut(_text(origin), data["reason"], float(data["added_at"])))
        return {e.origin: e for e in sorted(out, key=lambda e: e.added_at)}

    def get(self, origin: str) -> OptOut | None:
        raw = self.r.hget(self.list_key, origin)
        if raw is None:
            return None
        data = json.loads(raw)
        return OptOut(origin, data["reason"], float(data["added_at"]))

    def log(self, origin: str | None = None) -> list[dict[str, Any]]:
        lines = [json.loads(raw) for raw in self.r.lrange(self.log_key, 0, -1)]
        return [x for x in lines if origin is None or x["origin"] == origin]

    # --- changing (the forget command) ---------------------------------------------
    def add(self, origin: str, reason: str, now: float) -> int:
        """Put the origin on the list; returns the new version."""
        return self._change(origin, "forget", reason, now, add=True)

    def remove(self, origin: str, reason: str, now: float) -> int:
        """Take the origin off the list (``--undo``); returns the new version."""
        return self._change(origin, "undo", reason, now, add=False)

    def _change(self, origin: str, action: str, reason: str, now: float, *, add: bool) -> int:
        pipe = self.r.pipeline(transaction=True)
        if add:
            pipe.hset(self.list_key, origin, json.dumps({"reason": reason, "added_at": now}))
        else:
            pipe.hdel(self.list_key, origin)
        pipe.rpush(self.log_key, json.dumps({"origin": origin, "action": action,
                                             "reason": reason, "at": now, "removed": {}}))
        pipe.incr(self.version_key)
        return int(pipe.execute()[-1])

    def record_removed(self, origin: str, removed: dict[str, Any]) -> None:
        """What the last ``forget`` of the origin deleted (kept with its log line)."""
        lines = self.r.lrange(self.log_key, 0, -1)
        for i in range(len(lines) - 1, -1, -1):
            line = json.loads(lines[i])
            if line["origin"] == origin and line["action"] == "forget":
                line["removed"] = removed
                self.r.lset(self.log_key, i, json.dumps(line, sort_keys=True))
                return

    # --- jobs ------------------------------------------------------------------------
    @staticmethod
    def job_record(spider: str, crawl: str, worker: str, opened_at: float) -> dict[str, Any]:
        return {"spider": spider, "crawl": crawl, "worker": worker, "opened_at": opened_at,
                "closed_at": None}

    def register(self, owner: str, spider: str, crawl: str, worker: str, *, version: int,
                 now: float, alive_ttl: float) -> None:
        """A job opens (or its frontier worker id changed): it holds list ``version``."""
        pipe = self.r.pipeline(transaction=True)
        pipe.hset(self.jobs_key, owner, json.dumps(self.job_record(spider, crawl, worker, now)))
        pipe.hset(self.acks_key, owner, json.dumps({"version": version, "at": now}))
        pipe.set(self.alive_key(owner), "1", px=max(int(alive_ttl * 1000), 1))
        pipe.execute()

    def poll(self, owner: str, alive_ttl: float, ack: tuple[int, float] | None = None,
             job: dict[str, Any] | None = None) -> int:
        """The job's heartbeat and acknowledgement (and its record, should it have been
        pruned while the job stalled); returns the list's version. One round trip."""
        pipe = self.r.pipeline(transaction=False)
        pipe.set(self.alive_key(owner), "1", px=max(int(alive_ttl * 1000), 1))
        if job is not None:
            pipe.hsetnx(self.jobs_key, owner, json.dumps(job))
        if ack is not None:
            pipe.hset(self.acks_key, owner, json.dumps({"version": ack[0], "at": ack[1]}))
        pipe.get(self.version_key)
        return int(pipe.execute()[-1] or 0)

    def ack(self, owner: str, version: int, now: float) -> None:
        self.r.hset(self.acks_key, owner, json.dumps({"version": version, "at": now}))

    def closed(self, owner: str, now: float) -> None:
        raw = self.r.hget(self.jobs_key, owner)
        data = json.loads(raw) if raw is not None else {"spider": "", "opened_at": now}
        data["closed_at"] = now
        pipe = self.r.pipeline(transaction=True)
        pipe.hset(self.jobs_key, owner, json.dumps(data))
        pipe.delete(self.alive_key(owner))
        pipe.execute()

    def jobs(self, *, running: bool | None = None, keep: float = 365 * 86400.0,
             now: float | None = None) -> list[Job]:
        pipe = self.r.pipeline(transaction=True)
        pipe.hgetall(self.jobs_key)
        pipe.hgetall(self.acks_key)
        jobs, acks = pipe.execute()
        out = []
        for owner_raw, raw in jobs.items():
            owner = _text(owner_raw)
            data = json.loads(raw)
            acked = json.loads(acks.get(owner_raw, b'{"version": 0, "at": 0}'))
            job = Job(owner, data.get("spider", ""), None, float(data.get("opened_at", 0.0)),
                      data.get("closed_at"), int(acked["version"]), float(acked["at"]),
                      crawl=data.get("crawl"), worker=data.get("worker"))
            if running is True and job.closed_at is not None:
                continue
            if running is False and job.closed_at is None:
                continue
            out.append(job)
        return sorted(out, key=lambda j: (j.opened_at, j.owner))

    def forget_closed(self, now: float, keep: float) -> None:
        """Jobs closed more than ``keep`` seconds ago are forgotten, and jobs gone without
        closing (neither heartbeat nor frontier lease): one that was only stalled puts
        its record back with its next poll."""
        jobs = self.jobs()
        live = self.live(jobs)
        old = [j.owner for j in jobs if (j.closed_at is not None and j.closed_at < now - keep)
               or (j.closed_at is None and j.owner not in live)]
        if old:
            self.r.hdel(self.jobs_key, *old)
            self.r.hdel(self.acks_key, *old)

    def live(self, jobs: list[Job]) -> set[str]:
        """Owners of the running jobs whose heartbeat or frontier lease is there."""
        running = [j for j in jobs if j.closed_at is None]
        if not running:
            return set()
        pipe = self.r.pipeline(transaction=False)
        for j in running:
            pipe.exists(self.alive_key(j.owner))
            pipe.exists(self.worker_key(j.worker or "-"))
        res = pipe.execute()
        return {j.owner for k, j in enumerate(running) if res[2 * k] or res[2 * k + 1]}

    # --- the frontier's rows of an origin (forget) ------------------------------------
    def crawls_of(self, origin: str, also: list[str]) -> list[str]:
        """Crawls that queued rows of ``origin`` (the ``seq:C`` and ``stop:C`` fields of
        its origin hash) and ``also``."""
        found = set(also)
        for field in self.r.hkeys(self._okey(origin)):
            name = _text(field)
            if name.startswith(("seq:", "stop:")):
                found.add(name.split(":", 1)[1])
        return sorted(c for c in found if c)

    def _okey(self, origin: str) -> str:
        return origin_key(origin, self.p)

    def drop_queued(self, origin: str, crawls: list[str]) -> dict[str, int]:
        """Delete the origin's queued and claimed rows in each crawl's frontier and take it
        out of the crawl's active and free sets (plain commands: the crawl-wide sets are
        in other slots). Returns rows deleted per crawl."""
        out: dict[str, int] = {}
        for crawl in crawls:
            q = queue_key(origin, crawl, self.p)
            f = claimed_key(origin, crawl, self.p)
            pipe = self.r.pipeline(transaction=True)
            pipe.zcard(q)
            pipe.hlen(f)
            pipe.delete(q, f)
            queued, claimed, _ = pipe.execute()
            pipe = self.r.pipeline(transaction=False)
            pipe.srem(active_key(crawl, self.p), origin)
            pipe.srem(free_key(crawl, self.p), origin)
            pipe.execute()
            out[crawl] = int(queued) + int(claimed)
        return out

    def unstop(self, origin: str, crawls: list[str], reason: str) -> list[str]:
        """``--undo``: forget the crawls' stops of the origin for the opt-out."""
        okey = self._okey(origin)
        undone = []
        for crawl in crawls:
            if _text(self.r.hget(okey, f"stop:{crawl}")) == reason:
                self.r.hdel(okey, f"stop:{crawl}")
                undone.append(crawl)
        return undone

    def ping(self) -> None:
        """Raise one of :attr:`errors` unless Redis answers."""
        self.r.ping()

    def check_writable(self) -> None:
        """Raise one of :attr:`errors` unless the list can be written now (Redis answers)."""
        self.ping()

    def _crawls(self, origin: str) -> list[str]:
        """The crawls whose frontier may hold the origin: this one, every registered
        job's, and every crawl that queued or stopped it (:meth:`crawls_of`)."""
        named = [self.crawl, *(j.crawl for j in self.jobs() if j.crawl)]
        return self.crawls_of(origin, named)

    def clear_frontiers(self, origin: str, live: list[Job],
                        also: Sequence[str] = ()) -> dict[str, int | str]:
        """Delete the origin's queued and claimed rows from every crawl's frontier in
        Redis (``live`` and ``also`` change nothing: the workers share the queues, and
        the crawls are found in Redis). Per crawl: rows deleted."""
        dropped = self.drop_queued(origin, self._crawls(origin))
        return {f"{self.url} crawl {c}": n for c, n in dropped.items()}

    def unstop_frontiers(self, origin: str, live: list[Job],
                         also: Sequence[str] = ()) -> dict[str, int | str]:
        """``--undo``: forget every crawl's stop of the origin for the opt-out (its
        workers may crawl it again; a live worker keeps it stopped until it ends)."""
        undone = self.unstop(origin, self._crawls(origin), STOP_REASON)
        return {f"{self.url} crawl {c}": 1 for c in undone}

    def forget_robots(self, origin: str) -> int:
        """Delete the origin's robots.txt entry (``scrapy forget``); 1 if there was one."""
        return int(self.r.delete(robots_key(origin, self.p)))

    def known(self, origin: str) -> bool:
        """Whether the cluster's state has the origin (origin state or robots.txt copy)."""
        return bool(self.r.exists(self._okey(origin), robots_key(origin, self.p)))


__all__ = ["RedisOptOutList"]
