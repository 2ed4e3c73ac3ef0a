"""The bundled demo web: six small sites on 127.0.0.1 … 127.0.0.6, one port.

Each host plays one scenario a polite crawler must handle (see :data:`DEMO_HOSTS`).
All text is generated deterministically (:mod:`demo.web.prose`), every
page carries an ETag and a Last-Modified date, and absolute URLs are built from
the address and port a request arrived on, so the same sites also run on a free
port in the tests. ``make demo`` crawls it (:mod:`demo.crawl`);
``python -m demo.web.demo`` serves it until Ctrl-C, to look around.
"""

from __future__ import annotations

import argparse
import calendar
import gzip
import html
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote

from demo.web import prose
from demo.web.server import Req, Resp, Site, TestWeb, etag_for
from polite_crawler.defaults import DEMO_PORT

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence


@dataclass(frozen=True)
class DemoHost:
    address: str
    name: str
    scenario: str  # one line, shown in the demo's summary


DEMO_HOSTS: tuple[DemoHost, ...] = (
    DemoHost("127.0.0.1", "news", "sitemap index, feed, duplicates"),
    DemoHost("127.0.0.2", "events", "calendar trap"),
    DemoHost("127.0.0.3", "slow", "every answer delayed"),
    DemoHost("127.0.0.4", "busy", "429 + Retry-After"),
    DemoHost("127.0.0.5", "down", "robots.txt is a 503"),
    DemoHost("127.0.0.6", "library", "Crawl-delay, text sitemap"),
)


@dataclass(frozen=True)
class DemoScale:
    """How big each scenario is. The default is ``make demo``'s web; SMALL suits tests."""

    news_articles: int = 60
    near_duplicates: int = 12  # /syndicated/<slug>: same article, other date and byline
    aliases: int = 12  # /a/<n> (same bytes) and /print/<slug> (same text)
    events: int = 36
    slow_pages: int = 24
    slow_delay: float = 0.25  # seconds before every answer of the slow host
    busy_pages: int = 40
    busy_every: int = 6  # every Nth request to the busy host (robots.txt aside) is a 429
    retry_after: int = 2  # seconds, in the busy host's and the down host's Retry-After
    down_pages: int = 20
    library_pages: int = 40
    crawl_delay: int = 1  # the library's Crawl-delay for the bot's token

    @property
    def pages(self) -> int:
        """Distinct text pages (aliases and trap pages not counted)."""
        return (self.news_articles + self.near_duplicates + self.events + self.slow_pages
                + self.busy_pages + self.down_pages + self.library_pages)


FULL = DemoScale()
SMALL = DemoScale(
    news_articles=6, near_duplicates=2, aliases=2, events=4, slow_pages=3, slow_delay=0.1,
    busy_pages=6, busy_every=3, retry_after=1, down_pages=3, library_pages=3, crawl_delay=1,
)

# Last-Modified of pages without a date of their own: 2026-01-15 09:00 UTC.
SITE_EPOCH = float(calendar.timegm((2026, 1, 15, 9, 0, 0)))
ARTICLES_PER_PAGE = 20


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def base_url(req: Req) -> str:
    return f"http://{req.host}:{req.port}"


def html_page(
    site_name: str,
    title: str,
    body: str,
    *,
    nav: Sequence[tuple[str, str]] = (("/", "Home"),),
    canonical: str | None = None,
    head_extra: str = "",
) -> bytes:
    """A complete, plain HTML document: header with navigation, main, footer.

    ``body`` is HTML already; ``title`` and the nav labels are escaped here.
    """
    links = " · ".join(f'<a href="{_esc(href)}">{_esc(label)}</a>' for href, label in nav)
    full_title = title if title == site_name else f"{title} · {site_name}"
    canon = f'<link rel="canonical" href="{_esc(canonical)}">' if canonical else ""
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{_esc(full_title)}</title>{canon}{head_extra}</head>\n"
        f"<body><header><p><strong>{_esc(site_name)}</strong></p><nav>{links}</nav></header>\n"
        f"<main><h1>{_esc(title)}</h1>\n{body}\n</main>\n"
        f"<footer><p>{_esc(site_name)} is part of the polite_crawler demo web.</p></footer>"
        "</body></html>\n"
    ).encode()


def paras(texts: Iterable[str]) -> str:
    return "\n".join(f"<p>{_esc(t)}</p>" for t in texts)


