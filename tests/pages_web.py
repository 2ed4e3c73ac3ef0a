"""A test site of articles for the page store, duplicate and conditional-request tests."""

from __future__ import annotations

import html
from typing import Any

from demo.web.server import Req, Resp, Site, etag_for
from polite_crawler.items import PageItem, page_item
from polite_crawler.spiders.site import SiteSpider
from tests.neardup_corpus import build_corpus


def article_html(title: str, text: str, links: list[str] = (), extra_head: str = "") -> bytes:  # type: ignore[assignment]
    nav = "".join(f'<li><a href="{h}">{h}</a></li>' for h in links)
    paras = "".join(f"<p>{html.escape(p)}</p>" for p in text.split("\n"))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title>{extra_head}</head><body><header><nav><ul>{nav}</ul></nav></header>"
            f"<main><article><h1>{html.escape(title)}</h1>{paras}</article></main>"
            "<footer><p>Example footer. Contact us.</p></footer></body></html>").encode()


class ArticleSite(Site):
    """``/`` lists ``/a/0 .. /a/{n-1}``; each article answers with validators.

    ``validators``: "etag" (strong), "weak" (W/ ETag), "lm" (Last-Modified only),
    "none". ``headers`` adds response headers (e.g. Cache-Control) to articles.
    ``version[path]`` bumps change a page (new body, new validators).
    """

    def __init__(self, n: int = 10, validators: str = "etag", headers: dict[str, str] | None = None,
                 seed: int = 8, extra: dict[str, Any] | None = None) -> None:
        super().__init__()
        corpus = build_corpus(max(n, 1), seed)
        self.texts = {f"/a/{i}": corpus.articles[i] for i in range(n)}
        self.variants = corpus.variants
        self.validators = validators
        self.headers = headers or {}
        self.version: dict[str, int] = {}
        self.extra = extra or {}
        self.mtime = 1_700_000_000.0

    def body(self, path: str) -> bytes:
        text = self.texts[path]
        v = self.version.get(path, 0)
        if v:
            text = text + f"\nRevision note number {v}: the article was updated with new facts."
        return article_html(f"Article {path}", text, ["/"])

    def change(self, path: str) -> None:
        self.version[path] = self.version.get(path, 0) + 1

    def handle(self, req: Req) -> Resp:
        path = req.path.split("?", 1)[0]
        if path == "/robots.txt":
            return Resp(200, b"User-agent: *\nAllow: /\n", content_type="text/plain")
        if path in self.extra:
            route = self.extra[path]
            return route(req) if callable(route) else route
        if path == "/":
            links = sorted(self.texts) + sorted(self.extra)
            body = article_html("Index", "The index of all articles.", links)
        elif path in self.texts:
            body = self.body(path)
        else:
            return Resp(404, b"<html><body>Not found</body></html>")
        mtime = self.mtime + 1000 * self.version.get(path, 0)
        etag = etag_for(body)
        return Resp(
            200, body, headers=dict(self.headers),
            etag=(etag if self.validators == "etag" else "W/" + etag
                  if self.validators == "weak" else None),
            last_modified=mtime if self.validators in ("lm", "etag", "weak") else None,
        )


class PageSpider(SiteSpider):
    """The site spider with page items (for as long as its build_item yields dicts)."""

    name = "pages_test"

    def build_item(self, response: Any, page: Any = None) -> Any:
        base = super().build_item(response, page)
        if isinstance(base, PageItem):
            return base
        return page_item(response, canonical_url=base.get("canonical_url"),
                         title=base.get("title"), links=base.get("links"))
