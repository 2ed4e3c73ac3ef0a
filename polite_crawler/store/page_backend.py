"""The page store's SQL: one class for both dialects (SQLite and PostgreSQL).

:class:`SQLPageBackend` reads and writes pages (``pages``), aliases
(``page_aliases``) and the fetch state of URLs that are not pages (``url_fetches``)
in ``?``-parameter SQL both dialects run; a dialect's subclass
(:class:`~polite_crawler.store.sqlite.SQLitePageBackend`,
:class:`~polite_crawler.store.postgres.PostgresPageBackend`) opens its connection and
says how a transaction begins and what a lost connection looks like. The schema is
the versioned migrations' (:mod:`.migrations`). Copies are kept compressed (zstd).
One connection, used by one thread (:class:`~polite_crawler.store.pages.PageStore`'s).
"""

from __future__ import annotations

import json
from dataclasses import fields
from typing import TYPE_CHECKING, Any

import zstandard

from polite_crawler.policy.simhash import MIN_WORDS, from_signed, to_signed
from polite_crawler.policy.urls import origin_of
from polite_crawler.records import FetchRecord, PageRecord
from polite_crawler.store.migrations import migrate

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

ZSTD_LEVEL = 3


_FETCH_COLUMNS = ["url", "origin", *(f.name for f in fields(FetchRecord) if f.name != "url")]
_FETCH_LIGHT = [c for c in _FETCH_COLUMNS if c != "body"]


def body_hash(body: bytes | None) -> str | None:
    import hashlib

    return None if body is None else hashlib.blake2b(body, digest_size=16).hexdigest()


_COLUMNS = [f.name for f in fields(PageRecord) if f.name != "id"]
_COLUMNS.insert(1, "origin")
_LIGHT = [c for c in _COLUMNS if c != "body"]  # every column but the copy


def _encode_row(rec: PageRecord, compress: Callable[[bytes], bytes]) -> tuple[Any, ...]:
    values: list[Any] = []
    for name in _COLUMNS:
        if name == "origin":
            values.append(origin_of(rec.canonical_url))
        elif name == "body":
            values.append(compress(rec.body) if rec.body is not None and not rec.no_store else None)
        elif name in ("signals", "headers"):
            values.append(json.dumps(getattr(rec, name), sort_keys=True))
        elif name == "simhash":
            values.append(None if rec.simhash is None else to_signed(rec.simhash))
        elif name in ("noindex", "ai_input", "no_store"):
            values.append(int(bool(getattr(rec, name))))
        elif name == "body_length":  # of the copy kept (0: none)
            kept = rec.body is not None and not rec.no_store
            values.append(len(rec.body or b"") if kept else 0 if rec.no_store else rec.body_length)
        else:
            values.append(getattr(rec, name))
    return tuple(values)


def _decode_row(names: Sequence[str], row: Sequence[Any],
                decompress: Callable[[bytes], bytes]) -> PageRecord:
    data: dict[str, Any] = {}
    for name, raw in zip(names, row, strict=True):
        value = raw
        if name == "origin":
            continue
        if name == "body":
            value = decompress(bytes(raw)) if raw is not None else None
        elif name in ("signals", "headers"):
            value = json.loads(raw) if raw else {}
        elif name == "simhash":
            value = None if raw is None else from_signed(int(raw))
        elif name in ("noindex", "ai_input", "no_store"):
            value = bool(raw)
        data[name] = value
    return PageRecord(**data)