def link_list(items: Iterable[tuple[str, str]]) -> str:
    lis = "".join(f'<li><a href="{_esc(h)}">{_esc(t)}</a></li>' for h, t in items)
    return f"<ul>{lis}</ul>"


def urlset(urls: Iterable[tuple[str, str | None]]) -> bytes:
    """A sitemaps.org urlset of (loc, lastmod or None)."""
    rows = []
    for loc, lastmod in urls:
        mod = f"<lastmod>{lastmod}</lastmod>" if lastmod else ""
        rows.append(f"<url><loc>{_esc(loc)}</loc>{mod}</url>")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        + "\n".join(rows) + "\n</urlset>\n"
    ).encode()


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts))


def _long_date(year: int, month: int, day: int) -> str:
    return f"{day} {prose.MONTHS[month - 1]} {year}"


def text_resp(body: str, content_type: str = "text/plain; charset=utf-8") -> Resp:
    data = body.encode()
    return Resp(200, data, content_type=content_type, etag=etag_for(data), last_modified=SITE_EPOCH)


def page_resp(body: bytes, last_modified: float = SITE_EPOCH) -> Resp:
    return Resp(200, body, etag=etag_for(body), last_modified=last_modified)


def not_found(site_name: str) -> Resp:
    return Resp(404, html_page(site_name, "Not found", "<p>There is no page here.</p>"))


class DemoSite(Site):
    """A demo host: routes by path prefix in :meth:`route`; 404 otherwise."""

    name = "demo"

    def __init__(self, scale: DemoScale, token: str) -> None:
        super().__init__()
        self.scale = scale
        self.token = token

    def handle(self, req: Req) -> Resp:
        path = unquote(req.path.split("?", 1)[0])
        resp = self.route(req, path)
        return resp if resp is not None else not_found(self.name)

    def route(self, req: Req, path: str) -> Resp | None:
        raise NotImplementedError

    def robots_txt(self, req: Req) -> str:
        """The host's robots.txt (also what the demo's summary checks requests against)."""
        raise NotImplementedError


