"""Polite to the machine: two loopback machines, many sites each, judged from their logs.

Two machines, served by one asyncio process on loopback (the bench's child, stopped by
its PID whatever way the bench exits), each with its own worker slots: a request waits
for a free slot (an ``asyncio.Semaphore`` of W), then holds it for the service time and
while its answer is written, so its latency grows as requests queue.

``small``  a small shared host: one address (127.0.77.1), W = 2 workers, 150 ms a
           request. 16 name-based sites on one port (``s01.test`` ... ``s16.test``, all
           resolved to the address), 5 sites on 5 more ports of the address (its IP
           literal: one host name, five origins) and the https side of ``s01.test`` (a
           self-signed certificate made for the run; Scrapy does not verify
           certificates by default, ``DOWNLOAD_VERIFY_CERTIFICATES``). 7 pages a site.
``edge``   a fast edge: one address (127.0.78.1), 64 slots, 5 ms a request (flat
           latency under any load this crawl can make), 200 name-based sites
           (``e001.test`` ...), 5 pages a site.

Every site has a robots.txt (allow all, a ``Sitemap:`` line), a sitemap listing its
pages, and pages of real text cut from the Python documentation (python3-doc, as
:mod:`bench.realweb_nginx` cuts it), "/" linking to every page and each page to "/" and
the next. Each site name is its own registrable domain (``.test`` is no public suffix
the Public Suffix List names, so ``s01.test`` is an owner of its own): the owner bound
is not what this bench measures.

Names resolve through a table the bench writes (:mod:`demo.names`: a JSON file named by
``DEMO_DNS_TABLE``): the project's crawler reads it through its injectable lookup
(``POLITE_DNS_LOOKUP=demo.names.dns_lookup``), stock Scrapy through a resolver of the
same table (``TWISTED_DNS_RESOLVER=bench.shared_servers.TableResolver``).
Nothing leaves loopback and no system file is touched.

One crawl of all 222 sites of both machines at once, each crawler in its own process,
one after the other against the same servers:

* polite_crawler: ``scrapy crawl site -a urls=FILE`` with the project's defaults (a
  3 s rest with its jitter: names are not loopback literals, so the public floors
  hold for both machines), the POLITE_* values the run prints (state dir, stats file,
  the lookup, a bot URL);
* stock Scrapy at its most polite: a SitemapSpider reading each robots.txt, its
  sitemaps, following in-host links; ``ROBOTSTXT_OBEY``, ``CONCURRENT_REQUESTS_PER_DOMAIN
  = 1``, ``DOWNLOAD_DELAY = 3`` (Scrapy's randomisation on: 0.5 to 1.5 times, as the
  polite crawl's jitter is on), 128 requests at once.

The server writes one JSON line a request: machine, arrival (the request's head read),
start of service (a worker taken), end (answer written, worker freed), whether no worker
was free at arrival (queued), Host header, port, scheme, path, status, bytes,
User-Agent, connection id; and one line a connection when it closes. Every figure comes
from that log alone (each crawler's lines told apart by their User-Agent):

small host: the most of our requests open at once on the address (arrival to end),
the share that found no free worker (queued), our share of the workers' time (busy
worker-seconds / (W x span of our crawl on the machine); also busy / span, the share of
one worker), the most requests open at once on one host name (ports and schemes
together), gaps between two requests to one host name shorter than the rest (the end of
one to the arrival of the next; overlaps counted apart), p50/p90 latency (arrival to
end), the most connections open at once, and pages fetched against pages offered
(every site whole?).

edge: each site's rate as a fraction of its polite ideal, as
:mod:`bench.frontier_efficiency` defines efficiency, for one site: (its requests after
the first) x rest / (its last end - its first arrival); median and 10th percentile
over the sites; the most of our requests open at once; pages fetched / offered.

Targets (from the project's issue on machine-level politeness): small host never more
open than W, at most 2 % queued, share at most about a third, one at a time and the
whole rest per host name, every site whole; edge median site >= 0.55 of its ideal.

``--cluster`` adds a third crawl: two cluster workers (``POLITE_FRONTIER=redis://``, a
redis-server and a PostgreSQL page store on loopback, as :mod:`bench.cluster` starts
them) running the same command against the same two machines.

    .venv/bin/python -m bench.shared_servers [--skip-stock] [--skip-polite] [--cluster]
        [--edge-sites N] [--small-pages P] [--edge-pages P] [--keep DIR] [-s NAME=VALUE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import html
import itertools
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from demo.names import dns_lookup, write_table
from demo.spans import most_open

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

ROOT = Path(__file__).resolve().parent.parent
POLITE_AGENT = "PoliteCrawler"
STOCK_AGENT = "StockScrapyBench"
REST = 3.0  # the project's POLITE_REST_PAGE default, the public floor names rest
BOT_URL = "https://bot.example/"
LOOKUP = "demo.names.dns_lookup"  # POLITE_DNS_LOOKUP: the names of demo.names's table


# --- names (demo.names: the table the crawler's injected lookup reads) --------------------
class TableResolver:
    """Stock Scrapy's ``TWISTED_DNS_RESOLVER``: the bench's names from the same table;
    IP literals as themselves; any other name resolves to nothing."""

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> TableResolver:
        return cls(reactor)

    def install_on_reactor(self) -> None:
        from twisted.internet.interfaces import IHostnameResolver
        from zope.interface import directlyProvides

        directlyProvides(self, IHostnameResolver)
        self.reactor.installNameResolver(self)

    def resolveHostName(self, receiver: Any, hostName: str, portNumber: int = 0,
                        addressTypes: Any = None, transportSemantics: str = "TCP") -> Any:
        import ipaddress

        from twisted.internet.address import IPv4Address
        from twisted.internet.interfaces import IHostResolution
        from zope.interface import implementer

        @implementer(IHostResolution)
        class _Resolution:
            def __init__(self, name: str) -> None:
                self.name = name

            def cancel(self) -> None:
                pass

        resolution = _Resolution(hostName)
        receiver.resolutionBegan(resolution)
        try:
            answer = [str(ipaddress.ip_address(hostName))]
        except ValueError:
            answer = dns_lookup(hostName, portNumber)
        for address in answer:
            receiver.addressResolved(IPv4Address("TCP", address, portNumber))
        receiver.resolutionComplete()
        return resolution


# --- the machines -----------------------------------------------------------------------
@dataclass
class Machine:
    label: str
    address: str
    slots: int
    service: float  # seconds of a worker a request takes
    pages: int  # pages a site ("/" and pages - 1 more)
    # (listener, scheme, host): each site; listeners are the machine's ports by name
    sites: list[tuple[str, str, str]] = field(default_factory=list)

    def listeners(self) -> dict[str, str]:
        return {listener: scheme for listener, scheme, _h in self.sites}


def small_host(pages: int = 7) -> Machine:
    m = Machine("small", "127.0.77.1", 2, 0.150, pages)
    m.sites = [("names", "http", f"s{i:02d}.test") for i in range(1, 17)]
    m.sites += [(f"port{k}", "http", m.address) for k in range(1, 6)]
    m.sites.append(("tls", "https", "s01.test"))
    return m


def fast_edge(sites: int = 200, pages: int = 5) -> Machine:
    m = Machine("edge", "127.0.78.1", 64, 0.005, pages)
    m.sites = [("names", "http", f"e{i:03d}.test") for i in range(1, sites + 1)]
    return m


def names_table(machines: Iterable[Machine]) -> dict[str, list[str]]:
    return {host: [m.address] for m in machines for _l, _s, host in m.sites
            if host != m.address}


def page_paths(pages: int) -> list[str]:
    return ["/"] + [f"/p{i}.html" for i in range(1, pages)]


def _paragraphs(limit: int = 600) -> list[str]:
    """Paragraphs of real prose from the Python documentation (bench.realweb_nginx's cut);
    a few stand-in sentences when python3-doc is missing (the test's small runs)."""
    from bench.realweb_nginx import DOCS
    from bench.realweb_nginx import _paragraphs as cut

    if DOCS.is_dir():
        found = cut(DOCS, limit)
        if found:
            return found
    return [f"Paragraph {i} of stand-in text for a page of the bench. " * 5
            for i in range(50)]


def site_pages(base: str, pages: int, paras: Sequence[str], offset: int,
               size: int = 5000) -> dict[str, tuple[str, bytes]]:
    """robots.txt, sitemap.xml and the pages of one site: path -> (content type, body)."""
    paths = page_paths(pages)
    out: dict[str, tuple[str, bytes]] = {
        "/robots.txt": ("text/plain", f"User-agent: *\nAllow: /\n\nSitemap: {base}"
                        "/sitemap.xml\n".encode()),
        "/sitemap.xml": ("application/xml", (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            + "".join(f"<url><loc>{html.escape(base + p)}</loc></url>\n" for p in paths)
            + "</urlset>\n").encode()),
    }
    k = offset
    for i, path in enumerate(paths):
        links = (paths[1:] if i == 0 else ["/", paths[(i + 1) % len(paths)]])
        nav = " ".join(f'<a href="{p}">page {p}</a>' for p in links)
        parts: list[str] = []
        length = 0
        while length < size:
            parts.append(f"<p>{html.escape(paras[k % len(paras)])}</p>\n")
            k += 1
            length += len(parts[-1])
        out[path] = ("text/html; charset=utf-8", (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(base)} page {i}</title></head>\n<body><h1>Page {i}</h1>\n"
            f"<nav>{nav}</nav>\n{''.join(parts)}</body></html>\n").encode())
    return out


# --- the server (the bench's child process) ---------------------------------------------
async def _serve(machines: list[Machine], log_path: Path, cert: tuple[str, str] | None) -> None:
    import ssl

    log = log_path.open("a", buffering=1)
    paras = _paragraphs()
    conn_ids = itertools.count(1)
    loop = asyncio.get_running_loop()
    servers: list[asyncio.Server] = []
    ports: dict[str, dict[str, int]] = {}
    context: ssl.SSLContext | None = None
    if cert is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert[0], cert[1])

    for m in machines:
        workers = asyncio.Semaphore(m.slots)
        routes: dict[tuple[str, int, str], dict[str, tuple[str, bytes]]] = {}

        def handler(m: Machine, scheme: str, workers: asyncio.Semaphore,
                    routes: dict[tuple[str, int, str], dict[str, tuple[str, bytes]]]) -> Any:
            async def handle(reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter) -> None:
                port = int(writer.get_extra_info("sockname")[1])
                cid = next(conn_ids)
                opened = time.time()
                first_agent = ""
                served = 0
                try:
                    while True:
                        try:
                            head = await reader.readuntil(b"\r\n\r\n")
                        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                                ConnectionError, OSError):
                            break
                        arrival = time.time()
                        queued = workers.locked()
                        lines = head.decode("latin-1").split("\r\n")
                        parts = lines[0].split(" ")
                        path = parts[1] if len(parts) > 1 else "/"
                        headers = {k.strip().lower(): v.strip() for k, _c, v in
                                   (h.partition(":") for h in lines[1:] if ":" in h)}
                        length = int(headers.get("content-length", "0") or 0)
                        if length:
                            await reader.readexactly(length)
                        host = headers.get("host", "").lower()
                        name = host.rsplit(":", 1)[0] if not host.startswith("[") else host
                        agent = headers.get("user-agent", "")
                        first_agent = first_agent or agent
                        close = headers.get("connection", "").lower() == "close"
                        async with workers:
                            start = time.time()
                            await asyncio.sleep(m.service)
                            found = routes.get((scheme, port, name), {}).get(
                                path.split("?", 1)[0])
                            status, (ctype, body) = (200, found) if found else (
                                404, ("text/plain", b"not found\n"))
                            writer.write(
                                f"HTTP/1.1 {status} {'OK' if found else 'Not Found'}\r\n"
                                f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                                f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n"
                                .encode() + body)
                            with contextlib.suppress(ConnectionError, OSError):
                                await writer.drain()
                            end = time.time()
                        served += 1
                        log.write(json.dumps({
                            "k": "r", "m": m.label, "a": arrival, "s": start, "e": end,
                            "q": queued, "host": name, "port": port, "scheme": scheme,
                            "path": path, "status": status, "bytes": len(body),
                            "ua": agent, "c": cid}) + "\n")
                        if close:
                            break
                finally:
                    if not log.closed:  # a connection still open when the bench stops
                        log.write(json.dumps({"k": "c", "m": m.label, "o": opened,
                                              "x": time.time(), "ua": first_agent,
                                              "n": served, "c": cid}) + "\n")
                    writer.close()
            return handle

        ports[m.label] = {}
        for listener, scheme in m.listeners().items():
            tls = context if scheme == "https" else None
            srv = await asyncio.start_server(handler(m, scheme, workers, routes), m.address, 0,
                                             ssl=tls, backlog=1024, reuse_address=True)
            servers.append(srv)
            ports[m.label][listener] = int(srv.sockets[0].getsockname()[1])
        for n, (listener, scheme, host) in enumerate(m.sites):
            port = ports[m.label][listener]
            base = f"{scheme}://{host}:{port}"
            routes[(scheme, port, host)] = site_pages(base, m.pages, paras, 7 * n)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    print("ready " + json.dumps(ports), flush=True)
    await stop.wait()
    for s in servers:
        s.close()
    log.close()


