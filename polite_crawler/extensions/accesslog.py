"""The crawler's own access log: one JSON line per exchange, so the operator can answer
a site owner's question about what was fetched and when.

Fields: ``sent`` and ``done`` (epoch seconds; ``sent`` is null when nothing was
sent), ``origin``, ``method``, ``url``, ``status`` (null on a network error),
``bytes`` (body bytes received, before decoding), ``duration``, ``verdict``
(``<action>:<reason>``, e.g. ``ok:200``, ``retry_later:429``,
``refused:private``), ``rest`` (seconds the origin rests after it), ``robots``
(true for robots.txt) and ``cut`` (true when the body was cut at the size cap).

Timing, status and bytes come from Scrapy's downloader signals
(``request_reached_downloader``, ``response_downloaded``,
``request_left_downloader``): the same boundaries the frontier measures a
duration between. The verdict and the rest come from the gate middleware, which
calls :meth:`AccessLog.record` once per exchange it settles; that call writes
the line. Without that call, the gate's ``meta["polite_verdict"]`` and
``meta["polite_rest"]`` are read once the gate has set them for this exchange
(checked at every downloader signal and every :data:`SWEEP_INTERVAL`). A
component that refuses a request before it is sent records it itself
(``record(request=..., verdict="refused:<reason>")``), and it is written at
once. An exchange with no verdict is written with a null one
:data:`UNRECORDED_AFTER` seconds after it ended, and at the latest when the
spider closes.

Where: POLITE_ACCESS_LOG, else ``<state dir>/access-<spider>-<UTC start>-<pid>.jsonl``
(one file per crawl). Lines are written through at once (line buffered), so a
killed crawl loses none that were complete.

Rotation and retention: a file that reaches POLITE_ACCESS_LOG_MAX_BYTES goes on in
``<name>.2.jsonl``, ``<name>.3.jsonl`` ... (a fixed POLITE_ACCESS_LOG is appended to:
what earlier crawls wrote in a part counts towards its cap, and a full part is passed
over); when a crawl opens, files ``access-*.jsonl``
of its log directory last written more than POLITE_ACCESS_LOG_KEEP_DAYS ago are
deleted (0: kept for ever). ``scrapy history`` reads them all.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.reactor import CallLaterOnce

from polite_crawler.context import polite_context
from polite_crawler.policy.urls import origin_of
from polite_crawler.store.paths import state_dir

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

FIELDS = ("sent", "done", "origin", "method", "url", "status", "bytes", "duration",
          "verdict", "rest", "robots", "cut")
UNRECORDED_AFTER = 30.0  # seconds an ended exchange waits for its verdict
SWEEP_INTERVAL = 1.0


def prune_access_logs(directory: Path, keep_days: float, now: float,
                      spare: Path | None = None) -> list[Path]:
    """Delete the access logs of ``directory`` last written more than ``keep_days`` ago;
    never ``spare`` (the crawl's own, which a fixed POLITE_ACCESS_LOG may name)."""
    if keep_days <= 0:
        return []
    removed = []
    for path in directory.glob("access-*.jsonl"):
        if spare is not None and path == spare:
            continue
        try:
            if now - path.stat().st_mtime > keep_days * 86400:
                path.unlink()
                removed.append(path)
        except OSError:
            continue
    return removed


def rotated_path(path: Path, n: int) -> Path:
    """The ``n``-th file of a rotated access log (``n`` >= 2).

    >>> rotated_path(Path("/s/access-site-1-2.jsonl"), 3).name
    'access-site-1-2.3.jsonl'
    """
    return path.with_name(f"{path.name.removesuffix('.jsonl')}.{n}.jsonl")


def access_log_path(settings: BaseSettings, spider_name: str, now: float) -> Path:
    """POLITE_ACCESS_LOG, else a new file per crawl in the state directory."""
    configured = settings.get("POLITE_ACCESS_LOG")
    if configured:
        path = Path(configured).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        return path
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{now % 1:.3f}"[1:] + "Z"
    return state_dir(settings) / f"access-{spider_name}-{stamp}-{os.getpid()}.jsonl"


@dataclass
class _Exchange:
    sent: float
    done: float | None = None
    status: int | None = None
    bytes: int = 0
    cut: bool = False
    fields: dict[str, Any] = field(default_factory=dict)
    # The gate's meta["polite_end"] when the exchange began: a retry copy carries
    # the previous attempt's verdict in its meta until the gate settles this one.
    stale_end: Any = None


class AccessLog:
    """Writes the access log; ``polite_context(crawler).access_log`` is this object."""

    def __init__(self, crawler: Crawler, clock: Callable[[], float] | None = None) -> None:
        self.crawler = crawler
        ctx = polite_context(crawler)
        self.clock = clock or ctx.clock
        self.path: Path | None = None
        self._file: IO[str] | None = None
        self._open: dict[Request, _Exchange] = {}  # reached the downloader, not yet left
        self._ended: dict[Request, _Exchange] = {}  # left, waiting for the gate's verdict
        self.lines = 0
        self.max_bytes = crawler.settings.getint("POLITE_ACCESS_LOG_MAX_BYTES")
        self._written = 0
        self._part = 1
        self._sweep: CallLaterOnce[None] = CallLaterOnce(self._sweep_ended)
        ctx.access_log = self
        connect = crawler.signals.connect
        connect(self.spider_opened, signal=signals.spider_opened)
        connect(self.spider_closed, signal=signals.spider_closed)
        connect(self.request_reached_downloader, signal=signals.request_reached_downloader)
        connect(self.response_downloaded, signal=signals.response_downloaded)
        connect(self.request_left_downloader, signal=signals.request_left_downloader)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AccessLog:
        return cls(crawler)

    # --- file ---------------------------------------------------------------

    def _ensure_open(self) -> IO[str]:
        if self._file is None:
            if self.path is None:  # once per crawl: a late line goes to the same file
                name = getattr(self.crawler.spider, "name", None) or "crawl"
                self.path = access_log_path(self.crawler.settings, name, self.clock())
            self._open_part()
            logger.info("Access log: %(path)s", {"path": str(self._part_path())})
        assert self._file is not None
        return self._file

    def _part_path(self) -> Path:
        assert self.path is not None
        return self.path if self._part == 1 else rotated_path(self.path, self._part)

    def _open_part(self) -> None:
        """Open the current part for appending, its size counted towards the cap.

        A fixed POLITE_ACCESS_LOG is appended to by every crawl: what an earlier crawl
        wrote in a part counts, and a part already full is passed over for the next.
        """
        while True:
            # Line buffered: every line reaches the OS as it is written.
            self._file = self._part_path().open("a", encoding="utf-8", buffering=1)
            self._written = self._file.tell()
            if self.max_bytes <= 0 or self._written < self.max_bytes:
                return
            self._file.close()
            self._part += 1

    def spider_opened(self, spider: Spider) -> None:
        self._ensure_open()
        assert self.path is not None
        keep = self.crawler.settings.getfloat("POLITE_ACCESS_LOG_KEEP_DAYS")
        for old in prune_access_logs(self.path.parent, keep, time.time(), spare=self.path):
            logger.info("Deleted the access log %(path)s (older than %(days)g days)",
                        {"path": str(old), "days": keep})

    def spider_closed(self, spider: Spider) -> None:
        self._sweep.cancel()
        for request in list(self._ended):
            ex = self._ended.pop(request)
            ex.fields = {**(self._gate_fields(request, ex) or {}), **ex.fields}
            self._write_exchange(request, ex)
        now = self.clock()
        for request in list(self._open):
            ex = self._open.pop(request)
            ex.done = ex.done or now
            self._write_exchange(request, ex)
        if self._file is not None:
            self._file.close()
            self._file = None

    # --- downloader signals ---------------------------------------------------

    def request_reached_downloader(self, request: Request) -> None:
        self._open[request] = _Exchange(sent=self.clock(), stale_end=request.meta.get("polite_end"))
        if self._ended:
            self._flush_settled()

    def response_downloaded(self, response: Response, request: Request) -> None:
        ex = self._open.get(request)
        if ex is not None:
            ex.status = response.status
            ex.bytes = len(response.body)
            ex.cut = "download_stopped" in response.flags

    def request_left_downloader(self, request: Request) -> None:
        ex = self._open.pop(request, None)
        if ex is None:
            return
        ex.done = self.clock()
        if ex.fields.get("verdict") is not None:
            self._write_exchange(request, ex)
        else:
            self._ended[request] = ex
        if self._ended:
            self._flush_settled()

    @staticmethod
    def _gate_fields(request: Request, ex: _Exchange) -> dict[str, Any] | None:
        """The verdict and rest the gate left on the request's meta, once it settled it."""
        meta = request.meta
        end = meta.get("polite_end")
        if end is None or end == ex.stale_end or meta.get("polite_verdict") is None:
            return None
        return {"verdict": meta["polite_verdict"], "rest": meta.get("polite_rest")}

    def _flush_settled(self) -> None:
        now = self.clock()
        for request, ex in list(self._ended.items()):
            gate = self._gate_fields(request, ex)
            if gate is not None:
                ex.fields = {**gate, **ex.fields}
            elif ex.done is not None and now - ex.done < UNRECORDED_AFTER:
                continue
            self._write_exchange(request, self._ended.pop(request))
        if self._ended:
            self._sweep.schedule(SWEEP_INTERVAL)

    def _sweep_ended(self) -> None:
        self._flush_settled()

    # --- the interface for the gate and the address guard ---------------------

    def record(self, request: Request | None = None, **fields: Any) -> None:
        """Add ``fields`` (``verdict``, ``rest``, anything else) to ``request``'s exchange
        and write its line; a request never sent is written at once with ``sent`` null.

        Fields given here win over the ones measured from the signals.
        """
        if request is not None:
            ex = self._ended.pop(request, None)
            if ex is not None:
                ex.fields.update(fields)
                self._write_exchange(request, ex)
                return
            ex = self._open.get(request)
            if ex is not None:  # the verdict came before the downloader let go
                ex.fields.update(fields)
                return
        line: dict[str, Any] = {"sent": None, "done": self.clock(), "status": None, "bytes": 0,
                                "duration": None, "verdict": None, "rest": None, "cut": False}
        if request is not None:
            line.update(self._request_fields(request))
        line.update(fields)
        self._write(line)

    # --- writing --------------------------------------------------------------

    @staticmethod
    def _request_fields(request: Request) -> dict[str, Any]:
        return {
            "origin": origin_of(request.url),
            "method": request.method,
            "url": request.url,
            "robots": bool(request.meta.get("polite_robots")),
        }

    def _write_exchange(self, request: Request, ex: _Exchange) -> None:
        done = ex.done if ex.done is not None else self.clock()
        # A request handed out ahead of its time reached the downloader before it was
        # sent: the handler's time of sending (an earlier attempt's is older still).
        sent = max(ex.sent, float(request.meta.get("polite_sent") or 0.0))
        line: dict[str, Any] = {
            "sent": round(sent, 6),
            "done": round(done, 6),
            **self._request_fields(request),
            "status": ex.status,
            "bytes": ex.bytes,
            "duration": round(max(done - sent, 0.0), 6),
            "verdict": None,
            "rest": None,
            "cut": ex.cut,
        }
        saved = request.meta.get("polite_saved_bytes")
        if ex.status == 304 and isinstance(saved, int):
            # The body the 304 spared the site (the stored copy's size).
            line["saved"] = saved
        line.update(ex.fields)
        self._write(line)

    def _write(self, line: dict[str, Any]) -> None:
        ordered = {k: line.get(k) for k in FIELDS}
        ordered.update({k: v for k, v in line.items() if k not in ordered})
        rest = ordered.get("rest")
        if isinstance(rest, float):
            ordered["rest"] = round(rest, 6)
        text = json.dumps(ordered, separators=(",", ":"), default=str) + "\n"
        out = self._ensure_open()
        size = len(text.encode("utf-8"))
        while self.max_bytes > 0 and self._written and self._written + size > self.max_bytes:
            out.close()  # rotation: the next part of this crawl's log with room for the line
            self._part += 1
            self._open_part()
            assert self._file is not None
            out = self._file
        out.write(text)
        self._written += size
        self.lines += 1
        stats = self.crawler.stats
        if stats is not None:
            stats.inc_value("polite/accesslog/lines")


def read_access_log(path: str | Path) -> list[dict[str, Any]]:
    """The lines of an access log, parsed (for tests and tools)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
