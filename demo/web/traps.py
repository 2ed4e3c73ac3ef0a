"""Scenario sites for discovery and traps, served by :class:`~demo.web.server.TestWeb`.

- :class:`DiscoverySite`: robots.txt names a sitemap index (a gzipped sitemap
  and a text sitemap inside), an RSS feed and an Atom feed; the sitemaps also
  list pages of other hosts (to be dropped); pages link to each other under
  aliases and to one page no sitemap lists.
- :class:`FallbackSite`: robots.txt is a 404 and ``/sitemap.xml`` lists the pages.
- :class:`TrapSite`: a few real pages beside every classic trap: a calendar
  with endless "next month" links, faceted navigation (5 filters x 6 options,
  plus a sort link), session ids in paths, a ``/a/b/a/b/...`` loop, URLs that
  grow on every page, and aliases of one page (tracking parameters, fragment,
  parameter order, default port when served on port 80).
- :class:`FacetSite`: faceted navigation as a shop has it (five filters
  of six options; every listing links every two-filter combination).
- :class:`CatalogueSite`: query pages that are genuinely distinct (``/item?id=N``),
  which a crawl must fetch whole.
- :class:`SessionTrapSite`: ordinary pages beside a catalogue whose every link
  carries a new session token in its path (``/s/<16 hex>/page-N``).
- :class:`HashPathSite`: an ordinary site whose paths hold git hashes and dates
  (commits, their diffs, dated posts), every page its own text: no trap.

Each site has ``real``: the paths a crawl must find, each fetched once.
"""

from __future__ import annotations

import gzip
import random
import re
from urllib.parse import parse_qsl, urlencode, urlsplit

from demo.web.server import Req, Resp, Site, etag_for, page

_LOREM_TEXT = ("amber basil cobalt delta ember fjord granite harbor indigo juniper kestrel lagoon "
               "marble nectar onyx pewter quartz russet saffron tundra umber velvet willow xenon "
               "yarrow zephyr")
_LOREM = _LOREM_TEXT.split(" ")


def prose(seed: str, words: int = 80) -> str:
    """Distinct, stable text for one page (so every real page brings new content)."""
    rnd = random.Random(seed)
    return " ".join(f"{rnd.choice(_LOREM)}{rnd.randrange(10_000)}" for _ in range(words))


def _base(req: Req) -> str:
    return f"http://{req.host}:{req.port}"


def _xml(body: str) -> Resp:
    return Resp(200, body.encode(), content_type="application/xml")


def _urlset(base: str, paths: list[str], lastmod: str = "2026-05-01") -> str:
    items = "".join(f"<url><loc>{base}{p}</loc><lastmod>{lastmod}</lastmod></url>" for p in paths)
    return f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">' \
           f"{items}</urlset>"


