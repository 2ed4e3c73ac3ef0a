"""The render download handler: scrapy-playwright's, with the crawl's rules on every request.

Installed for http and https by the add-on only when rendering is on
(:mod:`polite_crawler.render.settings`). A request without ``meta["polite_render"]``
goes to :class:`polite_crawler.handlers.GuardedHTTPDownloadHandler` unchanged.
A request with it:

1. Its document is fetched like any page, through the guarded handler (address
   check at connect, timeouts, head cap, the request's own identity and
   conditional headers). Anything but a 200 HTML answer is returned as it is,
   with no browser: the gate judges it as usual.
2. Otherwise scrapy-playwright opens a page in the crawl's one browser context
   (Chromium from ``POLITE_RENDER_BROWSER``) and navigates to the URL. Every
   request the page makes is intercepted (``page.route``): the document is served
   from step 1; the rest is judged by :func:`polite_crawler.policy.render.judge_subrequest`
   (documents, scripts and XHR/fetch of the page's origin, GET/HEAD only; analytics
   hosts, images, media, fonts, stylesheets, favicons, other origins blocked and
   counted), then by robots.txt (the crawl's robots book) and the address policy,
   and only then fetched, one at a time, through the guarded handler with the
   crawl's User-Agent and From (and signed by the crawl's signing middleware, when
   POLITE_SIGNING_KEY is set). The browser itself never opens a connection: it
   is launched with a proxy that does not exist, so anything not intercepted fails.
   Playwright and the browser start with the first render, not with the crawl.
3. The page's DOM after the wait (``meta["polite_render_wait"]``, a CSS selector,
   or no sub-request for POLITE_RENDER_IDLE seconds) is the response body. A
   sub-request answered 402, 403, 429, 503 or with a challenge page (the gate's
   verdict, :func:`~polite_crawler.policy.render.ends_render`) stops the render's requests, and that
   answer (its Retry-After included) is the exchange's, so the gate waits, backs off
   or stops the origin as for any page.

The whole render is one exchange of the origin: the frontier keeps the origin
in flight from the gate's dispatch to the rendered answer, so no other request of
it overlaps, and the rest starts after it. The duration that feeds the 5x rest is
the render's time on the wire, from the page's document to the end of its last
sub-request (the browser's own work is not the server's slowness). A render
that fails (POLITE_RENDER_TIMEOUT, a crashed page or browser) raises
:class:`RenderTimeoutError` or :class:`RenderFailedError`: a failed exchange for
the breaker. A browser that died is launched again for the next render, and one
whose processes use more than POLITE_RENDER_MAX_RSS is closed after the page.

Private scrapy-playwright names this relies on (``scrapy-playwright`` is pinned to
0.0.48; ``tests/test_render_policy.py`` fails if they move): ``_download_request``,
``_make_request_handler``, ``_maybe_launch_in_thread``, ``_launch``,
``_maybe_launch_browser``, ``config``,
``browser_provider``, ``browser`` and ``_browser_disconnected_callback``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from playwright.async_api import TimeoutError as PlaywrightTimeoutError
from scrapy import Request
from scrapy.exceptions import DownloadTimeoutError, IgnoreRequest
from scrapy.http import Headers, HtmlResponse, Response
from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler
from scrapy_playwright.page import PageMethod

from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings
from polite_crawler.handlers import GuardedHTTPDownloadHandler, hold_until_due
from polite_crawler.middlewares.addresses import address_policy
from polite_crawler.middlewares.identity import identity_from_settings
from polite_crawler.middlewares.signing import SigningMiddleware
from polite_crawler.policy.codings import ACCEPT_ENCODING, Decoding
from polite_crawler.policy.render import (
    SubrequestRules,
    ends_render,
    judge_subrequest,
    load_blocked_hosts,
)
from polite_crawler.policy.verdicts import HeaderView, classify_response
from polite_crawler.render.memory import descendants_rss
from polite_crawler.render.middleware import AUTO, shell_cache

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from polite_crawler.interfaces import RobotsService

logger = logging.getLogger(__name__)

CONTEXT = "polite"
# Chromium flags: no background traffic of its own, and a proxy nobody listens on
# (loopback included): a request that escaped interception goes nowhere.
BROWSER_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--mute-audio",
    "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
]
# Response headers that describe the transfer, not the body the browser is given.
_TRANSFER = (b"Content-Encoding", b"Content-Length", b"Transfer-Encoding", b"Connection",
             b"Keep-Alive", b"Set-Cookie")
_FORWARDED = ("accept", "content-type", "accept-language")


class RenderTimeoutError(DownloadTimeoutError, TimeoutError):
    """The render took longer than POLITE_RENDER_TIMEOUT."""


class RenderFailedError(ConnectionError):
    """The browser failed the render (a crashed page or browser, a navigation error)."""


@dataclass
class _Sub:
    url: str
    method: str
    status: int | None
    size: int
    sent: float
    done: float


@dataclass
class _Render:
    """One page being rendered."""

    request: Request
    document: Response
    deadline: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    served_document: bool = False
    subs: list[_Sub] = field(default_factory=list)
    allowed: int = 0
    pages: list[Any] = field(default_factory=list)
    active: float = field(default_factory=time.monotonic)  # last sub-request seen or answered
    closed: bool = False  # the exchange is over: nothing more is sent for it
    refusal: Response | None = None  # a sub-request's answer asking the crawler to stop or wait
    refused: asyncio.Event = field(default_factory=asyncio.Event)
    fetching: asyncio.Task[Any] | None = None


class _ScriptCache:
    """Scripts kept for the crawl, by URL, up to a number of bytes (LRU)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._items: OrderedDict[str, tuple[int, dict[str, str], bytes]] = OrderedDict()

    def get(self, url: str) -> tuple[int, dict[str, str], bytes] | None:
        found = self._items.get(url)
        if found is not None:
            self._items.move_to_end(url)
        return found

    def put(self, url: str, status: int, headers: dict[str, str], body: bytes) -> None:
        if len(body) > self.max_bytes // 4 or url in self._items:
            return
        self._items[url] = (status, headers, body)
        self.size += len(body)
        while self.size > self.max_bytes and self._items:
            _, (_, _, old) = self._items.popitem(last=False)
            self.size -= len(old)


