"""A job's frontier database (JOBDIR) in the current canonical form of URLs.

The queue holds canonical URLs (a row's ``url``, its ``origin`` and the
serialised request) and the seen set holds fingerprints of canonical URLs
(:func:`polite_crawler.frontier.dupefilter.canonical_fingerprint`). When the
canonical form changes (version 2: the link kept as written where RFC 3986 allows
it; version 3: international hosts by UTS #46 non-transitional processing),
:func:`migrate_frontier` rewrites the queue in the new form (with the request meta
that names a canonical URL or an origin: ``polite_sitemap_scope``,
``polite_conditional``, ``polite_robots_origin``),
merges queued requests that now have one URL, re-keys stopped origins, and
adds to the seen set the fingerprints of every form a seen URL's link may now
take (from version 1:
:func:`~polite_crawler.store.migrations.recanonicalize.respellings`; from version
2 on, a URL lost no spelling and has its current form only), so a
resumed job neither fetches again what it has fetched nor loses what it queued.

A fingerprint names its URL only by hash: the seen entries of requests no longer
queued (already fetched) can be carried over only for URLs the caller names in
``known_urls`` (in the form they were stored, e.g. the page store's URLs read
before its own migration). The version is kept in ``frontier_meta`` under
``canonical_form``; a database that has it is left alone.
"""

from __future__ import annotations

import hashlib
import logging
import pickle
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from polite_crawler.policy.urls import origin_of
from polite_crawler.store.migrations.recanonicalize import current_form, respellings

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Iterable

logger = logging.getLogger(__name__)

CANONICAL_FORM = 3
_KEY = "canonical_form"


@dataclass
class FrontierMigration:
    """What :func:`migrate_frontier` changed."""

    from_version: int
    rewritten: int = 0  # queued rows whose URL changed
    merged: int = 0  # queued rows dropped: the same request as another queued row now
    seen_added: int = 0  # fingerprints added to the seen set


def _fingerprint(url: str, method: str, body: bytes) -> bytes:
    # The same bytes as dupefilter.canonical_fingerprint for a request of this
    # canonical URL, method and body.
    h = hashlib.blake2b(digest_size=16)
    h.update(url.encode("utf-8"))
    if method not in ("GET", "HEAD"):
        h.update(b"\0" + method.encode("ascii") + b"\0" + body)
    return h.digest()


def _request_key(d: dict[str, Any]) -> tuple[str, bytes]:
    method = str(d.get("method") or "GET").upper()
    body = d.get("body") or b""
    return method, body if isinstance(body, bytes) else str(body).encode("utf-8")


# Request meta that names a canonical URL or an origin (site spider, conditional requests).
_URL_META = ("polite_sitemap_scope", "polite_conditional")
_ORIGIN_META = ("polite_robots_origin",)


def _new_origin(origin: str) -> str:
    return origin_of(respellings(origin + "/")[0])


def _rewrite_meta(meta: object) -> bool:
    if not isinstance(meta, dict):
        return False
    changed = False
    for name in (*_URL_META, *_ORIGIN_META):
        value = meta.get(name)
        if isinstance(value, str) and value.startswith(("http://", "https://")):
            new = _new_origin(value) if name in _ORIGIN_META else respellings(value)[0]
            if new != value:
                meta[name] = new
                changed = True
    return changed


def _has_tables(conn: sqlite3.Connection) -> bool:
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    return {"frontier_meta", "frontier_queue", "frontier_seen"} <= names