def serve_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench.shared_servers serve")
    ap.add_argument("--spec", type=Path, required=True)
    a = ap.parse_args(argv)
    spec = json.loads(a.spec.read_text())
    machines = [Machine(**m) for m in spec["machines"]]
    for m in machines:
        m.sites = [(listener, scheme, host) for listener, scheme, host in m.sites]
    cert = (spec["cert"][0], spec["cert"][1]) if spec.get("cert") else None
    asyncio.run(_serve(machines, Path(spec["log"]), cert))
    return 0


class Servers:
    """The server child: started with the machines, stopped by its PID (a context manager)."""

    def __init__(self, tmp: Path, machines: list[Machine], env: dict[str, str]) -> None:
        self.tmp, self.machines, self.env = tmp, machines, env
        self.log = tmp / "server.jsonl"
        self.proc: subprocess.Popen[bytes] | None = None
        self.ports: dict[str, dict[str, int]] = {}

    def start(self) -> Servers:
        cert: list[str] | None = None
        tls_hosts = [h for m in self.machines for _l, s, h in m.sites if s == "https"]
        if tls_hosts:
            from tests.tls_web import self_signed

            c, k = self_signed(self.tmp, tls_hosts, [m.address for m in self.machines])
            cert = [str(c), str(k)]
        spec = self.tmp / "servers.json"
        spec.write_text(json.dumps({
            "machines": [m.__dict__ for m in self.machines], "log": str(self.log),
            "cert": cert}))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.shared_servers", "serve", "--spec", str(spec)],
            cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if not line.startswith("ready "):
            self.stop()
            raise RuntimeError(f"the servers did not start: {line!r}")
        self.ports = json.loads(line[len("ready "):])
        return self

    def stop(self) -> None:
        from demo.cluster import stop_proc

        proc, self.proc = self.proc, None
        if proc is not None:
            stop_proc(proc)  # SIGTERM: the log is closed whole; SIGKILL after 15 s

    def __enter__(self) -> Servers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def urls(self, m: Machine) -> list[str]:
        return [f"{scheme}://{host}:{self.ports[m.label][listener]}/"
                for listener, scheme, host in m.sites]


