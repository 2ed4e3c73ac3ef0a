"""One crawl over a web of hostile hosts beside normal ones.

Every hostile case is a scenario host of the test web, named as a start URL so
the crawler visits it: redirects into internal addresses in every spelling,
malformed HTTP, mislabelled and undecodable text, hostile robots.txt files, a
server that dribbles, a head that never ends. ``INSIDE`` (127.0.0.200) is
loopback but never named by the operator: it plays the internal network.

Asserted from the test web's own request log, the crawler's access log, the
process's own outgoing connections (guarded: an escape is blocked and recorded)
and the crawler's log:

* no connection was ever made to INSIDE, nor to any address outside loopback;
* the normal hosts beside the hostile ones were crawled completely;
* every hostile case ended in a counted decision (a refusal, a verdict, a cut,
  a robots.txt outcome), and the crawler's log holds no traceback;
* the process stayed under MEMORY_BOUND of resident memory during the crawl.
"""

from __future__ import annotations

import gzip
import logging
import os
import socket
import threading
import time
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import reactor

from demo.web.server import Resp, Site, TestWeb, page
from polite_crawler.extensions.accesslog import read_access_log
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import run_crawl
from tests.netguard import LOOPBACK, guard_connections

pytestmark = pytest.mark.slow

INSIDE = "127.0.0.200"
BOT_URL = "https://bot.example/"
# Resident memory the test process may gain during the crawl (measured from its start,
# which depends on the tests run before it in the same process). The hostile pages
# together are ~25 MB: a crawler that inflated a bomb or held every body would not
# stay under this.
MEMORY_GROWTH = 300 * 1024 * 1024

HOSTS = {
    "normal_a": "127.0.0.1",
    "normal_b": "127.0.0.2",
    "ssrf": "127.0.0.3",
    "malformed": "127.0.0.4",
    "text": "127.0.0.5",
    "robots_big": "127.0.0.6",
    "robots_utf16": "127.0.0.7",
    "robots_binary": "127.0.0.8",
    "slow": "127.0.0.9",
    "heads": "127.0.0.10",
    "redirects": "127.0.0.11",
    "rst": "127.0.0.12",
    "slow_head": "127.0.0.13",
}
ALLOW = "User-agent: *\nAllow: /\n"


def _normal(name: str) -> Site:
    return Site({
        "/robots.txt": ALLOW,
        "/": page(f"{name} home", "welcome", ["/p1", "/p2", "/p3"]),
        "/p1": page(f"{name} 1", "one", ["/", "/p2"]),
        "/p2": page(f"{name} 2", "two", ["/p3"]),
        "/p3": page(f"{name} 3", "three", ["/"]),
    })


def _index(name: str, paths: list[str]) -> bytes:
    # Every page its own text: pages with the same main text are one page (an alias).
    return page(f"{name} index", "hostile cases", paths)


def _redirect(to: str) -> Resp:
    return Resp(302, b"", headers={"Location": to})