class NewsSite(DemoSite):
    """127.0.0.1: a local newspaper, the biggest host.

    Sitemap index -> gzipped article sitemap + page sitemap, and an RSS feed, both
    declared in robots.txt. Articles are also reachable under aliases: ``/a/<n>``
    (the same bytes, with rel=canonical), ``/print/<slug>`` (the same text, other
    markup) and the feed's ``?utm_source=rss`` links; ``/syndicated/<slug>`` is the
    same article with another date and byline (a near duplicate). ``/search`` and
    ``/drafts/`` are disallowed. ``/bot/`` is the crawler's bot page.
    """

    name = "Harbourside Gazette"

    def __init__(self, scale: DemoScale, token: str, bot_page: bytes | None = None) -> None:
        super().__init__(scale, token)
        self.bot_page = bot_page
        self.articles = [prose.article("news", i) for i in range(scale.news_articles)]
        self.by_slug = {a.slug: i for i, a in enumerate(self.articles)}

    def robots_txt(self, req: Req) -> str:
        base = base_url(req)
        return (
            "# Harbourside Gazette (polite_crawler demo web)\n"
            "User-agent: *\n"
            "Disallow: /search\n"
            "Disallow: /drafts/\n"
            "\n"
            f"Sitemap: {base}/sitemap-index.xml\n"
            f"Sitemap: {base}/feed.xml\n"
        )

    def _lastmod(self, i: int) -> float:
        a = self.articles[i]
        return float(calendar.timegm((a.year, a.month, a.day, 9, 0, 0)))

    def _article_html(self, i: int) -> bytes:
        a = self.articles[i]
        n = len(self.articles)
        related = [self.articles[(i + k) % n] for k in (1, 7, 23) if n > 1]
        extra = ""
        if i < self.scale.aliases:
            extra = (f'<p>Short link: <a href="/a/{i}">/a/{i}</a> · '
                     f'<a href="/print/{a.slug}">Printer-friendly version</a></p>')
        body = (
            f'<p class="byline">By {_esc(a.author)} · {_long_date(a.year, a.month, a.day)}</p>\n'
            f"{paras(a.paragraphs)}\n{extra}\n<h2>Related</h2>\n"
            + link_list((f"/articles/{r.slug}", r.title) for r in related)
            + f'<p><a href="/search?q={_esc(a.slug.split("-")[0])}">More like this</a></p>'
        )
        return html_page(self.name, a.title, body, canonical=f"/articles/{a.slug}",
                         nav=(("/", "Home"), ("/archive/1", "Archive"), ("/about", "About")))

    def _syndicated_html(self, i: int) -> bytes:
        a = self.articles[i]
        # Same article, reprinted a few days later under an agency byline.
        day = min(a.day + 3, 28)
        body = (
            f'<p class="byline">By Coastal Wire staff · {_long_date(a.year, a.month, day)}</p>\n'
            f"{paras(a.paragraphs)}\n"
        )
        return html_page(self.name, a.title, body,
                         nav=(("/", "Home"), ("/syndicated/", "From the wire")))

    def _print_html(self, i: int) -> bytes:
        a = self.articles[i]
        return (
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{_esc(a.title)}</title></head><body><h1>{_esc(a.title)}</h1>\n"
            f'<p class="byline">By {_esc(a.author)} · {_long_date(a.year, a.month, a.day)}</p>\n'
            f"{paras(a.paragraphs)}\n</body></html>\n"
        ).encode()

    def _archive_pages(self) -> int:
        return max(1, -(-len(self.articles) // ARTICLES_PER_PAGE))

    def route(self, req: Req, path: str) -> Resp | None:
        s = self.scale
        if path == "/robots.txt":
            return text_resp(self.robots_txt(req))
        if path in ("/bot", "/bot/", "/bot/index.html"):
            if self.bot_page is None:
                return None
            return page_resp(self.bot_page)
        if path == "/":
            latest = self.articles[:ARTICLES_PER_PAGE]
            body = (
                "<p>News from the harbour, the market and the meadows.</p>\n<h2>Latest</h2>\n"
                + link_list((f"/articles/{a.slug}", a.title) for a in latest)
                + '<p><a href="/archive/1">Older stories</a> · '
                '<a href="/syndicated/">From the wire</a> · '
                '<a href="/search?q=harbour">Search</a></p>'
            )
            feed = '<link rel="alternate" type="application/rss+xml" href="/feed.xml" title="RSS">'
            return page_resp(html_page(self.name, "Harbourside Gazette", body, head_extra=feed,
                                       nav=(("/", "Home"), ("/archive/1", "Archive"),
                                            ("/about", "About"))))
        if path == "/about":
            body = paras(prose.paragraphs("news:about", 2)) + (
                '<p>Coming soon: <a href="/drafts/next-issue">the next issue</a>.</p>')
            return page_resp(html_page(self.name, "About the Gazette", body))
        if path.startswith("/archive/"):
            try:
                n = int(path.removeprefix("/archive/"))
            except ValueError:
                return None
            if not 1 <= n <= self._archive_pages():
                return None
            chunk = self.articles[(n - 1) * ARTICLES_PER_PAGE: n * ARTICLES_PER_PAGE]
            pager = []
            if n > 1:
                pager.append((f"/archive/{n - 1}", "Newer"))
            if n < self._archive_pages():
                pager.append((f"/archive/{n + 1}", "Older"))
            body = link_list((f"/articles/{a.slug}", a.title) for a in chunk) + link_list(pager)
            return page_resp(html_page(self.name, f"Archive, page {n}", body))
        if path.startswith("/articles/"):
            i = self.by_slug.get(path.removeprefix("/articles/").rstrip("/"))
            if i is None:
                return None
            return page_resp(self._article_html(i), self._lastmod(i))
        if path.startswith("/a/"):
            try:
                i = int(path.removeprefix("/a/"))
            except ValueError:
                return None
            if not 0 <= i < min(s.aliases, len(self.articles)):
                return None
            return page_resp(self._article_html(i), self._lastmod(i))
        if path.startswith("/print/"):
            i = self.by_slug.get(path.removeprefix("/print/"))
            if i is None or i >= s.aliases:
                return None
            return page_resp(self._print_html(i), self._lastmod(i))
        if path == "/syndicated/":
            items = self.articles[: s.near_duplicates]
            body = "<p>Stories from our partners.</p>" + link_list(
                (f"/syndicated/{a.slug}", a.title) for a in items)
            return page_resp(html_page(self.name, "From the wire", body))
        if path.startswith("/syndicated/"):
            i = self.by_slug.get(path.removeprefix("/syndicated/"))
            if i is None or i >= s.near_duplicates:
                return None
            return page_resp(self._syndicated_html(i), self._lastmod(i) + 3 * 86400)
        if path == "/search" or path.startswith("/drafts/"):
            # Disallowed by robots.txt: a polite crawler never asks.
            body = "<p>Search results are generated for every query.</p>"
            return Resp(200, html_page(self.name, "Search", body))
        if path == "/feed.xml":
            return self._feed(req)
        if path == "/sitemap-index.xml":
            base = base_url(req)
            body = (
                '<?xml version="1.0" encoding="UTF-8"?>\n'
                '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
                f"<sitemap><loc>{base}/sitemaps/articles.xml.gz</loc>"
                f"<lastmod>{_iso(SITE_EPOCH)}</lastmod></sitemap>\n"
                f"<sitemap><loc>{base}/sitemaps/pages.xml</loc></sitemap>\n"
                "</sitemapindex>\n"
            )
            return text_resp(body, "application/xml")
        if path == "/sitemaps/articles.xml.gz":
            base = base_url(req)
            xml = urlset((f"{base}/articles/{a.slug}", _iso(self._lastmod(i)))
                         for i, a in enumerate(self.articles))
            data = gzip.compress(xml, mtime=0)
            return Resp(200, data, content_type="application/gzip", gzip_ok=False,
                        etag=etag_for(data), last_modified=SITE_EPOCH)
        if path == "/sitemaps/pages.xml":
            base = base_url(req)
            pages = ["/", "/about", "/syndicated/"]
            pages += [f"/archive/{n}" for n in range(1, self._archive_pages() + 1)]
            return text_resp(urlset((base + p, None) for p in pages).decode(), "application/xml")
        return None

    def _feed(self, req: Req) -> Resp:
        base = base_url(req)
        items = []
        for i, a in enumerate(self.articles[:ARTICLES_PER_PAGE]):
            link = f"{base}/articles/{a.slug}?utm_source=rss&amp;utm_medium=feed"
            date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(self._lastmod(i)))
            items.append(
                f"<item><title>{_esc(a.title)}</title><link>{link}</link>"
                f"<guid isPermaLink=\"false\">news-{i}</guid><pubDate>{date}</pubDate>"
                f"<description>{_esc(a.paragraphs[0][:200])}</description></item>"
            )
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"><channel>'
            f"<title>{_esc(self.name)}</title><link>{base}/</link>"
            "<description>Latest stories</description>\n" + "\n".join(items)
            + "\n</channel></rss>\n"
        )
        return text_resp(body, "application/rss+xml")