# --- the log and the figures --------------------------------------------------------------
@dataclass
class Req:
    machine: str
    arrival: float
    start: float
    end: float
    queued: bool
    host: str
    port: int
    scheme: str
    path: str
    status: int
    size: int
    agent: str
    conn: int

    @property
    def is_page(self) -> bool:
        return self.status == 200 and self.path not in ("/robots.txt", "/sitemap.xml")


@dataclass
class Conn:
    machine: str
    opened: float
    closed: float
    agent: str
    requests: int


def read_log(path: Path) -> tuple[list[Req], list[Conn]]:
    reqs: list[Req] = []
    conns: list[Conn] = []
    if not path.exists():
        return reqs, conns
    for line in path.read_text().splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue  # a line cut by a stop
        if d["k"] == "r":
            reqs.append(Req(d["m"], d["a"], d["s"], d["e"], d["q"], d["host"], d["port"],
                            d["scheme"], d["path"], d["status"], d["bytes"], d["ua"], d["c"]))
        else:
            conns.append(Conn(d["m"], d["o"], d["x"], d["ua"], d["n"]))
    return reqs, conns


def gaps_by_name(reqs: Sequence[Req]) -> tuple[list[float], int]:
    """Per host name (schemes and ports together), in arrival order: the gaps from the end
    of one request to the arrival of the next, and how many of them are overlaps (< 0)."""
    by_name: dict[str, list[Req]] = defaultdict(list)
    for r in reqs:
        by_name[r.host].append(r)
    gaps: list[float] = []
    for items in by_name.values():
        items.sort(key=lambda r: r.arrival)
        gaps += [b.arrival - a.end for a, b in itertools.pairwise(items)]
    return gaps, sum(g < 0 for g in gaps)