def _ssrf(port: int) -> Site:
    targets = {
        "/to-inside": f"http://{INSIDE}:{port}/",
        "/to-private": "http://10.0.0.1/",
        "/to-metadata": "http://169.254.169.254/latest/meta-data/",
        "/to-decimal": "http://2852039166/latest/meta-data/",
        "/to-octal": f"http://0177.0.0.1:{port + 1}/",  # loopback, another port
        "/to-hex": "http://0xa9fea9fe/",
        "/to-short": f"http://127.1:{port + 1}/",
        "/to-mapped": f"http://[::ffff:7f00:c8]:{port}/",  # INSIDE, as IPv6
        "/to-v6-loopback": f"http://[::1]:{port}/",
        "/to-localhost": f"http://localhost:{port}/",
        "/to-dotted": f"http://{INSIDE}.:{port}/",
        "/to-encoded": f"http://%31%32%37.0.0.200:{port}/",
        "/to-userinfo": f"http://{HOSTS['ssrf']}:{port}@{INSIDE}:{port}/",
        "/to-userinfo-self": f"http://someone:secret@{HOSTS['ssrf']}:{port}/creds",
        "/to-cgnat": "http://100.64.0.1/",
        "/to-file": "file:///etc/passwd",
        "/to-gopher": f"gopher://{INSIDE}:{port}/_stats",
        "/to-name": f"http://inward.test:{port}/",
        "/to-port": f"http://{HOSTS['ssrf']}:22/",  # the start host, another service
    }
    me = f"http://{HOSTS['ssrf']}:{port}"
    # robots.txt and sitemaps may name other hosts; rel=canonical points inside.
    robots = (ALLOW + "Sitemap: http://169.254.169.254/latest/sitemap.xml\n"
              f"Sitemap: http://{INSIDE}:{port}/sitemap.xml\nSitemap: {me}/sitemap.xml\n")
    sitemap = ('<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
               + "".join(f"<url><loc>{u}</loc></url>" for u in (
                   f"http://{INSIDE}:{port}/from-sitemap", "http://10.0.0.1/from-sitemap",
                   "http://2852039166/from-sitemap", f"{me}/listed"))
               + "</urlset>")
    index = _index("ssrf", list(targets)).replace(
        b"<head>", f'<head><link rel="canonical" href="http://{INSIDE}:{port}/">'.encode())
    routes: dict[str, Any] = {"/robots.txt": robots, "/": index, "/sitemap.xml": sitemap,
                              "/listed": page("listed")}
    routes.update({path: _redirect(to) for path, to in targets.items()})
    return Site(routes)


def _malformed() -> Site:
    cases = {
        "/bad-status": b"HTTP/1.1 abc OK\r\nContent-Length: 2\r\n\r\nok",
        "/garbage-status": b"\x00\x01\x02 garbage \xff\xfe\r\n\r\n",
        "/no-status": b"",
        "/conflicting-length": (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                                b"Content-Length: 5\r\nContent-Length: 500\r\n\r\nhello"),
        "/truncated-chunked": (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                               b"Transfer-Encoding: chunked\r\n\r\n"
                               b"10\r\n<html><body>abcd\r\n400\r\nonly a few bytes"),
        "/bad-chunk-size": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                            b"zz\r\nnope\r\n0\r\n\r\n"),
        "/short-body": (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                        b"Content-Length: 100000\r\n\r\n<html>cut short"),
        "/header-no-colon": (b"HTTP/1.1 200 OK\r\nThis line has no colon\r\n"
                             b"Content-Type: text/html\r\nContent-Length: 17\r\n\r\n"
                             b"<html>fine</html>"),
    }
    routes: dict[str, Any] = {"/robots.txt": ALLOW, "/": _index("malformed", list(cases))}
    routes.update({path: Resp(raw=raw) for path, raw in cases.items()})
    return Site(routes)


# 100 MB of zeros in 100 KB: the body is cut at POLITE_MAX_BYTES of output, not inflated.
_BOMB = gzip.compress(b"\0" * (100 * 1024 * 1024), compresslevel=9)


