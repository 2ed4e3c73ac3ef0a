"""A site for recrawl tests and ``bench/recrawl_bytes.py``: everything a revisit meets.

:class:`RecrawlSite` serves, with an ETag and a Last-Modified on every answer:

- robots.txt naming a sitemap index and an RSS feed; the index names a plain
  sitemap (articles, some with ``lastmod``) and a gzipped one (the rest);
- articles ``/article/<n>`` and, for each of the first few, aliases of several
  kinds: ``/article/<n>/print`` (the same main text in another template: an
  exact duplicate), ``/article/<n>/amp`` (``rel=canonical`` naming the
  article) and ``/reprint/<n>`` (another date and byline: a near duplicate);
- ``/ai`` (``Content-Signal: ai-input=no``), ``/private`` (``noindex``),
  ``/fresh/<n>`` (``Cache-Control: max-age=86400``, and ``no-store`` for
  ``/nostore``);
- ``/big``: a long page (about 200 KB), for a crawl whose size cap cuts it;
- a calendar ``/calendar?month=YYYY-MM`` whose months link on forever.

It keeps what it answered (:attr:`RecrawlSite.answered`: path -> response
headers of its last 200), so a test can tell from the site's own records which
URLs had validators and which were declared fresh.
"""

from __future__ import annotations

import gzip
import threading
from typing import TYPE_CHECKING

from demo.web import prose
from demo.web.demo import html_page, link_list, paras, urlset
from demo.web.server import Req, Resp, Site, etag_for

if TYPE_CHECKING:
    from collections.abc import Iterable

EPOCH = 1_700_000_000.0
CALENDAR_START = "2026-01"


