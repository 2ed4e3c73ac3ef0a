"""``scrapy forget ORIGIN``: a site owner's opt-out, honoured by every job from its next dispatch.

The origin goes on the durable opt-out list in the origin store
(:mod:`polite_crawler.store.optout`); every running job reads the list's version
and stops the origin (the opt-out middleware drops even its robots.txt request),
and ``forget`` waits until each live job has acknowledged: after it returns, no
job sends the origin a request. A live job that has not acknowledged within ``--wait``
is named, nothing is deleted, and the exit status is 1 (``--force`` deletes anyway): such
a job may still fetch the origin and store what it fetched. Once every live job has
acknowledged, ``forget`` deletes what the crawl holds of the origin:
its pages (with their texts and fingerprints) in the page store (SQLite or
PostgreSQL), aliases to and from it, near-duplicate links pointing at its pages,
its robots.txt copy, and its queued URLs in every job frontier it can find:

* the frontier file each job registered when it opened (``polite_optout_jobs``:
  JOBDIR/polite_frontier.sqlite3, or the temporary one in the state directory);
* every ``polite_frontier.sqlite3`` under ``<state dir>/jobs/`` (the default JOBDIRs);
* the JOBDIR setting, and each ``--jobdir DIR`` (a JOBDIR or a directory above some).

A live job's own frontier is emptied of the origin by the job (it stops the origin);
the others are edited here. The access logs are kept: they are the record that
answers the owner's questions (``scrapy history``).

With ``-s POLITE_FRONTIER=redis://...`` (the cluster's setting) the list is the one in
Redis (:mod:`polite_crawler.store.redis_optout`), honoured by every worker on every
machine; ``forget`` waits for every live worker's acknowledgement (the same rule: none in
time, nothing deleted unless ``--force``), then deletes from the
page store (``-s POLITE_STORE=postgresql://...``) and the robots.txt cache in Redis, and
drops the origin's queued and claimed rows from every crawl's Redis frontier that
queued it. No state directory is needed; given one, its trap memory is cleaned too.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.commands import ScrapyCommand

from polite_crawler.backend import backend_of
from polite_crawler.commands._base import (
    CommandError,
    add_common,
    emit,
    fail,
    open_reader,
    origins_db,
    parse_origin,
    state_dir_of,
    when,
    with_defaults,
)
from polite_crawler.frontier.scheduler import QUEUE_DB
from polite_crawler.frontier.store import edit_queue_file, owner_alive
from polite_crawler.store.erase import delete_from_page_store
from polite_crawler.store.optout import Job, OptOutList
from polite_crawler.store.robots import SQLiteRobotsStore
from polite_crawler.store.traps import TRAPS_DB, forget_traps

if TYPE_CHECKING:
    import argparse

    from polite_crawler.store.pages import SQLPageBackend


def page_store_backend(settings: Any, state: Path, timeout: float) -> tuple[SQLPageBackend,
                                                                             str] | None:
    """The page store's backend (None: no SQLite page store was ever written)."""
    from polite_crawler.store.sqlite import SQLitePageBackend

    chosen = backend_of(settings)
    if chosen.pages_on_postgres:
        try:
            return chosen.page_backends(state)(), "postgresql"
        except Exception as exc:  # psycopg's errors: no server, refused, bad URI
            raise CommandError(f"cannot open the page store {chosen.store_uri}: {exc}") from exc
    path = chosen.pages_path(state)
    if path is None or not path.is_file():
        return None
    return SQLitePageBackend(str(path), wait=timeout), str(path)