def _pct(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1)))] if s else 0.0


@dataclass
class SmallFigures:
    requests: int
    pages: int
    offered: int
    sites_whole: int
    sites: int
    most_open: int
    queued: int
    share_workers: float  # busy / (W x span)
    share_one: float  # busy / span
    peak_share: float  # busiest WINDOW seconds: busy / (W x WINDOW)
    span: float
    page_kb: float
    most_open_name: int
    short_gaps: int
    overlaps: int
    gaps: int
    min_gap: float
    p50_latency: float
    p90_latency: float
    most_conns: int

    def rows(self, slots: int) -> list[tuple[str, str, str]]:
        q = self.queued / self.requests if self.requests else 0.0
        return [
            ("requests (pages fetched / offered)",
             f"{self.requests} ({self.pages} / {self.offered})", ""),
            ("average page fetched, KB", f"{self.page_kb:.1f}", ""),
            ("sites whole", f"{self.sites_whole} / {self.sites}", "all"),
            ("most requests open at once on the address", str(self.most_open),
             f"<= {slots}"),
            ("requests queued (no free worker at arrival)",
             f"{self.queued} ({100 * q:.2f} %)", "<= 2 %"),
            ("share of the workers' time: busy / (W x span)", f"{self.share_workers:.2f}",
             "<= ~0.33"),
            ("share of one worker: busy / span", f"{self.share_one:.2f}", ""),
            (f"busiest {WINDOW:g} s: busy / (W x {WINDOW:g} s)", f"{self.peak_share:.2f}", ""),
            ("crawl span on the machine, s", f"{self.span:.0f}", ""),
            ("most requests open at once on one host name", str(self.most_open_name), "1"),
            (f"gaps on one host name < rest {REST:g} s (overlaps) / gaps",
             f"{self.short_gaps} ({self.overlaps}) / {self.gaps}", "0"),
            ("shortest gap on one host name, s", f"{self.min_gap:.2f}", f">= {REST:g}"),
            ("latency p50 / p90 (arrival to end), s",
             f"{self.p50_latency:.3f} / {self.p90_latency:.3f}", ""),
            ("most connections open at once", str(self.most_conns), ""),
        ]


