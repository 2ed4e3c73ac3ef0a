"""``make demo``: crawl the bundled demo web and say what happened, host by host.

``python -m demo`` starts the demo web (:mod:`demo.web.demo`)
in this process, runs ``scrapy crawl site -a urls=<its hosts>`` as a child process
with the project's settings and short loopback rests, stops the demo web, and
prints a summary. Every figure in it comes from a record: the demo web's own
request log (what the sites saw), the crawler's access log, its final stats
(POLITE_STATS_FILE), its feed export and its page store. A record the crawler did
not write is reported as missing, never filled in. The exit status is not zero
when the crawl failed, timed out, or never reached the demo web.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from demo.web.demo import DEMO_HOSTS, FULL, SMALL, DemoScale, demo_web, set_bot_page
from demo.web.server import LogEntry, Req, overlaps
from polite_crawler.defaults import DEMO_PORT

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from demo.web.server import TestWeb

# Loopback rests: the same rules with small numbers, so the demo ends in about a minute.
DEMO_SETTINGS: dict[str, Any] = {
    "POLITE_REST_PAGE": 0.2,
    "POLITE_REST_API": 0.1,
    "POLITE_JITTER": 0.25,  # up to 0.05 s extra
    "POLITE_BACKOFF_MAX": 10.0,  # backoff without Retry-After; the server's own waits still hold
    "POLITE_ROBOTS_RETRY_MIN": 2.0,  # first retry of an unreachable robots.txt (doubles)
    "POLITE_CONTACT": "demo-operator@example.org",
    "LOG_LEVEL": "INFO",
}
CLOSE_AFTER = 90  # CLOSESPIDER_TIMEOUT: the demo's bound if a trap is not contained
HARD_TIMEOUT = 115  # then the crawl process is stopped


@dataclass
class CrawlRun:
    """What the child ``scrapy crawl`` did, as far as the runner saw it."""

    returncode: int | None = None
    seconds: float = 0.0
    timed_out: bool = False
    interrupted: bool = False
    command: list[str] = field(default_factory=list)


@dataclass
class Records:
    """Everything the summary is computed from."""

    web_log: list[LogEntry]
    robots: dict[str, tuple[int, str]]  # address -> (robots.txt status, body)
    access_log: list[dict[str, Any]] | None  # None: no access log was written
    stats: dict[str, Any] | None  # the stats file's content, None when missing
    items: list[dict[str, Any]] | None  # the feed export, None when missing
    store: dict[str, int] | None  # pages in the page store by host, None when unknown
    store_note: str
    token: str
    port: int
    # origin -> reason, from the frontier's "Stopped <origin> for this run (<reason>)"
    stops: dict[str, str] = field(default_factory=dict)


_STOPPED = re.compile(r"Stopped (\S+) for this run \(([^)]+)\)")


def read_stops(log: Path) -> dict[str, str]:
    """Origins the frontier stopped for the run, and why, from the crawl log."""
    if not log.is_file():
        return {}
    found: dict[str, str] = {}
    for match in _STOPPED.finditer(log.read_text(encoding="utf-8", errors="replace")):
        found[match.group(1)] = match.group(2)
    return found


# --- the records ------------------------------------------------------------------------

def read_jsonl(path: Path) -> list[dict[str, Any]] | None:
    """JSON lines of ``path`` (a broken last line is skipped), or None if it does not exist."""
    if not path.is_file():
        return None
    out = []
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.strip()
        if not line:
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def read_stats(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


_URL_COLUMNS = ("canonical_url", "url", "final_url", "requested_url")


def store_counts(db: Path) -> tuple[dict[str, int] | None, str]:
    """Pages in the SQLite page store, by host, and which table was read.

    The page store's schema belongs to polite_crawler.store; this reads the table
    whose name says pages and which has a URL column, and says so.
    """
    if not db.is_file():
        return None, f"no page store at {db}"
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as exc:
        return None, f"page store {db} unreadable: {exc}"
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        for table in sorted(tables, key=lambda t: (t != "pages", "page" not in t, t)):
            if "page" not in table:
                continue
            cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            col = next((c for c in _URL_COLUMNS if c in cols), None)
            if col is None:
                continue
            counts: Counter[str] = Counter()
            for (url,) in conn.execute(f'SELECT "{col}" FROM "{table}"'):
                counts[urlsplit(str(url)).hostname or "?"] += 1
            return dict(counts), f"table {table!r} of {db}"
        return None, f"no table of pages in {db} (tables: {', '.join(tables) or 'none'})"
    except sqlite3.Error as exc:
        return None, f"page store {db} unreadable: {exc}"
    finally:
        conn.close()


def robots_answers(web: TestWeb) -> dict[str, tuple[int, str]]:
    """What each demo host answers for /robots.txt (asked of the site objects directly)."""
    out = {}
    for address, site in web.sites.items():
        resp = site.handle(Req("GET", "/robots.txt", {}, address, web.port))
        body = resp.body if isinstance(resp.body, bytes) else b"".join(resp.body)
        out[address] = (resp.status, body.decode("utf-8", "replace"))
    return out


# --- per-host figures -------------------------------------------------------------------

@dataclass
class HostFigures:
    address: str
    name: str
    scenario: str
    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    gap_min: float | None = None
    gap_median: float | None = None
    span: float | None = None  # first request to last answer, seconds
    after_refusal: float | None = None  # shortest rest after a 429 or 503 answer
    overlaps: int = 0
    before_robots: int = 0
    disallowed: int = 0
    crawl_delay: float | None = None  # the host's Crawl-delay for the token
    under_crawl_delay: int = 0  # gaps shorter than that Crawl-delay
    identified: int = 0  # requests carrying the crawler's token and +URL
    logged: int | None = None  # access log lines (None: no access log)
    verdicts: Counter[str] = field(default_factory=Counter)
    stopped: str = ""
    items: int | None = None
    stored: int | None = None


def _robots_rules(status: int, body: str, token: str) -> tuple[Any, float | None]:
    """(url -> allowed, Crawl-delay) from a robots.txt answer (RFC 9309 section 2.3.1)."""
    if 200 <= status < 300:
        from protego import Protego

        rules = Protego.parse(body)
        delay = rules.crawl_delay(token)
        return (lambda url: rules.can_fetch(url, token)), (float(delay) if delay else None)
    if 400 <= status < 500:
        return (lambda url: True), None
    return (lambda url: False), None  # 5xx or unreachable: the whole site is disallowed


def _stop_reason(lines: Sequence[dict[str, Any]]) -> str:
    """Why the crawler stopped or held back a host, from its own access log lines."""
    for line in reversed(lines):
        verdict = str(line.get("verdict") or "")
        if any(word in verdict for word in ("stop", "breaker", "park")):
            return verdict
    robots = [ln for ln in lines if ln.get("robots")]
    answered = [ln for ln in robots
                if isinstance(ln.get("status"), int) and 200 <= ln["status"] < 500
                and ln["status"] != 429]
    if robots and not answered:
        statuses = Counter(str(ln.get("status") or ln.get("verdict")) for ln in robots)
        shown = ", ".join(f"{s} x{n}" for s, n in statuses.items())
        return f"robots.txt unavailable ({shown}): held back"
    return ""


def host_figures(rec: Records) -> list[HostFigures]:
    out = []
    for host in DEMO_HOSTS:
        fig = HostFigures(host.address, host.name, host.scenario)
        entries = sorted((e for e in rec.web_log if e.host == host.address),
                         key=lambda e: e.started)
        fig.requests = len(entries)
        fig.statuses = Counter(e.status for e in entries)
        gaps = [b.started - a.finished for a, b in itertools.pairwise(entries)]
        if gaps:
            fig.gap_min, fig.gap_median = min(gaps), statistics.median(gaps)
        if entries:
            fig.span = max(e.finished for e in entries) - entries[0].started
        after = [b.started - a.finished for a, b in itertools.pairwise(entries)
                 if a.status in (429, 503)]
        fig.after_refusal = min(after) if after else None
        fig.overlaps = len(overlaps(entries))
        robots_done = next((e.finished for e in entries if e.path == "/robots.txt"), None)
        status, body = rec.robots.get(host.address, (404, ""))
        allowed, fig.crawl_delay = _robots_rules(status, body, rec.token)
        if fig.crawl_delay is not None:
            fig.under_crawl_delay = sum(1 for g in gaps if g < fig.crawl_delay)
        for e in entries:
            if e.path == "/robots.txt":
                continue
            if robots_done is None or e.started < robots_done:
                fig.before_robots += 1
            if not allowed(f"http://{e.host}:{e.port}{e.path}"):
                fig.disallowed += 1
        for e in entries:
            ua = e.headers.get("user-agent", "")
            if ua.startswith(f"{rec.token}/") and "(+http" in ua:
                fig.identified += 1
        if rec.access_log is not None:
            lines = [ln for ln in rec.access_log if _host_of(ln) == host.address]
            fig.logged = len(lines)
            fig.verdicts = Counter(str(ln.get("verdict")) for ln in lines)
            fig.stopped = _stop_reason(lines)
        origin = f"http://{host.address}:{rec.port}"
        if origin in rec.stops:
            why = f"stopped: {rec.stops[origin]}"
            fig.stopped = f"{why}; {fig.stopped}" if fig.stopped else why
        if rec.items is not None:
            fig.items = sum(1 for it in rec.items if _host_of(it) == host.address)
        if rec.store is not None:
            fig.stored = rec.store.get(host.address, 0)
        out.append(fig)
    return out


def _host_of(record: dict[str, Any]) -> str:
    for key in ("origin", "url", "final_url", "canonical_url"):
        value = record.get(key)
        if isinstance(value, str) and value:
            return urlsplit(value).hostname or ""
    return ""


# --- the summary ------------------------------------------------------------------------

def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    rows = [list(r) for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join([line, rule, *body])


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _statuses(counts: Counter[int]) -> str:
    if not counts:
        return "-"
    return " ".join(f"{s if s > 0 else 'reset'}x{n}" for s, n in sorted(counts.items()))


def _opt(value: int | None) -> str:
    return "n/a" if value is None else str(value)


def summary(rec: Records, run: CrawlRun, out: Path) -> str:
    figs = host_figures(rec)
    stats = (rec.stats or {}).get("stats", {}) if rec.stats else {}
    reason = (rec.stats or {}).get("reason") if rec.stats else None
    parts = []
    status = (f"exit code {run.returncode}" if run.returncode is not None else "no exit code")
    if run.timed_out:
        status += f", stopped by the demo after {HARD_TIMEOUT} s"
    if run.interrupted:
        status += ", interrupted"
    parts.append(
        f"Demo crawl of {len(DEMO_HOSTS)} hosts on port {rec.port}: {run.seconds:.1f} s, "
        f"scrapy {status}, close reason: {reason or 'unknown (no stats file)'}."
    )
    if reason == "closespider_timeout":
        parts.append(
            "  (closespider_timeout: the demo's own time limit closed the crawl while requests\n"
            "  were still queued or waiting, e.g. in a trap or behind a robots.txt outage.)")
    total = len(rec.web_log)
    uas = Counter(e.headers.get("user-agent", "(none)") for e in rec.web_log)
    froms = Counter(e.headers.get("from", "(none)") for e in rec.web_log)
    for label, counts in (("User-Agent", uas), ("From", froms)):
        shown = "; ".join(f"{v!r} on {n} of {total}" for v, n in counts.most_common(3))
        parts.append(f"{label} seen by the demo web: {shown or '(no requests)'}")

    parts.append("\nWhat each site saw (the demo web's own request log): traffic")
    parts.append(_table(
        ["host", "site", "requests", "statuses", "span s", "rest min / median s",
         "rest after 429/503 min s"],
        [[f.address, f.name, str(f.requests), _statuses(f.statuses), _secs(f.span),
          f"{_secs(f.gap_min)} / {_secs(f.gap_median)}", _secs(f.after_refusal)]
         for f in figs]))
    parts.append(
        "  span = first request to last answer; rest = gap from the end of one answer to the\n"
        "  start of the next request to that host."
    )
    parts.append("\nWhat each site saw: the rules (each count should be 0, identified all)")
    parts.append(_table(
        ["host", "site", "overlaps", "before robots", "disallowed", "under Crawl-delay",
         "identified"],
        [[f.address, f.name, str(f.overlaps), str(f.before_robots), str(f.disallowed),
          "-" if f.crawl_delay is None else f"{f.under_crawl_delay} (<{f.crawl_delay:g} s)",
          f"{f.identified}/{f.requests}"]
         for f in figs]))
    parts.append(
        "  overlaps = requests in flight at the same time on one host; before robots = pages\n"
        "  asked before robots.txt was answered; disallowed = requests robots.txt forbids the\n"
        "  crawler's token (all but robots.txt when robots.txt answered 5xx); under Crawl-delay\n"
        "  = rests shorter than the host's Crawl-delay for the token; identified = requests\n"
        "  with the token and +URL in the User-Agent."
    )

    parts.append("\nWhat the crawler did (its access log, feed export and page store):")
    parts.append(_table(
        ["host", "scenario", "logged", "pages exported", "pages stored",
         "stopped or held back (why)"],
        [[f.address, f.scenario, _opt(f.logged), _opt(f.items), _opt(f.stored), f.stopped or "-"]
         for f in figs]))
    for f in figs:
        if f.verdicts:
            shown = ", ".join(f"{v} x{n}" for v, n in f.verdicts.most_common())
            parts.append(f"  verdicts {f.address} ({f.name}): {shown}")

    missing = []
    if rec.access_log is None:
        missing.append(f"the crawler wrote no access log at {out / 'access.jsonl'}")
    if rec.items is None:
        missing.append(f"no feed export at {out / 'pages.jsonl'}")
    if rec.store is None:
        missing.append(rec.store_note)
    if rec.stats is None:
        missing.append(f"no stats file at {out / 'stats.json'}")
    for m in missing:
        parts.append(f"  missing: {m}")

    if stats:
        polite = {k: v for k, v in stats.items() if k.startswith("polite/")}
        keys = ["downloader/request_count", "downloader/response_count", "item_scraped_count",
                "retry/count", "log_count/WARNING", "log_count/ERROR", "elapsed_time_seconds"]
        parts.append("\nCrawler stats:")
        for k in keys:
            if k in stats:
                parts.append(f"  {k}: {stats[k]}")
        for k in sorted(polite):
            parts.append(f"  {k}: {polite[k]}")
        if not polite:
            parts.append("  (no polite/* counters in the stats)")

    parts.append("\nWhere things are:")
    store_line = rec.store_note if rec.store is not None else "(no page store found)"
    for label, value in (
        ("stored pages (page store)", store_line),
        ("pages as JSON lines (feed export)", str(out / "pages.jsonl")),
        ("crawler's access log", str(out / "access.jsonl")),
        ("demo web's request log", str(out / "web-log.jsonl")),
        ("crawl log", str(out / "crawl.log")),
        ("final stats", str(out / "stats.json")),
    ):
        parts.append(f"  {label:36} {value}")
    return "\n".join(parts)


# --- running it -------------------------------------------------------------------------

def demo_settings(out: Path, port: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    settings = dict(DEMO_SETTINGS)
    settings.update({
        "POLITE_BOT_URL": f"http://127.0.0.1:{port}/bot/",
        "POLITE_STATE_DIR": str(out / "state"),
        "POLITE_ACCESS_LOG": str(out / "access.jsonl"),
        "POLITE_STATS_FILE": str(out / "stats.json"),
        "LOG_FILE": str(out / "crawl.log"),
        "CLOSESPIDER_TIMEOUT": CLOSE_AFTER,
    })
    settings.update(extra or {})
    return settings


def crawl_command(hosts_file: Path, feed: Path, settings: dict[str, Any]) -> list[str]:
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"urls={hosts_file}",
           "-O", str(feed)]
    for name, value in settings.items():
        cmd += ["-s", f"{name}={value}"]
    return cmd


def _stop(proc: subprocess.Popen[bytes], grace: float) -> int:
    """Give the crawl ``grace`` seconds, then SIGTERM (Scrapy closes cleanly), then SIGKILL."""
    try:
        return proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.terminate()
    try:
        return proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def run_crawl(cmd: list[str], web: TestWeb, timeout: float, quiet: bool = False) -> CrawlRun:
    """Run the crawl child process; it is always gone when this returns."""
    run = CrawlRun(command=cmd)
    env = dict(os.environ)
    env.setdefault("SCRAPY_SETTINGS_MODULE", "polite_crawler.settings")
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL)
    try:
        while run.returncode is None:
            try:
                run.returncode = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - start
                if not quiet:
                    print(f"  {elapsed:5.0f} s  {len(web.log):5d} requests served", flush=True)
                if elapsed > timeout:
                    run.timed_out = True
                    run.returncode = _stop(proc, 0)
    except KeyboardInterrupt:
        # From a terminal the crawl got the same SIGINT and is closing already.
        run.interrupted = True
        run.returncode = _stop(proc, 5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        run.seconds = time.monotonic() - start
    return run


def write_web_log(entries: Sequence[LogEntry], path: Path) -> None:
    with path.open("w", encoding="utf-8") as f:
        for e in sorted(entries, key=lambda e: e.started):
            f.write(json.dumps({
                "started": round(e.started, 6), "finished": round(e.finished, 6),
                "host": e.host, "port": e.port, "method": e.method, "path": e.path,
                "status": e.status, "bytes": e.bytes_sent,
                "user_agent": e.headers.get("user-agent"), "from": e.headers.get("from"),
            }) + "\n")


def run_demo(
    out: Path,
    *,
    port: int = DEMO_PORT,
    scale: DemoScale = FULL,
    extra: dict[str, Any] | None = None,
    keep: bool = False,
    timeout: float = HARD_TIMEOUT,
    quiet: bool = False,
) -> tuple[int, str]:
    """Run the whole demo; returns (exit status, summary text)."""
    from polite_crawler.botpage import load_settings, render_bot_page

    out = out.resolve()
    if not keep:
        shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("access.jsonl", "stats.json", "pages.jsonl", "crawl.log"):
        (out / name).unlink(missing_ok=True)

    token = load_settings(extra).get("POLITE_BOT_NAME")
    web = demo_web(port, scale, token)
    try:
        web.start()
    except OSError as exc:
        web.stop()
        return 2, (
            f"Cannot serve the demo web on 127.0.0.1-127.0.0.{len(DEMO_HOSTS)} "
            f"port {port}: {exc}.\n"
            "If the port is taken, use another: python -m demo --port 8901 "
            "(or POLITE_DEMO_PORT=8901 make demo).\n"
            "On macOS only 127.0.0.1 exists by default; add the others with\n"
            "  for i in 2 3 4 5 6; do sudo ifconfig lo0 alias 127.0.0.$i up; done"
        )
    try:
        settings = demo_settings(out, web.port, extra)
        # The bot page the crawler's +URL points at, from the crawl's own settings.
        set_bot_page(web, render_bot_page(load_settings(settings)).encode())
        hosts_file = out / "hosts.txt"
        hosts_file.write_text("".join(f"{web.url(h.address)}\n" for h in DEMO_HOSTS),
                              encoding="utf-8")
        if not quiet:
            print(f"Demo web on {', '.join(h.address for h in DEMO_HOSTS)} port {web.port}; "
                  f"crawling (log: {out / 'crawl.log'}) ...", flush=True)
        run = run_crawl(crawl_command(hosts_file, out / "pages.jsonl", settings), web,
                        timeout, quiet)
        robots = robots_answers(web)
    finally:
        web.stop()
    write_web_log(web.log, out / "web-log.jsonl")
    store, note = store_counts(out / "state" / "polite.sqlite3")
    rec = Records(
        web_log=list(web.log),
        robots=robots,
        access_log=read_jsonl(out / "access.jsonl"),
        stats=read_stats(out / "stats.json"),
        items=read_jsonl(out / "pages.jsonl"),
        store=store,
        store_note=note,
        token=token,
        port=web.port,
        stops=read_stops(out / "crawl.log"),
    )
    text = summary(rec, run, out)
    from polite_crawler.commands.report import demo_report  # the crawl report (scrapy report)

    text += f"\n  {'crawl report (HTML, scrapy report)':36} {demo_report(out)}"
    failed = []
    if run.returncode != 0:
        failed.append(f"the crawl exited with {run.returncode}")
    if run.timed_out:
        failed.append("the crawl did not finish in time")
    if run.interrupted:
        failed.append("the demo was interrupted")
    if rec.stats is None:
        failed.append("the crawl wrote no stats (it did not close normally)")
    if not rec.web_log:
        failed.append("the demo web received no request")
    if failed:
        text += "\n\nDEMO FAILED: " + "; ".join(failed) + f". See {out / 'crawl.log'}."
        return 1, text
    return 0, text


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m demo",
        description="Crawl the bundled demo web on loopback and summarise it per host.")
    parser.add_argument("--port", type=int,
                        default=int(os.environ.get("POLITE_DEMO_PORT") or DEMO_PORT))
    parser.add_argument("--out", type=Path, default=Path("demo-output"))
    parser.add_argument("--keep", action="store_true",
                        help="keep the state of the last run: the crawl becomes a recrawl")
    parser.add_argument("--small", action="store_true", help="the tests' small demo web")
    parser.add_argument("--timeout", type=float, default=HARD_TIMEOUT)
    parser.add_argument("-s", "--set", action="append", default=[], metavar="NAME=VALUE",
                        help="an extra crawl setting, as with scrapy crawl -s")
    args = parser.parse_args(argv)
    extra = {}
    for pair in args.set:
        name, sep, value = pair.partition("=")
        if not sep:
            parser.error(f"-s expects NAME=VALUE, got {pair!r}")
        extra[name] = value
    signal.signal(signal.SIGTERM, _interrupt)  # stop the crawl and the web as on Ctrl-C
    try:
        code, text = run_demo(args.out, port=args.port, scale=SMALL if args.small else FULL,
                              extra=extra, keep=args.keep, timeout=args.timeout)
    except Exception as exc:  # the demo web is already stopped; say why and fail
        traceback.print_exc()
        print(f"DEMO FAILED: {exc}")
        return 1
    print(text)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
