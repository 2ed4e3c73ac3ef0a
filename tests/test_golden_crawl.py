"""A golden crawl: real pages (the Python documentation's HOWTOs) crawled end to end, and
everything the crawl keeps compared with ``tests/data/golden_crawl.json``.

What is compared: every stored page (its text, title, language, links, fingerprints,
near-duplicate link, signals, noindex, validators, the copy's hash), the aliases and
fetch records (exact duplicates, redirects), the access log and the crawl's decision
counters; times and durations left out (they differ from run to run). The crawl runs
twice, through the two ways pages reach the frontier: in bulk, as URL rows (the site
spider's own way), and as plain Requests a callback yields
(``SiteSpider.bulk_pages = False``).

The web: one host on loopback serving the HOWTO pages of /usr/share/doc/python3/html
as they are (``Content-Type: text/html`` without a charset, as nginx sends it), under
``/howto/``. robots.txt allows only ``/howto/`` (every link to the rest of the
documentation is refused, and logged) and carries a Content-Signal; the sitemap lists
part of the pages (the others are found through links), an exact copy of one page
(a duplicate) and a page with a paragraph added to another (a near duplicate); one page
says ``X-Robots-Tag: noindex``, one ``nofollow``, one has a ``Content-Usage`` header,
one redirects.

After a change that means to alter what is stored, write the file again:
``POLITE_GOLDEN_WRITE=1 .venv/bin/python -m pytest tests/test_golden_crawl.py``, and
read its diff.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from demo.web.server import Req, Resp, Site, etag_for
from tests.crawl import run_crawl
from tests.pages_web import PageSpider

DOCS = Path("/usr/share/doc/python3/html")
HOWTO = DOCS / "howto"
GOLDEN = Path(__file__).parent / "data" / "golden_crawl.json"
HOST = "127.0.31.1"

pytestmark = pytest.mark.skipif(not HOWTO.is_dir(), reason="python3-doc is not installed")

# Listed in the sitemap (the others are reached through links of /howto/index.html).
LISTED = ["argparse.html", "descriptor.html", "enum.html", "functional.html",
          "ipaddress.html", "logging.html", "regex.html", "sorting.html", "unicode.html",
          "urllib2.html", "curses.html", "annotations.html"]
NEAR_NOTE = ("<p>A note added to this copy of the page: the examples below were checked "
             "against the current release of the interpreter.</p>")


class HowtoSite(Site):
    def __init__(self) -> None:
        super().__init__()
        self.pages = {f"/howto/{p.name}": p.read_bytes() for p in sorted(HOWTO.glob("*.html"))}
        self.pages["/howto/sorting-copy.html"] = self.pages["/howto/sorting.html"]
        enum = self.pages["/howto/enum.html"]
        self.pages["/howto/enum-annotated.html"] = enum.replace(
            b"</h1>", b"</h1>" + NEAR_NOTE.encode(), 1)
        self.port = 0

    def _padded(self, text: str) -> bytes:
        """``text`` (which names the port) padded to the length a 5-digit port gives: the
        access log's byte counts do not change with the port (sent as it is, not gzipped)."""
        short = 5 - len(str(self.port))
        return (text + " " * (short * text.count(f":{self.port}/"))).encode()

    def handle(self, req: Req) -> Resp:
        path = req.path.split("?", 1)[0]
        base = f"http://{HOST}:{self.port}"
        if path == "/robots.txt":
            return Resp(200, self._padded(
                f"User-agent: *\nContent-Signal: search=yes, ai-input=no\nAllow: /howto/\n"
                f"Disallow: /\n\nSitemap: {base}/howto/sitemap.xml\n"),
                content_type="text/plain", gzip_ok=False)
        if path == "/howto/sitemap.xml":
            locs = [*LISTED, "sorting-copy.html", "enum-annotated.html", "old-logging.html"]
            body = "".join(f"<url><loc>{base}/howto/{p}</loc></url>" for p in locs)
            return Resp(200, self._padded(
                '<?xml version="1.0" encoding="UTF-8"?><urlset xmlns='
                f'"http://www.sitemaps.org/schemas/sitemap/0.9">{body}</urlset>'),
                content_type="application/xml", gzip_ok=False)
        if path == "/howto/old-logging.html":
            return Resp(301, b"", headers={"Location": f"{base}/howto/logging-cookbook.html"})
        body = self.pages.get(path)
        if body is None:
            return Resp(404, b"<html><body>Not found</body></html>")
        headers: dict[str, str] = {}
        if path == "/howto/curses.html":
            headers["X-Robots-Tag"] = "noindex"
        elif path == "/howto/regex.html":
            headers["X-Robots-Tag"] = "nofollow"
        elif path == "/howto/unicode.html":
            headers["Content-Usage"] = "train-ai=n"
        return Resp(200, body, headers=headers, content_type="text/html", etag=etag_for(body))


class PlainRequestSpider(PageSpider):
    """The page spider, every page a Request its callback yields."""

    name = "golden_plain"
    bulk_pages = False


