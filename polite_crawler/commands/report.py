"""``scrapy report [JOB|--all] -o report.html``: one self-contained HTML report of a crawl.

Built from the records only: the access logs (every exchange), the origin store
(stops, robots.txt outcome) and the opt-out list. A per-site table (requests, pages,
statuses, bytes, bytes a 304 saved, median and p90 rest, robots.txt outcome, stopped
and why) and plots rendered by matplotlib to inline SVG (no script, no network):
requests over time, rests per site against the rule, the status mix, a timeline of
a few sites, and revisit savings.

JOB is an access log (a path, its name, or a unique part of it: crawls are named
``access-<spider>-<UTC start>-<pid>``), or a job id / JOBDIR name a job registered
with the opt-out list (mapped to its process's log). No JOB: the latest crawl.
``--all``: every access log of the state directory.
"""

from __future__ import annotations

import html
import io
import ipaddress
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.commands import ScrapyCommand

from polite_crawler.backend import backend_of
from polite_crawler.commands._base import (
    CommandError,
    add_common,
    emit,
    fail,
    open_reader,
    state_dir_of,
    with_defaults,
)
from polite_crawler.commands.history import log_files, read_lines
from polite_crawler.policy.urls import host_of_origin
from polite_crawler.policy.verdicts import describe_stop

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

    from scrapy.settings import BaseSettings

    from polite_crawler.interfaces import StateReader

# --- the figures ---------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) by linear interpolation; None for no values.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 0.5), percentile([5.0], 0.9), percentile([], 0.5)
    (2.5, 5.0, None)
    """
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def status_class(line: dict[str, Any]) -> str:
    if line.get("sent") is None:
        return "held" if str(line.get("verdict") or "").startswith("held:") else "refused"
    status = line.get("status")
    if status is None:
        return "error"
    if status == 304:
        return "304"
    return f"{int(status) // 100}xx"


@dataclass
class Site:
    origin: str
    lines: list[dict[str, Any]] = field(default_factory=list)
    rests: list[float] = field(default_factory=list)  # measured: end of one to start of next
    rules: list[float] = field(default_factory=list)  # the rest the crawler set before each
    statuses: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    pages: int = 0
    bytes: int = 0
    saved: int = 0
    refused: int = 0
    # Handed out, then not sent (a cluster worker that no longer held the origin:
    # held:lease_lapsed; the process out of file descriptors: held:descriptors_exhausted);
    # the row went back to the queue, not refused.
    held: int = 0
    robots: str = "-"
    stopped: str | None = None
    here: bool = True  # False: known only to the cluster's shared state (another worker's)

    def row(self) -> dict[str, Any]:
        return {
            "origin": self.origin, "requests": self.requests, "pages": self.pages,
            "statuses": dict(sorted(self.statuses.items())), "bytes": self.bytes,
            "saved_by_304": self.saved, "refused": self.refused, "held": self.held,
            "rest_median": percentile(self.rests, 0.5), "rest_p90": percentile(self.rests, 0.9),
            "rule_median": percentile(self.rules, 0.5), "robots": self.robots,
            "stopped": self.stopped, "here": self.here,
        }


def build_sites(lines: list[dict[str, Any]]) -> dict[str, Site]:
    sites: dict[str, Site] = {}
    previous: dict[str, dict[str, Any]] = {}
    for line in sorted(lines, key=lambda x: float(x.get("sent") or x.get("done") or 0)):
        origin = str(line.get("origin") or "")
        site = sites.setdefault(origin, Site(origin))
        site.lines.append(line)
        if line.get("sent") is None:
            verdict = str(line.get("verdict") or "")
            if verdict.startswith("held:"):
                site.held += 1
                site.statuses["held"] += 1
                continue
            site.refused += 1
            site.statuses["refused"] += 1
            if verdict == "refused:opted_out":
                site.stopped = "opted out (scrapy forget)"
            continue
        site.requests += 1
        cls = status_class(line)
        site.statuses[cls if cls != "304" else "304"] += 1
        site.bytes += int(line.get("bytes") or 0)
        site.saved += int(line.get("saved") or 0)
        status = line.get("status")
        if line.get("robots"):
            site.robots = _robots_outcome(status)
        elif isinstance(status, int) and (200 <= status < 300 or status == 304):
            site.pages += 1
        verdict = str(line.get("verdict") or "")
        if verdict.startswith("stop_origin:"):
            site.stopped = describe_stop(verdict.split(":", 1)[1])
        prev = previous.get(origin)
        if prev is not None and prev.get("done") is not None:
            site.rests.append(max(float(line["sent"]) - float(prev["done"]), 0.0))
            if isinstance(prev.get("rest"), int | float):
                site.rules.append(float(prev["rest"]))
        previous[origin] = line
    return sites


@dataclass
class Server:
    """The sites on one server address, and our load on it as the access logs show."""

    address: str
    sites: list[str] = field(default_factory=list)
    requests: int = 0
    most_open: int = 0  # the most of our requests open on it at once
    share: float = 0.0  # our share of one of its workers: exchange seconds over the span

    def row(self) -> dict[str, Any]:
        return {"server": self.address, "sites": sorted(self.sites),
                "requests": self.requests, "most_open": self.most_open,
                "share": round(self.share, 4)}


def address_of(host: str, lookup: Callable[[str, int], Any]) -> str:
    """The address ``host`` connects to: itself for an IP literal, else the first of the
    lookup's answer (``name:<host>`` when it does not resolve)."""
    literal = host.strip("[]")
    try:
        return str(ipaddress.ip_address(literal))
    except ValueError:
        pass
    try:
        answer = list(lookup(host, 0))
    except OSError:
        answer = []
    return str(answer[0]) if answer else f"name:{host}"