class DiscoverySite(Site):
    """Sitemap index -> gzipped sitemap + text sitemap; RSS and Atom feeds; one unlisted page."""

    GZ_PAGES = [f"/p/{i}" for i in range(1, 6)]
    TEXT_PAGES = [f"/t/{i}" for i in range(1, 4)]
    RSS_PAGES = ["/news/1", "/news/2"]
    ATOM_PAGES = ["/posts/a", "/posts/b"]
    UNLISTED = ["/hidden", "/hidden/deeper"]

    def __init__(self, foreign_host: str = "127.0.0.9") -> None:
        super().__init__()
        self.foreign_host = foreign_host
        self.real = ["/", *self.GZ_PAGES, *self.TEXT_PAGES, *self.RSS_PAGES, *self.ATOM_PAGES,
                     *self.UNLISTED]
        self.sitemap_files = ["/sitemap_index.xml", "/sitemaps/pages.xml.gz",
                              "/sitemaps/more.txt", "/feed.rss", "/atom.xml"]

    def handle(self, req: Req) -> Resp:
        base = _base(req)
        path = req.path.split("?", 1)[0]
        foreign = f"http://{self.foreign_host}:{req.port}"
        if path == "/robots.txt":
            return Resp(200, (f"User-agent: *\nAllow: /\n\nSitemap: {base}/sitemap_index.xml\n"
                              f"Sitemap: /feed.rss\nsitemap: {base}/atom.xml\n"
                              f"Sitemap: {foreign}/sitemap.xml\n").encode(),
                        content_type="text/plain")
        if path == "/sitemap_index.xml":
            return _xml('<?xml version="1.0"?><sitemapindex '
                        'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                        f"<sitemap><loc>{base}/sitemaps/pages.xml.gz</loc></sitemap>"
                        f"<sitemap><loc>{base}/sitemaps/more.txt</loc></sitemap>"
                        f"<sitemap><loc>{foreign}/elsewhere.xml</loc></sitemap>"
                        "</sitemapindex>")
        if path == "/sitemaps/pages.xml.gz":
            body = _urlset(base, self.GZ_PAGES) + ""
            body = body.replace("</urlset>", f"<url><loc>{foreign}/p/x</loc></url>"
                                             f"<url><loc>http://other.invalid/p/y</loc></url>"
                                             "</urlset>")
            return Resp(200, gzip.compress(body.encode(), mtime=0),
                        content_type="application/x-gzip", gzip_ok=False)
        if path == "/sitemaps/more.txt":
            lines = [f"{base}{p}?utm_source=sitemap" for p in self.TEXT_PAGES]
            lines.append(f"{foreign}/t/9")
            return Resp(200, "\n".join(lines).encode(), content_type="text/plain")
        if path == "/feed.rss":
            items = "".join(f"<item><title>{p}</title><link>{base}{p}</link>"
                            f"<pubDate>Tue, 05 May 2026 10:00:00 GMT</pubDate></item>"
                            for p in self.RSS_PAGES)
            return Resp(200, f'<?xml version="1.0"?><rss version="2.0"><channel><title>N'
                             f"</title>{items}</channel></rss>".encode(),
                        content_type="application/rss+xml")
        if path == "/atom.xml":
            entries = "".join(f'<entry><title>{p}</title><link href="{p}"/>'
                              f"<updated>2026-05-06T00:00:00Z</updated></entry>"
                              for p in self.ATOM_PAGES)
            return Resp(200, f'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom">'
                             f"<title>B</title>{entries}</feed>".encode(),
                        content_type="application/atom+xml")
        if path in self.real:
            # Every page links to the others under aliases, and to the unlisted pages.
            links = [f"{p}?utm_medium=web#top" for p in self.GZ_PAGES] + \
                    [f"{base.upper()}{p}" for p in self.TEXT_PAGES] + \
                    [f"{p}?fbclid=XYZ" for p in self.RSS_PAGES + self.ATOM_PAGES]
            if path == "/":
                links.append("/hidden")
            if path == "/hidden":
                links.append("/hidden/deeper")
            links.append(f"{foreign}/offsite")
            return Resp(200, page(f"Page {path}", prose(path), links))
        return Resp(404, b"<html><body>Not found</body></html>")


class FallbackSite(Site):
    """No robots.txt (404): ``/sitemap.xml`` is where discovery starts."""

    PAGES = ["/one", "/two", "/three"]

    def __init__(self) -> None:
        super().__init__()
        self.real = ["/", *self.PAGES]

    def handle(self, req: Req) -> Resp:
        path = req.path.split("?", 1)[0]
        if path == "/sitemap.xml":
            return _xml(_urlset(_base(req), self.PAGES))
        if path in self.real:
            return Resp(200, page(f"Page {path}", prose(path), ["/"]))
        return Resp(404, b"<html><body>Not found</body></html>")


FILTERS = {
    "color": ["red", "green", "blue", "black", "white", "pink"],
    "size": ["xs", "s", "m", "l", "xl", "xxl"],
    "brand": ["acme", "globex", "initech", "umbrella", "hooli", "stark"],
    "price": ["0-10", "10-20", "20-50", "50-100", "100-200", "200-"],
    "rating": ["1", "2", "3", "4", "5", "any"],
}
PRODUCTS = 12
# What every page of a shop carries: delivery terms, opening hours, the legal lines.
SHOP_FOOTER = prose("shop-footer", 120)
_SESSION = re.compile(r";jsessionid=[^/?]*|/\(S\([^)]*\)\)", re.IGNORECASE)