class EventsSite(DemoSite):
    """127.0.0.2: a events listing with a calendar that never ends.

    ``/calendar/<year>/<month>`` exists for every month of years 1 to 9999 and
    links to the month before and after: valid, distinct, worthless URLs. The
    real content is ``/events/<slug>``, listed in /sitemap.xml (robots.txt declares
    no sitemap, so a crawler finds it only at the conventional place).
    """

    name = "What's On"
    YEAR = 2025

    def __init__(self, scale: DemoScale, token: str) -> None:
        super().__init__(scale, token)
        self.events = [prose.article("events", i, year=self.YEAR) for i in range(scale.events)]
        self.by_slug = {e.slug: i for i, e in enumerate(self.events)}

    def robots_txt(self, req: Req) -> str:
        return "User-agent: *\nDisallow: /admin/\n"

    def route(self, req: Req, path: str) -> Resp | None:
        if path == "/robots.txt":
            return text_resp(self.robots_txt(req))
        if path == "/":
            body = (paras(prose.paragraphs("events:home", 1))
                    + "<h2>Coming up</h2>"
                    + link_list((f"/events/{e.slug}", e.title) for e in self.events)
                    + f'<p><a href="/calendar/{self.YEAR}/6">The calendar</a></p>')
            return page_resp(html_page(self.name, "What's On", body))
        if path.startswith("/events/"):
            i = self.by_slug.get(path.removeprefix("/events/"))
            if i is None:
                return None
            e = self.events[i]
            body = (f'<p class="when">{_long_date(e.year, e.month, e.day)}, at 7 pm</p>'
                    + paras(e.paragraphs[:3])
                    + f'<p><a href="/calendar/{e.year}/{e.month}">All events in '
                      f"{prose.MONTHS[e.month - 1]}</a></p>")
            return page_resp(html_page(self.name, e.title, body),
                             float(calendar.timegm((e.year, e.month, e.day, 0, 0, 0))) - 30 * 86400)
        if path.startswith("/calendar/"):
            return self._month(path)
        if path == "/sitemap.xml":
            base = base_url(req)
            urls: list[tuple[str, str | None]] = [(f"{base}/", None)]
            urls += [(f"{base}/events/{e.slug}", None) for e in self.events]
            return text_resp(urlset(urls).decode(), "application/xml")
        return None

    def _month(self, path: str) -> Resp | None:
        try:
            year_s, month_s = path.removeprefix("/calendar/").strip("/").split("/")
            year, month = int(year_s), int(month_s)
        except ValueError:
            return None
        if not (1 <= year <= 9999 and 1 <= month <= 12):
            return None
        prev_y, prev_m = (year, month - 1) if month > 1 else (year - 1, 12)
        next_y, next_m = (year, month + 1) if month < 12 else (year + 1, 1)
        label = f"{prose.MONTHS[month - 1]} {year}"
        found = [e for e in self.events if (e.year, e.month) == (year, month)]
        if found:
            listing = link_list((f"/events/{e.slug}", e.title) for e in found)
        else:
            listing = f"<p>No events are planned for {label} yet. Check back later.</p>"
        nav = []
        if prev_y >= 1:
            nav.append((f"/calendar/{prev_y}/{prev_m}", f"« {prose.MONTHS[prev_m - 1]} {prev_y}"))
        if next_y <= 9999:
            nav.append((f"/calendar/{next_y}/{next_m}", f"{prose.MONTHS[next_m - 1]} {next_y} »"))
        body = listing + link_list(nav)
        return page_resp(html_page(self.name, f"Events in {label}", body))