def build_servers(sites: dict[str, Site], lookup: Callable[[str, int], Any]) -> list[Server]:
    """Group the sites by the address their host name resolves to now (the crawl's own
    lookup: POLITE_DNS_LOOKUP, or the system's), with the most of our requests open on
    each at once and our share of one of its workers, from the exchanges logged."""
    addresses: dict[str, str] = {}
    servers: dict[str, Server] = {}
    spans: dict[str, list[tuple[float, float]]] = {}
    for site in sites.values():
        host = host_of_origin(site.origin)
        if host not in addresses:
            addresses[host] = address_of(host, lookup)
        server = servers.setdefault(addresses[host], Server(addresses[host]))
        server.sites.append(site.origin)
        server.requests += site.requests
        for line in site.lines:
            if line.get("sent") is not None and line.get("done") is not None:
                spans.setdefault(server.address, []).append(
                    (float(line["sent"]), float(line["done"])))
    for address, pairs in spans.items():
        server = servers[address]
        events = sorted([(a, 1) for a, _b in pairs] + [(b, -1) for _a, b in pairs])
        open_now = 0
        for _t, step in events:
            open_now += step
            server.most_open = max(server.most_open, open_now)
        span = max(b for _a, b in pairs) - min(a for a, _b in pairs)
        server.share = sum(b - a for a, b in pairs) / span if span > 0 else 0.0
    return sorted(servers.values(), key=lambda v: (-v.share, v.address))


def _robots_outcome(status: Any) -> str:
    if status is None:
        return "unreachable (network error)"
    if 200 <= status < 300:
        return f"read ({status})"
    if status == 429 or status >= 500:
        return f"unreachable ({status})"
    if 400 <= status < 500:
        return f"none, no restrictions ({status})"
    return f"redirected ({status})"


def add_shared_sites(sites: dict[str, Site], reader: StateReader) -> None:
    """On a cluster: the sites every worker has crawled (their state is in Redis),
    those this machine's access logs do not have included, marked as not ``here``."""
    for origin, _state in reader.origin_states():
        if origin not in sites:
            sites[origin] = Site(origin, here=False)


def add_store_facts(sites: dict[str, Site], reader: StateReader) -> None:
    """Stops, robots.txt outages and opt-outs the crawl's shared state holds (the state
    directory's origin store, or every worker's in Redis on a cluster)."""
    for origin, state in reader.origin_states():
        site = sites.get(origin)
        if site is None:
            continue
        stopped = state.failure.stopped
        if stopped and site.stopped is None:
            site.stopped = describe_stop(stopped)
    for entry in reader.robots_entries():
        site = sites.get(entry.origin)
        if site is not None and entry.failures and entry.kind is None:
            site.robots = f"unreachable ({entry.last_error}), nothing fetched"
    for origin in reader.optouts():
        if origin in sites:
            sites[origin].stopped = "opted out (scrapy forget)"