def frontier_files(state: Path, jobs: list[Job], extra: list[str],
                   jobdir: str | None) -> list[Path]:
    """Every job frontier file this command can find (see the module docstring)."""
    found: list[Path] = [Path(j.queue_path) for j in jobs if j.queue_path]
    found.extend((state / "jobs").glob(f"**/{QUEUE_DB}"))
    for raw in [*(extra or []), *([jobdir] if jobdir else [])]:
        root = Path(raw).expanduser()
        if root.is_file():
            found.append(root)
        elif (root / QUEUE_DB).is_file():
            found.append(root / QUEUE_DB)
        else:
            found.extend(root.glob(f"**/{QUEUE_DB}"))
    seen: set[Path] = set()
    out = []
    for path in found:
        resolved = path.resolve()
        if resolved not in seen and resolved.is_file():
            seen.add(resolved)
            out.append(resolved)
    return out


def is_live(job: Job) -> bool:
    return job.closed_at is None and owner_alive(job.owner) is not False



def _delete_pages(settings: Any, pages: tuple[Any, str], origin: str,
                  acked: bool) -> dict[str, Any]:
    """Delete the origin's pages from the page store; with live jobs acknowledged, look
    again once their stores' open batches are committed (a page a job read before it
    acknowledged may still be in one)."""
    backend, where = pages
    try:
        counts = delete_from_page_store(backend, origin)
        if acked:
            time.sleep(settings.getfloat("POLITE_STORE_FLUSH", 1.0) + 0.5)
            for key, n in delete_from_page_store(backend, origin).items():
                counts[key] = counts.get(key, 0) + n
    finally:
        backend.close()
    return {"where": where, **counts}