WINDOW = 10.0  # seconds: the window of the busiest stretch


def peak_busy(spans: Sequence[tuple[float, float]], window: float = WINDOW) -> float:
    """The most busy seconds (spans summed, clipped) in any ``window`` seconds starting at
    a span's start."""
    best = 0.0
    for t0, _e in spans:
        t1 = t0 + window
        best = max(best, sum(max(0.0, min(e, t1) - max(s, t0)) for s, e in spans))
    return best


def _page_kb(reqs: Sequence[Req]) -> float:
    pages = [r.size for r in reqs if r.is_page]
    return sum(pages) / len(pages) / 1000 if pages else 0.0


def small_figures(m: Machine, reqs: Sequence[Req], conns: Sequence[Conn],
                  rest: float = REST) -> SmallFigures:
    mine = [r for r in reqs if r.machine == m.label]
    span = (max(r.end for r in mine) - min(r.arrival for r in mine)) if mine else 0.0
    busy = sum(r.end - r.start for r in mine)
    fetched: dict[tuple[str, int, str], set[str]] = defaultdict(set)
    for r in mine:
        if r.is_page:
            fetched[(r.scheme, r.port, r.host)].add(r.path)
    offered = set(page_paths(m.pages))
    whole = sum(offered <= v for v in fetched.values())
    by_name: dict[str, list[Req]] = defaultdict(list)
    for r in mine:
        by_name[r.host].append(r)
    gaps, overlaps = gaps_by_name(mine)
    lat = [r.end - r.arrival for r in mine]
    return SmallFigures(
        requests=len(mine), pages=sum(r.is_page for r in mine),
        offered=len(offered) * len(m.sites), sites_whole=whole, sites=len(m.sites),
        most_open=most_open((r.arrival, r.end) for r in mine),
        queued=sum(r.queued for r in mine),
        share_workers=busy / (m.slots * span) if span else 0.0,
        share_one=busy / span if span else 0.0, span=span,
        peak_share=peak_busy([(r.start, r.end) for r in mine]) / (m.slots * WINDOW),
        page_kb=_page_kb(mine),
        most_open_name=max((most_open((r.arrival, r.end) for r in v)
                            for v in by_name.values()), default=0),
        short_gaps=sum(g < rest for g in gaps), overlaps=overlaps, gaps=len(gaps),
        min_gap=min(gaps, default=0.0), p50_latency=_pct(lat, 0.5),
        p90_latency=_pct(lat, 0.9),
        most_conns=most_open((c.opened, c.closed) for c in conns if c.machine == m.label),
    )