def _text() -> Site:
    deep = b"<html><body>" + b"<div>" * 100_000 + b"deep" + b"</div>" * 100_000 + b"</body></html>"
    # Off-host links: extracted and dropped. (The number of links taken from a page is
    # capped by discovery; Scrapy's LinkExtractor spends ~35 us a link, in the reactor.)
    many = page("many links", "", [f"http://elsewhere.example/p{i}" for i in range(20_000)])
    cases: dict[str, Resp] = {
        "/invalid-utf8": Resp(200, b"<html><title>bad \xff\xfe\xc3\x28</title>\xed\xa0\x80</html>",
                              content_type="text/html; charset=utf-8"),
        "/wrong-charset": Resp(200, "<html><title>Grüße ☃</title></html>".encode(),
                               content_type="text/html; charset=iso-2022-jp"),
        "/unknown-charset": Resp(200, b"<html><title>x</title></html>",
                                 content_type="text/html; charset=x-no-such-charset"),
        "/utf16-no-bom": Resp(200, "<html><title>wide</title></html>".encode("utf-16-le"),
                              content_type="text/html; charset=utf-16"),
        "/html-as-png": Resp(200, page("not an image", "", ["/p-from-png"]),
                             content_type="image/png"),
        "/binary-as-html": Resp(200, os.urandom(200_000), content_type="text/html"),
        "/nul-bytes": Resp(200, b"<html>\x00\x00<title>\x00</title>" + b"\x00" * 10_000,
                           content_type="text/html"),
        "/deep-nesting": Resp(200, deep, content_type="text/html"),
        "/many-links": Resp(200, many, content_type="text/html"),
        "/gzip-bomb": Resp(200, _BOMB, content_type="text/html", gzip_ok=False,
                           headers={"Content-Encoding": "gzip"}),
        "/meta-charset-lies": Resp(
            200, b'<html><head><meta charset="utf-32"></head><body>\x80\x81</body></html>',
            content_type="text/html"),
    }
    routes: dict[str, Any] = {"/robots.txt": ALLOW, "/": _index("text", list(cases))}
    routes.update(cases)
    return Site(routes)


def _robots(name: str, body: bytes, ctype: str = "text/plain") -> Site:
    return Site({
        "/robots.txt": Resp(200, body, content_type=ctype),
        "/": page(f"{name} home", "", ["/p1"]),
        "/p1": page(f"{name} p1"),
    })


def _slow() -> Site:
    return Site({
        "/robots.txt": ALLOW,
        "/": _index("slow", ["/dribble", "/fine"]),
        "/dribble": Resp(200, (b"x" for _ in range(200)), delay_per_chunk=0.05),
        "/fine": page("slow fine"),
    })


def _slow_head() -> Site:
    # A machine of its own: a timed-out exchange holds its whole address for 5 times its
    # length (policy.servers), so the dribble's and the head's waits on one machine came
    # one after the other, retries included (50 s of the crawl's 52).
    return Site({
        "/robots.txt": ALLOW,
        "/": _index("slow head", ["/slow-head", "/fine"]),
        "/slow-head": Resp(200, page("late"), delay=5.0),
        "/fine": page("slow head fine"),
    })


def _heads() -> Site:
    many = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"y" * 200) for i in range(5000))  # ~1 MB
    long_line = b"X-Long: " + b"z" * 100_000 + b"\r\n"
    return Site({
        "/robots.txt": ALLOW,
        "/": _index("heads", ["/many-headers", "/long-header", "/fine"]),
        "/many-headers": Resp(raw=b"HTTP/1.1 200 OK\r\n" + many + b"Content-Length: 2\r\n\r\nok"),
        "/long-header": Resp(raw=b"HTTP/1.1 200 OK\r\n" + long_line
                             + b"Content-Length: 2\r\n\r\nok"),
        "/fine": page("heads fine"),
    })


def _redirects(port: int, host: str) -> Site:
    routes: dict[str, Any] = {
        "/robots.txt": ALLOW,
        "/": _index("redirects", ["/r0", "/loop", "/long-location", "/target"]),
        "/loop": _redirect("/loop"),
        "/long-location": _redirect("/x" * 5000),
        "/target": page("target"),
    }
    for i in range(8):  # /r0 -> /r1 -> ... -> /r8: more than 5 hops
        routes[f"/r{i}"] = _redirect(f"http://{host}:{port}/r{i + 1}")
    routes["/r8"] = page("too far")
    return Site(routes)


class RstServer:
    """A host that resets the connection in the middle of a body (RST, not FIN)."""

    def __init__(self, host: str, port: int) -> None:
        self.log: list[str] = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True, name="rst-server")
        self.thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            path = head.split(b" ", 2)[1].decode()
            self.log.append(path)
            if path == "/robots.txt":
                body = ALLOW.encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                             % (len(body), body))
            elif path == "/":
                body = page("rst home", "", ["/rst"])
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d"
                             b"\r\nConnection: close\r\n\r\n%s" % (len(body), body))
            else:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                             b"Content-Length: 100000\r\n\r\n<html><body>" + b"a" * 5000)
                time.sleep(0.05)
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                b"\x01\x00\x00\x00\x00\x00\x00\x00")
        except OSError:
            pass
        finally:
            conn.close()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


