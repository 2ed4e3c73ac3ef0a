"""A real HTTP/1.1 server on several loopback addresses, with a request log.

Used by the demo (``make demo``) and by the tests. Each loopback address is a
distinct host serving one :class:`Site`. It speaks correct HTTP/1.1: keep-alive,
Content-Length or chunked bodies, HEAD, gzip when asked, and ETag /
Last-Modified validators with 304 answers.
"""

from __future__ import annotations

import email.utils
import gzip
import hashlib
import itertools
import socket
import socketserver
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator


@dataclass
class Req:
    """What a site's handler sees of one request."""

    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    host: str  # the loopback address the request arrived on
    port: int

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)


@dataclass
class Resp:
    """What a site's handler answers.

    ``body`` may be bytes or an iterable of byte chunks (sent chunked, or with
    ``delay_per_chunk`` seconds between them, to play a slow server).
    ``validators`` adds ETag/Last-Modified and answers 304 when the request's
    conditional headers match. ``close`` drops the connection without answering
    (a reset); ``raw`` sends these bytes verbatim instead of a proper response.
    """

    status: int = 200
    body: bytes | Iterable[bytes] = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "text/html; charset=utf-8"
    etag: str | None = None
    last_modified: float | None = None  # epoch seconds
    delay: float = 0.0  # seconds before the response head
    delay_per_chunk: float = 0.0
    chunked: bool = False
    gzip_ok: bool = True  # gzip when the client accepts it
    reset: bool = False
    raw: bytes | None = None


@dataclass
class LogEntry:
    """One line of the server's access log."""

    host: str
    port: int
    method: str
    path: str
    status: int
    bytes_sent: int  # body bytes on the wire
    started: float  # time.time() when the request head had arrived
    # time.time() as the response's last bytes were handed to the socket (or when it was
    # dropped): the earliest the client could have it all. Stamped after the send, a
    # server thread waiting for the GIL or a CPU stamped it late, up to tens of ms on a
    # busy machine, and a polite client's rest read short.
    finished: float
    headers: dict[str, str]

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"


class Site:
    """A host's content. Subclass and override :meth:`handle`, or pass a route table."""

    def __init__(
        self, routes: dict[str, Callable[[Req], Resp] | Resp | str | bytes] | None = None
    ):
        self.routes = routes or {}

    def handle(self, req: Req) -> Resp:
        path = req.path.split("?", 1)[0]
        route = self.routes.get(req.path, self.routes.get(path))
        if route is None:
            return Resp(404, b"<html><body>Not found</body></html>")
        if isinstance(route, Resp):
            return route
        if isinstance(route, bytes):
            return Resp(200, route)
        if isinstance(route, str):
            ctype = "text/plain" if path.endswith(".txt") else "text/html; charset=utf-8"
            if path.endswith(".xml"):
                ctype = "application/xml"
            return Resp(200, route.encode(), content_type=ctype)
        return route(req)


def _http_date(ts: float) -> str:
    return email.utils.formatdate(ts, usegmt=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HostServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        started = time.time()
        self.last_bytes_at: float | None = None
        web = self.server.web
        host, port = self.server.server_address[:2]
        headers = {k.lower(): v for k, v in self.headers.items()}
        req = Req(self.command, self.path, headers, str(host), int(port))
        try:
            resp = self.server.site.handle(req)
        except Exception as exc:  # a scenario bug must show, not hang the client
            resp = Resp(500, f"handler error: {exc!r}".encode())
        status, sent = self._send(req, resp)
        finished = self.last_bytes_at if self.last_bytes_at is not None else time.time()
        web._record(
            LogEntry(str(host), int(port), self.command, self.path, status, sent, started,
                     finished, headers)
        )

    def _send(self, req: Req, resp: Resp) -> tuple[int, int]:
        if resp.delay:
            time.sleep(resp.delay)
        if resp.reset:
            self._reset()
            return 0, 0
        if resp.raw is not None:
            self.wfile.write(resp.raw)
            self.wfile.flush()
            self.close_connection = True
            return -1, len(resp.raw)
        status = resp.status
        hdrs = dict(resp.headers)
        if resp.content_type and "Content-Type" not in hdrs:
            hdrs["Content-Type"] = resp.content_type
        if resp.etag is not None:
            hdrs["ETag"] = resp.etag
        if resp.last_modified is not None:
            hdrs["Last-Modified"] = _http_date(resp.last_modified)
        if status == 200 and self._not_modified(req, resp):
            status = 304
        body_iter: Iterator[bytes] | None = None
        body = b""
        if isinstance(resp.body, (bytes, bytearray)):
            body = bytes(resp.body)
        else:
            body_iter = iter(resp.body)
        if status in (204, 304) or 100 <= status < 200:
            body, body_iter = b"", None
        elif body_iter is None and resp.gzip_ok and "gzip" in req.header("accept-encoding") \
                and "Content-Encoding" not in hdrs and len(body) > 64:
            body = gzip.compress(body, mtime=0)
            hdrs["Content-Encoding"] = "gzip"
            hdrs["Vary"] = "Accept-Encoding"
        chunked = resp.chunked or body_iter is not None
        self.send_response(status)
        for k, v in hdrs.items():
            self.send_header(k, v)
        if status not in (204, 304):
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(len(body)))
        if req.method == "HEAD" or status in (204, 304):
            self.last_bytes_at = time.time()
            self.end_headers()
            self.wfile.flush()
            return status, 0
        self.end_headers()
        sent = 0
        try:
            if chunked:
                chunks = body_iter if body_iter is not None else iter([body])
                for chunk in chunks:
                    if not chunk:
                        continue
                    if resp.delay_per_chunk:
                        time.sleep(resp.delay_per_chunk)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                    sent += len(chunk)
                self.last_bytes_at = time.time()
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.last_bytes_at = time.time()
                self.wfile.write(body)
                sent = len(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        return status, sent

    def _not_modified(self, req: Req, resp: Resp) -> bool:
        inm = req.header("if-none-match")
        if inm and resp.etag is not None:
            tags = {t.strip().removeprefix("W/") for t in inm.split(",")}
            return "*" in tags or resp.etag.removeprefix("W/") in tags
        ims = req.header("if-modified-since")
        if ims and resp.last_modified is not None:
            try:
                since = email.utils.parsedate_to_datetime(ims).timestamp()
            except (TypeError, ValueError):
                return False
            return int(resp.last_modified) <= int(since)
        return False

    def _reset(self) -> None:
        # SO_LINGER 0: close() sends RST instead of FIN.
        self.connection.setsockopt(
            socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
        )
        self.close_connection = True

    do_GET = _serve
    do_HEAD = _serve
    do_POST = _serve


class _HostServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, addr: tuple[str, int], site: Site, web: TestWeb):
        self.site = site
        self.web = web
        super().__init__(addr, _Handler)