@dataclass
class EdgeFigures:
    requests: int
    pages: int
    offered: int
    sites_whole: int
    sites: int
    median: float
    p10: float
    most_open: int
    queued: int
    span: float
    page_kb: float

    def rows(self, slots: int) -> list[tuple[str, str, str]]:
        return [
            ("requests (pages fetched / offered)",
             f"{self.requests} ({self.pages} / {self.offered})", ""),
            ("average page fetched, KB", f"{self.page_kb:.1f}", ""),
            ("sites whole", f"{self.sites_whole} / {self.sites}", "all"),
            ("site's rate / its polite ideal: median (p10)",
             f"{self.median:.2f} ({self.p10:.2f})", ">= 0.55"),
            ("most requests open at once on the address", str(self.most_open),
             f"(slots {slots})"),
            ("requests queued", str(self.queued), ""),
            ("crawl span on the machine, s", f"{self.span:.0f}", ""),
        ]


def site_ideal_fraction(items: Sequence[Req], rest: float = REST) -> float | None:
    """One site's rate over its polite ideal (bench.frontier_efficiency's efficiency, for
    one site): (requests after its first) x rest / (its last end - its first arrival)."""
    if len(items) < 2:
        return None
    span = max(r.end for r in items) - min(r.arrival for r in items)
    return (len(items) - 1) * rest / span if span > 0 else None


def edge_figures(m: Machine, reqs: Sequence[Req], rest: float = REST) -> EdgeFigures:
    mine = [r for r in reqs if r.machine == m.label]
    by_site: dict[tuple[str, int, str], list[Req]] = defaultdict(list)
    for r in mine:
        by_site[(r.scheme, r.port, r.host)].append(r)
    fractions = [f for v in by_site.values() if (f := site_ideal_fraction(v, rest)) is not None]
    offered = set(page_paths(m.pages))
    whole = sum(offered <= {r.path for r in v if r.is_page} for v in by_site.values())
    span = (max(r.end for r in mine) - min(r.arrival for r in mine)) if mine else 0.0
    return EdgeFigures(
        requests=len(mine), pages=sum(r.is_page for r in mine),
        offered=len(offered) * len(m.sites), sites_whole=whole, sites=len(m.sites),
        median=statistics.median(fractions) if fractions else 0.0,
        p10=_pct(fractions, 0.1), most_open=most_open((r.arrival, r.end) for r in mine),
        queued=sum(r.queued for r in mine), span=span, page_kb=_page_kb(mine))


# --- stock Scrapy (the bench's child process) ----------------------------------------------
def stock_main(argv: list[str]) -> int:
    from scrapy.crawler import CrawlerProcess
    from scrapy.http import TextResponse
    from scrapy.linkextractors import LinkExtractor
    from scrapy.spiders import SitemapSpider

    ap = argparse.ArgumentParser(prog="bench.shared_servers stock")
    ap.add_argument("--urls", type=Path, required=True)
    ap.add_argument("--delay", type=float, default=REST)
    ap.add_argument("--log-file", type=str, default=None)
    a = ap.parse_args(argv)
    roots = a.urls.read_text().split()

    class StockSpider(SitemapSpider):
        name = "stock"
        sitemap_urls = [r.rstrip("/") + "/robots.txt" for r in roots]
        links = LinkExtractor()

        def parse(self, response: Any, **kwargs: Any) -> Any:
            if not isinstance(response, TextResponse):
                return
            host = response.url.split("/")[2]
            for link in self.links.extract_links(response):
                if link.url.split("/")[2] == host:
                    yield response.follow(link.url, callback=self.parse)

    process = CrawlerProcess({
        "TELNETCONSOLE_ENABLED": False,
        "USER_AGENT": f"{STOCK_AGENT}/1.0",
        "LOG_LEVEL": "INFO",
        "LOG_FILE": a.log_file,
        "ROBOTSTXT_OBEY": True,
        "CONCURRENT_REQUESTS": 128,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY": a.delay,
        "TWISTED_DNS_RESOLVER": "bench.shared_servers.TableResolver",
    })
    process.crawl(StockSpider)
    process.start()
    return 0


# --- the crawls --------------------------------------------------------------------------
@dataclass
class Run:
    crawler: str
    agent: str
    t0: float
    t1: float
    cpu: float
    codes: list[int]
    reqs: list[Req] = field(default_factory=list)
    conns: list[Conn] = field(default_factory=list)