class SQLPageBackend:
    """The page store's SQL, shared by both dialects (``?`` placeholders here).

    Not thread-safe: one thread uses one backend (see :class:`PageStore`).
    """

    dialect = "sqlite"

    def __init__(self) -> None:
        self._zc = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        self._zd = zstandard.ZstdDecompressor()
        self.in_transaction = False

    # --- dialect hooks -------------------------------------------------------
    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        for row in rows:
            self.execute(sql, row)

    def close(self) -> None:
        raise NotImplementedError

    def begin_sql(self) -> str:
        return "BEGIN"

    def lost(self, exc: BaseException) -> bool:
        """Whether ``exc`` means the connection to the database is gone (a server
        restarted or unreachable): the store reconnects and writes its batch again."""
        return False

    # --- transactions ----------------------------------------------------------
    def migrate(self) -> list[int]:
        return migrate(self.execute, self.dialect)

    def begin(self) -> None:
        if not self.in_transaction:
            self.execute(self.begin_sql())
            self.in_transaction = True

    def commit(self) -> None:
        if self.in_transaction:
            self.execute("COMMIT")
            self.in_transaction = False

    def rollback(self) -> None:
        if self.in_transaction:
            self.execute("ROLLBACK")
            self.in_transaction = False

    # --- helpers ---------------------------------------------------------------
    def _compress(self, data: bytes) -> bytes:
        return self._zc.compress(data)

    def _decompress(self, data: bytes) -> bytes:
        return self._zd.decompress(data)

    def _one(self, where: str, params: Sequence[Any], body: bool) -> PageRecord | None:
        names = ["id", *(_COLUMNS if body else _LIGHT)]
        rows = self.execute(f"SELECT {', '.join('p.' + n for n in names)} FROM pages p {where}",
                            params)
        if not rows:
            return None
        return _decode_row(names, rows[0], self._decompress)

    # --- reads -------------------------------------------------------------------
    def get(self, canonical_url: str, *, body: bool = False) -> PageRecord | None:
        return self._one("WHERE p.canonical_url = ?", (canonical_url,), body)

    def resolve(self, canonical_url: str, *, body: bool = False,
                follow: Sequence[str] | None = None) -> PageRecord | None:
        """The page stored under this canonical URL, or the one it is an alias of.

        ``follow`` limits the aliases followed to these reasons (None: all).
        """
        rec = self.get(canonical_url, body=body)
        if rec is not None or follow == ():
            return rec
        where = "WHERE a.alias_url = ?"
        params: list[Any] = [canonical_url]
        if follow is not None:
            where += f" AND a.reason IN ({', '.join('?' for _ in follow)})"
            params.extend(follow)
        return self._one(f"JOIN page_aliases a ON a.canonical_url = p.canonical_url {where}",
                         params, body)

    def alias_of(self, alias_url: str) -> tuple[str, str] | None:
        rows = self.execute("SELECT canonical_url, reason FROM page_aliases WHERE alias_url = ?",
                            (alias_url,))
        return (rows[0][0], rows[0][1]) if rows else None

    def first_with_text_hash(self, text_hash: str, exclude: str) -> str | None:
        rows = self.execute("SELECT canonical_url FROM pages WHERE text_hash = ? "
                            "AND canonical_url <> ? ORDER BY id LIMIT 1", (text_hash, exclude))
        return rows[0][0] if rows else None

    def fingerprints(self) -> Iterator[tuple[str, int, str | None]]:
        rows = self.execute("SELECT canonical_url, simhash, near_duplicate_of FROM pages "
                            "WHERE simhash IS NOT NULL AND words >= ? ORDER BY id", (MIN_WORDS,))
        for canonical, h, root in rows:
            yield canonical, from_signed(int(h)), root

    def due_urls(self, origin: str, now: float, limit: int = 1000) -> list[str]:
        rows = self.execute("SELECT canonical_url FROM pages WHERE origin = ? AND due_at <= ? "
                            "AND (fresh_until IS NULL OR fresh_until <= ?) ORDER BY due_at LIMIT ?",
                            (origin, now, now, limit))
        return [r[0] for r in rows]

    def iter_pages(self, batch: int = 500) -> Iterator[PageRecord]:
        """Every stored page (without its copy), in the order stored."""
        last = 0
        names = ["id", *_LIGHT]
        while True:
            rows = self.execute(f"SELECT {', '.join(names)} FROM pages WHERE id > ? "
                                "ORDER BY id LIMIT ?", (last, batch))
            if not rows:
                return
            for row in rows:
                rec = _decode_row(names, row, self._decompress)
                last = rec.id or last
                yield rec

    def count(self) -> int:
        return int(self.execute("SELECT COUNT(*) FROM pages")[0][0])

    def get_fetch(self, url: str, *, body: bool = False) -> FetchRecord | None:
        names = _FETCH_COLUMNS if body else _FETCH_LIGHT
        rows = self.execute(f"SELECT {', '.join(names)} FROM url_fetches WHERE url = ?", (url,))
        if not rows:
            return None
        data: dict[str, Any] = {}
        for name, raw in zip(names, rows[0], strict=True):
            if name == "origin":
                continue
            value = raw
            if name == "body":
                value = self._decompress(bytes(raw)) if raw is not None else None
            elif name == "headers":
                value = json.loads(raw) if raw else {}
            elif name == "no_store":
                value = bool(raw)
            data[name] = value
        return FetchRecord(**data)

    def put_fetch(self, rec: FetchRecord) -> None:
        values: list[Any] = []
        for name in _FETCH_COLUMNS:
            if name == "origin":
                values.append(origin_of(rec.url))
            elif name == "body":
                keep = rec.body is not None and not rec.no_store
                values.append(self._compress(rec.body) if keep and rec.body is not None else None)
            elif name == "body_length":
                values.append(len(rec.body) if rec.body is not None and not rec.no_store else 0)
            elif name == "headers":
                values.append(json.dumps(rec.headers, sort_keys=True))
            elif name == "no_store":
                values.append(int(rec.no_store))
            else:
                values.append(getattr(rec, name))
        updates = ", ".join(f"{c} = excluded.{c}" for c in _FETCH_COLUMNS if c != "url")
        self.execute(f"INSERT INTO url_fetches ({', '.join(_FETCH_COLUMNS)}) VALUES "
                     f"({', '.join('?' for _ in _FETCH_COLUMNS)}) "
                     f"ON CONFLICT (url) DO UPDATE SET {updates}", values)

    def fetch_revisited(self, url: str, *, fetched_at: float, headers: dict[str, str],
                        fresh_until: float | None, revisit_interval: float,
                        due_at: float) -> bool:
        rows = self.execute("SELECT etag, last_modified, headers FROM url_fetches WHERE url = ?",
                            (url,))
        if not rows:
            return False
        etag, lm, old = rows[0]
        merged = {**(json.loads(old) if old else {}), **headers}
        self.execute(
            "UPDATE url_fetches SET fetched_at = ?, headers = ?, etag = ?, last_modified = ?, "
            "fresh_until = ?, revisit_interval = ?, due_at = ?, visits = visits + 1 "
            "WHERE url = ?",
            (fetched_at, json.dumps(merged, sort_keys=True), headers.get("etag") or etag,
             headers.get("last-modified") or lm, fresh_until, revisit_interval, due_at, url))
        return True

    def count_fetches(self, kind: str | None = None) -> int:
        if kind is None:
            return int(self.execute("SELECT COUNT(*) FROM url_fetches")[0][0])
        return int(self.execute("SELECT COUNT(*) FROM url_fetches WHERE kind = ?",
                                (kind,))[0][0])

    def count_aliases(self) -> int:
        return int(self.execute("SELECT COUNT(*) FROM page_aliases")[0][0])

    # --- writes (inside a transaction: call begin() first) ---------------------------
    def put(self, rec: PageRecord) -> None:
        """Insert or replace the page stored under ``rec.canonical_url``."""
        cols = ", ".join(_COLUMNS)
        marks = ", ".join("?" for _ in _COLUMNS)
        updates = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c != "canonical_url")
        self.execute(f"INSERT INTO pages ({cols}) VALUES ({marks}) "
                     f"ON CONFLICT (canonical_url) DO UPDATE SET {updates}",
                     _encode_row(rec, self._compress))
        # A URL stored as a page of its own is no longer an alias of another.
        self.execute("DELETE FROM page_aliases WHERE alias_url = ?", (rec.canonical_url,))

    def revisited(self, canonical_url: str, *, fetched_at: float, headers: dict[str, str],
                  etag: str | None, last_modified: str | None, fresh_until: float | None,
                  revisit_interval: float, due_at: float) -> None:
        """A visit that found the stored copy current (304, or the same text)."""
        self.execute(
            "UPDATE pages SET fetched_at = ?, headers = ?, etag = ?, last_modified = ?, "
            "fresh_until = ?, revisit_interval = ?, due_at = ?, visits = visits + 1 "
            "WHERE canonical_url = ?",
            (fetched_at, json.dumps(headers, sort_keys=True), etag, last_modified, fresh_until,
             revisit_interval, due_at, canonical_url))

    def add_alias(self, alias_url: str, canonical_url: str, reason: str, seen_at: float) -> None:
        if alias_url == canonical_url:
            return
        self.execute("INSERT INTO page_aliases (alias_url, canonical_url, reason, seen_at) "
                     "VALUES (?, ?, ?, ?) ON CONFLICT (alias_url) DO UPDATE SET "
                     "canonical_url = excluded.canonical_url, reason = excluded.reason, "
                     "seen_at = excluded.seen_at", (alias_url, canonical_url, reason, seen_at))

    def delete(self, canonical_url: str) -> None:
        self.execute("DELETE FROM pages WHERE canonical_url = ?", (canonical_url,))


__all__ = ["SQLPageBackend", "body_hash"]
