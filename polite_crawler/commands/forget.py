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
its robots.txt copy, its remembered refusal, what the state directory keeps of its
owner (the registrable domain's row and the time its stop was lifted) when no other
site of the owner is kept, and its queued URLs in every job frontier it can find:

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

from polite_crawler.backend import Backend, backend_of
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
from polite_crawler.store.erase import delete_from_page_store
from polite_crawler.store.traps import TRAPS_DB, forget_traps

if TYPE_CHECKING:
    import argparse

    from polite_crawler.interfaces import OptOutStore
    from polite_crawler.store.optout import Job
    from polite_crawler.store.page_backend import SQLPageBackend


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


def _delete_pages(settings: Any, pages: tuple[Any, str], origin: str,
                  acked: bool) -> dict[str, Any]:
    """Delete the origin's pages from the page store; with live jobs acknowledged, look
    again once their stores' open batches are committed (a page a job read before it
    acknowledged may still be in one)."""
    backend, where = pages
    try:
        counts = delete_from_page_store(backend, origin)
        if acked:
            time.sleep(settings.getfloat("POLITE_STORE_FLUSH") + 0.5)
            for key, n in delete_from_page_store(backend, origin).items():
                counts[key] = counts.get(key, 0) + n
    finally:
        backend.close()
    return {"where": where, **counts}


def wait_for_acks(optout: OptOutStore, version: int, wait: float
                  ) -> tuple[list[Job], list[Job], list[str]]:
    """Every live job's acknowledgement of ``version``, or the deadline: the jobs that
    acknowledged, those that had not, and those that ended while ``forget`` waited."""
    deadline = time.monotonic() + max(wait, 0.0)
    ended: set[str] | None = None
    while True:
        running = optout.jobs(running=True)
        alive = optout.live(running)  # a job that is not live sends nothing
        live = [j for j in running if j.owner in alive]
        late = [j for j in live if j.version < version]
        if ended is None:
            ended = {j.owner for j in late}
        if not late or time.monotonic() >= deadline:
            ended -= {j.owner for j in live}
            return [j for j in live if j.version >= version], late, sorted(ended)
        time.sleep(0.02)


class Command(ScrapyCommand):
    requires_project = False
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
        state = self._state(settings, chosen, opts)
        if opts.list:
            if args:
                raise CommandError("--list takes no origin")
            return self._list(settings, chosen, state)
        if len(args) != 1:
            raise CommandError("name one origin, e.g. scrapy forget https://example.org")
        origin = parse_origin(args[0])
        optout = self._open(settings, chosen, state, opts)
        try:
            try:
                if opts.undo:
                    return self._undo(optout, settings, chosen, state, origin, opts)
                return self._forget(optout, settings, chosen, state, origin, opts)
            except optout.errors as exc:
                raise CommandError(f"{optout.where} stopped answering ({exc}); run the same "
                                   "command again") from exc
        finally:
            optout.close()

    @staticmethod
    def _state(settings: Any, chosen: Backend, opts: argparse.Namespace) -> Path | None:
        """The state directory: the embedded backend's stores are there; a cluster needs
        none (given one, its page store and trap memory are cleaned too)."""
        if not chosen.cluster:
            state = state_dir_of(settings, opts.state_dir)
            origins_db(state)  # no origin store: no crawl has used it
            return state
        try:
            return state_dir_of(settings, opts.state_dir)
        except CommandError:
            if opts.state_dir:  # named on the command line: it must be there
                raise
            return None

    @staticmethod
    def _open(settings: Any, chosen: Backend, state: Path | None,
              opts: argparse.Namespace) -> OptOutStore:
        """The opt-out list, writable now: nothing is changed unless it can be written."""
        try:
            optout = chosen.optout_store(settings, state, timeout=opts.lock_timeout)
        except sqlite3.OperationalError as exc:
            where = str(origins_db(state)) if state is not None else ""
            raise CommandError(_unwritable(chosen, where, exc)) from exc
        try:
            optout.check_writable()
        except optout.errors as exc:
            optout.close()
            raise CommandError(_unwritable(chosen, optout.where, exc)) from exc
        return optout

    @staticmethod
    def _list(settings: Any, chosen: Backend, state: Path | None) -> tuple[Any, str, int]:
        with open_reader(settings, state) as reader:
            found = list(reader.optouts().values())
        entries: list[dict[str, Any]] = [
            {"origin": e.origin, "reason": e.reason, "added_at": e.added_at} for e in found]
        where = f" in Redis {chosen.frontier_url}" if chosen.cluster else ""
        lines = [f"{len(entries)} origins on the opt-out list{where}"]
        lines += [f"  {e.origin}  since {when(e.added_at)}"
                  + (f"  ({e.reason})" if e.reason else "") for e in found]
        return {"optout": entries, **_labels(chosen)}, "\n".join(lines), 0

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

    def _forget(self, optout: OptOutStore, settings: Any, chosen: Backend,  # noqa: PLR0917
                state: Path | None, origin: str, opts: argparse.Namespace
                ) -> tuple[Any, str, int]:
        if optout.get(origin) is None and not opts.force and not optout.known(origin) \
                and not self._known(settings, state, origin):
            raise CommandError(f"{origin} is unknown here (no origin state or robots.txt copy "
                               f"in {optout.where}, no page in the page store, no access log "
                               "line); check the spelling, or --force")
        # A page store to clean: PostgreSQL, or SQLite in the state directory.
        pages_here = chosen.pages_on_postgres or state is not None
        if pages_here:
            self._probe_locks(settings, state or Path("."), opts.lock_timeout)
        now = time.time()
        version = optout.add(origin, opts.reason, now)
        waited = time.monotonic()
        acked, late, ended = wait_for_acks(optout, version, opts.wait)
        waited = time.monotonic() - waited
        data = {"origin": origin, "reason": opts.reason, "version": version, "at": now,
                **_labels(chosen), "ack_wait": round(waited, 3),
                "acknowledged": [_job(j) for j in acked], "ended_meanwhile": ended,
                "not_acknowledged": [_job(j) for j in late], "removed": None}
        if late and not opts.force:
            # A job that has not acknowledged may still fetch the origin and store what
            # it fetches: nothing is deleted until every live job has (or --force).
            return data, _forget_text(data), 1
        removed: dict[str, Any] = {}
        pages = page_store_backend(settings, state or Path("."), 30.0) if pages_here else None
        if pages is not None:
            removed["page_store"] = _delete_pages(settings, pages, origin, bool(acked))
        removed["robots_txt"] = optout.forget_robots(origin)
        removed["trap_memory"] = forget_traps(state / TRAPS_DB, origin, opts.lock_timeout) \
            if state is not None else 0
        removed["frontiers"] = optout.clear_frontiers(origin, acked, opts.jobdir)
        removed["block"] = _forget_block(settings, chosen, state, origin)
        if not chosen.cluster and state is not None:
            removed["owner"] = _forget_owner(state, origin)
        optout.record_removed(origin, removed)
        data["removed"] = removed
        return data, _forget_text(data), 1 if late else 0

    @staticmethod
    def _undo(optout: OptOutStore, settings: Any, chosen: Backend,  # noqa: PLR0917
              state: Path | None, origin: str, opts: argparse.Namespace
              ) -> tuple[Any, str, int]:
        if optout.get(origin) is None:
            raise CommandError(f"{origin} is not on the opt-out list in {optout.where} "
                               "(scrapy forget --list)")
        version = optout.remove(origin, opts.reason, time.time())
        running = optout.jobs(running=True)
        alive = optout.live(running)
        running = [j for j in running if j.owner in alive]
        frontiers = optout.unstop_frontiers(origin, running, opts.jobdir)
        # A refusal remembered meanwhile (middlewares.blocks) is lifted with the opt-out:
        # the operator has said the site may be crawled again.
        block = _forget_block(settings, chosen, state, origin)
        data = {"origin": origin, "version": version, "undone": True, **_labels(chosen),
                "running_jobs_keep_it_stopped": [_job(j) for j in running],
                "frontiers": frontiers, "block_lifted": block}
        lines = [f"{origin} is off the opt-out list in {optout.where} (version {version}): "
                 "future jobs may crawl it again; what was deleted stays deleted"]
        if running:
            lines.append(f"  {len(running)} running jobs keep it stopped until they end")
        if block:
            lines.append("  its remembered refusal (a 402, 403 or challenge) lifted too")
        for where, n in frontiers.items():
            if isinstance(n, int) and n:
                lines.append(f"  {where}: its stop for the opt-out forgotten (a job that "
                             "resumes it may crawl it)")
        return data, "\n".join(lines), 0


def _forget_block(settings: Any, chosen: Backend, state: Path | None, origin: str) -> int:
    """Delete the origin's remembered refusal (:mod:`polite_crawler.policy.blocks`); 1 if
    there was one."""
    store = chosen.block_store(settings, state)
    try:
        return store.delete(origin)
    except store.errors as exc:
        raise CommandError(f"the remembered refusals could not be written ({exc}); run the "
                           "same command again") from exc
    finally:
        store.close()


def _forget_owner(state: Path, origin: str) -> dict[str, Any]:
    """What the state directory keeps of the origin's owner (its registrable domain: the
    run's budget count and stop, the time its stop was lifted), deleted when the origin
    was its last site kept (:func:`polite_crawler.frontier.store.forget_owner`); the
    owner's other sites keep it otherwise."""
    from polite_crawler.frontier.store import forget_owner
    from polite_crawler.store.paths import ORIGINS_DB

    try:
        owner, deleted, kept = forget_owner(state / ORIGINS_DB, origin)
    except sqlite3.Error as exc:
        raise CommandError(f"the owner's rows could not be written ({exc}); run the same "
                           "command again") from exc
    return {"owner": owner, "rows_deleted": deleted, "kept_by": kept}


def _labels(chosen: Backend) -> dict[str, Any]:
    """What the output names of the backend: the cluster's Redis."""
    return {"redis": chosen.frontier_url} if chosen.cluster else {}


def _unwritable(chosen: Backend, where: str, exc: Exception) -> str:
    if chosen.cluster:
        return f"cannot reach Redis at {chosen.frontier_url} ({exc}); nothing was changed"
    return (f"the origin store {where} is locked by another process ({exc}); nothing was "
            "changed, try again")


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
    lines.append(f"  remembered refusal: {removed.get('block', 0)} deleted")
    owner = removed.get("owner")
    if owner is not None and owner["kept_by"]:
        kept = owner["kept_by"]
        lines.append(f"  owner {owner['owner']}: its budget count and stop kept for its "
                     f"{len(kept)} other sites ({', '.join(kept[:3])}"
                     + (", ..." if len(kept) > 3 else "") + ")")
    elif owner is not None:
        lines.append(f"  owner {owner['owner']}: {owner['rows_deleted']} rows deleted (its "
                     "budget count and stop, its stop's lift; no other site of it is kept)")
    frontiers = removed["frontiers"]
    if not frontiers:
        lines.append("  job frontiers: none found")
    for path, n in frontiers.items():
        what = f"{n} queued URLs deleted" if isinstance(n, int) else n
        lines.append(f"  job frontier {path}: {what}")
    lines.append("  access logs kept (what was fetched and when: scrapy history ORIGIN)")
    return "\n".join(lines)