class TestWeb:
    """Serve ``sites`` ({loopback address: Site}) on one port and log every request.

    Use as a context manager; ``port=0`` picks a free port shared by all hosts.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, sites: dict[str, Site], port: int = 0):
        self.sites = sites
        self.port = port
        self.log: list[LogEntry] = []
        self._lock = threading.Lock()
        self._servers: list[_HostServer] = []
        self._threads: list[threading.Thread] = []

    def _record(self, entry: LogEntry) -> None:
        with self._lock:
            self.log.append(entry)

    def entries(self, host: str | None = None, path: str | None = None) -> list[LogEntry]:
        with self._lock:
            out = list(self.log)
        if host is not None:
            out = [e for e in out if e.host == host]
        if path is not None:
            out = [e for e in out if e.path == path]
        return sorted(out, key=lambda e: e.started)

    def url(self, host: str, path: str = "/") -> str:
        return f"http://{host}:{self.port}{path}"

    def start(self) -> TestWeb:
        for host, site in self.sites.items():
            srv = _HostServer((host, self.port), site, self)
            if self.port == 0:
                self.port = srv.server_address[1]
            self._servers.append(srv)
            t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                                 daemon=True, name=f"testweb-{host}")
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        for srv in self._servers:
            srv.shutdown()
            srv.server_close()
        for t in self._threads:
            t.join(timeout=5)
        self._servers.clear()
        self._threads.clear()

    def __enter__(self) -> TestWeb:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def page(title: str, body: str = "", links: Iterable[str] = ()) -> bytes:
    """A small HTML page with a title, a paragraph and links."""
    items = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
        f"<body><nav><ul>{items}</ul></nav><main><h1>{title}</h1><p>{body}</p></main>"
        "</body></html>"
    ).encode()


def etag_for(body: bytes) -> str:
    return '"' + hashlib.sha1(body).hexdigest()[:16] + '"'


def consecutive(entries: list[LogEntry]) -> Iterator[tuple[LogEntry, LogEntry]]:
    """Each origin's requests in the order they arrived, as pairs of neighbours."""
    by_origin: dict[str, list[LogEntry]] = {}
    for e in entries:
        by_origin.setdefault(e.origin, []).append(e)
    for items in by_origin.values():
        items.sort(key=lambda e: e.started)
        yield from itertools.pairwise(items)


def overlaps(entries: list[LogEntry]) -> list[tuple[LogEntry, LogEntry]]:
    """Pairs of requests to one origin that were in flight at the same time."""
    return [(a, b) for a, b in consecutive(entries) if b.started < a.finished]


def short_rests(
    entries: list[LogEntry], rest: float, slack: float = 0.0
) -> list[tuple[LogEntry, LogEntry, float]]:
    """Pairs of consecutive requests to one origin whose gap (end to start) is below ``rest``."""
    gaps = ((a, b, b.started - a.finished) for a, b in consecutive(entries))
    return [(a, b, gap) for a, b, gap in gaps if gap < rest - slack]
