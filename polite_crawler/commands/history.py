"""``scrapy history ORIGIN``: what was fetched from a site and when, across every job.

Read from the access logs (``access-*.jsonl`` in the state directory, rotated parts
included, plus POLITE_ACCESS_LOG and ``--log FILE``): one line per exchange with its
time, URL, status, bytes, duration, the rest before it (measured from the end of the
previous exchange with the site, in whatever job, and the rest the crawler had set),
and the verdict. What a site owner asks for.
"""

from __future__ import annotations

import json
import math
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.commands import ScrapyCommand

from polite_crawler.commands._base import (
    CommandError,
    add_common,
    emit,
    fail,
    parse_origin,
    state_dir_of,
    with_defaults,
)

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator


def parse_date(text: str, option: str = "--since") -> float:
    """An ISO 8601 date or time (UTC unless it says otherwise), or epoch seconds."""
    raw = text.strip()
    try:
        seconds = float(raw)
    except ValueError:
        pass
    else:
        if math.isfinite(seconds):
            return seconds
    try:
        stamp = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError as exc:
        raise CommandError(f"{option} {text!r}: write a date as 2026-12-01 or "
                           "2026-12-01T10:00:00Z") from exc
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


def log_files(state: Path, extra: list[str], configured: str | None) -> list[Path]:
    files = sorted(state.glob("access-*.jsonl"))
    for raw in [*([configured] if configured else []), *extra]:
        path = Path(raw).expanduser()
        if path.is_file():
            files.append(path)
            files.extend(sorted(path.parent.glob(f"{path.name.removesuffix('.jsonl')}.*.jsonl")))
        elif raw in extra:
            raise CommandError(f"--log {raw}: no such file")
    seen: set[Path] = set()
    out = []
    for f in files:
        if f.resolve() not in seen:
            seen.add(f.resolve())
            out.append(f)
    return out


def read_lines(files: list[Path], origin: str | None = None) -> Iterator[dict[str, Any]]:
    """Every parsed line (of ``origin`` only, if given), each with its ``job``."""
    needle = f'"{origin}"' if origin else None
    for path in files:
        job = path.name.removesuffix(".jsonl")
        with path.open(encoding="utf-8", errors="replace") as fh:
            for text in fh:
                if needle is not None and needle not in text:
                    continue
                try:
                    line = json.loads(text)
                except ValueError:
                    continue  # a line cut by a crash
                if not isinstance(line, dict):
                    continue
                if origin is not None and line.get("origin") != origin:
                    continue
                line["job"] = job
                yield line


def _start(line: dict[str, Any]) -> float:
    return float(line.get("sent") or line.get("done") or 0.0)


def history(files: list[Path], origin: str, since: float | None,
            until: float | None) -> list[dict[str, Any]]:
    lines = sorted(read_lines(files, origin), key=_start)
    out: list[dict[str, Any]] = []
    previous: dict[str, Any] | None = None
    for line in lines:
        sent = line.get("sent")
        entry = {
            "time": _start(line), "url": line.get("url"), "status": line.get("status"),
            "bytes": line.get("bytes"), "duration": line.get("duration"),
            "verdict": line.get("verdict"), "robots": bool(line.get("robots")),
            "job": line["job"], "saved": line.get("saved"), "sent": sent is not None,
            "rest_before": None, "rest_rule": None,
        }
        if sent is not None and previous is not None and previous.get("done") is not None:
            entry["rest_before"] = round(float(sent) - float(previous["done"]), 3)
            entry["rest_rule"] = previous.get("rest")
        if sent is not None:
            previous = line
        if (since is None or entry["time"] >= since) and (until is None or entry["time"] < until):
            out.append(entry)
    return out


def _fmt_time(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}"


def history_text(origin: str, entries: list[dict[str, Any]], files: int) -> str:
    sent = [e for e in entries if e["sent"]]
    total = sum(int(e["bytes"] or 0) for e in sent)
    statuses: dict[str, int] = {}
    for e in sent:
        key = str(e["status"]) if e["status"] is not None else "error"
        statuses[key] = statuses.get(key, 0) + 1
    lines = [f"{origin}: {len(sent)} requests from {files} access logs"
             + (f", {_fmt_time(entries[0]['time'])} to {_fmt_time(entries[-1]['time'])} UTC"
                if entries else ""),
             f"  statuses: {', '.join(f'{k} x{v}' for k, v in sorted(statuses.items())) or '-'};"
             f" {total} bytes received", ""]
    lines.append(f"{'time (UTC)':<23} {'status':>6} {'bytes':>9} {'duration':>8} "
                 f"{'rest':>14}  {'verdict':<22} url")
    for e in entries:
        rest = "-"
        if e["rest_before"] is not None:
            rule = e["rest_rule"]
            rest = f"{e['rest_before']:.2f}" + (f" ({rule:.2f})" if isinstance(rule, float | int)
                                                else "")
        status = e["status"] if e["status"] is not None else ("-" if not e["sent"] else "error")
        duration = f"{e['duration']:.3f}" if isinstance(e["duration"], float | int) else "-"
        lines.append(f"{_fmt_time(e['time']):<23} {status!s:>6} {int(e['bytes'] or 0):>9} "
                     f"{duration:>8} {rest:>14}  {e['verdict'] or '-':<22} {e['url']}")
    lines.append("")
    lines.append("rest: seconds from the end of the previous exchange with the site to this "
                 "one's start (in brackets: the rest the crawler had set)")
    return "\n".join(lines)


class Command(ScrapyCommand):
    requires_project = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "ORIGIN [--since DATE] [--until DATE]"

    def short_desc(self) -> str:
        return "What was fetched from a site and when, from the access logs of every job"

    def long_desc(self) -> str:
        return ("Every exchange with ORIGIN (scheme://host[:port]) in the access logs of "
                "every job: time, URL, status, bytes, duration, the rest before it and the "
                "verdict. --since/--until limit it to a period (ISO 8601 dates, UTC).")

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        add_common(parser)
        parser.add_argument("--since", metavar="DATE", help="from this date or time (UTC)")
        parser.add_argument("--until", metavar="DATE", help="before this date or time (UTC)")
        parser.add_argument("--log", action="append", default=[], metavar="FILE",
                            help="another access log to read (repeatable)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        settings = with_defaults(self.settings)
        try:
            if len(args) != 1:
                raise CommandError("name one origin, e.g. scrapy history https://example.org")
            origin = parse_origin(args[0])
            since = parse_date(opts.since) if opts.since else None
            until = parse_date(opts.until, "--until") if opts.until else None
            state = state_dir_of(settings, opts.state_dir)
            files = log_files(state, opts.log, settings.get("POLITE_ACCESS_LOG") or None)
            if not files:
                raise CommandError(f"no access log in {state} (access-*.jsonl)")
            entries = history(files, origin, since, until)
            if not entries and not any(True for _ in read_lines(files, origin)):
                raise CommandError(f"no exchange with {origin} in {len(files)} access logs "
                                   "(check the origin: scheme, host and port)")
        except CommandError as exc:
            fail("history", str(exc))
            return
        emit(opts, {"origin": origin, "files": [str(f) for f in files], "since": since,
                    "until": until, "exchanges": entries},
             history_text(origin, entries, len(files)))
