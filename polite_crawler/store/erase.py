"""What ``scrapy forget`` deletes of an origin in the page store (SQLite or PostgreSQL).

Kept with the stores so the command holds no SQL of its own; every statement is the
same on both databases (``?`` placeholders, ``substr``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from polite_crawler.store.page_backend import SQLPageBackend


def _prefix_sql(column: str) -> str:
    # Canonical URLs of an origin start with "<origin>/"; substr is portable (SQLite, PG).
    return f"substr({column}, 1, ?) = ?"


def page_store_tables(backend: SQLPageBackend) -> dict[str, set[str]]:
    """Tables of the page store and their columns."""
    if backend.dialect == "postgres":
        rows = backend.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema()")
        out: dict[str, set[str]] = {}
        for table, column in rows:
            out.setdefault(str(table), set()).add(str(column))
        return out
    tables = [r[0] for r in backend.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")]
    return {t: {r[1] for r in backend.execute(f'PRAGMA table_info("{t}")')} for t in tables}


def delete_from_page_store(backend: SQLPageBackend, origin: str) -> dict[str, int]:
    """Delete everything of ``origin`` in the page store, in one transaction.

    ``pages`` rows of the origin (their texts, hashes and SimHash fingerprints are
    columns of those rows), ``page_aliases`` from or to it, near-duplicate links
    (``near_duplicate_of``) pointing at it; and, in any other table of the store,
    rows whose ``origin`` is it or whose ``canonical_url`` is one of its URLs.
    """
    prefix = origin + "/"
    p = (len(prefix), prefix)
    tables = page_store_tables(backend)
    removed: dict[str, int] = {}
    backend.begin()
    try:
        def count(sql: str, params: tuple[Any, ...]) -> int:
            return int(backend.execute(sql, params)[0][0])

        if "pages" in tables:
            removed["pages"] = count("SELECT COUNT(*) FROM pages WHERE origin = ?", (origin,))
            if "near_duplicate_of" in tables["pages"]:
                where = f"origin <> ? AND {_prefix_sql('near_duplicate_of')}"
                removed["near_duplicate_links"] = count(
                    f"SELECT COUNT(*) FROM pages WHERE {where}", (origin, *p))
                backend.execute(f"UPDATE pages SET near_duplicate_of = NULL WHERE {where}",
                                (origin, *p))
            backend.execute("DELETE FROM pages WHERE origin = ?", (origin,))
        if "page_aliases" in tables:
            where = f"{_prefix_sql('alias_url')} OR {_prefix_sql('canonical_url')}"
            removed["aliases"] = count(f"SELECT COUNT(*) FROM page_aliases WHERE {where}", p + p)
            backend.execute(f"DELETE FROM page_aliases WHERE {where}", p + p)
        for table, cols in sorted(tables.items()):
            if table in ("pages", "page_aliases", "page_store_schema"):
                continue
            if "origin" in cols:
                n = count(f'SELECT COUNT(*) FROM "{table}" WHERE origin = ?', (origin,))
                backend.execute(f'DELETE FROM "{table}" WHERE origin = ?', (origin,))
            elif "canonical_url" in cols:
                where = _prefix_sql("canonical_url")
                n = count(f'SELECT COUNT(*) FROM "{table}" WHERE {where}', p)
                backend.execute(f'DELETE FROM "{table}" WHERE {where}', p)
            else:
                continue
            if n:
                removed[table] = n
        backend.commit()
    except BaseException:
        backend.rollback()
        raise
    return removed


__all__ = ["delete_from_page_store", "page_store_tables"]
