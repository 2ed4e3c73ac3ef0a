"""Pipelines in real crawls: pages stored once, exact duplicates as aliases, near ones linked."""

from __future__ import annotations

import json
from typing import Any

import pytest_twisted

from demo.web.server import Resp
from polite_crawler.backend import backend_of
from polite_crawler.items import PageItem
from tests.crawl import project_settings_dict, run_crawl
from tests.pages_web import ArticleSite, PageSpider, article_html

HOST = "127.0.8.1"


def _settings(tmp_path: Any, job: str = "job", **extra: Any) -> dict[str, Any]:
    """Shared state (the page store) in tmp_path; each crawl a job of its own."""
    return {"POLITE_STATE_DIR": str(tmp_path), "JOBDIR": str(tmp_path / job), **extra}


def _store(tmp_path: Any) -> Any:
    from scrapy.settings import Settings

    settings = Settings(project_settings_dict(**_settings(tmp_path)))
    return backend_of(settings).open_page_store(settings)


@pytest_twisted.ensureDeferred
async def test_duplicates_aliases_and_near_duplicates(web_factory, tmp_path) -> None:
    site = ArticleSite(n=4)
    a0 = site.texts["/a/0"]
    near = next(v for v in site.variants if v.base == 1 and v.kind == "date+byline")
    site.extra = {
        # The same article under another URL (another template around it: same main text).
        "/copy-of-0": Resp(200, article_html("Article /a/0", a0, ["/", "/a/1"])),
        # Article 1 with another date and byline: a near duplicate.
        "/republished-1": Resp(200, article_html("Article 1 again", near.text, ["/"])),
        # rel=canonical naming article 2: the same page under its canonical URL.
        "/a/2-print": Resp(200, article_html("Article /a/2", site.texts["/a/2"], ["/"],
                                             '<link rel="canonical" href="/a/2">')),
    }
    web = web_factory({HOST: site})
    result = await run_crawl(PageSpider, _settings(tmp_path), url=web.url(HOST))

    items = {i["canonical_url"]: i for i in result.items}

    def url(path: str) -> str:
        return web.url(HOST, path)

    assert all(isinstance(i, PageItem) for i in result.items)
    order = [e.path for e in web.entries(HOST)]

    def earlier(a: str, b: str) -> tuple[str, str]:
        return (a, b) if order.index(a) < order.index(b) else (b, a)

    # The exact duplicate (whichever came second) never reached the output.
    first0, copy0 = earlier("/a/0", "/copy-of-0")
    assert url(copy0) not in items and url(first0) in items
    assert result.stats.get("polite/pages/duplicate") == 1
    # The near duplicate is linked to the first page of the cluster.
    first1, near1 = earlier("/a/1", "/republished-1")
    assert items[url(near1)]["near_duplicate_of"] == url(first1)
    assert items[url(first1)]["near_duplicate_of"] is None
    assert items[url("/a/3")]["near_duplicate_of"] is None
    # The main text has no navigation or footer; fingerprints are filled.
    a3 = items[url("/a/3")]
    assert "Example footer" not in a3["text"] and a3["text"].startswith("Article /a/3")
    assert len(a3["simhash"]) == 16 and a3["words"] > 100 and a3["language"] == "en"
    assert a3["etag"] and a3["last_modified"] and a3["revisit"] == "new"

    store = _store(tmp_path)
    try:
        dup = store.lookup(url(copy0))
        assert dup is not None and dup.canonical_url == url(first0)

        def alias_of(path: str) -> Any:
            return store.call(lambda b: b.alias_of(url(path))).result()

        assert alias_of(copy0) == (url(first0), "duplicate")
        assert alias_of("/a/2-print") == (url("/a/2"), "canonical")
        stored = store.call(lambda b: [r.canonical_url for r in b.iter_pages()]).result()
        # Every page once: the index, four articles (one of /a/0 and its copy), the near one.
        articles = [url(first0), *(url(f"/a/{i}") for i in (1, 2, 3))]
        assert sorted(stored) == sorted([url("/"), *articles, url("/republished-1")])
        rec = store.lookup(url("/a/3"), body=True)
        assert rec is not None and rec.body == site.body("/a/3")
        assert rec.etag == a3["etag"] and rec.revisit_interval == 24 * 3600.0
    finally:
        store.close()


@pytest_twisted.ensureDeferred
async def test_feed_export_jsonl(web_factory, tmp_path) -> None:
    site = ArticleSite(n=2)
    web = web_factory({HOST: site})
    out = tmp_path / "pages.jsonl"
    await run_crawl(PageSpider, _settings(tmp_path, FEEDS={str(out): {"format": "jsonlines"}}),
                    url=web.url(HOST))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["canonical_url"] for r in rows} == {web.url(HOST, p) for p in ("/", "/a/0", "/a/1")}
    assert all("_polite_copy" not in r and "text" in r and "simhash" in r for r in rows)