class ChainSite(DemoSite):
    """A host of ``count`` pages under ``prefix``, each linking to its neighbours."""

    prefix = "/pages/"
    seed = "chain"
    count_field = "down_pages"  # the DemoScale field with this host's number of pages

    def __init__(self, scale: DemoScale, token: str) -> None:
        super().__init__(scale, token)
        count: int = getattr(scale, self.count_field)
        self.pages = [prose.article(self.seed, i) for i in range(count)]
        self.by_slug = {p.slug: i for i, p in enumerate(self.pages)}

    def robots_txt(self, req: Req) -> str:
        return f"User-agent: *\nAllow: /\n\nSitemap: {base_url(req)}/sitemap.xml\n"

    def index_body(self) -> str:
        return paras(prose.paragraphs(f"{self.seed}:home", 1)) + link_list(
            (f"{self.prefix}{p.slug}", p.title) for p in self.pages)

    def page_body(self, i: int) -> str:
        p = self.pages[i]
        n = len(self.pages)
        neighbours = [self.pages[(i + k) % n] for k in (1, 2) if n > 1]
        return (f'<p class="byline">By {_esc(p.author)}</p>' + paras(p.paragraphs)
                + link_list((f"{self.prefix}{q.slug}", q.title) for q in neighbours))

    def route(self, req: Req, path: str) -> Resp | None:
        if path == "/robots.txt":
            return text_resp(self.robots_txt(req))
        if path == "/":
            return page_resp(html_page(self.name, self.name, self.index_body()))
        if path.startswith(self.prefix):
            i = self.by_slug.get(path.removeprefix(self.prefix))
            if i is None:
                return None
            return page_resp(html_page(self.name, self.pages[i].title, self.page_body(i)))
        if path == "/sitemap.xml":
            base = base_url(req)
            return text_resp(urlset([(f"{base}/", None)] + [
                (f"{base}{self.prefix}{p.slug}", None) for p in self.pages]).decode(),
                "application/xml")
        return None


class SlowSite(ChainSite):
    """127.0.0.3: every answer, robots.txt included, waits ``slow_delay`` seconds."""

    name = "Slow Notes"
    prefix = "/notes/"
    seed = "slow"
    count_field = "slow_pages"

    def handle(self, req: Req) -> Resp:
        resp = super().handle(req)
        resp.delay = self.scale.slow_delay
        return resp


class BusySite(ChainSite):
    """127.0.0.4: every ``busy_every``-th request (robots.txt aside) is a 429."""

    name = "Busy Forum"
    prefix = "/posts/"
    seed = "busy"
    count_field = "busy_pages"

    def __init__(self, scale: DemoScale, token: str) -> None:
        super().__init__(scale, token)
        self._count = 0
        self._lock = threading.Lock()

    def handle(self, req: Req) -> Resp:
        if req.path != "/robots.txt":
            with self._lock:
                self._count += 1
                limited = self._count % self.scale.busy_every == 0
            if limited:
                return Resp(429, html_page(self.name, "Too many requests",
                                           "<p>Please slow down.</p>"),
                            headers={"Retry-After": str(self.scale.retry_after)})
        return super().handle(req)