class Command(ScrapyCommand):
    requires_project = False
    _ended: set[str] = set()
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "ORIGIN [--reason TEXT] | --list | --undo ORIGIN"

    def short_desc(self) -> str:
        return "Opt an origin out: never fetch it again and delete what is stored of it"

    def long_desc(self) -> str:
        return (
            "Put ORIGIN (scheme://host[:port]) on the durable opt-out list that every "
            "running and future job honours from its next dispatch (not even robots.txt is "
            "fetched), wait until every running job has acknowledged it (one that has not in "
            "--wait: nothing is deleted, exit 1, unless --force), then delete its "
            "stored pages, texts, fingerprints, aliases, near-duplicate links pointing at "
            "it, its robots.txt copy and its queued URLs in every job frontier found, and "
            "print what was removed. --list shows the list, --undo takes an origin off it.")

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        add_common(parser)
        parser.add_argument("--reason", default="", help="why (kept with the list entry)")
        parser.add_argument("--list", action="store_true", help="show the opt-out list")
        parser.add_argument("--undo", action="store_true",
                            help="take ORIGIN off the list (deleted data stays deleted)")
        parser.add_argument("--force", action="store_true",
                            help="list an origin the crawl has never seen; delete even when "
                                 "a running job has not acknowledged in time")
        parser.add_argument("--jobdir", action="append", default=[], metavar="DIR",
                            help="another JOBDIR (or a directory above JOBDIRs) to clean")
        parser.add_argument("--wait", type=float, default=60.0, metavar="SECONDS",
                            help="how long to wait for running jobs to acknowledge (60)")
        parser.add_argument("--lock-timeout", type=float, default=10.0, metavar="SECONDS",
                            help="how long to wait for a store another process has locked (10)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        try:
            data, text, status = self._run(args, opts)
        except CommandError as exc:
            fail("forget", str(exc))
            return
        emit(opts, data, text)
        if status:
            raise SystemExit(status)

    # --------------------------------------------------------------------------------
    def _run(self, args: list[str], opts: argparse.Namespace) -> tuple[Any, str, int]:
        assert self.settings is not None
        settings = with_defaults(self.settings)
        chosen = backend_of(settings)
        if chosen.cluster:
            return self._run_redis(settings, chosen.frontier_url, args, opts)
        state = state_dir_of(settings, opts.state_dir)
        db = origins_db(state)
        if opts.list:
            if args:
                raise CommandError("--list takes no origin")
            return self._list(settings, state, opts)
        if len(args) != 1:
            raise CommandError("name one origin, e.g. scrapy forget https://example.org")
        origin = parse_origin(args[0])
        optout = self._open_list(db, opts.lock_timeout)
        try:
            if opts.undo:
                return self._undo(optout, state, origin, opts)
            return self._forget(optout, settings, state, origin, opts)
        finally:
            optout.close()

    @staticmethod
    def _open_list(db: Path, timeout: float) -> OptOutList:
        try:
            optout = OptOutList(db, timeout=timeout)
            optout.check_writable()  # nothing is changed unless the store can be written now
        except sqlite3.OperationalError as exc:
            raise CommandError(f"the origin store {db} is locked by another process ({exc}); "
                               "nothing was changed, try again") from exc
        return optout

    def _list(self, settings: Any, state: Path, opts: argparse.Namespace
              ) -> tuple[Any, str, int]:
        with open_reader(settings, state) as reader:
            entries: list[dict[str, Any]] = [
                {"origin": e.origin, "reason": e.reason, "added_at": e.added_at}
                for e in reader.optouts().values()]
        lines = [f"{len(entries)} origins on the opt-out list"]
        lines += [f"  {e['origin']}  since {when(e['added_at'])}"
                  + (f"  ({e['reason']})" if e["reason"] else "") for e in entries]
        return {"optout": entries}, "\n".join(lines), 0

    def _known(self, settings: Any, state: Path | None, origin: str) -> bool:
        """Whether the crawl's state has the origin: its state, a robots.txt copy, a page,
        or a line in this machine's access logs."""
        with open_reader(settings, state) as reader:
            if reader.origin_state(origin) is not None or reader.robots(origin) is not None \
                    or reader.has_pages(origin):
                return True
        if state is None:
            return False
        needle = f'"{origin}"'
        for log in state.glob("access-*.jsonl"):
            with log.open(encoding="utf-8", errors="replace") as fh:
                if any(needle in line for line in fh):
                    return True
        return False

    def _probe_locks(self, settings: Any, state: Path, timeout: float) -> None:
        pages = page_store_backend(settings, state, timeout)
        if pages is None:
            return
        backend, where = pages
        try:
            backend.begin()
            backend.rollback()
        except Exception as exc:
            raise CommandError(f"the page store {where} is locked by another process ({exc}); "
                               "nothing was changed, try again") from exc
        finally:
            backend.close()

    def _forget(self, optout: OptOutList, settings: Any, state: Path, origin: str,
                opts: argparse.Namespace) -> tuple[Any, str, int]:
        if optout.get(origin) is None and not opts.force \
                and not self._known(settings, state, origin):
            raise CommandError(f"{origin} is unknown here (no origin state, robots.txt copy, "
                               "page or access log line); check the spelling, or --force")
        self._probe_locks(settings, state, opts.lock_timeout)
        now = time.time()
        version = optout.add(origin, opts.reason, now)
        waited = time.monotonic()
        acked, late = self._wait_for_acks(optout, version, opts.wait)
        waited = time.monotonic() - waited
        ended = sorted(self._ended)
        data = {"origin": origin, "reason": opts.reason, "version": version, "at": now,
                "ack_wait": round(waited, 3),
                "acknowledged": [_job(j) for j in acked], "ended_meanwhile": ended,
                "not_acknowledged": [_job(j) for j in late], "removed": None}
        if late and not opts.force:
            # A job that has not acknowledged may still fetch the origin and store what
            # it fetches: nothing is deleted until every live job has (or --force).
            return data, _forget_text(data), 1
        removed: dict[str, Any] = {}
        pages = page_store_backend(settings, state, 30.0)
        if pages is not None:
            removed["page_store"] = _delete_pages(settings, pages, origin, bool(acked))
        removed["robots_txt"] = SQLiteRobotsStore(optout.conn).delete(origin)
        removed["trap_memory"] = forget_traps(state / TRAPS_DB, origin, opts.lock_timeout)
        live = {j.queue_path for j in acked if j.queue_path}
        jobdir = settings.get("JOBDIR") or None
        frontiers: dict[str, Any] = {}
        for path in frontier_files(state, optout.jobs(), opts.jobdir, jobdir):
            if str(path) in live:
                frontiers[str(path)] = "dropped by the running job"
            else:
                frontiers[str(path)] = edit_queue_file(path, origin, undo=False,
                                                     timeout=min(opts.lock_timeout, 2.0))
        removed["frontiers"] = frontiers
        optout.record_removed(origin, removed)
        data["removed"] = removed
        return data, _forget_text(data), 1 if late else 0

    def _wait_for_acks(self, optout: OptOutList, version: int,
                       wait: float) -> tuple[list[Job], list[Job]]:
        deadline = time.monotonic() + max(wait, 0.0)
        first = True
        while True:
            running = optout.jobs(running=True)
            live = []
            for job in running:
                if is_live(job):
                    live.append(job)
                else:  # crashed without closing: it holds nothing
                    optout.closed(job.owner, time.time())
            late = [j for j in live if j.version < version]
            if first:
                self._ended = {j.owner for j in late}
                first = False
            if not late or time.monotonic() >= deadline:
                self._ended -= {j.owner for j in live}
                return [j for j in live if j.version >= version], late
            time.sleep(0.02)

    def _undo(self, optout: OptOutList, state: Path, origin: str,
              opts: argparse.Namespace) -> tuple[Any, str, int]:
        if optout.get(origin) is None:
            raise CommandError(f"{origin} is not on the opt-out list (scrapy forget --list)")
        version = optout.remove(origin, opts.reason, time.time())
        running = [j for j in optout.jobs(running=True) if is_live(j)]
        live = {j.queue_path for j in running if j.queue_path}
        frontiers: dict[str, Any] = {}
        assert self.settings is not None
        for path in frontier_files(state, optout.jobs(), opts.jobdir,
                                   self.settings.get("JOBDIR") or None):
            if str(path) not in live:
                frontiers[str(path)] = edit_queue_file(path, origin, undo=True,
                                                     timeout=min(opts.lock_timeout, 2.0))
        data = {"origin": origin, "version": version, "undone": True,
                "running_jobs_keep_it_stopped": [_job(j) for j in running],
                "frontiers": frontiers}
        lines = [f"{origin} is off the opt-out list (version {version}): future jobs may "
                 "crawl it again; what was deleted stays deleted"]
        if running:
            lines.append(f"  {len(running)} running jobs keep it stopped until they end")
        for where, n in frontiers.items():
            if isinstance(n, int) and n:
                lines.append(f"  {where}: its stop for the opt-out forgotten (a resumed job "
                             "may crawl it)")
        return data, "\n".join(lines), 0


    # --- the cluster: the list in Redis (POLITE_FRONTIER=redis://...) -------------------
    def _run_redis(self, settings: Any, url: str, args: list[str],
                   opts: argparse.Namespace) -> tuple[Any, str, int]:
        try:  # the state directory is this machine's; the cluster needs none
            state: Path | None = state_dir_of(settings, opts.state_dir)
        except CommandError:
            if opts.state_dir:  # named on the command line: it must be there
                raise
            state = None
        optout = backend_of(settings).cluster_optout(settings, timeout=max(settings.getfloat(
            "POLITE_REDIS_STATE_TIMEOUT", 2.0), 5.0))
        assert optout is not None
        try:
            try:
                optout.ping()
            except optout.errors as exc:
                raise CommandError(f"cannot reach Redis at {url} ({exc}); nothing was "
                                   "changed") from exc
            try:
                if opts.list:
                    if args:
                        raise CommandError("--list takes no origin")
                    found = list(optout.entries().values())
                    entries = [{"origin": e.origin, "reason": e.reason, "added_at": e.added_at}
                               for e in found]
                    lines = [f"{len(entries)} origins on the opt-out list in Redis {url}"]
                    lines += [f"  {e.origin}  since {when(e.added_at)}"
                              + (f"  ({e.reason})" if e.reason else "") for e in found]
                    return {"optout": entries, "redis": url}, "\n".join(lines), 0
                if len(args) != 1:
                    raise CommandError("name one origin, e.g. scrapy forget https://example.org")
                origin = parse_origin(args[0])
                if opts.undo:
                    return self._undo_redis(optout, settings, url, origin, opts)
                return self._forget_redis(optout, settings, url, state, origin, opts)
            except optout.errors as exc:
                raise CommandError(f"Redis at {url} stopped answering ({exc}); run the same "
                                   "command again") from exc
        finally:
            optout.close()

    def _crawls(self, optout: Any, settings: Any, origin: str) -> list[str]:
        named = [settings.get("POLITE_CRAWL") or "default"]
        named += [j.crawl for j in optout.jobs() if j.crawl]
        return list(optout.crawls_of(origin, named))

    def _forget_redis(self, optout: Any, settings: Any, url: str, state: Path | None,  # noqa: PLR0917
                      origin: str, opts: argparse.Namespace) -> tuple[Any, str, int]:
        pg = backend_of(settings).pages_on_postgres
        if optout.get(origin) is None and not opts.force and not optout.known(origin) \
                and not self._known(settings, state, origin):
            raise CommandError(f"{origin} is unknown here (no origin state or robots.txt copy "
                               f"in Redis {url}, no page in the page store); check the "
                               "spelling, or --force")
        if pg or state is not None:
            self._probe_locks(settings, state or Path("."), opts.lock_timeout)
        now = time.time()
        version = optout.add(origin, opts.reason, now)
        waited = time.monotonic()
        acked, late, ended = self._wait_for_redis_acks(optout, version, opts.wait)
        waited = time.monotonic() - waited
        data = {"origin": origin, "reason": opts.reason, "version": version, "at": now,
                "redis": url, "ack_wait": round(waited, 3),
                "acknowledged": [_job(j) for j in acked], "ended_meanwhile": ended,
                "not_acknowledged": [_job(j) for j in late], "removed": None}
        if late and not opts.force:
            return data, _forget_text(data), 1  # nothing deleted (see _forget)
        removed: dict[str, Any] = {}
        pages = page_store_backend(settings, state or Path("."), 30.0) \
            if (pg or state is not None) else None
        if pages is not None:
            removed["page_store"] = _delete_pages(settings, pages, origin, bool(acked))
        removed["robots_txt"] = optout.forget_robots(origin)
        removed["trap_memory"] = forget_traps(state / TRAPS_DB, origin, opts.lock_timeout) \
            if state is not None else 0
        dropped = optout.drop_queued(origin, self._crawls(optout, settings, origin))
        removed["frontiers"] = {f"{url} crawl {c}": n for c, n in dropped.items()}
        optout.record_removed(origin, removed)
        data["removed"] = removed
        return data, _forget_text(data), 1 if late else 0

    @staticmethod
    def _wait_for_redis_acks(optout: Any, version: int, wait: float
                             ) -> tuple[list[Job], list[Job], list[str]]:
        """Every live worker's acknowledgement of ``version``, or the deadline."""
        deadline = time.monotonic() + max(wait, 0.0)
        ended: set[str] | None = None
        while True:
            running = optout.jobs(running=True)
            alive = optout.live(running)  # neither heartbeat nor lease: it sends nothing
            live = [j for j in running if j.owner in alive]
            late = [j for j in live if j.version < version]
            if ended is None:
                ended = {j.owner for j in late}
            if not late or time.monotonic() >= deadline:
                ended -= {j.owner for j in live}
                return [j for j in live if j.version >= version], late, sorted(ended)
            time.sleep(0.02)

    def _undo_redis(self, optout: Any, settings: Any, url: str, origin: str,
                    opts: argparse.Namespace) -> tuple[Any, str, int]:
        if optout.get(origin) is None:
            raise CommandError(f"{origin} is not on the opt-out list in Redis {url} "
                               "(scrapy forget --list)")
        version = optout.remove(origin, opts.reason, time.time())
        running = optout.jobs(running=True)
        alive = optout.live(running)
        running = [j for j in running if j.owner in alive]
        undone = optout.unstop(origin, self._crawls(optout, settings, origin), "opted_out")
        frontiers = {f"{url} crawl {c}": 1 for c in undone}
        data = {"origin": origin, "version": version, "undone": True, "redis": url,
                "running_jobs_keep_it_stopped": [_job(j) for j in running],
                "frontiers": frontiers}
        lines = [f"{origin} is off the opt-out list in Redis (version {version}): future "
                 "jobs may crawl it again; what was deleted stays deleted"]
        if running:
            lines.append(f"  {len(running)} running workers keep it stopped until they end")
        for where in frontiers:
            lines.append(f"  {where}: its stop for the opt-out forgotten (its workers may "
                         "crawl it)")
        return data, "\n".join(lines), 0


def _job(job: Job) -> dict[str, Any]:
    out = {"owner": job.owner, "spider": job.spider, "frontier": job.queue_path,
           "acknowledged": job.version}
    if job.crawl is not None:
        out.update(crawl=job.crawl, worker=job.worker)
    return out


def _forget_text(data: dict[str, Any]) -> str:
    removed = data["removed"]
    lines = [f"forgot {data['origin']}" + (f" ({data['reason']})" if data["reason"] else "")]
    lines.append(f"  opt-out list: on it since {when(data['at'])} (version {data['version']}); "
                 "no job fetches it again, not even robots.txt")
    acked, late = data["acknowledged"], data["not_acknowledged"]
    lines.append(f"  running jobs: {len(acked)} acknowledged"
                 + (f" (in {data['ack_wait']:.2f} s)" if acked else "")
                 + "".join(f"\n    {j['spider']} {j['owner']}" for j in acked))
    if data["ended_meanwhile"]:
        lines.append(f"  {len(data['ended_meanwhile'])} jobs ended while forget waited")
    for job in late:
        lines.append(f"  NOT acknowledged in time: {job['spider']} {job['owner']} (it honours "
                     "the list at its next check)")
    if removed is None:
        lines.append("  NOTHING DELETED: a job that has not acknowledged may still fetch and "
                     "store the origin; run forget again once every job has acknowledged, "
                     "or with --force to delete now")
        return "\n".join(lines)
    if late:
        lines.append("  deleted anyway (--force): run forget again once every job has "
                     "acknowledged, to delete what they stored meanwhile")
    store = removed.get("page_store")
    if store is None:
        lines.append("  page store: none in this state directory")
    else:
        lines.append(
            f"  page store {store['where']}: {store.get('pages', 0)} pages deleted (with their "
            f"texts and fingerprints), {store.get('aliases', 0)} aliases, "
            f"{store.get('near_duplicate_links', 0)} near-duplicate links to its pages dropped")
        for key, n in store.items():
            if key not in ("where", "pages", "aliases", "near_duplicate_links"):
                lines.append(f"    {key}: {n} rows")
    lines.append(f"  robots.txt cache: {removed['robots_txt']} copy deleted")
    lines.append(f"  trap memory: {removed.get('trap_memory', 0)} judged URLs deleted")
    frontiers = removed["frontiers"]
    if not frontiers:
        lines.append("  job frontiers: none found")
    for path, n in frontiers.items():
        what = f"{n} queued URLs deleted" if isinstance(n, int) else n
        lines.append(f"  job frontier {path}: {what}")
    lines.append("  access logs kept (what was fetched and when: scrapy history ORIGIN)")
    return "\n".join(lines)
