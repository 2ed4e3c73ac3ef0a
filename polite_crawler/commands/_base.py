"""What every polite_crawler command shares (not itself a command: no ScrapyCommand here)."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polite_crawler.defaults import load_defaults
from polite_crawler.policy.urls import URLError, origin_of
from polite_crawler.store.paths import ORIGINS_DB

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator

    from scrapy.settings import BaseSettings

    from polite_crawler.interfaces import StateReader

USAGE = 2  # exit status of bad input (as argparse and Scrapy use it)


class CommandError(Exception):
    """Bad input: the message is printed on one line, the exit status is 2."""


def fail(name: str, message: str, status: int = USAGE) -> None:
    """One line on stderr, then exit."""
    sys.stderr.write(f"scrapy {name}: {message}\n")
    sys.stderr.flush()
    raise SystemExit(status)


def with_defaults(settings: BaseSettings) -> BaseSettings:
    """The settings with every POLITE_* default filled in (the add-on does this for a crawl)."""
    return load_defaults(settings)


def state_dir_of(settings: BaseSettings, given: str | None = None) -> Path:
    """The crawl's shared state directory, as the crawl finds it; never created here.

    ``--state-dir``, else the setting POLITE_STATE_DIR, else the environment
    variable of that name (as :class:`~polite_crawler.extensions.jobdir.JobDirExtension`
    reads it), else ``.scrapy/polite``.
    """
    from polite_crawler.policy.jobs import state_dir_for  # the crawl's own precedence

    raw = state_dir_for(given or settings.get("POLITE_STATE_DIR") or "",
                        os.environ.get("POLITE_STATE_DIR", ""), None, Path.cwd())
    path = Path(raw or ".scrapy/polite").expanduser().resolve()
    if not path.is_dir():
        raise CommandError(
            f"no state directory at {path}: give the crawl's with --state-dir or "
            "-s POLITE_STATE_DIR=... (or the environment variable POLITE_STATE_DIR)")
    return path


def command_state_dir(settings: BaseSettings, given: str | None = None) -> Path | None:
    """:func:`state_dir_of`; on a cluster None when there is none (the cluster's state is
    in Redis and the page store), unless one was named on the command line."""
    from polite_crawler.backend import backend_of

    try:
        return state_dir_of(settings, given)
    except CommandError:
        if given or not backend_of(settings).cluster:
            raise
        return None


@contextmanager
def open_reader(settings: BaseSettings, state: Path | None) -> Iterator[StateReader]:
    """The crawl's state, read only, on the backend the settings name; a store that
    cannot be read is a :class:`CommandError`."""
    from polite_crawler.backend import backend_of
    from polite_crawler.store.reader import StateUnreadable

    try:
        reader = backend_of(settings).reader(settings, state)
    except StateUnreadable as exc:
        raise CommandError(str(exc)) from exc
    try:
        yield reader
    except StateUnreadable as exc:
        raise CommandError(str(exc)) from exc
    finally:
        reader.close()


def origins_db(state: Path, *, must_exist: bool = True) -> Path:
    path = state / ORIGINS_DB
    if must_exist and not path.is_file():
        raise CommandError(f"no origin store at {path}: no crawl has used this state directory")
    return path


def parse_origin(text: str) -> str:
    """``scheme://host[:port]`` of an origin or URL given on the command line."""
    raw = text.strip()
    if "://" not in raw:
        raise CommandError(f"{text!r} is not an http(s) origin (e.g. https://example.org)")
    scheme = raw.split("://", 1)[0].lower()
    if scheme not in ("http", "https"):
        raise CommandError(f"{text!r} is not an http(s) origin (e.g. https://example.org)")
    try:
        origin = origin_of(raw)
    except (ValueError, URLError) as exc:
        raise CommandError(f"{text!r} is not an http(s) origin: {exc}") from exc
    if origin.endswith("://"):
        raise CommandError(f"{text!r} names no host")
    return origin


def add_common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("polite_crawler")
    group.add_argument("--json", action="store_true", help="print JSON instead of text")
    group.add_argument("--state-dir", metavar="DIR",
                       help="the crawl's POLITE_STATE_DIR (default: the setting, the "
                            "environment variable, .scrapy/polite)")


def emit(opts: argparse.Namespace, data: Any, text: str) -> None:
    if getattr(opts, "json", False):
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def when(ts: float | None) -> str:
    """An epoch time as UTC ISO 8601 (``-`` for none)."""
    if ts is None or ts <= 0:
        return "-"
    if ts >= 1e17:
        return "never (parked)"
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts)) + (
        f" ({_ago(ts)})" if abs(ts - time.time()) < 10 * 86400 else "")


def _ago(ts: float) -> str:
    import time

    delta = ts - time.time()
    word = "in" if delta > 0 else "ago"
    secs = abs(delta)
    if secs < 120:
        span = f"{secs:.1f} s"
    elif secs < 7200:
        span = f"{secs / 60:.0f} min"
    else:
        span = f"{secs / 3600:.1f} h"
    return f"in {span}" if word == "in" else f"{span} ago"