def _cacheable(headers: Headers) -> bool:
    control = (headers.get(b"Cache-Control") or b"").decode("latin-1").lower()
    return "no-store" not in control and "no-cache" not in control and "private" not in control


class RenderDownloadHandler(ScrapyPlaywrightDownloadHandler):  # type: ignore[misc]
    """Plain requests to the guarded HTTP handler; ``polite_render`` ones through the browser."""

    lazy = False

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        settings = polite_settings(crawler.settings)
        self.crawler = crawler
        self.ctx = polite_context(crawler)
        self.guarded = GuardedHTTPDownloadHandler(crawler)
        self.identity = identity_from_settings(settings)
        self.policy = address_policy(crawler)
        extra = {h.strip().lower() for h in settings.getlist("POLITE_RENDER_BLOCK_HOSTS") if h}
        self.rules = SubrequestRules(
            blocked_hosts=load_blocked_hosts() | frozenset(extra),
            block_stylesheets=settings.getbool("POLITE_RENDER_BLOCK_STYLESHEETS"),
        )
        self.timeout = settings.getfloat("POLITE_RENDER_TIMEOUT")
        self.idle = settings.getfloat("POLITE_RENDER_IDLE")
        self.max_subrequests = settings.getint("POLITE_RENDER_MAX_SUBREQUESTS")
        self.max_rss = settings.getint("POLITE_RENDER_MAX_RSS")
        self.max_bytes = settings.getint("POLITE_MAX_BYTES")
        self.cache = _ScriptCache(settings.getint("POLITE_RENDER_CACHE_BYTES"))
        executable = settings.get("POLITE_RENDER_BROWSER")
        # scrapy-playwright's own settings are not the project's to tune: the browser
        # is launched, limited and timed here.
        cfg = self.config
        cfg.browser_type_name = "chromium"
        cfg.launch_options = {"executable_path": executable, "headless": True,
                              "args": list(BROWSER_ARGS), "handle_sigint": False}
        cfg.max_pages_per_context = max(1, settings.getint("POLITE_RENDER_MAX_PAGES"))
        cfg.navigation_timeout_ms = self.timeout * 1000
        cfg.restart_disconnected_browser = True
        cfg.startup_context_kwargs = {}
        cfg.cdp_url = cfg.connect_url = None
        self.process_request_headers = None  # every header is set by _fetch
        self.abort_request = None
        self._renders: dict[str, _Render] = {}
        self._last_browser: Any = None
        # The signing middleware, False when there is none (None: not looked for yet).
        self._signing: SigningMiddleware | bool | None = None
        self._start_lock = asyncio.Lock()

    async def _maybe_launch_in_thread(self) -> None:
        """scrapy-playwright starts Playwright when the engine starts; here it waits for
        the first render, so a crawl that renders nothing starts no process."""

    async def _start_browser(self) -> None:
        async with self._start_lock:
            if getattr(self, "browser_provider", None) is None:
                self._inc("polite/render/playwright_started")
                await self._launch()
        await self._maybe_launch_browser()

    def _inc(self, key: str, n: int = 1) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key, n)

    def _max(self, key: str, value: float) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.max_value(key, value)

    # --- the two paths -----------------------------------------------------------
    async def download_request(self, request: Request) -> Response:
        if not request.meta.get("polite_render"):
            return await self.guarded.download_request(request)
        return await self._render(request)

    async def _render(self, request: Request) -> Response:
        await hold_until_due(self.crawler, request)  # handed out ahead of its time
        started = time.monotonic()
        # The browser is up before the document is asked for: its launch is not part of
        # the render's time on the wire.
        try:
            await asyncio.wait_for(self._start_browser(), self.timeout)
        except Exception as exc:
            self._inc("polite/render/failed/launch")
            raise RenderFailedError(f"the browser did not start: {exc}") from exc
        wire_start = self.ctx.clock()
        # A shell the trigger just read is not asked for again (-a render=auto).
        document = shell_cache(self.crawler).take(request.url) \
            if request.meta.get(AUTO) else None
        wire_end: float | None = None
        if document is not None:
            self._inc("polite/render/shell_reused")
            wire_start = math.inf  # on the wire from the first sub-request
        else:
            document = await self.guarded.download_request(request)
            wire_end = self.ctx.clock()
        if not self._renderable(document):
            self._inc("polite/render/not_rendered")
            return document
        body, headers = self._for_browser(document)
        document = document.replace(body=body, headers=headers)
        url = request.url
        if url in self._renders:
            raise RenderFailedError(f"{url} is being rendered already")
        render = _Render(request, document, started + self.timeout)
        self._renders[url] = render
        inner = request.replace(meta=self._browser_meta(request, render))
        self._inc("polite/render/started")
        try:
            left = max(0.001, render.deadline - time.monotonic())
            try:
                rendered = await self._until_refused(render, self._download_request(inner),
                                                     left)
            except (TimeoutError, PlaywrightTimeoutError):
                self._inc("polite/render/failed/timeout")
                raise RenderTimeoutError(
                    f"rendering {url} took longer than {self.timeout} s") from None
            except Exception as exc:
                if isinstance(exc, DownloadTimeoutError):
                    raise
                self._inc("polite/render/failed/browser")
                logger.info("Rendering %(url)s failed: %(exc)s", {"url": url, "exc": exc})
                raise RenderFailedError(f"rendering {url} failed: {exc}") from exc
        finally:
            await self._close_render(render)
        if render.refusal is not None or rendered is None:
            refusal = render.refusal
            assert refusal is not None
            self._inc(f"polite/render/refused/{refusal.status}")
            self._wire_time(request, render, wire_start, wire_end)
            return Response(url=request.url, status=refusal.status, headers=refusal.headers,
                            body=refusal.body, request=request, flags=["polite_render_refused"])
        self._inc("polite/render/pages")
        self._max("polite/render/seconds_max", round(time.monotonic() - started, 3))
        request.meta["polite_rendered"] = True
        request.meta["polite_render_subrequests"] = len(render.subs)
        self._wire_time(request, render, wire_start, wire_end)
        return self._response(rendered, document, request)

    def _browser_meta(self, request: Request, render: _Render) -> dict[str, Any]:
        """The meta of the copy scrapy-playwright renders: the browser context, the
        page's open callback and what the render waits for before it is read."""
        # scrapy-playwright works on a copy: the request itself keeps a meta the
        # frontier can store (a retry goes back to its disk queue).
        meta: dict[str, Any] = {
            "playwright": True,
            "playwright_context": CONTEXT,
            "playwright_context_kwargs": {
                "user_agent": self.identity.user_agent,
                "service_workers": "block",
                "accept_downloads": False,
                "java_script_enabled": True,
            },
        }

        async def opened(page: Any, _request: Request) -> None:
            render.pages.append(page)

        meta["playwright_page_init_callback"] = opened
        wait = request.meta.get("polite_render_wait")
        remaining_ms = max(1.0, (render.deadline - time.monotonic()) * 1000)
        meta["playwright_page_goto_kwargs"] = {"wait_until": "load", "timeout": remaining_ms}
        if wait:
            meta["playwright_page_methods"] = [
                PageMethod("wait_for_selector", str(wait), state="attached",
                           timeout=remaining_ms)]
        else:
            meta["playwright_page_methods"] = [PageMethod(self._settle, render)]
        return meta

    async def _close_render(self, render: _Render) -> None:
        """The exchange ends here for the frontier: a sub-request still under way is
        cancelled, the page's later requests are refused and its pages closed."""
        render.closed = True
        if render.fetching is not None and not render.fetching.done():
            render.fetching.cancel()
            self._inc("polite/render/subrequest_cancelled")
        url = render.request.url
        self._renders.pop(url, None)
        for page in render.pages:
            if not page.is_closed():
                try:
                    await page.close()
                except Exception:  # a page of a browser that died
                    logger.debug("Could not close a page of %(url)s", {"url": url})
        self._log_subrequests(render)
        await self._after_render()

    @staticmethod
    async def _until_refused(render: _Render, work: Any, timeout: float) -> Response | None:
        """The render's result; None as soon as a sub-request brought a refusal."""
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(render.refused.wait())
        try:
            done, _ = await asyncio.wait({task, stop}, timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
            if task in done:
                return task.result()  # type: ignore[no-any-return]
            if stop in done:
                return None
            raise TimeoutError
        finally:
            for pending in (task, stop):
                if not pending.done():
                    pending.cancel()
            await asyncio.gather(task, stop, return_exceptions=True)

    def _wire_time(self, request: Request, render: _Render, start: float,
                   end: float | None) -> None:
        """Let the gate read the render's time on the wire as the exchange's duration.

        The 5x rest follows the server's slowness: from the page's document to the
        end of its last sub-request, not the browser's own work before and after
        (launching, running scripts, waiting to settle). The gate's start stamp is
        moved forward by that work; the rest still starts when the render ends.
        """
        for sub in render.subs:
            start = min(start, sub.sent)
            end = sub.done if end is None else max(end, sub.done)
        gate_start = request.meta.get("polite_start")
        if end is None or not math.isfinite(start) or not isinstance(gate_start, float):
            return
        browser_time = max(0.0, start - gate_start) + max(0.0, self.ctx.clock() - end)
        request.meta["polite_start"] = gate_start + browser_time
        request.meta["polite_render_wire_duration"] = round(end - start, 6)

    @staticmethod
    def _renderable(document: Response) -> bool:
        ctype = (document.headers.get(b"Content-Type") or b"").decode("latin-1").lower()
        return document.status == 200 and ("html" in ctype or not ctype)

    @staticmethod
    def _response(rendered: Response, document: Response, request: Request) -> Response:
        headers = document.headers.copy()
        headers[b"Content-Type"] = b"text/html; charset=utf-8"
        text = rendered.text if hasattr(rendered, "text") else rendered.body.decode("utf-8")
        return HtmlResponse(url=rendered.url, status=document.status, headers=headers,
                            body=text.encode("utf-8"), encoding="utf-8",
                            request=request, flags=[*document.flags, "polite_rendered"],
                            ip_address=document.ip_address, protocol=document.protocol)

    async def _settle(self, page: Any, render: _Render) -> None:
        """Wait until no sub-request has been in flight for POLITE_RENDER_IDLE seconds."""
        while True:
            quiet = time.monotonic() - render.active
            if not render.lock.locked() and quiet >= self.idle:
                return
            await asyncio.sleep(max(0.02, min(self.idle - quiet, 0.1)))

    # --- every request of the page -------------------------------------------------
    def _make_request_handler(  # noqa: PLR0917 (scrapy-playwright's signature)
        self, context_name: str, method: str, url: str, headers: Any, body: Any,
        encoding: str, spider: Any, initial_request_done: asyncio.Event,
    ) -> Any:
        async def route_request(route: Any, preq: Any) -> None:
            render = self._renders.get(url)
            if render is None:
                await route.abort("blockedbyclient")
                return
            try:
                await self._serve(render, route, preq)
            except Exception as exc:  # a page closed meanwhile; never a crash of the crawl
                logger.debug("Sub-request %(url)s: %(exc)s", {"url": preq.url, "exc": exc})

        return route_request

    async def _serve(self, render: _Render, route: Any, preq: Any) -> None:
        render.active = time.monotonic()
        if render.closed:
            await route.abort("blockedbyclient")
            return
        page_url = render.request.url
        if not render.served_document and preq.is_navigation_request() \
                and preq.url.rstrip("/") == page_url.rstrip("/"):
            render.served_document = True
            doc = render.document
            await route.fulfill(status=doc.status, headers=_str_headers(doc.headers),
                                body=doc.body)
            return
        reason = judge_subrequest(preq.url, preq.resource_type, preq.method, page_url, self.rules)
        if reason is None:
            reason = self._crawl_rules(preq.url)
        if reason is None and render.allowed >= self.max_subrequests:
            reason = "too_many"
        if reason is not None:
            self._inc("polite/render/blocked")
            self._inc(f"polite/render/blocked/{reason}")
            logger.debug("Blocked %(type)s %(url)s (%(reason)s)",
                         {"type": preq.resource_type, "url": preq.url, "reason": reason})
            await route.abort("blockedbyclient")
            return
        render.allowed += 1
        if preq.resource_type == "script" and preq.method == "GET":
            cached = self.cache.get(preq.url)
            if cached is not None:
                self._inc("polite/render/cache_hit")
                status, headers, body = cached
                await route.fulfill(status=status, headers=headers, body=body)
                return
        async with render.lock:  # one exchange at a time, as for any request of the origin
            response = None
            if not render.closed and render.refusal is None:
                render.fetching = asyncio.ensure_future(self._fetch(render, preq))
                try:
                    response = await render.fetching
                except asyncio.CancelledError:
                    response = None
                finally:
                    render.fetching = None
            render.active = time.monotonic()
        if response is None:
            await route.abort("failed")
            return
        status, headers, body = response
        await route.fulfill(status=status, headers=_str_headers(headers), body=body)

    def _crawl_rules(self, url: str) -> str | None:
        robots: RobotsService | None = self.ctx.robots
        if robots is not None and not robots.allowed(url):
            return "robots"
        if self.policy.check_url(url) is not None:
            return "address"
        return None

    async def _fetch(self, render: _Render, preq: Any) -> tuple[int, Headers, bytes] | None:
        sent_headers = {k: v for k, v in (await preq.all_headers()).items()
                        if k.lower() in _FORWARDED}
        sent_headers["User-Agent"] = self.identity.user_agent
        if self.identity.from_header:
            sent_headers["From"] = self.identity.from_header
        sent_headers["Accept-Encoding"] = ACCEPT_ENCODING.decode()
        left = render.deadline - time.monotonic()
        if left <= 0:
            return None
        request = Request(preq.url, method=preq.method, headers=sent_headers,
                          meta={"download_timeout": left, "polite_render_of": render.request.url},
                          dont_filter=True)
        signer = self._signer()
        if signer is not None:
            try:
                signer.process_request(request)  # signed as every request of the crawl is
            except IgnoreRequest:
                self._inc("polite/render/blocked/unsignable")
                return None
        sent = self.ctx.clock()
        self._inc("polite/render/subrequests")
        try:
            response = await self.guarded.download_request(request)
        except Exception as exc:
            render.subs.append(_Sub(preq.url, preq.method, None, 0, sent, self.ctx.clock()))
            self._inc("polite/render/subrequest_failed")
            logger.debug("Sub-request %(url)s failed: %(exc)s", {"url": preq.url, "exc": exc})
            return None
        render.subs.append(_Sub(preq.url, preq.method, response.status, len(response.body),
                                sent, self.ctx.clock()))
        # An answer that speaks for the origin (a stop, a challenge, a wait): the render
        # stops sending, and its exchange answers the gate with it, not with the page.
        # Judged as the gate judges an answer: the headers read as the verdict asks for
        # them, the body's head decoded once, the browser's body decoded on from there.
        view = HeaderView(response.headers)
        decoding = Decoding.of(response.body, view.get("content-encoding"))
        if render.refusal is None and ends_render(classify_response(
                response.status, view, decoding, self.ctx.clock())):
            render.refusal = response
            render.refused.set()
            logger.info("%(url)s answered %(status)d during the render of %(page)s: the "
                        "render stops and the origin is told",
                        {"url": preq.url, "status": response.status,
                         "page": render.request.url})
        self._inc("polite/render/subrequest_bytes", len(response.body))
        body, headers = self._for_browser(response, decoding)
        if preq.resource_type == "script" and response.status == 200 and _cacheable(headers):
            self.cache.put(preq.url, 200, _str_headers(headers), body)
        return response.status, headers, body

    def _for_browser(
        self, response: Response, decoding: Decoding | None = None,
    ) -> tuple[bytes, Headers]:
        """The body decoded (under the size cap) and the headers without the transfer's;
        ``decoding``: the body's, begun already (the sub-request's judgement)."""
        if decoding is None:
            decoding = Decoding.of(response.body,
                                   HeaderView(response.headers).get("content-encoding"))
        body, _left, _cut = decoding.capped(self.max_bytes)
        headers = response.headers.copy()
        for name in _TRANSFER:
            headers.pop(name, None)
        return body, headers

    def _signer(self) -> SigningMiddleware | None:
        """The crawl's signing middleware (Web Bot Auth), when it is installed."""
        if self._signing is None:
            engine = self.crawler.engine
            found: SigningMiddleware | bool = False
            if engine is not None:
                for mw in engine.downloader.middleware.middlewares:
                    if isinstance(mw, SigningMiddleware):
                        found = mw
            self._signing = found
        return self._signing if isinstance(self._signing, SigningMiddleware) else None

    # --- after each render -----------------------------------------------------------
    def _log_subrequests(self, render: _Render) -> None:
        log = self.ctx.access_log
        for sub in render.subs:
            if log is not None:
                log.record(None, sent=round(sub.sent, 6), done=round(sub.done, 6),
                           origin=render.request.meta.get("polite_origin"), method=sub.method,
                           url=sub.url, status=sub.status, bytes=sub.size,
                           duration=round(sub.done - sub.sent, 6), verdict="render_subrequest",
                           render_of=render.request.url)

    async def _after_render(self) -> None:
        browser = getattr(self, "browser", None)
        if browser is not None and browser is not self._last_browser:
            if self._last_browser is not None:
                self._inc("polite/render/browser_restarts")
                logger.info("The browser was launched again (the previous one died or was closed)")
            self._last_browser = browser
        rss = descendants_rss()
        self._max("polite/render/memory_max_bytes", rss)
        if browser is not None and self.max_rss and rss > self.max_rss:
            self._inc("polite/render/restart/memory")
            logger.info("The browser holds %(mb).0f MB (over POLITE_RENDER_MAX_RSS): closing it",
                        {"mb": rss / 1e6})
            try:
                await browser.close()
            except Exception:  # closed already
                logger.debug("The browser was closed already")
            # scrapy-playwright forgets it on its "disconnected" event; the next render
            # must not find it.
            for _ in range(100):
                if getattr(self, "browser", None) is not browser:
                    break
                await asyncio.sleep(0.01)

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            await self.guarded.close()


def _str_headers(headers: Headers | dict[str, str]) -> dict[str, str]:
    if not isinstance(headers, Headers):  # (Headers is a dict too)
        return headers
    out: dict[str, str] = {}
    for name, values in headers.items():
        key = name.decode("latin-1") if isinstance(name, bytes) else str(name)
        out[key] = ", ".join(v.decode("latin-1") for v in values)
    return out


__all__ = ["RenderDownloadHandler", "RenderFailedError", "RenderTimeoutError"]