# What differs from run to run: times, durations, and the rests made of durations.
_TIMES = {"fetched_at", "due_at", "fresh_until", "seen_at", "sent", "done", "duration",
          "rest", "revisit_interval", "checked_at", "updated_at", "first_seen"}


def _digest(data: bytes | str | None, port: int = 0) -> str | None:
    """A hash of ``data``, the test web's port in it written as PORT (padding removed)."""
    if data is None:
        return None
    raw = data.encode() if isinstance(data, str) else data
    if port:
        raw = raw.replace(f":{port}/".encode(), b":PORT/").rstrip(b" ")
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def _local(value: Any, port: int) -> Any:
    """``value`` with the test web's port (a different one each run) written as PORT."""
    if isinstance(value, str):
        return value.replace(f":{port}", ":PORT")
    if isinstance(value, dict):
        return {_local(k, port): _local(v, port) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_local(v, port) for v in value]
    return value


def _rows(db: sqlite3.Connection, table: str, key: str) -> list[dict[str, Any]]:
    cur = db.execute(f"SELECT * FROM {table} ORDER BY {key}")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def capture(state: Path, stats: dict[str, Any], port: int) -> dict[str, Any]:
    """What the crawl kept, without times: pages, aliases, fetch records, log, counters."""
    from polite_crawler.store.sqlite import SQLitePageBackend

    backend = SQLitePageBackend(str(state / "polite.sqlite3"))
    db = sqlite3.connect(state / "polite.sqlite3")
    pages, fetches = [], []
    try:
        for rec in backend.iter_pages():
            full = backend.get(rec.canonical_url, body=True)
            assert full is not None
            row = {k: v for k, v in vars(full).items() if k not in _TIMES | {"id", "body"}}
            row["headers"] = {k: v for k, v in full.headers.items() if k != "date"}
            row["text"] = {"chars": len(full.text), "digest": _digest(full.text),
                           "start": full.text[:120]}
            row["body_digest"] = _digest(full.body, port)
            pages.append(row)
        aliases = [{k: v for k, v in r.items() if k not in _TIMES}
                   for r in _rows(db, "page_aliases", "alias_url")]
        for (url,) in db.execute("SELECT url FROM url_fetches ORDER BY url").fetchall():
            fetch = backend.get_fetch(url, body=True)
            assert fetch is not None
            # The copy's hash as the store has it names the port: ours does not.
            row = {k: v for k, v in vars(fetch).items()
                   if k not in _TIMES | {"body", "body_hash"}}
            row["headers"] = {k: v for k, v in fetch.headers.items() if k != "date"}
            row["body_digest"] = _digest(fetch.body, port)
            fetches.append(row)
    finally:
        db.close()
        backend.close()
    pages.sort(key=lambda r: r["canonical_url"])
    log = []
    for path in sorted(state.glob("access-*.jsonl")):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            log.append({k: v for k, v in entry.items() if k not in _TIMES})
    log.sort(key=lambda e: json.dumps(e, sort_keys=True))
    counters = {k: v for k, v in sorted(stats.items())
                if k.startswith(("polite/pages/", "polite/traps/", "polite/discovery/",
                                 "polite/robots/", "item_", "response_received_count",
                                 "downloader/response_status_count/", "scheduler/enqueued",
                                 "polite/frontier/bulk_enqueued", "polite/frontier/duplicate"))}
    return _local({"pages": pages, "aliases": aliases, "fetches": fetches,
                   "access_log": log, "counters": counters}, port)


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    if os.environ.get("POLITE_GOLDEN_WRITE") or not GOLDEN.exists():
        return {}
    return dict(json.loads(GOLDEN.read_text()))


@pytest.mark.parametrize("path", ["bulk", "plain"])
@pytest_twisted.ensureDeferred
async def test_golden_crawl_keeps_what_it_stores(web_factory: Any, tmp_path: Path,
                                                golden: dict[str, Any], path: str) -> None:
    site = HowtoSite()
    web = web_factory({HOST: site})
    site.port = web.port
    spider = PageSpider if path == "bulk" else PlainRequestSpider
    result = await run_crawl(spider, {"POLITE_STATE_DIR": str(tmp_path),
                                      "JOBDIR": str(tmp_path / "job"),
                                      "POLITE_REST_PAGE": 0.01},
                             url=web.url(HOST, "/howto/index.html"))
    got = capture(tmp_path, result.stats, web.port)
    assert len(got["pages"]) >= 15, got["counters"]
    # The two ways in: URL rows in bulk, or every page a Request.
    assert ("polite/frontier/bulk_enqueued" in got["counters"]) == (path == "bulk")
    if os.environ.get("POLITE_GOLDEN_WRITE"):
        data = dict(json.loads(GOLDEN.read_text())) if GOLDEN.exists() else {}
        data[path] = got
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
        return
    assert path in golden, f"{GOLDEN} has no {path!r} crawl: write it (see the module doc)"
    want = golden[path]
    for part in ("counters", "access_log", "aliases", "fetches", "pages"):
        assert got[part] == want[part], f"{part} differ from {GOLDEN.name} ({path} path)"