class DownSite(ChainSite):
    """127.0.0.5: robots.txt answers 503; every page would answer 200.

    RFC 9309 section 2.3.1.4: an unreachable robots.txt means the whole site is
    disallowed. A crawler that fetches any page here broke the rule.
    """

    name = "Down for Maintenance"
    seed = "down"
    count_field = "down_pages"

    def robots_txt(self, req: Req) -> str:
        return ""  # never served: the answer is a 503

    def route(self, req: Req, path: str) -> Resp | None:
        if path == "/robots.txt":
            return Resp(503, html_page(self.name, "Service unavailable",
                                       "<p>Back soon.</p>"),
                        headers={"Retry-After": str(self.scale.retry_after)})
        return super().route(req, path)


class LibrarySite(ChainSite):
    """127.0.0.6: a group for the bot's token with Crawl-delay; a text sitemap."""

    name = "Town Library"
    prefix = "/books/"
    seed = "library"
    count_field = "library_pages"

    def robots_txt(self, req: Req) -> str:
        return (
            "User-agent: *\n"
            "Disallow: /drafts/\n"
            "\n"
            f"User-agent: {self.token}\n"
            f"Crawl-delay: {self.scale.crawl_delay}\n"
            "Disallow: /drafts/\n"
            "Disallow: /catalogue/raw/\n"
            "\n"
            f"Sitemap: {base_url(req)}/sitemap.txt\n"
        )

    def page_body(self, i: int) -> str:
        return super().page_body(i) + (
            f'<p><a href="/catalogue/raw/{i}">Raw catalogue record</a> · '
            f'<a href="/drafts/review-{i}">Draft review</a></p>')

    def route(self, req: Req, path: str) -> Resp | None:
        if path == "/sitemap.txt":
            base = base_url(req)
            lines = [f"{base}/"] + [f"{base}{self.prefix}{p.slug}" for p in self.pages]
            return text_resp("\n".join(lines) + "\n")
        if path.startswith(("/catalogue/raw/", "/drafts/")):
            return Resp(200, html_page(self.name, "Not for crawlers", "<p>Raw data.</p>"))
        return super().route(req, path)


def demo_sites(
    scale: DemoScale = FULL, token: str = "PoliteCrawler", bot_page: bytes | None = None
) -> dict[str, DemoSite]:
    """The demo web's sites by loopback address (see :data:`DEMO_HOSTS`)."""
    sites: list[DemoSite] = [
        NewsSite(scale, token, bot_page),
        EventsSite(scale, token),
        SlowSite(scale, token),
        BusySite(scale, token),
        DownSite(scale, token),
        LibrarySite(scale, token),
    ]
    return {h.address: s for h, s in zip(DEMO_HOSTS, sites, strict=True)}


def demo_web(
    port: int = DEMO_PORT,
    scale: DemoScale = FULL,
    token: str = "PoliteCrawler",
    bot_page: bytes | None = None,
) -> TestWeb:
    """The demo web, not started yet (``with demo_web() as web:`` or ``.start()``)."""
    return TestWeb(dict(demo_sites(scale, token, bot_page)), port)


def set_bot_page(web: TestWeb, bot_page: bytes) -> None:
    """Serve ``bot_page`` at /bot/ on 127.0.0.1 (after start, once the port is known)."""
    site = web.sites[DEMO_HOSTS[0].address]
    assert isinstance(site, NewsSite)
    site.bot_page = bot_page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m demo.web.demo",
        description="Serve the demo web on 127.0.0.1-127.0.0.6 until Ctrl-C.")
    parser.add_argument("--port", type=int, default=DEMO_PORT)
    parser.add_argument("--small", action="store_true", help="the tests' small variant")
    args = parser.parse_args(argv)
    from polite_crawler.botpage import load_settings, render_bot_page

    settings = load_settings({"POLITE_BOT_URL": f"http://127.0.0.1:{args.port}/bot/"})
    web = demo_web(args.port, SMALL if args.small else FULL,
                   settings.get("POLITE_BOT_NAME"), render_bot_page(settings).encode())
    web.start()
    # SIGTERM too (a background job ignores SIGINT): both stop the web cleanly.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        for host in DEMO_HOSTS:
            print(f"{web.url(host.address):28} {host.name:8} {host.scenario}")
        print("Serving; Ctrl-C stops.")
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        web.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
