"""The real web of ``bench.realweb``: Debian's nginx on loopback, serving N sites.

Everything lives in one temporary directory: the configuration, the pid file, the
error and access logs, nginx's temp paths and, per site, its ``robots.txt`` and
``sitemap.xml`` (``sites/<address>/``). The pages themselves are one directory shared
read-only by every site (``root``): the Python documentation for the python3-doc
workloads, or generated small pages of real text. Each site is a ``server`` block of
its own that listens on its loopback address (127.0.x.y) and the one port.

nginx runs in the foreground (``daemon off``) as a child of the bench and is stopped
by its PID (SIGQUIT, then SIGKILL), whatever way the bench exits.

The access log has one line a request: server address, ``$msec`` (the time the answer
was done), ``$request_time``, status, bytes sent, content type, the path and the
User-Agent (which tells the two crawls apart).
"""

from __future__ import annotations

import contextlib
import html
import os
import random
import re
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

NGINX = Path("/usr/sbin/nginx")
DOCS = Path("/usr/share/doc/python3/html")

LOG_FORMAT = (
    '$server_addr $msec $request_time $status $body_bytes_sent "$sent_http_content_type" '
    '"$request_uri" "$http_user_agent"'
)
_LINE = re.compile(r'^(\S+) (\S+) (\S+) (\d+) (\d+) "([^"]*)" "([^"]*)" "([^"]*)"$')