class TrapSite(Site):
    """Real pages beside the classic traps (calendars, facets, repeating paths)."""

    TRAPS = ("calendar", "facets", "paths")

    def __init__(self, traps: tuple[str, ...] = TRAPS) -> None:
        super().__init__()
        rnd = random.Random(7)
        self.traps = traps
        self.products = {
            n: {f: rnd.choice(opts) for f, opts in FILTERS.items()} for n in range(1, PRODUCTS + 1)
        }
        self.real = ["/", "/about"]
        if "calendar" in traps:
            self.real += ["/calendar?month=2026-01"]
        if "facets" in traps:
            self.real += ["/shop", *[f"/product/{n}" for n in self.products]]
        if "paths" in traps:
            self.real += ["/session/a", "/session/b", "/loop/", "/grow/x", "/alias",
                          "/item?a=1&b=2"]

    def _home_links(self) -> list[str]:
        links = ["/about"]
        if "calendar" in self.traps:
            links += ["/calendar?month=2026-01"]
        if "facets" in self.traps:
            links += ["/shop", "/shop?color=red&size=m&brand=acme&price=0-10&rating=5&sort=price"]
        if "paths" in self.traps:
            links += [f"/session/a;jsessionid={rnd_id()}", f"/(S({rnd_id()}))/session/b",
                      "/loop/", "/grow/x", "/alias?utm_source=home&utm_campaign=spring",
                      "/item?b=2&a=1"]
        return links

    def _product_blurb(self, n: int) -> str:
        attrs = ", ".join(f"{k} {v}" for k, v in self.products[n].items())
        return f"Product {n}: {attrs}."

    def handle(self, req: Req) -> Resp:
        parts = urlsplit(req.path)
        path = _SESSION.sub("", parts.path) or "/"
        query = dict(parse_qsl(parts.query))
        if path == "/robots.txt":
            return Resp(404, b"")
        if path == "/":
            # Each site its own text: the same home page on two hosts is one page
            # to the duplicate detection.
            site = "-".join(self.traps)
            return Resp(200, page("Home", prose(f"home-{site}"), self._home_links()))
        if path == "/about":
            more = ["/alias#team", "/alias?gclid=123", "/item?a=1&b=2&fbclid=1"]
            return Resp(200, page("About", prose(f"about-{'-'.join(self.traps)}"),
                                  [*(more if "paths" in self.traps else []), "/"]))
        if path == "/alias":
            return Resp(200, page("Alias", prose("alias"), ["/alias?mc_eid=9#x", "/about"]))
        if path == "/item":
            return Resp(200, page("Item", prose("item"), ["/item?b=2&a=1&msclkid=5"]))
        if path.startswith("/product/"):
            n = int(path.rsplit("/", 1)[1])
            text = f"{self._product_blurb(n)} {prose(f'product-{n}')} {SHOP_FOOTER}"
            return Resp(200, page(f"Product {n}", text, ["/shop"]))
        if path == "/shop":
            return self._facets(query)
        if path == "/calendar":
            month = query.get("month", "2026-01")
            y, m = (int(x) for x in month.split("-"))
            nxt = f"{y + m // 12}-{m % 12 + 1:02d}"
            prev = f"{y - (m == 1)}-{(m - 2) % 12 + 1:02d}"
            body = "Events this month: none. " + "Monday Tuesday Wednesday Thursday Friday " * 5
            return Resp(200, page(f"Calendar {month}", body,
                                  [f"/calendar?month={nxt}", f"/calendar?month={prev}", "/"]))
        if path.startswith("/session/"):
            # Every visit hands out a fresh session id in every link.
            return Resp(200, page(f"Session {path}", prose(path), [
                f"/session/a;jsessionid={rnd_id()}", f"/(S({rnd_id()}))/session/b", "/"]))
        if path.startswith("/loop/"):
            return Resp(200, page("Loop", "The same page, again. " * 20, ["a/b/", "/"]))
        if path.startswith("/grow/"):
            # 250 more characters a page: the URL passes 2,000 (our limit) before
            # Scrapy's own 2,083 and before depth 10.
            return Resp(200, page("Grow", "Growing URLs. " * 20, [path + "-" + "y" * 249]))
        return Resp(404, b"<html><body>Not found</body></html>")

    def _facets(self, query: dict[str, str]) -> Resp:
        chosen = {k: v for k, v in query.items() if k in FILTERS}
        matches = [n for n, attrs in self.products.items()
                   if all(attrs[k] == v for k, v in chosen.items())]
        # Labelled as a shop labels them: the option, not the URL.
        links = [(f"/product/{n}", f"Product {n}") for n in matches]
        for f, opts in FILTERS.items():
            if f in chosen:
                continue
            for o in opts:
                links.append(("/shop?" + urlencode({**chosen, f: o}), o))
        links.append(("/shop?" + urlencode({**chosen, "sort": "price"}), "Sort by price"))
        desc = ", ".join(f"{k}={v}" for k, v in sorted(chosen.items())) or "none"
        body = f"Filters: {desc}. " + " ".join(self._product_blurb(n) for n in matches) + \
               ("" if matches else " No products match these filters.")
        nav = "".join(f'<li><a href="{href}">{label}</a></li>' for href, label in links)
        html = (f"<!doctype html><html><head><meta charset='utf-8'><title>Shop</title></head>"
                f"<body><nav><ul>{nav}</ul></nav><main><h1>Shop</h1><p>{body}</p></main>"
                f"<footer>{SHOP_FOOTER}</footer></body></html>")
        return Resp(200, html.encode())


