"""Conditional requests in real crawls: the test web's own log shows every revisit conditional."""

from __future__ import annotations

import json
from typing import Any

import pytest
import pytest_twisted

from demo.web.server import Req, Resp
from tests.crawl import run_crawl
from tests.pages_web import ArticleSite, PageSpider
from tests.test_pipelines_pages import _settings, _store

HOST = "127.0.8.2"
N = 6


def _pages(web: Any, since: int = 0) -> list[Any]:
    """Server log entries for the index and the articles (not robots.txt or sitemaps)."""
    return [e for e in web.entries(HOST)[since:]
            if e.path == "/" or e.path.startswith("/a/")]


@pytest.mark.parametrize("validators", ["etag", "weak", "lm"])
@pytest_twisted.ensureDeferred
async def test_second_crawl_is_conditional_for_every_stored_page(web_factory, tmp_path,
                                                                 validators: str) -> None:
    site = ArticleSite(n=N, validators=validators)
    web = web_factory({HOST: site})
    first = await run_crawl(PageSpider, _settings(tmp_path), url=web.url(HOST))
    assert len(first.items) == N + 1
    sent = {e.path: e for e in _pages(web)}
    assert set(sent) == {"/", *site.texts}
    assert all("if-none-match" not in e.headers for e in sent.values())
    before = len(web.entries(HOST))

    second = await run_crawl(PageSpider, _settings(tmp_path, "job2"), url=web.url(HOST),
                             recrawl="all")

    again = _pages(web, before)
    assert {e.path for e in again} == set(sent)  # every stored page asked again, once
    first_answers = {i["final_url"]: i for i in first.items}
    for e in again:
        answered = first_answers[web.url(HOST, e.path)]
        if validators == "lm":
            assert "if-none-match" not in e.headers
        else:  # the ETag exactly as the server sent it, weak or strong
            assert e.headers["if-none-match"] == answered["etag"]
            assert answered["etag"].startswith("W/") == (validators == "weak")
        assert e.headers["if-modified-since"] == answered["last_modified"]
        assert e.status == 304 and e.bytes_sent == 0
    # The stored copies went to the spider: same pages, links still followed, nothing stored anew.
    assert {i["canonical_url"] for i in second.items} == {i["canonical_url"] for i in first.items}
    assert all(i["revisit"] == "not_modified" for i in second.items)
    assert {i["text_hash"] for i in second.items} >= {i["text_hash"] for i in first.items} - {None}
    stats = second.stats
    assert stats["polite/conditional/not_modified"] == N + 1
    assert stats["polite/conditional/bytes_saved"] == sum(len(site.body(p)) for p in site.texts) \
        + _index_len(tmp_path, web)
    assert stats.get("polite/pages/not_modified") == N + 1
    # The access log counts the 304s and the bytes each one saved.
    lines = [json.loads(ln) for f in sorted(tmp_path.glob("access-*.jsonl"))
             for ln in f.read_text().splitlines()]
    saved = [ln["saved"] for ln in lines if ln["status"] == 304]
    assert len(saved) == N + 1
    assert sum(saved) == stats["polite/conditional/bytes_saved"]
    store = _store(tmp_path)
    try:
        rec = store.lookup(web.url(HOST, "/a/0"))
        assert rec is not None and rec.visits == 2
        assert rec.revisit_interval == 1.5 * 24 * 3600  # unchanged: the interval grew
    finally:
        store.close()


def _index_len(tmp_path: Any, web: Any) -> int:
    store = _store(tmp_path)
    try:
        rec = store.lookup(web.url(HOST, "/"))
        assert rec is not None
        return rec.body_length
    finally:
        store.close()


@pytest_twisted.ensureDeferred
async def test_changed_pages_transfer_bodies_and_shorten_their_interval(web_factory,
                                                                         tmp_path) -> None:
    site = ArticleSite(n=N)
    web = web_factory({HOST: site})
    await run_crawl(PageSpider, _settings(tmp_path), url=web.url(HOST))
    site.change("/a/2")
    before = len(web.entries(HOST))
    second = await run_crawl(PageSpider, _settings(tmp_path, "job2"), url=web.url(HOST),
                             recrawl="all")
    again = {e.path: e for e in _pages(web, before)}
    assert again["/a/2"].status == 200 and again["/a/2"].bytes_sent > 0
    assert all(e.status == 304 for p, e in again.items() if p != "/a/2")
    by_url = {i["canonical_url"]: i for i in second.items}
    assert by_url[web.url(HOST, "/a/2")]["revisit"] == "changed"
    assert "Revision note number 1" in by_url[web.url(HOST, "/a/2")]["text"]
    store = _store(tmp_path)
    try:
        rec = store.lookup(web.url(HOST, "/a/2"), body=True)
        assert rec is not None and rec.body == site.body("/a/2") and rec.changes == 1
        assert rec.revisit_interval == 12 * 3600.0  # changed: the interval halved
    finally:
        store.close()