def hosts_for(n: int) -> list[str]:
    """N distinct loopback addresses: 127.0.1.1 ... 127.0.1.250, 127.0.2.1 ..."""
    return [f"127.0.{1 + i // 250}.{1 + i % 250}" for i in range(n)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def doc_pages(root: Path = DOCS) -> list[str]:
    """Every HTML page under ``root``, as URL paths ("/library/os.html"), sorted; the
    top ``index.html`` as "/" (the URL a crawl starts from, and its sitemap lists first)."""
    root = root.resolve()
    paths = ("/" + p.relative_to(root).as_posix() for p in root.rglob("*.html") if p.is_file())
    return sorted("/" if p == "/index.html" else p for p in paths)


@dataclass
class Hit:
    """One line of the access log."""

    host: str
    end: float
    duration: float
    status: int
    size: int
    ctype: str
    path: str
    agent: str

    @property
    def start(self) -> float:
        return self.end - self.duration

    @property
    def is_page(self) -> bool:
        return self.status == 200 and self.ctype.startswith("text/html")


def raw_size(root: Path, path: str) -> int | None:
    """The size on disk of the file nginx serves for ``path`` under ``root`` (None: none)."""
    rel = path.split("?", 1)[0].lstrip("/")
    target = root / rel
    if not rel or rel.endswith("/"):
        target = target / "index.html"
    try:
        return target.stat().st_size
    except OSError:
        return None


def read_log(path: Path) -> list[Hit]:
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        host, end, dur, status, size, ctype, path_, agent = m.groups()
        out.append(Hit(host, float(end), float(dur), int(status), int(size), ctype, path_, agent))
    return out


# --- the sites ---------------------------------------------------------------------------
def host_order(host: str, paths: list[str]) -> list[str]:
    """``paths`` in the host's own order: a shuffle seeded by the host's name (stable from
    run to run), "/" first. Sites list their pages in orders of their own; listed in one
    sorted order, a budget of 10 would fetch the same few small pages on every host."""
    rest = [p for p in paths if p != "/"]
    random.Random(f"sitemap order {host}").shuffle(rest)
    return (["/"] if len(rest) < len(paths) else []) + rest


def write_site_files(sites_dir: Path, hosts: list[str], port: int, paths: list[str], *,
                     sitemap: bool = True, order: str = "host") -> int:
    """robots.txt (with a ``Sitemap:`` line) and sitemap.xml for every host; URLs listed.

    ``order``: "host" lists each host's pages in its own order (:func:`host_order`),
    "sorted" in ``paths``' order on every host.
    """
    if order not in ("host", "sorted"):
        raise ValueError(f"order must be 'host' or 'sorted', not {order!r}")
    listed = 0
    for host in hosts:
        d = sites_dir / host
        d.mkdir(parents=True, exist_ok=True)
        base = f"http://{host}:{port}"
        robots = "User-agent: *\nAllow: /\n"
        sm = d / "sitemap.xml"
        if sitemap:
            robots += f"\nSitemap: {base}/sitemap.xml\n"
            listing = host_order(host, paths) if order == "host" else paths
            body = "".join(f"<url><loc>{html.escape(base + p)}</loc></url>\n"
                           for p in listing)
            sm.write_text('<?xml version="1.0" encoding="UTF-8"?>\n'
                          '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
                          f"{body}</urlset>\n", encoding="utf-8")
            listed += len(paths)
        else:
            sm.unlink(missing_ok=True)
        (d / "robots.txt").write_text(robots, encoding="utf-8")
    return listed


def _paragraphs(root: Path, limit: int = 4000) -> list[str]:
    """Paragraphs of real prose from the Python documentation (tags removed)."""
    out: list[str] = []
    tag = re.compile(r"<[^>]+>")
    space = re.compile(r"\s+")
    for page in sorted(root.resolve().rglob("*.html")):
        text = page.read_text(encoding="utf-8", errors="replace")
        for m in re.finditer(r"<p>(.*?)</p>", text, re.S):
            para = space.sub(" ", html.unescape(tag.sub("", m.group(1)))).strip()
            if len(para) > 200:
                out.append(para)
        if len(out) >= limit:
            break
    return out


def write_small_pages(pages_dir: Path, count: int, size: int = 5000,
                      docs: Path = DOCS, linked: int | None = None) -> list[str]:
    """``count`` pages of about ``size`` bytes of real text.

    "/" links to the next ``linked`` pages (all of them by default), each page to "/".
    """
    paras = _paragraphs(docs)
    if not paras:
        raise RuntimeError(f"no paragraphs found under {docs}")
    pages_dir.mkdir(parents=True, exist_ok=True)
    paths = ["/"] + [f"/p{i}.html" for i in range(1, count)]
    k = 0
    for i, path in enumerate(paths):
        links = " ".join(f'<a href="{p}">page {j}</a>'
                         for j, p in enumerate(paths[1:(linked or count - 1) + 1], 1)) \
            if i == 0 else '<a href="/">home</a>'
        parts: list[str] = []
        length = 0
        while length < size:
            para = paras[k % len(paras)]
            k += 1
            parts.append(f"<p>{html.escape(para)}</p>\n")
            length += len(parts[-1])
        name = "index.html" if path == "/" else path.lstrip("/")
        (pages_dir / name).write_text(
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>Page {i}</title></head>\n<body><h1>Page {i}</h1>\n<nav>{links}</nav>\n"
            f"{''.join(parts)}</body></html>\n", encoding="utf-8")
    return paths


# --- nginx -------------------------------------------------------------------------------
class Nginx:
    """nginx in the foreground, configured and logging in ``tmp``; a context manager."""

    def __init__(self, tmp: Path, hosts: list[str], port: int, pages_root: Path, *,
                 limit_rest: float | None = None) -> None:
        self.tmp, self.hosts, self.port, self.root = tmp, hosts, port, pages_root
        self.limit_rest = limit_rest
        self.access_log = tmp / "access.log"
        self.error_log = tmp / "error.log"
        self.conf = tmp / "nginx.conf"
        self.sites = tmp / "sites"
        self.proc: subprocess.Popen[bytes] | None = None

    def config(self) -> str:
        t = self.tmp
        limit_zone = limit = ""
        if self.limit_rest is not None:
            # One request per R per site ($server_addr), no burst: the excess gets 429.
            per_minute = 60.0 / self.limit_rest
            limit_zone = (f"limit_req_zone $server_addr zone=persite:16m "
                          f"rate={per_minute:g}r/m;\n    limit_req_status 429;\n")
            limit = "limit_req zone=persite;"
        servers = []
        for host in self.hosts:
            servers.append(
                f"    server {{\n        listen {host}:{self.port};\n"
                f"        root {self.root};\n        {limit}\n"
                f"        location = /robots.txt {{ root {self.sites}/{host}; }}\n"
                f"        location = /sitemap.xml {{ root {self.sites}/{host}; }}\n    }}\n")
        nofile = min(65536, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
        return f"""daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile {nofile};
pid {t}/nginx.pid;
error_log {t}/error.log warn;
events {{ worker_connections {nofile - 64}; }}
http {{
    types {{
        text/html html htm; text/css css; text/plain txt; application/xml xml;
        application/javascript js; image/png png; image/svg+xml svg;
    }}
    default_type application/octet-stream;
    client_body_temp_path {t}/tmp/body;
    proxy_temp_path {t}/tmp/proxy;
    fastcgi_temp_path {t}/tmp/fastcgi;
    uwsgi_temp_path {t}/tmp/uwsgi;
    scgi_temp_path {t}/tmp/scgi;
    log_format bench '{LOG_FORMAT}';
    access_log {self.access_log} bench;
    sendfile on;
    keepalive_timeout 75s;
    keepalive_requests 1000000;
    gzip on;
    gzip_types text/css text/plain application/xml application/javascript;
    server_tokens off;
    {limit_zone}
{''.join(servers)}}}
"""

    def start(self) -> Nginx:
        if not NGINX.exists():
            raise RuntimeError(f"{NGINX} is missing: run `bash scripts/system-deps.sh bench`")
        (self.tmp / "tmp").mkdir(parents=True, exist_ok=True)
        self.conf.write_text(self.config(), encoding="utf-8")
        # nginx's workers run as "nobody" when the bench is root: let them read.
        for d in (self.tmp, self.sites, self.root):
            if d.is_dir() and d.is_relative_to(self.tmp):
                for p in [d, *d.rglob("*")]:
                    p.chmod(0o755 if p.is_dir() else 0o644)
        self.proc = subprocess.Popen(
            [str(NGINX), "-p", str(self.tmp), "-c", str(self.conf), "-e", str(self.error_log)],
            stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited {self.proc.returncode}: "
                                   f"{self._error_tail()}")
            try:
                with socket.create_connection((self.hosts[-1], self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"nginx did not listen on {self.hosts[-1]}:{self.port}")

    def _error_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.error_log.read_text()[-2000:]
        return ""

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGQUIT)  # graceful: workers finish, logs are flushed
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> Nginx:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def keep(self, dest: Path) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        for p in (self.conf, self.access_log, self.error_log):
            if p.exists():
                shutil.copy(p, dest / p.name)


def make_readable_tmp(prefix: str) -> Path:
    tmp = Path(os.path.realpath(tempfile.mkdtemp(prefix=prefix)))
    tmp.chmod(0o755)
    return tmp