def _wait(procs: list[subprocess.Popen[bytes]]) -> tuple[list[int], float]:
    """Wait for every process; their exit codes and CPU seconds (user + system)."""
    codes: list[int] = []
    cpu = 0.0
    try:
        for p in procs:
            _pid, status, usage = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            codes.append(p.returncode)
            cpu += usage.ru_utime + usage.ru_stime
    except BaseException:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        raise
    return codes, cpu


def polite_settings(d: Path, extra: Sequence[str], state: Path | None = None,
                    **more: str) -> list[str]:
    """``-s`` arguments of a polite crawl writing its log and stats in ``d``."""
    args: list[str] = []
    for k, v in {"POLITE_STATE_DIR": state or d / "state", "LOG_LEVEL": "INFO",
                 "LOG_FILE": d / "crawl.log", "POLITE_STATS_FILE": d / "stats.json",
                 "POLITE_DNS_LOOKUP": LOOKUP,
                 "POLITE_BOT_URL": BOT_URL, **more}.items():
        args += ["-s", f"{k}={v}"]
    for kv in extra:
        args += ["-s", kv]
    return args


def run_polite(tmp: Path, urls: Path, env: dict[str, str], extra: Sequence[str]) -> Run:
    d = tmp / "polite"
    d.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"urls={urls}",
           *polite_settings(d, extra)]
    print("-- polite_crawler: " + " ".join(cmd), flush=True)
    t0 = time.time()
    codes, cpu = _wait([subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)])
    return Run("polite_crawler", POLITE_AGENT, t0, time.time(), cpu, codes)


def run_stock(tmp: Path, urls: Path, env: dict[str, str]) -> Run:
    d = tmp / "stock"
    d.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "bench.shared_servers", "stock", "--urls", str(urls),
           "--delay", str(REST), "--log-file", str(d / "crawl.log")]
    print("-- stock Scrapy: " + " ".join(cmd), flush=True)
    t0 = time.time()
    codes, cpu = _wait([subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)])
    return Run("stock Scrapy", STOCK_AGENT, t0, time.time(), cpu, codes)


def run_cluster(tmp: Path, urls: Path, env: dict[str, str], extra: Sequence[str],
                workers: int = 2) -> Run:
    from demo.cluster import Postgres, start_redis, stop_proc

    d = tmp / "cluster"
    d.mkdir(parents=True, exist_ok=True)
    redis_proc, redis_port = start_redis(d)
    pg = Postgres()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        store = pg.start()
        t0 = time.time()
        for i in range(workers):
            w = d / f"worker{i}"
            w.mkdir(exist_ok=True)
            args = polite_settings(
                w, extra, d / "state", POLITE_FRONTIER=f"redis://127.0.0.1:{redis_port}/0",
                POLITE_CRAWL="shared-servers", POLITE_STORE=store)
            cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"urls={urls}",
                   *args]
            print(f"-- cluster worker {i}: " + " ".join(cmd), flush=True)
            procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL))
            time.sleep(1.0)  # the shared state directory's files created by one first
        codes, cpu = _wait(procs)
        return Run(f"polite_crawler, {workers} cluster workers", POLITE_AGENT, t0,
                   time.time(), cpu, codes)
    finally:
        for p in procs:
            stop_proc(p)
        stop_proc(redis_proc)
        pg.stop()


def _collect(run: Run, log: Path) -> None:
    time.sleep(0.3)  # the last lines
    runs = log.parent / "runs.json"
    saved = json.loads(runs.read_text()) if runs.exists() else []
    saved.append({"crawler": run.crawler, "agent": run.agent, "t0": run.t0, "t1": run.t1,
                  "cpu": run.cpu, "codes": run.codes})
    runs.write_text(json.dumps(saved, indent=1))
    _select(run, log)


def _select(run: Run, log: Path) -> None:
    reqs, conns = read_log(log)
    run.reqs = [r for r in reqs if run.agent in r.agent and run.t0 <= r.arrival <= run.t1]
    run.conns = [c for c in conns if run.agent in c.agent and run.t0 <= c.opened <= run.t1]


