"""Stored canonical URLs of an older canonical form, in the current one.

Version 1 of the canonical form (w3lib's ``canonicalize_url`` and the rules
around it, before canonical form 2) wrote every query piece as ``name=value``, escaped
every reserved character of the query (``:`` as ``%3A``, ``/`` as ``%2F``, …),
decoded every escape of the path, kept a lone ``%`` and a percent-encoded host
as written and spelt an IPv4-mapped IPv6 address in hex. Version 2 keeps the
link as written where RFC 3986 allows it. Version 3 encodes a host that is not
ASCII by UTS #46 non-transitional processing, as browsers do, where version 2
used IDNA 2003 (Python's codec), which maps ``faß.de`` to ``fass.de``.

For most stored URLs the current canonical form of the stored string is the
page's new identity: :func:`respellings` gives it first. Where version 1 lost
how the link was spelt, the page may now be reached under another form too: a
query name that was bare (``?print`` stored as ``?print=``) or reserved
characters that were raw (``?r=http://x/`` stored as ``?r=http%3A%2F%2Fx%2F``).
Those forms follow, so a store can answer for them as aliases of the page and a
seen set can hold them, and the first crawl after the upgrade does not take
such pages for new ones.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from polite_crawler.policy.urls import URLError, canonicalize

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    Execute = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]

logger = logging.getLogger(__name__)

# Escapes version 1 wrote for characters a query may hold raw (RFC 3986 3.4); not
# "&", "=", "+" or "#", whose escapes also stand for themselves in a link.
_RAW_IN_QUERY = re.compile(r"%(21|24|27|28|29|2A|2C|2F|3A|3B|3F|40)")


def _raw(piece: str) -> str:
    return _RAW_IN_QUERY.sub(lambda m: chr(int(m.group(1), 16)), piece)


def _bare(piece: str) -> str:
    return piece[:-1] if piece.endswith("=") and piece.count("=") == 1 else piece


def respellings(stored: str) -> list[str]:
    """The current canonical form of a stored URL, then the other forms of its link.

    A stored URL without a canonical form now is kept as it is (never dropped).

    >>> forms = respellings("http://example.org/p?a=1&print=&r=http%3A%2F%2Fx.example%2F")
    >>> forms[0]
    'http://example.org/p?a=1&print=&r=http%3A%2F%2Fx.example%2F'
    >>> forms[1:]  # doctest: +NORMALIZE_WHITESPACE
    ['http://example.org/p?a=1&print=&r=http://x.example/',
     'http://example.org/p?a=1&print&r=http%3A%2F%2Fx.example%2F',
     'http://example.org/p?a=1&print&r=http://x.example/']
    >>> respellings("http://[::ffff:7f00:1]/90%+of")
    ['http://[::ffff:127.0.0.1]/90%25+of']
    """
    try:
        primary = canonicalize(stored)
    except URLError:
        return [stored]
    out = [primary]
    base, _, query = primary.partition("?")
    if not query:
        return out
    pieces = query.split("&")
    raw = [_raw(p) for p in pieces]
    for variant in (raw, [_bare(p) for p in pieces], [_bare(p) for p in raw]):
        try:
            form = canonicalize(base + "?" + "&".join(variant))
        except URLError:  # pragma: no cover - the base has a canonical form already
            continue
        if form not in out:
            out.append(form)
    return out


def current_form(stored: str) -> list[str]:
    """The current canonical form of a stored URL alone; the stored URL if it has none.

    From canonical form 2 on, a stored URL lost nothing of how its link was spelt
    that a later form tells apart, so it has no other spellings to add.

    >>> current_form("http://Example.org/a?b"), current_form("not a url")
    (['http://example.org/a?b'], ['not a url'])
    """
    try:
        return [canonicalize(stored)]
    except URLError:
        return [stored]


# --------------------------------------------------------------------------------------
# The page store (migrations 2 and 4).

_BATCH = 1000
# Reason of an alias the migration adds: another spelling of the page's link.
MIGRATED = "migrated"




def _add_alias(execute: Execute, alias: str, target: str, reason: str, seen_at: float) -> int:
    """Add an alias unless the URL is a page or an alias already; 1 if added."""
    return len(execute(
        "INSERT INTO page_aliases (alias_url, canonical_url, reason, seen_at) "
        "SELECT ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM pages WHERE canonical_url = ?) "
        "ON CONFLICT (alias_url) DO NOTHING RETURNING alias_url",
        (alias, target, reason, seen_at, alias)))


def recanonicalize_pages(execute: Execute, dialect: str) -> dict[str, int]:
    """Migration 2: the page store from canonical form 1 to the current one.

    The other spellings of a link that form 1 lost (:func:`respellings`) become aliases.
    """
    return _recanonicalize(execute, respellings, 2)


def recanonicalize_pages_3(execute: Execute, dialect: str) -> dict[str, int]:
    """Migration 4: the page store from canonical form 2 to 3 (international hosts).

    Form 3 encodes a host that is not ASCII by UTS #46 non-transitional processing
    where form 2 used IDNA 2003. Form 2 stored every host in ASCII, and an ASCII host
    is spelt alike in both, so no URL form 2 wrote changes here: the pass proves the
    store is in form 3 (and would rewrite and merge any URL that is not). What IDNA
    2003 mapped away (``faß.de`` stored as ``fass.de``) cannot be told from a link
    that was spelt ``fass.de``: such a row stays the page of the host that was in
    fact fetched, and a link that says ``faß.de`` now leads to ``xn--fa-hia.de``.
    """
    return _recanonicalize(execute, current_form, 3)


def _recanonicalize(execute: Execute, forms: Callable[[str], list[str]],
                    version: int) -> dict[str, int]:
    """Rewrite the page store's canonical URLs in the current form (one transaction).

    Pages whose URLs now have one form are merged into one row: the newest fetch
    (its copy and its validators) stays, with the visits and changes of all. Aliases
    and near-duplicate links follow their pages; the other spellings of a page's
    link (``forms(url)[1:]``) become aliases of it (reason ``migrated``). Returns
    counts of what changed.
    """
    counts = {"rewritten": 0, "merged": 0, "aliases_rewritten": 0, "aliases_added": 0,
              "near_duplicate_links": 0}
    _merge_pages(execute, forms, counts)
    _rewrite_near_duplicate_links(execute, forms, counts)
    _rewrite_aliases(execute, forms, counts)
    _add_other_spellings(execute, forms, counts)
    if any(counts.values()):
        logger.info("Page store in canonical form %(form)d: %(rewritten)d page URLs "
                    "rewritten, %(merged)d rows merged, %(aliases_rewritten)d aliases "
                    "rewritten, %(aliases_added)d aliases added for other spellings, "
                    "%(near_duplicate_links)d near-duplicate links rewritten",
                    {**counts, "form": version})
    return counts


def _merge_pages(execute: Execute, forms: Callable[[str], list[str]],
                 counts: dict[str, int]) -> None:
    """1. Pages: the rows whose URL changes, grouped by their new URL, merged into one
    row each (the newest fetch stays, with the visits and changes of all)."""
    from polite_crawler.policy.urls import origin_of

    moved: dict[str, list[int]] = {}
    last = 0
    while rows := execute("SELECT id, canonical_url FROM pages WHERE id > ? ORDER BY id LIMIT ?",
                          (last, _BATCH)):
        for row_id, url in rows:
            last = row_id
            new = forms(url)[0]
            if new != url:
                moved.setdefault(new, []).append(row_id)
    for new, ids in moved.items():
        members = list(ids)
        members += [r[0] for r in execute("SELECT id FROM pages WHERE canonical_url = ?", (new,))]
        marks = ", ".join("?" for _ in members)
        rows = execute(f"SELECT id, fetched_at, visits, changes FROM pages WHERE id IN ({marks})",
                       members)
        winner = max(rows, key=lambda r: (r[1], r[0]))
        for row in rows:
            if row[0] != winner[0]:
                execute("DELETE FROM pages WHERE id = ?", (row[0],))
                counts["merged"] += 1
        execute("UPDATE pages SET canonical_url = ?, origin = ?, visits = ?, changes = ? "
                "WHERE id = ?", (new, origin_of(new), sum(int(r[2]) for r in rows),
                                 sum(int(r[3]) for r in rows), winner[0]))
        counts["rewritten"] += len(ids)


def _rewrite_near_duplicate_links(execute: Execute, forms: Callable[[str], list[str]],
                                  counts: dict[str, int]) -> None:
    """2. Near-duplicate links name the first page of a cluster by its URL."""
    for row_id, root in execute("SELECT id, near_duplicate_of FROM pages "
                                "WHERE near_duplicate_of IS NOT NULL", ()):
        new = forms(root)[0]
        if new != root:
            execute("UPDATE pages SET near_duplicate_of = ? WHERE id = ?", (new, row_id))
            counts["near_duplicate_links"] += 1


def _rewrite_aliases(execute: Execute, forms: Callable[[str], list[str]],
                     counts: dict[str, int]) -> None:
    """3. Aliases: both ends in the new form; on a collision the newest stays. A URL
    stored as a page of its own is no alias."""
    changed = []
    for alias, target, reason, seen_at in execute(
            "SELECT alias_url, canonical_url, reason, seen_at FROM page_aliases", ()):
        new_alias, new_target = forms(alias)[0], forms(target)[0]
        if (new_alias, new_target) != (alias, target):
            changed.append((alias, new_alias, new_target, reason, seen_at))
    for alias, new_alias, new_target, reason, seen_at in changed:
        execute("DELETE FROM page_aliases WHERE alias_url = ?", (alias,))
        counts["aliases_rewritten"] += 1
        if new_alias == new_target:
            continue
        execute("INSERT INTO page_aliases (alias_url, canonical_url, reason, seen_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (alias_url) DO UPDATE SET "
                "canonical_url = excluded.canonical_url, reason = excluded.reason, "
                "seen_at = excluded.seen_at WHERE excluded.seen_at > page_aliases.seen_at",
                (new_alias, new_target, reason, seen_at))
    execute("DELETE FROM page_aliases WHERE alias_url IN (SELECT canonical_url FROM pages)", ())


def _add_other_spellings(execute: Execute, forms: Callable[[str], list[str]],
                         counts: dict[str, int]) -> None:
    """4. The other spellings of each alias, as aliases of its page for the same reason,
    and of each page's own link, as aliases of the page."""
    for alias, target, reason, seen_at in execute(
            "SELECT alias_url, canonical_url, reason, seen_at FROM page_aliases", ()):
        for other in forms(alias)[1:]:
            counts["aliases_added"] += _add_alias(execute, other, target, reason, seen_at)
    last = 0
    while rows := execute("SELECT id, canonical_url, fetched_at FROM pages WHERE id > ? "
                          "ORDER BY id LIMIT ?", (last, _BATCH)):
        for row_id, url, fetched_at in rows:
            last = row_id
            for other in forms(url)[1:]:
                counts["aliases_added"] += _add_alias(execute, other, url, MIGRATED, fetched_at)