# --- plots ---------------------------------------------------------------------------------

_COLORS = {"2xx": "#2b8a3e", "304": "#74b816", "3xx": "#1c7ed6", "4xx": "#f08c00",
           "5xx": "#e03131", "error": "#862e9c", "refused": "#868e96", "held": "#adb5bd"}


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def plots(sites: dict[str, Site], chosen: list[str]) -> dict[str, str]:
    """The report's figures as inline SVG documents, by name."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text (smaller, searchable)
    matplotlib.rcParams["font.size"] = 9
    import matplotlib.pyplot as plt

    out: dict[str, str] = {}
    sent = [float(x["sent"]) for s in sites.values() for x in s.lines if x.get("sent")]
    if not sent:
        return out
    t0 = min(sent)
    span = max(max(sent) - t0, 1.0)
    unit, scale = ("s", 1.0) if span < 300 else ("min", 60.0) if span < 3 * 3600 else ("h", 3600.0)

    fig, ax = plt.subplots(figsize=(8, 2.6))
    bins = min(max(int(span / scale) + 1, 10), 120)
    top = sorted(sites.values(), key=lambda s: -s.requests)[:6]
    series = [[(float(x["sent"]) - t0) / scale for x in s.lines if x.get("sent")] for s in top]
    ax.hist(series, bins=bins, stacked=True, label=[s.origin for s in top])
    ax.set_xlabel(f"time since the first request ({unit})")
    ax.set_ylabel("requests")
    ax.set_title("Requests over time (the six busiest sites)")
    ax.legend(fontsize=7, loc="upper right")
    out["requests"] = _svg(fig)

    ranked = [s for s in sorted(sites.values(), key=lambda s: -s.requests) if s.rests][:12]
    if ranked:
        fig, ax = plt.subplots(figsize=(8, 0.45 * len(ranked) + 1.2))
        ax.boxplot([s.rests for s in ranked], orientation="horizontal", showfliers=True,
                   tick_labels=[s.origin for s in ranked])
        for i, s in enumerate(ranked, start=1):
            rule = percentile(s.rules, 0.5)
            if rule is not None:
                ax.plot([rule, rule], [i - 0.4, i + 0.4], color="#e03131", linewidth=2)
        ax.set_xlabel("seconds from the end of one exchange to the start of the next "
                      "(red: the rest the crawler set, median)")
        ax.set_title("Rests per site against the rule")
        ax.invert_yaxis()
        out["rests"] = _svg(fig)

    classes = [c for c in _COLORS if any(s.statuses.get(c) for s in sites.values())]
    shown = sorted(sites.values(), key=lambda s: -(s.requests + s.refused))[:12]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(shown) + 1.2))
    left = [0.0] * len(shown)
    for c in classes:
        values = [float(s.statuses.get(c, 0)) for s in shown]
        ax.barh([s.origin for s in shown], values, left=left, color=_COLORS[c], label=c)
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set_xlabel("exchanges")
    ax.set_title("Status mix per site")
    ax.invert_yaxis()
    ax.legend(fontsize=7, ncols=len(classes), loc="lower right")
    out["statuses"] = _svg(fig)

    picked = [sites[o] for o in chosen if o in sites][:6]
    if picked:
        fig, ax = plt.subplots(figsize=(8, 0.55 * len(picked) + 1.2))
        for i, s in enumerate(picked):
            bars = [((float(x["sent"]) - t0) / scale,
                     max(float(x.get("duration") or 0.0) / scale, span / scale / 1500))
                    for x in s.lines if x.get("sent")][:3000]
            colors = [_COLORS[status_class(x)] for x in s.lines if x.get("sent")][:3000]
            ax.broken_barh(bars, (i - 0.35, 0.7), facecolors=colors)
        ax.set_yticks(range(len(picked)), [s.origin for s in picked])
        ax.set_xlabel(f"time since the first request ({unit}); each bar one exchange")
        ax.set_title("Timeline of a few sites (one request in flight per site, rests between)")
        ax.invert_yaxis()
        out["timeline"] = _svg(fig)

    savings = _savings_plot(plt, sites)
    if savings is not None:
        out["savings"] = savings
    return out


def _savings_plot(plt: Any, sites: dict[str, Site]) -> str | None:
    """Bytes received and bytes conditional requests spared, per site (None: no site
    was asked anything)."""
    revisits = [s for s in sorted(sites.values(), key=lambda s: -(s.bytes + s.saved))
                if s.requests][:12]
    if not revisits:
        return None
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(revisits) + 1.2))
    names = [s.origin for s in revisits]
    ax.barh(names, [s.bytes / 1024 for s in revisits], color="#1c7ed6",
            label="received")
    ax.barh(names, [s.saved / 1024 for s in revisits],
            left=[s.bytes / 1024 for s in revisits], color="#74b816",
            label="spared by a 304 (the stored copy's size)")
    ax.set_xlabel("KiB")
    ax.set_title("Revisit savings: bytes received and bytes conditional requests spared")
    ax.invert_yaxis()
    ax.legend(fontsize=7, loc="lower right")
    return _svg(fig)


# --- the page ------------------------------------------------------------------------------

_CSS = """
body{font:15px/1.45 system-ui,sans-serif;color:#212529;margin:0;background:#fff}
.wrap{max-width:1100px;margin:0 auto;padding:1.5rem}
h1{font-size:1.6rem;margin:.2rem 0}h2{font-size:1.2rem;margin-top:2rem}
table{border-collapse:collapse;font-size:13px;width:100%}
th,td{border-bottom:1px solid #dee2e6;padding:.25rem .4rem;text-align:right;vertical-align:top}
th:first-child,td:first-child,td.l{text-align:left}
thead th{background:#f1f3f5;position:sticky;top:0}
.fig{margin:1rem 0}.fig svg{max-width:100%;height:auto}
.muted{color:#868e96}.stop{color:#c92a2a}
"""


def _fmt_s(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _kib(n: int) -> str:
    return f"{n / 1024:.1f}" if n else "0"


def render(title: str, sources: list[str], sites: dict[str, Site], figures: dict[str, str],  # noqa: PLR0917
           generated: float, servers: Sequence[Server] = ()) -> str:
    esc = html.escape
    server_rows = "".join(
        f"<tr><td>{esc(v.address)}</td><td>{len(v.sites)}</td><td>{v.requests}</td>"
        f"<td>{v.most_open}</td><td>{v.share:.3f}</td>"
        f"<td class=l>{esc(', '.join(sorted(v.sites)))}</td></tr>" for v in servers)
    total = sum(s.requests for s in sites.values())
    pages = sum(s.pages for s in sites.values())
    rows = []
    for s in sorted(sites.values(), key=lambda s: -(s.requests + s.refused)):
        r = s.row()
        mix = ", ".join(f"{k} {v}" for k, v in r["statuses"].items())
        rows.append(
            f"<tr><td>{esc(s.origin)}</td>"
            + (f"<td>{s.requests}</td><td>{s.pages}</td>" if s.here else
               "<td class=muted colspan=2>another worker's</td>") +
            f"<td class=l>{esc(mix)}</td><td>{_kib(s.bytes)}</td><td>{_kib(s.saved)}</td>"
            f"<td>{_fmt_s(r['rest_median'])}</td><td>{_fmt_s(r['rest_p90'])}</td>"
            f"<td>{_fmt_s(r['rule_median'])}</td><td class=l>{esc(s.robots)}</td>"
            f"<td class='l{' stop' if s.stopped else ''}'>{esc(s.stopped or '-')}</td></tr>")
    captions = {
        "requests": "Requests over time", "rests": "Rests per site against the rule",
        "statuses": "Status mix", "timeline": "Per-site timeline", "savings": "Revisit savings",
    }
    figs = "".join(f'<section class="fig" id="plot-{k}"><h2>{esc(captions[k])}</h2>{v}</section>'
                   for k, v in figures.items())
    src = "".join(f"<li><code>{esc(p)}</code></li>" for p in sources)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(generated))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title><style>{_CSS}</style></head>
<body><div class="wrap">
<h1>{esc(title)}</h1>
<p>{len(sites)} sites, {total} requests, {pages} pages. Generated {stamp} from the
crawler's own records (access logs and the origin store; on a cluster, this machine's
access logs and every worker's state in Redis: "another worker's" sites have their
exchanges in that worker's access log); nothing here is estimated.</p>
<h2>Per site</h2>
<table><thead><tr><th>site</th><th>requests</th><th>pages</th><th>statuses</th>
<th>KiB received</th><th>KiB spared by 304</th><th>rest median (s)</th><th>rest p90 (s)</th>
<th>rule median (s)</th><th>robots.txt</th><th>stopped, and why</th></tr></thead>
<tbody>{''.join(rows)}</tbody></table>
<p class="muted">rest: from the end of one exchange with the site to the start of the next;
rule: the rest the crawler had set after the previous exchange.</p>
<h2>Per server</h2>
<table><thead><tr><th>server</th><th>sites</th><th>requests</th><th>most open at once</th>
<th>share of a worker</th><th class=l>sites on it</th></tr></thead>
<tbody>{server_rows}</tbody></table>
<p class="muted">server: the address the sites' host names resolve to now; share: seconds
of our exchanges with it over the time from its first to its last.</p>
{figs}
<h2>Sources</h2><ul>{src}</ul>
</div></body></html>
"""


# --- choosing the logs ---------------------------------------------------------------------

def pick_logs(state: Path, job: str | None, every: bool,
              configured: str | None, settings: BaseSettings | None = None
              ) -> tuple[list[Path], str]:
    files = log_files(state, [], configured)
    if not files:
        raise CommandError(f"no access log in {state} (access-*.jsonl): no crawl to report")
    if every:
        return files, "All crawls"
    if job is None:
        latest = max(files, key=lambda p: p.stat().st_mtime)
        return _parts(latest, files), f"Crawl {_base(latest.name)}"
    given = Path(job).expanduser()
    if given.is_file():
        return _parts(given.resolve(), files), f"Crawl {_base(given.name)}"
    stems = sorted({_base(f.name) for f in files})
    hits = [s for s in stems if s == job or job in s]
    if len(hits) == 1:
        return [f for f in files if _base(f.name) == hits[0]], f"Crawl {hits[0]}"
    if len(hits) > 1:
        raise CommandError(f"job {job!r} matches {len(hits)} crawls ({', '.join(hits[:3])}, "
                           "...): give more of its name")
    with open_reader(_settings(settings), state) as reader:
        mapped = _from_registry(reader, job, stems)
    if mapped is not None:
        return [f for f in files if _base(f.name) == mapped], f"Job {job} ({mapped})"
    raise CommandError(f"no job {job!r} in {state}: name an access log (scrapy report --list "
                       "shows them) or use --all")


def _base(name: str) -> str:
    """The crawl an access log file belongs to (rotated parts included)."""
    stem = name.removesuffix(".jsonl")
    head, dot, tail = stem.rpartition(".")
    return head if dot and tail.isdigit() and not head.endswith("Z") else stem


def _parts(path: Path, files: list[Path]) -> list[Path]:
    base = _base(path.name)
    return [f for f in files if _base(f.name) == base] or [path]


def _from_registry(reader: StateReader, job: str, stems: list[str]) -> str | None:
    """A job id or JOBDIR name a job registered (store.optout) -> its process's log."""
    for entry in reader.jobs():
        queue_path, opened = entry.queue_path, entry.opened_at
        if not queue_path or Path(queue_path).parent.name != job:
            continue
        owner = entry.owner
        pid = owner.split(":")[1] if owner.count(":") >= 2 else ""
        candidates = [s for s in stems if s.endswith(f"-{pid}")]
        if candidates:
            return min(candidates, key=lambda s: abs(_start_of(s) - float(opened)))
    return None


def _start_of(stem: str) -> float:
    import calendar

    try:
        stamp = stem.split("-")[-2]  # access-<spider>-<start>-<pid>
        return float(calendar.timegm(time.strptime(stamp[:15], "%Y%m%dT%H%M%S")))
    except (IndexError, ValueError):
        return 0.0


def _settings(settings: BaseSettings | None) -> BaseSettings:
    """The settings naming the crawl's backend (none given: the embedded one)."""
    if settings is not None:
        return settings
    from scrapy.settings import Settings

    return Settings()


def build_report(state: Path, files: list[Path], title: str, chosen: list[str],  # noqa: PLR0917
                 out: Path, settings: BaseSettings | None = None) -> dict[str, Any]:
    lines = list(read_lines(files))
    if not lines:
        raise CommandError(f"the access logs {', '.join(str(f) for f in files)} are empty")
    sites = build_sites(lines)
    chosen_settings = _settings(settings)
    with open_reader(chosen_settings, state) as reader:
        if backend_of(chosen_settings).cluster:
            add_shared_sites(sites, reader)
        add_store_facts(sites, reader)
    local = {o: site for o, site in sites.items() if site.here}  # what the logs here show
    if not chosen:
        chosen = [s.origin for s in sorted(local.values(), key=lambda s: -s.requests)[:5]]
    try:
        figures = plots(local, [o for o in chosen if o in local])
    except ImportError as exc:
        raise CommandError("the report's plots need matplotlib: pip install "
                           "'polite_crawler[report]'") from exc
    servers = build_servers(sites, _lookup(chosen_settings))
    page = render(title, [str(f) for f in files], sites, figures, time.time(), servers)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return {"report": str(out), "title": title, "sources": [str(f) for f in files],
            "plots": sorted(figures), "sites": [s.row() for s in sites.values()],
            "servers": [v.row() for v in servers]}


def _lookup(settings: BaseSettings) -> Callable[[str, int], Any]:
    """The crawl's name lookup (POLITE_DNS_LOOKUP), or the system's."""
    from scrapy.utils.misc import load_object

    from polite_crawler.resolver import system_lookup

    lookup = settings.get("POLITE_DNS_LOOKUP") or system_lookup
    return load_object(lookup) if isinstance(lookup, str) else lookup


class Command(ScrapyCommand):
    requires_project = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[JOB | --all] -o report.html"

    def short_desc(self) -> str:
        return "Write a crawl's report: one self-contained HTML file with tables and plots"

    def long_desc(self) -> str:
        return ("One HTML file, viewable without a network: a per-site table (requests, "
                "pages, statuses, bytes, bytes a 304 spared, median and p90 rest, robots.txt "
                "outcome, stopped and why) and SVG plots (requests over time, rests against "
                "the rule, status mix, a timeline of a few sites, revisit savings). JOB: an "
                "access log, its name or a unique part of it, or a job id; none: the latest "
                "crawl; --all: every crawl of the state directory.")

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        add_common(parser)
        parser.add_argument("-o", "--output", metavar="FILE", help="the HTML file to write")
        parser.add_argument("--all", action="store_true", help="every crawl's access logs")
        parser.add_argument("--site", action="append", default=[], metavar="ORIGIN",
                            help="a site for the timeline (repeatable; default: the busiest)")
        parser.add_argument("--list", action="store_true", help="list the crawls one can name")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        settings = with_defaults(self.settings)
        try:
            state = state_dir_of(settings, opts.state_dir)
            if opts.list:
                files = log_files(state, [], settings.get("POLITE_ACCESS_LOG") or None)
                names = sorted({_base(f.name) for f in files})
                emit(opts, {"crawls": names}, "\n".join(names) or "no access logs")
                return
            if len(args) > 1 or (args and opts.all):
                raise CommandError("name one job, or --all")
            if not opts.output:
                raise CommandError("say where to write it: -o report.html")
            from polite_crawler.commands._base import parse_origin

            chosen = [parse_origin(s) for s in opts.site]
            files, title = pick_logs(state, args[0] if args else None, opts.all,
                                     settings.get("POLITE_ACCESS_LOG") or None, settings)
            data = build_report(state, files, title, chosen, Path(opts.output), settings)
        except CommandError as exc:
            fail("report", str(exc))
            return
        emit(opts, data, f"wrote {data['report']} ({len(data['sites'])} sites, "
                         f"{len(data['plots'])} plots)")


def demo_report(out: Path) -> str:
    """The demo's report (``make demo``): ``<out>/report.html``; its path, or why not."""
    target = out / "report.html"
    try:
        files, _ = pick_logs(out / "state", None, True, str(out / "access.jsonl"))
        files = [f for f in files if f.resolve() == (out / "access.jsonl").resolve()
                 or f.name.startswith("access.")] or files
        build_report(out / "state", files, "The demo crawl", [], target)
    except CommandError as exc:
        return f"(not written: {exc})"
    return str(target)