def migrate_frontier(conn: sqlite3.Connection,
                     known_urls: Iterable[str] = ()) -> FrontierMigration | None:
    """Bring a frontier database to the current canonical form, in one transaction.

    ``conn``: the job's queue database (autocommit mode, as ``QueueStore`` opens it),
    its tables created. Returns what changed, or None when it was current already.
    """
    if not _has_tables(conn):
        raise ValueError("not a frontier database (no frontier_meta/queue/seen tables)")
    row = conn.execute("SELECT value FROM frontier_meta WHERE key=?", (_KEY,)).fetchone()
    version = int(row[0]) if row else 1
    if version >= CANONICAL_FORM:
        return None
    result = FrontierMigration(from_version=version)
    forms = respellings if version < 2 else current_form
    conn.execute("BEGIN IMMEDIATE")
    try:
        _migrate(conn, known_urls, result, forms)
        conn.execute("INSERT OR REPLACE INTO frontier_meta (key, value) VALUES (?, ?)",
                     (_KEY, str(CANONICAL_FORM)))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    if result.rewritten or result.merged or result.seen_added:
        logger.info("Frontier in canonical form %(v)d: %(r)d queued URLs rewritten, "
                    "%(m)d queued duplicates merged, %(s)d seen-set entries added",
                    {"v": CANONICAL_FORM, "r": result.rewritten, "m": result.merged,
                     "s": result.seen_added})
    return result


def _add_seen(conn: sqlite3.Connection, forms: list[str], key: tuple[str, bytes],
              result: FrontierMigration) -> None:
    for form in forms:
        cur = conn.execute("INSERT OR IGNORE INTO frontier_seen (fp) VALUES (?)",
                           (_fingerprint(form, *key),))
        result.seen_added += cur.rowcount


def _migrate(conn: sqlite3.Connection, known_urls: Iterable[str],
             result: FrontierMigration, forms: Callable[[str], list[str]]) -> None:
    # The queue: first in (lowest id) keeps the place of requests that now share a URL,
    # with the highest priority among them.
    kept: dict[tuple[str, str, bytes], tuple[int, int]] = {}  # -> (row id, prio)
    rows = conn.execute("SELECT id, prio, url, data FROM frontier_queue ORDER BY id").fetchall()
    for row_id, prio, url, data in rows:
        d: dict[str, Any] | None = None
        if data[:1] in (b"", b"u"):
            # A URL row (frontier.url_rows.URL_ROW: its URL is this column, its meta
            # names no URL) or a request kept in memory only: a GET of the column's URL.
            key = ("GET", b"")
        else:
            d = pickle.loads(data)
            key = _request_key(d)
        spelt = forms(url)
        new = spelt[0]
        if _is_seen(conn, _fingerprint(url, *key)):
            _add_seen(conn, spelt, key, result)
        first = kept.get((new, *key))
        if first is not None:
            conn.execute("DELETE FROM frontier_queue WHERE id=?", (row_id,))
            if prio > first[1]:
                conn.execute("UPDATE frontier_queue SET prio=? WHERE id=?", (prio, first[0]))
                kept[(new, *key)] = (first[0], prio)
            result.merged += 1
            continue
        kept[(new, *key)] = (row_id, prio)
        meta_changed = d is not None and _rewrite_meta(d.get("meta"))
        if new != url or meta_changed:
            stored = data
            if d is not None:
                d["url"] = new
                stored = pickle.dumps(d, protocol=5)
            conn.execute("UPDATE frontier_queue SET url=?, origin=?, data=? WHERE id=?",
                         (new, origin_of(new), stored, row_id))
            result.rewritten += int(new != url)
    # Stopped origins are keyed by origin, whose host may be spelt anew.
    for origin, reason in conn.execute("SELECT origin, reason FROM frontier_stopped").fetchall():
        new_origin = _new_origin(origin)
        if new_origin != origin:
            conn.execute("DELETE FROM frontier_stopped WHERE origin=?", (origin,))
            conn.execute("INSERT OR REPLACE INTO frontier_stopped VALUES (?, ?)",
                         (new_origin, reason))
    # Seen URLs no longer queued: only those the caller knows by URL.
    get = ("GET", b"")
    for url in known_urls:
        if _is_seen(conn, _fingerprint(url, *get)):
            _add_seen(conn, forms(url), get, result)


def _is_seen(conn: sqlite3.Connection, fp: bytes) -> bool:
    return conn.execute("SELECT 1 FROM frontier_seen WHERE fp=?", (fp,)).fetchone() is not None
