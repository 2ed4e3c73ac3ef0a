"""Reading a sitemap leaves no reference cycle behind: what it made is freed by reference
counting, not left for a full collection that a crawl's collector settings make rare."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import TYPE_CHECKING

from polite_crawler.policy.sitemaps import RSS, UNKNOWN, URLSET, parse_sitemap

if TYPE_CHECKING:
    from collections.abc import Iterator

SM = "http://example.org/sitemap.xml"
URLSET_BODY = (b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
               + b"".join(b"<url><loc>http://example.org/p%d</loc></url>" % i for i in range(300))
               + b"</urlset>")


@contextmanager
def cyclic_garbage() -> Iterator[list[object]]:
    """The objects left in reference cycles by the body of the block."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    found: list[object] = []
    try:
        yield found
        gc.collect()
        found.extend(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def test_an_xml_sitemap_read_by_its_entries_leaves_no_cycle() -> None:
    with cyclic_garbage() as garbage:
        for _ in range(3):
            r = parse_sitemap(URLSET_BODY, SM)
            assert r.kind == URLSET and len(r.pages) == 300
        del r
    assert [type(o).__name__ for o in garbage] == []


def test_a_file_stopped_early_or_cut_leaves_no_cycle() -> None:
    feed = (b'<?xml version="1.0"?><rss version="2.0"><channel>'
            b"<item><link>http://example.org/a</link></item><item><link>http://exa")
    with cyclic_garbage() as garbage:
        page = parse_sitemap(b"<html><body><p>no sitemap here</p></body></html>", SM)
        cut = parse_sitemap(feed, "http://example.org/feed.xml")
        kinds = (page.kind, cut.kind, [e.url for e in cut.pages])
        del page, cut
    assert kinds == (UNKNOWN, RSS, ["http://example.org/a"])
    assert [type(o).__name__ for o in garbage] == []


def test_a_file_read_after_one_stopped_early_is_read_whole() -> None:
    # The parser a thread keeps is left ready for the next file: no event of a file
    # stopped at its root is read as the next one's.
    assert parse_sitemap(b"<html><body><p>no sitemap here", SM).kind == UNKNOWN
    r = parse_sitemap(URLSET_BODY, SM)
    assert r.kind == URLSET and len(r.pages) == 300