_ids = random.Random(11)


def rnd_id() -> str:
    return "".join(_ids.choice("ABCDEF0123456789") for _ in range(16))


class AliasPortSite(Site):
    """Served on port 80: links spell the same pages with and without ``:80``."""

    def __init__(self) -> None:
        super().__init__()
        self.real = ["/", "/x", "/y"]

    def handle(self, req: Req) -> Resp:
        path = req.path.split("?", 1)[0]
        if path in self.real:
            h = req.host
            return Resp(200, page(f"Port {path}", prose(f"port{path}"), [
                f"http://{h}:80/x", f"http://{h}/x", f"HTTP://{h}:80/y#f", f"http://{h}/y?utm_id=1",
                f"http://{h}:80/"]))
        return Resp(404, b"<html><body>Not found</body></html>")


class FacetSite(Site):
    """Faceted navigation as a shop has it.

    Five filters of six options over ``products`` product pages; ``/shop`` and
    every listing link every combination of two filters (``/shop?a=x&b=y``,
    360 URLs, under the parameter limit) and the products they match. Nothing
    in the URLs gives the trap away; the listings differ only in their filter
    line and in which of the few products they show.
    """

    def __init__(self, products: int = 8) -> None:
        super().__init__()
        rnd = random.Random(5)
        self.products = {n: {f: rnd.choice(opts) for f, opts in FILTERS.items()}
                         for n in range(1, products + 1)}
        self.real = ["/", "/shop", *[f"/product/{n}" for n in self.products]]
        names = list(FILTERS)
        self.combinations = [
            urlencode({a: x, b: y})
            for i, a in enumerate(names) for b in names[i + 1:]
            for x in FILTERS[a] for y in FILTERS[b]]

    def _listing(self, chosen: dict[str, str]) -> Resp:
        matches = [n for n, attrs in self.products.items()
                   if all(attrs.get(k) == v for k, v in chosen.items())]
        links = [(f"/product/{n}", f"Product {n}") for n in matches]
        links += [(f"/shop?{q}", q.replace("&", ", ").replace("=", " ")) for q in self.combinations]
        desc = ", ".join(f"{k} {v}" for k, v in sorted(chosen.items())) or "all products"
        blurbs = " ".join(f"Product {n}: " + ", ".join(f"{k} {v}" for k, v in
                                                     self.products[n].items()) + "."
                          for n in matches) or "No products match these filters."
        nav = "".join(f'<li><a href="{h}">{label}</a></li>' for h, label in links)
        body = ("<!doctype html><html><head><meta charset='utf-8'><title>Shop</title></head>"
                f"<body><nav><ul>{nav}</ul></nav><main><h1>Shop: {desc}</h1><p>{blurbs}</p>"
                f"</main><footer>{SHOP_FOOTER}</footer></body></html>").encode()
        return Resp(200, body, etag=etag_for(body))

    def handle(self, req: Req) -> Resp:
        parts = urlsplit(req.path)
        if parts.path == "/robots.txt":
            return Resp(404, b"")
        if parts.path == "/":
            return Resp(200, page("Home", prose("facet-home"), ["/shop"]))
        if parts.path == "/shop":
            return self._listing({k: v for k, v in parse_qsl(parts.query) if k in FILTERS})
        if parts.path.startswith("/product/"):
            n = int(parts.path.rsplit("/", 1)[1])
            if n in self.products:
                attrs = ", ".join(f"{k} {v}" for k, v in self.products[n].items())
                return Resp(200, page(f"Product {n}", f"Product {n}: {attrs}. "
                                      f"{prose(f'facet-product-{n}', 150)}", ["/shop"]))
        return Resp(404, b"<html><body>Not found</body></html>")


