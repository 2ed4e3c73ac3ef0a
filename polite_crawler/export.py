"""Export the page store; ``--ai-input`` holds back what sites refused to AI readers.

    python -m polite_crawler.export --ai-input pages.jsonl [--state-dir DIR] [--store URI]

One JSON line per stored page: ``canonical_url``, ``url``, ``final_url``,
``title``, ``text``, ``language``, ``fetched_at``, ``near_duplicate_of``,
``signals``. For an AI-input export a page whose content signals refuse AI input
(Cloudflare ``Content-Signal: ai-input=no``, IETF AIPREF ``ai-use=n``, from
robots.txt or a response header) is kept, but without its title and text, and
says why in ``withheld``: a page that refuses AI input is kept, but its text is
held back from an AI reader (the site's signal is its owner's word). A ``noindex`` page
never carries content in any export. ``ai-train=no`` is recorded in
``signals`` only: the crawler trains no model.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from polite_crawler.backend import backend_of
from polite_crawler.backend import page_backend_factory as backend_factory

if TYPE_CHECKING:
    from collections.abc import Iterable

    from polite_crawler.store.pages import PageRecord


@dataclass
class ExportCounts:
    pages: int = 0
    withheld: int = 0


def withheld_reason(rec: PageRecord, *, ai_input: bool) -> str | None:
    """Why a page's content stays out of this export (None: it goes in)."""
    if rec.noindex:
        return "noindex"
    if ai_input and (not rec.ai_input or rec.signals.get("ai_input") is False):
        return "ai-input refused"
    return None


def export_pages(pages: Iterable[PageRecord], out: IO[str], *, ai_input: bool) -> ExportCounts:
    counts = ExportCounts()
    for rec in pages:
        row: dict[str, Any] = {
            "canonical_url": rec.canonical_url, "url": rec.url, "final_url": rec.final_url,
            "fetched_at": rec.fetched_at, "language": rec.language,
            "near_duplicate_of": rec.near_duplicate_of, "signals": rec.signals,
        }
        reason = withheld_reason(rec, ai_input=ai_input)
        if reason is None:
            row["title"] = rec.title
            row["text"] = rec.text
        else:
            row["withheld"] = reason
            counts.withheld += 1
        out.write(json.dumps(row, ensure_ascii=False) + "\n")
        counts.pages += 1
    return counts


def export_store(uri: str, sqlite_path: str, out: IO[str], *, ai_input: bool) -> ExportCounts:
    backend = backend_factory(uri, sqlite_path)()
    try:
        backend.migrate()
        return export_pages(backend.iter_pages(), out, ai_input=ai_input)
    finally:
        backend.close()


def main(argv: list[str] | None = None) -> int:
    from scrapy.utils.project import get_project_settings

    from polite_crawler.defaults import load_defaults
    from polite_crawler.store.paths import state_db_path

    ap = argparse.ArgumentParser(prog="python -m polite_crawler.export", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    target = ap.add_mutually_exclusive_group(required=True)
    target.add_argument("--ai-input", metavar="FILE",
                        help="JSON lines for AI readers: refused pages without their text")
    target.add_argument("--all", metavar="FILE", help="JSON lines of every page (noindex aside)")
    ap.add_argument("--state-dir", help="POLITE_STATE_DIR of the crawls")
    ap.add_argument("--store",
                    help="POLITE_STORE (postgresql://...); default: SQLite in the state dir")
    args = ap.parse_args(argv)
    settings = load_defaults(get_project_settings())
    if args.state_dir:
        settings.set("POLITE_STATE_DIR", args.state_dir, priority="cmdline")
    if args.store is not None:
        settings.set("POLITE_STORE", args.store, priority="cmdline")
    uri = backend_of(settings).store_uri
    path = args.ai_input or args.all
    ai_input = args.ai_input is not None
    sqlite_path = str(state_db_path(settings))
    if path == "-":
        counts = export_store(uri, sqlite_path, sys.stdout, ai_input=ai_input)
    else:
        with open(path, "w", encoding="utf-8") as out:
            counts = export_store(uri, sqlite_path, out, ai_input=ai_input)
    print(f"{counts.pages} pages, text withheld from {counts.withheld}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