def _esc(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def _next_month(month: str, step: int) -> str:
    y, m = (int(x) for x in month.split("-"))
    m0 = y * 12 + (m - 1) + step
    return f"{m0 // 12}-{m0 % 12 + 1:02d}"


class RecrawlSite(Site):
    """Articles, their aliases, sitemaps, a feed, page rules, max-age pages, a calendar."""

    def __init__(self, articles: int = 24, aliases: int = 4, fresh: int = 4,
                 seed: str = "recrawl") -> None:
        super().__init__()
        self.articles = [prose.article(seed, i) for i in range(articles)]
        self.aliases = min(aliases, articles)
        self.fresh = fresh
        self.seed = seed
        self.version: dict[str, int] = {}
        self.answered: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    # --- what a crawl must find ------------------------------------------------------
    def pages(self) -> list[str]:
        out = ["/", "/about", "/ai", "/private", "/nostore", "/big",
               f"/calendar?month={CALENDAR_START}"]
        out += [f"/article/{i}" for i in range(len(self.articles))]
        out += [f"/fresh/{i}" for i in range(self.fresh)]
        for i in range(self.aliases):
            out += [f"/article/{i}/print", f"/article/{i}/amp", f"/reprint/{i}"]
        return out

    @staticmethod
    def is_trap(path: str) -> bool:
        """A calendar month other than the one the home page links: the trap's pages."""
        return path.startswith("/calendar?") and path != f"/calendar?month={CALENDAR_START}"

    def change(self, path: str) -> None:
        self.version[path] = self.version.get(path, 0) + 1

    # --- pages -------------------------------------------------------------------------
    def _article_body(self, i: int, *, byline: str | None = None) -> str:
        a = self.articles[i]
        text = list(a.paragraphs)
        v = self.version.get(f"/article/{i}", 0)
        if v:
            text.append(f"Update {v}: the {a.title.lower()} story was corrected after readers "
                        "wrote in with new details about the dates and places involved.")
        who = byline or f"By {a.author} · {a.day} {prose.MONTHS[a.month - 1]} {a.year}"
        return f'<p class="byline">{_esc(who)}</p>\n{paras(text)}'

    def _article(self, i: int) -> bytes:
        n = len(self.articles)
        related = [(f"/article/{(i + k) % n}", self.articles[(i + k) % n].title) for k in (1, 5)]
        extra = ""
        if i < self.aliases:
            extra = (f'<p><a href="/article/{i}/print">Print</a> · '
                     f'<a href="/article/{i}/amp">AMP</a></p>')
        aside = f"<aside>{extra}<h2>Related</h2>{link_list(related)}</aside>".encode()
        page = html_page("Recrawl Times", self.articles[i].title, self._article_body(i),
                         nav=(("/", "Home"), ("/about", "About")))
        return page.replace(b"</main>", b"</main>" + aside, 1)

    def _print(self, i: int) -> bytes:
        # The same main text without the site's furniture: an exact duplicate.
        return html_page("Recrawl Times", self.articles[i].title, self._article_body(i), nav=())

    def _amp(self, i: int) -> bytes:
        a = self.articles[i]
        return html_page("Recrawl Times", a.title, self._article_body(i),
                         canonical=f"/article/{i}", nav=(("/", "Home"),))

    def _reprint(self, i: int) -> bytes:
        a = self.articles[i]
        day = min(a.day + 3, 28)
        return html_page("Recrawl Times", a.title, self._article_body(
            i, byline=f"By Wire staff · {day} {prose.MONTHS[a.month - 1]} {a.year}"),
            nav=(("/", "Home"),))

    def _plain(self, title: str, seed: str, links: Iterable[tuple[str, str]] = (),
               head_extra: str = "") -> bytes:
        return html_page("Recrawl Times", title, paras(prose.paragraphs(f"{self.seed}:{seed}", 3))
                         + link_list(links), head_extra=head_extra, nav=(("/", "Home"),))

    def _home(self) -> bytes:
        links = [(f"/article/{i}", a.title) for i, a in enumerate(self.articles)]
        links += [(f"/reprint/{i}", "From the wire") for i in range(self.aliases)]
        links += [(f"/fresh/{i}", f"Today {i}") for i in range(self.fresh)]
        links += [("/ai", "Not for machines"), ("/private", "Members"), ("/nostore", "Live"),
                  ("/big", "The long read"),
                  (f"/calendar?month={CALENDAR_START}", "Events"), ("/about", "About")]
        return html_page("Recrawl Times", "Recrawl Times",
                         "<p>News and notes.</p>" + link_list(links), nav=(("/", "Home"),))

    def _calendar(self, month: str) -> bytes:
        body = ("<p>Events this month: none planned yet. Check back soon.</p>"
                + link_list([(f"/calendar?month={_next_month(month, 1)}", "Next month"),
                             (f"/calendar?month={_next_month(month, -1)}", "Previous month")]))
        return html_page("Recrawl Times", f"Events, {month}", body, nav=(("/", "Home"),))

    # --- sitemaps and the feed ---------------------------------------------------------
    def _sitemaps(self, base: str, path: str) -> Resp | None:
        n = len(self.articles)
        half = n // 2
        if path == "/sitemap_index.xml":
            body = ('<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns='
                    '"http://www.sitemaps.org/schemas/sitemap/0.9">'
                    f"<sitemap><loc>{base}/sitemaps/pages.xml</loc></sitemap>"
                    f"<sitemap><loc>{base}/sitemaps/more.xml.gz</loc></sitemap>"
                    "</sitemapindex>\n").encode()
            return Resp(200, body, content_type="application/xml")
        if path == "/sitemaps/pages.xml":
            # Half the articles with a lastmod (long before any crawl), half without.
            rows = [(f"{base}/article/{i}", "2023-11-01" if i % 2 == 0 else None)
                    for i in range(half)]
            return Resp(200, urlset(rows), content_type="application/xml")
        if path == "/sitemaps/more.xml.gz":
            rows = [(f"{base}/article/{i}", None) for i in range(half, n)]
            return Resp(200, gzip.compress(urlset(rows), mtime=0),
                        content_type="application/x-gzip", gzip_ok=False)
        if path == "/feed.rss":
            items = "".join(f"<item><title>{_esc(a.title)}</title><link>{base}/article/{i}</link>"
                            "</item>" for i, a in enumerate(self.articles[:5]))
            body = (f'<?xml version="1.0"?><rss version="2.0"><channel><title>Recrawl Times'
                    f"</title>{items}</channel></rss>").encode()
            return Resp(200, body, content_type="application/rss+xml")
        return None

    # --- routing -------------------------------------------------------------------
    def _route(self, req: Req) -> Resp:
        base = f"http://{req.host}:{req.port}"
        path = req.path
        plain = path.split("?", 1)[0]
        if plain == "/robots.txt":
            return Resp(200, (f"User-agent: *\nAllow: /\n\nSitemap: {base}/sitemap_index.xml\n"
                              f"Sitemap: {base}/feed.rss\n").encode(), content_type="text/plain")
        found = self._sitemaps(base, plain)
        if found is not None:
            return found
        headers: dict[str, str] = {}
        body: bytes | None = None
        parts = plain.strip("/").split("/")
        if plain == "/":
            body = self._home()
        elif plain == "/about":
            body = self._plain("About", "about")
        elif plain == "/ai":
            body = self._plain("Not for machines", "ai")
            headers["Content-Signal"] = "search=yes, ai-input=no, ai-train=no"
        elif plain == "/private":
            body = self._plain("Members", "private",
                               head_extra='<meta name="robots" content="noindex">')
        elif plain == "/big":
            text = [p for k in range(40) for p in prose.paragraphs(f"{self.seed}:big{k}", 6)]
            body = html_page("Recrawl Times", "The long read", paras(text), nav=(("/", "Home"),))
        elif plain == "/nostore":
            body = self._plain("Live", "nostore")
            headers["Cache-Control"] = "no-store"
        elif parts[0] == "fresh" and len(parts) == 2 and parts[1].isdigit():
            body = self._plain(f"Today {parts[1]}", f"fresh{parts[1]}")
            headers["Cache-Control"] = "max-age=86400"
        elif plain == "/calendar":
            month = path.partition("month=")[2] or CALENDAR_START
            body = self._calendar(month)
        elif parts[0] in ("article", "reprint") and len(parts) >= 2 and parts[1].isdigit():
            i = int(parts[1])
            if i >= len(self.articles):
                return Resp(404, b"<html><body>Not found</body></html>")
            if parts[0] == "reprint" and len(parts) == 2 and i < self.aliases:
                body = self._reprint(i)
            elif parts[0] == "article" and len(parts) == 2:
                body = self._article(i)
            elif parts[0] == "article" and len(parts) == 3 and i < self.aliases:
                body = {"print": self._print, "amp": self._amp}.get(parts[2], lambda _: b"")(i)
        if not body:
            return Resp(404, b"<html><body>Not found</body></html>")
        mtime = EPOCH + 1000 * self.version.get(plain, 0)
        return Resp(200, body, headers=headers, etag=etag_for(body), last_modified=mtime)

    def handle(self, req: Req) -> Resp:
        resp = self._route(req)
        if resp.status == 200 and resp.etag is None and req.path != "/robots.txt":
            data = resp.body if isinstance(resp.body, bytes) else b""
            resp.etag = etag_for(data)
            resp.last_modified = EPOCH
        if resp.status == 200:
            headers = {k.lower(): v for k, v in resp.headers.items()}
            if resp.etag:
                headers["etag"] = resp.etag
            with self._lock:
                self.answered[req.path] = headers
        return resp