class CatalogueSite(Site):
    """A catalogue whose query pages are genuinely distinct (facets' counter-case).

    ``/catalogue?page=N`` lists ``per_page`` items each; every item is
    ``/item?id=N`` with text of its own; listings also sort (``&sort=name``).
    Every item page must be crawled.
    """

    def __init__(self, items: int = 60, per_page: int = 6) -> None:
        super().__init__()
        self.items = items
        self.per_page = per_page
        pages = -(-items // per_page)
        self.real = ["/", *[f"/catalogue?page={p}" for p in range(1, pages + 1)],
                     *[f"/item?id={i}" for i in range(1, items + 1)]]

    def handle(self, req: Req) -> Resp:
        parts = urlsplit(req.path)
        query = dict(parse_qsl(parts.query))
        if parts.path == "/robots.txt":
            return Resp(404, b"")
        if parts.path == "/":
            return Resp(200, page("Catalogue", prose("cat-home"), ["/catalogue?page=1"]))
        if parts.path == "/catalogue":
            p = int(query.get("page", "1") or 1)
            first = (p - 1) * self.per_page + 1
            ids = range(first, min(first + self.per_page, self.items + 1))
            links = [f"/item?id={i}" for i in ids]
            # A numbered pager: every page of the catalogue.
            links += [f"/catalogue?page={n}" for n in range(1, -(-self.items // self.per_page) + 1)]
            text = " ".join(f"Item {i}: {prose(f'cat-blurb-{i}', 12)}." for i in ids)
            return Resp(200, page(f"Catalogue page {p}", text, links))
        if parts.path == "/item":
            i = int(query.get("id", "0") or 0)
            if 1 <= i <= self.items:
                return Resp(200, page(f"Item {i}", prose(f"cat-item-{i}", 160),
                                      [f"/catalogue?page={(i - 1) // self.per_page + 1}"]))
        return Resp(404, b"<html><body>Not found</body></html>")


_tokens = random.Random(24)
_ALLOW_ALL = Resp(200, b"User-agent: *\nAllow: /\n", content_type="text/plain")


def _validated(title: str, text: str, links: list[str]) -> Resp:
    """A :func:`page` with an ETag (so a recrawl can revalidate it)."""
    body = page(title, text, links)
    return Resp(200, body, etag=etag_for(body))


def session_token() -> str:
    """A fresh 16-hex session token (letters and digits, as a server mints them)."""
    while True:
        token = f"{_tokens.getrandbits(64):016x}"
        if not token.isdigit() and not token.isalpha():
            return token


class SessionTrapSite(Site):
    """Ordinary pages beside a session-id trap.

    The home page links its ordinary pages and ``/s/<token>/page-1``; every page
    under ``/s/`` links the next page, the first page and home, each link with a
    token minted for it. Page N has the same text whatever its token, so the space
    of URLs has no end and none comes back. Ordinary pages carry an ETag.
    """

    def __init__(self, pages: int = 6, seed: str = "session") -> None:
        super().__init__()
        self.seed = seed
        self.news = [f"/news/{i}" for i in range(1, pages + 1)]
        self.real = ["/", "/about", *self.news]

    @staticmethod
    def is_trap(path: str) -> bool:
        return path.startswith("/s/")

    def handle(self, req: Req) -> Resp:
        path = req.path.split("?", 1)[0]
        if path == "/robots.txt":
            return _ALLOW_ALL
        if path == "/":
            return _validated("Home", prose(f"{self.seed}-home"),
                              ["/about", *self.news, f"/s/{session_token()}/page-1"])
        if path in self.real:
            return _validated(f"Page {path}", prose(f"{self.seed}{path}"), ["/"])
        parts = path.split("/")
        if len(parts) == 4 and parts[1] == "s" and parts[3].startswith("page-") \
                and parts[3][5:].isdigit():
            n = int(parts[3][5:])
            return _validated(f"Catalogue page {n}", prose(f"{self.seed}-catalogue-{n}"), [
                f"/s/{session_token()}/page-{n + 1}", f"/s/{session_token()}/page-1", "/"])
        return Resp(404, b"<html><body>Not found</body></html>")


class HashPathSite(Site):
    """An ordinary site with git hashes and dates in its paths (session ids' counter-case).

    ``/log`` lists ``commits`` commits ``/commit/<40 hex>``; each links its parent
    and its diff ``/commit/<sha>/diff``; ``/blog`` lists posts
    ``/2024/05/<day>/post-<n>`` and day archives ``/archive/2024-05-<day>``. Every
    page has text of its own and an ETag: everything is crawled, every time.
    """

    def __init__(self, commits: int = 6, posts: int = 5) -> None:
        super().__init__()
        rnd = random.Random(40)
        self.shas = [f"{rnd.getrandbits(160):040x}" for _ in range(commits)]
        self.posts = [f"/2024/05/{n + 10:02d}/post-{n}" for n in range(posts)]
        self.archives = [f"/archive/2024-05-{n + 10:02d}" for n in range(posts)]
        self.real = ["/", "/log", "/blog", *[f"/commit/{s}" for s in self.shas],
                     *[f"/commit/{s}/diff" for s in self.shas], *self.posts, *self.archives]

    def handle(self, req: Req) -> Resp:
        path = req.path.split("?", 1)[0]
        if path == "/robots.txt":
            return _ALLOW_ALL
        if path == "/":
            return _validated("Code and notes", prose("hash-home"), ["/log", "/blog"])
        if path == "/log":
            return _validated("Log", prose("hash-log", 20),
                              [f"/commit/{self.shas[0]}", "/"])
        if path == "/blog":
            return _validated("Blog", prose("hash-blog", 20), [*self.posts, *self.archives])
        if path.startswith("/commit/"):
            sha, _, tail = path[len("/commit/"):].partition("/")
            if sha in self.shas and tail in ("", "diff"):
                i = self.shas.index(sha)
                links = [f"/commit/{sha}/diff", "/log"]
                if i + 1 < len(self.shas):
                    links.append(f"/commit/{self.shas[i + 1]}")
                what = "diff" if tail else "commit"
                return _validated(f"{what} {sha[:8]}", prose(f"hash-{what}-{sha}", 120), links)
        if path in self.posts or path in self.archives:
            return _validated(path, prose(f"hash{path}", 120), ["/blog", "/"])
        return Resp(404, b"<html><body>Not found</body></html>")
