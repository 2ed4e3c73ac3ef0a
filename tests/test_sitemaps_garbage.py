"""Reading a sitemap leaves no reference cycle behind: what it made is freed by reference
counting, not left for a full collection that a crawl's collector settings make rare."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from polite_crawler.policy.sitemaps import UNKNOWN, URLSET, parse_sitemap

SM = "http://example.org/sitemap.xml"
URLSET_BODY = (b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
               + b"".join(b"<url><loc>http://example.org/p%d</loc></url>" % i for i in range(300))
               + b"</urlset>")


# Each reading runs in a fresh interpreter: in a process shared with other tests, their
# servers' and reactors' threads make garbage of their own while the block runs, which
# the collector cannot tell from the parser's.
PRELUDE = """
import gc, json
from polite_crawler.policy.sitemaps import RSS, UNKNOWN, URLSET, parse_sitemap
SM = "http://example.org/sitemap.xml"
gc.collect()
gc.disable()
gc.set_debug(gc.DEBUG_SAVEALL)
"""
EPILOGUE = """
gc.collect()
print(json.dumps({"garbage": [type(o).__name__ for o in gc.garbage], "seen": seen}))
"""


def cyclic_garbage(block: str) -> tuple[list[str], object]:
    """The type names of the objects ``block`` left in reference cycles, and what it
    put in ``seen``, read in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(block) + EPILOGUE],
        capture_output=True, text=True, check=True, timeout=60,
        cwd=str(Path(__file__).resolve().parent.parent))
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    return answer["garbage"], answer["seen"]


def test_an_xml_sitemap_read_by_its_entries_leaves_no_cycle() -> None:
    garbage, seen = cyclic_garbage(f"""
        body = {URLSET_BODY!r}
        seen = []
        for _ in range(3):
            r = parse_sitemap(body, SM)
            seen.append([r.kind == URLSET, len(r.pages)])
        del r
    """)
    assert seen == [[True, 300]] * 3
    assert garbage == []


def test_a_file_stopped_early_or_cut_leaves_no_cycle() -> None:
    feed = (b'<?xml version="1.0"?><rss version="2.0"><channel>'
            b"<item><link>http://example.org/a</link></item><item><link>http://exa")
    garbage, seen = cyclic_garbage(f"""
        page = parse_sitemap(b"<html><body><p>no sitemap here</p></body></html>", SM)
        cut = parse_sitemap({feed!r}, "http://example.org/feed.xml")
        seen = [page.kind == UNKNOWN, cut.kind == RSS, [e.url for e in cut.pages]]
        del page, cut
    """)
    assert seen == [True, True, ["http://example.org/a"]]
    assert garbage == []


def test_a_file_read_after_one_stopped_early_is_read_whole() -> None:
    # The parser a thread keeps is left ready for the next file: no event of a file
    # stopped at its root is read as the next one's.
    assert parse_sitemap(b"<html><body><p>no sitemap here", SM).kind == UNKNOWN
    r = parse_sitemap(URLSET_BODY, SM)
    assert r.kind == URLSET and len(r.pages) == 300