def report(runs: list[Run], small: Machine, edge: Machine) -> list[str]:
    out: list[str] = []
    if not runs:
        return out
    for label, m in (("small host", small), ("fast edge", edge)):
        rows: list[tuple[str, ...]] = []
        per_run = [small_figures(m, run.reqs, run.conns).rows(m.slots) if m is small
                   else edge_figures(m, run.reqs).rows(m.slots) for run in runs]
        header = ("figure", *(r.crawler for r in runs), "target")
        for i, row in enumerate(per_run[0]):
            rows.append((row[0], *(p[i][1] for p in per_run), row[2]))
        out.append(f"### {label}: {m.address}, W = {m.slots}, {1000 * m.service:g} ms a "
                   f"request, {len(m.sites)} sites of {m.pages} pages")
        out.append("")
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "---|" * len(header))
        out += ["| " + " | ".join(r) + " |" for r in rows]
        out.append("")
    out.append("| run | exit | CPU s | wall s |")
    out.append("|---|---|---|---|")
    out += [f"| {r.crawler} | {r.codes} | {r.cpu:.1f} | {r.t1 - r.t0:.0f} |" for r in runs]
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        return serve_main(argv[1:])
    if argv[:1] == ["stock"]:
        return stock_main(argv[1:])
    ap = argparse.ArgumentParser(prog="bench.shared_servers", description=__doc__)
    ap.add_argument("--edge-sites", type=int, default=200)
    ap.add_argument("--small-pages", type=int, default=7)
    ap.add_argument("--edge-pages", type=int, default=5)
    ap.add_argument("--skip-polite", action="store_true")
    ap.add_argument("--skip-stock", action="store_true")
    ap.add_argument("--cluster", action="store_true", help="also two cluster workers")
    ap.add_argument("--keep", type=Path, default=None, help="keep the logs and state here")
    ap.add_argument("-s", dest="extra", action="append", default=[],
                    help="NAME=VALUE, an extra setting for the polite crawls")
    ap.add_argument("--analyse", type=Path, default=None,
                    help="a --keep directory: its figures again, from its server log")
    a = ap.parse_args(argv)
    small, edge = small_host(a.small_pages), fast_edge(a.edge_sites, a.edge_pages)
    if a.analyse is not None:
        log = a.analyse / "server.jsonl"
        kept = [Run(d["crawler"], d["agent"], d["t0"], d["t1"], d["cpu"], d["codes"])
                for d in json.loads((a.analyse / "runs.json").read_text())]
        for run in kept:
            _select(run, log)
        print("\n".join(report(kept, small, edge)))
        return 0
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    def _terminate(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)  # unwinds through `with servers:`

    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    tmp = Path(tempfile.mkdtemp(prefix="shared-servers-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           **write_table(tmp / "names.json", names_table([small, edge]))}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=False,
                            capture_output=True, text=True).stdout.strip() or f"({ROOT})"
    runs: list[Run] = []
    try:
        with Servers(tmp, [small, edge], env) as servers:
            urls = tmp / "urls.txt"
            urls.write_text("".join(u + "\n" for u in servers.urls(small) + servers.urls(edge)))
            print(f"commit {commit}; {len(small.sites)} sites on the small host "
                  f"({small.address}, ports {servers.ports['small']}), {len(edge.sites)} on "
                  f"the edge ({edge.address}:{servers.ports['edge']['names']}); "
                  f"server log {servers.log}", flush=True)
            print("polite crawl: the project's defaults (POLITE_REST_PAGE 3, POLITE_JITTER "
                  "1.0); set: POLITE_STATE_DIR, POLITE_STATS_FILE, LOG_FILE, "
                  f"POLITE_DNS_LOOKUP={LOOKUP}, "
                  f"POLITE_BOT_URL={BOT_URL}" + (f"; extra {a.extra}" if a.extra else ""),
                  flush=True)
            if not a.skip_polite:
                runs.append(run_polite(tmp, urls, env, a.extra))
                _collect(runs[-1], servers.log)
            if not a.skip_stock:
                runs.append(run_stock(tmp, urls, env))
                _collect(runs[-1], servers.log)
            if a.cluster:
                try:
                    runs.append(run_cluster(tmp, urls, env, a.extra))
                except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                    print(f"-- the cluster run failed: {e}", flush=True)
                else:
                    _collect(runs[-1], servers.log)
        print()
        print(f"commit {commit}; command: python -m bench.shared_servers "
              + " ".join(argv))
        print("\n".join(report(runs, small, edge)))
    finally:
        if a.keep is not None:
            shutil.copytree(tmp, a.keep, dirs_exist_ok=True)
            print(f"kept in {a.keep}")
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if all(c == 0 for r in runs for c in r.codes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