@pytest_twisted.ensureDeferred
async def test_new_crawl_requests_only_what_is_due(web_factory, tmp_path) -> None:
    site = ArticleSite(n=N)
    web = web_factory({HOST: site})
    await run_crawl(PageSpider, _settings(tmp_path), url=web.url(HOST))
    before = len(web.entries(HOST))
    second = await run_crawl(PageSpider, _settings(tmp_path, "job2"), url=web.url(HOST))
    # Nothing was due (one day by default): no page was requested, yet every page was
    # walked through from the store, links included.
    assert _pages(web, before) == []
    assert len(second.items) == N + 1
    assert {i["revisit"] for i in second.items} == {"not_due"}
    assert second.stats["polite/conditional/not_due"] == N + 1


def _always_304(req: Req) -> Resp:
    return Resp(304, headers={"ETag": '"fixed"'})


@pytest_twisted.ensureDeferred
async def test_304_without_stored_copy_is_fetched_once_unconditionally(web_factory,
                                                                       tmp_path) -> None:
    site = ArticleSite(n=2, extra={"/broken": _always_304})
    web = web_factory({HOST: site})
    await run_crawl(PageSpider, _settings(tmp_path), url=web.url(HOST))
    # The copy of /a/1 is lost (a store restored without bodies, say).
    store = _store(tmp_path)
    try:
        store.call(lambda b: b.execute("UPDATE pages SET body = NULL"), write=True).result()
    finally:
        store.close()
    before = len(web.entries(HOST))
    second = await run_crawl(PageSpider, _settings(tmp_path, "job2"), url=web.url(HOST),
                             recrawl="all")
    log = web.entries(HOST)[before:]
    a1 = [e for e in log if e.path == "/a/1"]
    assert [e.status for e in a1] == [304, 200]
    assert "if-none-match" in a1[0].headers and "if-none-match" not in a1[1].headers
    assert "if-modified-since" not in a1[1].headers
    # A server that answers 304 to everything: one conditional-free retry, then no more.
    broken = [e for e in log if e.path == "/broken"]
    assert len(broken) == 1 and "if-none-match" not in broken[0].headers
    assert second.stats["polite/conditional/unconditional_retry"] == 3  # /, /a/0, /a/1
    by_url = {i["canonical_url"]: i for i in second.items}
    assert by_url[web.url(HOST, "/a/1")]["revisit"] == "unchanged"


@pytest_twisted.ensureDeferred
async def test_a_duplicate_alias_is_fetched_as_itself(web_factory, tmp_path) -> None:
    """Two sites with the same index page: the second's index is a duplicate (an alias of
    the first's). On a revisit it is revalidated as itself, with its own validators (issue
    16), never answered with the first site's copy, whose links would lead back to the
    first site."""
    other = "127.0.8.4"
    sites = {HOST: ArticleSite(n=2, seed=1), other: ArticleSite(n=2, seed=2)}
    web = web_factory(sites)
    urls = tmp_path / "urls.txt"
    urls.write_text(f"{web.url(HOST)}\n{web.url(other)}\n")
    first = await run_crawl(PageSpider, _settings(tmp_path), urls=str(urls))
    assert first.stats["polite/pages/duplicate"] == 1
    kept = {i["canonical_url"] for i in first.items}
    dup_host = next(h for h in (HOST, other) if web.url(h) not in kept)  # whichever came second
    before = len(web.entries())
    second = await run_crawl(PageSpider, _settings(tmp_path, "job2"), urls=str(urls),
                             recrawl="all")
    again = [e for e in web.entries()[before:] if e.path == "/" or e.path.startswith("/a/")]
    assert sorted((e.host, e.path) for e in again) == sorted(
        (h, p) for h in (HOST, other) for p in ("/", "/a/0", "/a/1"))
    assert all(e.status == 304 and "if-none-match" in e.headers for e in again)
    dup_index = next(e for e in again if e.host == dup_host and e.path == "/")
    own = sites[dup_host].handle(Req("GET", "/", {}, dup_host, web.port))
    assert dup_index.headers["if-none-match"] == own.etag  # its own, not the other page's
    # The alias's answer is its own stored copy, dropped again (not an item of the crawl);
    # its links lead to its own site's articles, which were revalidated above.
    assert web.url(dup_host) not in {i["canonical_url"] for i in second.items}
    assert second.stats["polite/pages/alias_revisited"] == 1