class MemorySampler:
    """Peak resident memory of this process, sampled every 20 ms."""

    def __init__(self) -> None:
        self.peak = self.base = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def rss() -> int:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(0.02)

    def __enter__(self) -> MemorySampler:
        self.base = self.peak = self.rss()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.thread.join()


class StallMonitor:
    """The longest the reactor went without running a 50 ms timer (parsing blocks it)."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._last = 0.0
        self._call: Any = None

    def _tick(self) -> None:
        now = time.monotonic()
        self.worst = max(self.worst, now - self._last - 0.05)
        self._last = now
        self._call = reactor.callLater(0.05, self._tick)

    def __enter__(self) -> StallMonitor:
        self._last = time.monotonic()
        self._call = reactor.callLater(0.05, self._tick)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._call is not None and self._call.active():
            self._call.cancel()


def _inward_lookup(name: str, port: int) -> list[str]:
    """The injected DNS: one name leads inside, nothing else resolves."""
    return [INSIDE] if name == "inward.test" else []


def _build_web(web_factory: Any) -> TestWeb:
    # The port is known once the first host is bound; the other sites need it.
    web: TestWeb = web_factory({HOSTS["normal_a"]: _normal("a"), HOSTS["normal_b"]: _normal("b")})
    inside = TestWeb({INSIDE: Site({"/": page("secret"), "/robots.txt": ALLOW})}, web.port)
    others = {
        HOSTS["ssrf"]: _ssrf(web.port),
        HOSTS["malformed"]: _malformed(),
        HOSTS["text"]: _text(),
        HOSTS["robots_big"]: _robots(
            "big", b"User-agent: *\nAllow: /\n" + b"# filler line\n" * 800_000),
        HOSTS["robots_utf16"]: _robots(
            "utf16", "User-agent: *\nDisallow: /p1\n".encode("utf-16"),
            "text/plain; charset=utf-16"),
        HOSTS["robots_binary"]: _robots(
            "binary", os.urandom(64 * 1024), "application/octet-stream"),
        HOSTS["slow"]: _slow(),
        HOSTS["slow_head"]: _slow_head(),
        HOSTS["heads"]: _heads(),
        HOSTS["redirects"]: _redirects(web.port, HOSTS["redirects"]),
    }
    extra = TestWeb(others, web.port).start()
    inside.start()
    web._polite_extra = [extra, inside]  # type: ignore[attr-defined]
    return web


@pytest_twisted.ensureDeferred
async def test_hostile_web(web_factory, tmp_path, caplog) -> None:
    web = _build_web(web_factory)
    extra, inside = web._polite_extra  # type: ignore[attr-defined]
    rst = RstServer(HOSTS["rst"], web.port)
    log = tmp_path / "access.jsonl"
    start_urls = [f"http://{h}:{web.port}/" for h in HOSTS.values()]
    settings = {
        "POLITE_STATE_DIR": str(tmp_path),
        "POLITE_ACCESS_LOG": str(log),
        "POLITE_BOT_URL": BOT_URL,
        "POLITE_DNS_LOOKUP": _inward_lookup,
        # Small, but above the longest the reactor is busy parsing one hostile page.
        "POLITE_HEADERS_TIMEOUT": 2.0,
        "POLITE_EXCHANGE_TIMEOUT": 3.0,
        "POLITE_RETRY_TIMES": 1,
        "POLITE_TEST_WAIT_SCALE": 0.01,
        "POLITE_BREAKER_FAILURES": 50,  # let every malformed case be tried
        "POLITE_REST_DURATION_FACTOR": 1.0,  # a timed-out exchange rests 3 s, not 15
        "LOG_LEVEL": "DEBUG",
    }
    caplog.set_level(logging.DEBUG)
    t0 = time.monotonic()
    try:
        with guard_connections(LOOPBACK) as netguard, MemorySampler() as memory, \
                StallMonitor() as stalls:
            result = await run_crawl(SiteSpider, settings, url=",".join(start_urls))
    finally:
        rst.stop()
        extra.stop()
        inside.stop()
    took = time.monotonic() - t0
    stats = result.stats
    entries = web.entries() + extra.entries()

    # --- nothing reached the inside, nor anything beyond loopback ----------------------
    assert netguard.escapes == []
    assert INSIDE not in netguard.hosts()
    assert inside.entries() == []
    lines = read_access_log(log)
    inward = [ln for ln in lines if INSIDE in ln["url"] or "inward.test" in ln["url"]]
    assert inward and all(ln["sent"] is None for ln in inward), inward
    served_hosts = {e.host for e in entries}
    assert served_hosts <= set(HOSTS.values())

    # --- the normal hosts were crawled completely ------------------------------------------
    urls = {dict(i)["url"] for i in result.items}
    for name in ("normal_a", "normal_b"):
        for path in ("/", "/p1", "/p2", "/p3"):
            assert f"http://{HOSTS[name]}:{web.port}{path}" in urls, (name, path)

    # --- every SSRF redirect was refused, counted and logged ---------------------------
    refusals = [ln for ln in lines if str(ln["verdict"]).startswith("refused:")]
    refused = {ln["url"]: ln["verdict"] for ln in refusals}
    assert all(ln["sent"] is None for ln in refusals)
    reasons = {k.rsplit("/", 1)[1]: v for k, v in stats.items()
               if k.startswith("polite/addresses/refused/")}
    for reason in ("loopback", "private", "link-local", "cgnat", "special-name", "userinfo",
                   "dns-loopback"):
        assert reasons.get(reason, 0) >= 1, (reason, reasons)
    assert any("169.254.169.254" in u or "2852039166" in u for u in refused)
    ssrf_paths = {e.path for e in entries if e.host == HOSTS["ssrf"]}
    assert "/to-metadata" in ssrf_paths and "/to-inside" in ssrf_paths
    assert {"/sitemap.xml", "/listed"} <= ssrf_paths  # its own sitemap was read and followed

    # --- redirects: at most 5 hops ----------------------------------------------------------
    hops = [e.path for e in entries if e.host == HOSTS["redirects"] and e.path.startswith("/r")]
    assert "/r5" in hops and "/r6" not in hops and "/r8" not in hops

    # --- malformed HTTP, slow servers and fat heads end in verdicts -----------------------
    for host, paths in ((HOSTS["malformed"], ("/bad-status", "/truncated-chunked")),
                        (HOSTS["slow"], ("/dribble",)),
                        (HOSTS["slow_head"], ("/slow-head",)),
                        (HOSTS["heads"], ("/many-headers",))):
        failed = [ln for ln in lines if ln["origin"].endswith(f"{host}:{web.port}")
                  and any(ln["url"].endswith(p) for p in paths)]
        assert failed, (host, paths)
        assert all(ln["verdict"] for ln in failed), failed
    assert f"http://{HOSTS['slow']}:{web.port}/fine" in urls
    assert f"http://{HOSTS['slow_head']}:{web.port}/fine" in urls
    assert f"http://{HOSTS['heads']}:{web.port}/fine" in urls
    assert f"http://{HOSTS['malformed']}:{web.port}/header-no-colon" in urls
    dribble = [e for e in entries if e.path == "/dribble"]
    assert dribble and all(e.bytes_sent < 200 for e in dribble)  # cut before the end
    assert "/rst" in rst.log

    # --- hostile robots.txt files end in an outcome ------------------------------------------
    outcomes = sum(v for k, v in stats.items() if k.startswith("polite/robots/outcome/"))
    assert outcomes >= len(HOSTS)
    assert f"http://{HOSTS['robots_big']}:{web.port}/p1" in urls

    # --- mislabelled text: decided, not crashed --------------------------------------------------
    text_seen = {e.path for e in entries if e.host == HOSTS["text"]}
    assert {"/invalid-utf8", "/binary-as-html", "/deep-nesting", "/many-links",
            "/html-as-png", "/gzip-bomb"} <= text_seen
    assert stats.get("polite/sizecap/cut/decoded", 0) >= 1  # the bomb stopped at the cap

    # --- no traceback, bounded memory, bounded time ---------------------------------------------
    tracebacks = [r for r in caplog.records
                  if r.exc_info or "Traceback" in r.getMessage()]
    assert tracebacks == [], [f"{r.name}: {r.getMessage()[:300]}" for r in tracebacks]
    assert not any(r.levelno >= logging.ERROR for r in caplog.records), [
        f"{r.name}: {r.getMessage()[:300]}" for r in caplog.records if r.levelno >= logging.ERROR]
    assert memory.peak - memory.base < MEMORY_GROWTH, (memory.base, memory.peak)
    assert took < 120
    print(f"hostile crawl: {took:.1f} s, RSS {memory.base / 2**20:.0f} MiB at the start, "
          f"peak {memory.peak / 2**20:.0f} MiB, "
          f"longest reactor stall {stalls.worst:.2f} s, {len(entries)} requests served, "
          f"{len(lines)} access-log lines")


class _SlotSpider(SiteSpider):
    name = "slots"
    slots: dict[str, str]

    def parse(self, response: Any, **kwargs: Any) -> Any:
        self.slots[response.url] = response.meta.get("download_slot")
        yield from super().parse(response, **kwargs)


@pytest_twisted.ensureDeferred
async def test_redirect_to_another_host_is_keyed_by_its_own_origin(web_factory, tmp_path) -> None:
    a, b = HOSTS["normal_a"], HOSTS["normal_b"]
    web = web_factory({a: Site({"/robots.txt": ALLOW, "/": page("a", "", ["/go"])}),
                       b: Site({"/robots.txt": ALLOW, "/": page("b"), "/landing": page("b")})})
    web.sites[a].routes["/go"] = _redirect(web.url(b, "/landing"))
    _SlotSpider.slots = {}
    await run_crawl(_SlotSpider, {"POLITE_STATE_DIR": str(tmp_path)},
                    url=f"{web.url(a)},{web.url(b)}")
    landing = web.url(b, "/landing")
    assert _SlotSpider.slots[landing] == f"http://{b}:{web.port}"  # not the old host's slot
    assert [e.path for e in web.entries(b)].index("/robots.txt") == 0


@pytest.mark.parametrize("markup", [
    b'<html><head><base href="http://["><title>t</title></head><a href="/a">a</a></html>',
    b'<html><head><link rel="canonical" href="http://[::1"></head><a href="/a">a</a></html>',
    b'<html><body><a href="http://[oops/">x</a><a href="/a">a</a></body></html>',
    b'<html><body><a href="http://%zz%00/">x</a><a href="\x00/a">y</a><a href="/a">a</a></body>',
])
@pytest_twisted.ensureDeferred
async def test_hostile_markup_in_pages(web_factory, tmp_path, caplog, markup: bytes) -> None:
    host = HOSTS["normal_a"]
    # /a has text of its own: a page whose text equals the start page's is an alias.
    web = web_factory({host: Site({"/robots.txt": ALLOW, "/": Resp(200, markup),
                                   "/a": page("a", "the page the markup links to")})})
    caplog.set_level(logging.INFO)
    result = await run_crawl(SiteSpider, {"POLITE_STATE_DIR": str(tmp_path)}, url=web.url(host))
    assert web.url(host, "/a") in {dict(i)["url"] for i in result.items}
    errors = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert errors == [], [f"{r.name}: {r.getMessage()[:200]}" for r in errors]
