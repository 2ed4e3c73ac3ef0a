"""Migration 2 of the page store (canonical form 2) on SQLite and a real PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted

from polite_crawler.backend import page_backend_factory as backend_factory
from polite_crawler.middlewares.conditional import FOLLOW
from polite_crawler.policy.urls import canonicalize
from polite_crawler.store.migrations import MIGRATIONS, current_version, migrate
from polite_crawler.store.migrations.recanonicalize import MIGRATED, respellings
from polite_crawler.store.pages import PageRecord, SQLPageBackend
from tests.pg import pg_server, pg_uri  # noqa: F401  (fixtures)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    if request.param == "sqlite":
        uri = f"sqlite:///{tmp_path / 'polite.sqlite3'}"
    else:
        uri = str(request.getfixturevalue("pg_uri"))
    b = backend_factory(uri, "")()
    yield b
    b.close()


def _rec(url: str, fetched_at: float, **kw: Any) -> PageRecord:
    values: dict[str, Any] = {
        "canonical_url": url, "url": url, "final_url": url, "status": 200,
        "fetched_at": fetched_at, "etag": f'"{fetched_at:g}"', "title": url,
        "text": f"text of {url}", "text_hash": f"{abs(hash(url)):032x}",
        "body": f"<html>{url}</html>".encode(), "revisit_interval": 86400.0,
        "due_at": fetched_at + 86400.0, "visits": 2, "changes": 1,
    }
    values.update(kw)
    return PageRecord(**values)


# Canonical URLs as version 1 of the canonical form wrote them.
V1_PAGES = [
    _rec("http://example.org/show?article300=", 10.0),               # link ?article300
    _rec("http://example.org/r?u=http%3A%2F%2Fx.example%2F", 11.0),   # link ?u=http://x.example/
    _rec("http://example%2ecom/a", 12.0, etag='"old"'),              # older copy ...
    _rec("http://example.com/a", 19.0, etag='"new"', last_modified="Tue, 1 Dec 2026"),
    _rec("http://example.org/90%+of", 30.0, etag='"newest"'),        # newer copy ...
    _rec("http://example.org/90%25+of", 20.0, etag='"older"'),
    _rec("http://[::ffff:7f00:1]:8080/x", 13.0, near_duplicate_of="http://example%2ecom/a"),
    _rec("http://example.org/plain", 14.0),
]
V1_ALIASES = [
    ("http://example%2ecom/old", "http://example%2ecom/a", "redirect", 5.0),
    ("http://example%2ecom/a", "http://example.com/a", "duplicate", 6.0),  # one page now
    ("http://example.org/gone?x=", "http://[::ffff:7f00:1]:8080/x", "canonical", 7.0),
]


def _v1_store(backend: SQLPageBackend) -> None:
    migrate(backend.execute, backend.dialect, MIGRATIONS[:1])
    backend.begin()
    for rec in V1_PAGES:
        backend.put(rec)
    # The origin column as version 1 wrote it.
    backend.execute("UPDATE pages SET origin = ? WHERE canonical_url = ?",
                    ("http://[::ffff:7f00:1]:8080", "http://[::ffff:7f00:1]:8080/x"))
    backend.execute("UPDATE pages SET origin = ? WHERE canonical_url = ?",
                    ("http://example%2ecom", "http://example%2ecom/a"))
    for alias, target, reason, seen_at in V1_ALIASES:
        backend.add_alias(alias, target, reason, seen_at)
    backend.commit()
    assert current_version(backend.execute) == 1


def test_migration_rewrites_merges_and_keeps_every_page(backend: SQLPageBackend) -> None:
    _v1_store(backend)
    assert backend.migrate() == [m.version for m in MIGRATIONS[1:]]  # 2, then later ones
    assert backend.migrate() == []
    urls = {r[0] for r in backend.execute("SELECT canonical_url FROM pages", ())}
    assert urls == {
        "http://example.org/show?article300=",
        "http://example.org/r?u=http%3A%2F%2Fx.example%2F",
        "http://example.com/a",
        "http://example.org/90%25+of",
        "http://[::ffff:127.0.0.1]:8080/x",
        "http://example.org/plain",
    }
    # Every stored page is still found under the new form of its old URL.
    for rec in V1_PAGES:
        assert backend.resolve(canonicalize(rec.canonical_url)) is not None, rec.canonical_url
    # Merged rows: the newest fetch and its validators stay, visits and changes add up.
    merged = backend.get("http://example.com/a", body=True)
    assert merged is not None
    assert (merged.etag, merged.last_modified, merged.fetched_at) == ('"new"', "Tue, 1 Dec 2026",
                                                                      19.0)
    assert merged.body == b"<html>http://example.com/a</html>"
    assert (merged.visits, merged.changes) == (4, 2)
    newest = backend.get("http://example.org/90%25+of")
    assert newest is not None
    assert (newest.etag, newest.fetched_at) == ('"newest"', 30.0)
    # The origin column and the near-duplicate link follow.
    origins = dict(backend.execute("SELECT canonical_url, origin FROM pages", ()))
    assert origins["http://[::ffff:127.0.0.1]:8080/x"] == "http://[::ffff:127.0.0.1]:8080"
    assert origins["http://example.com/a"] == "http://example.com"
    v6 = backend.get("http://[::ffff:127.0.0.1]:8080/x")
    assert v6 is not None
    assert v6.near_duplicate_of == "http://example.com/a"
    assert backend.count() == len(V1_PAGES) - 2


def test_migration_rewrites_aliases(backend: SQLPageBackend) -> None:
    _v1_store(backend)
    backend.migrate()
    assert backend.alias_of("http://example.com/old") == ("http://example.com/a", "redirect")
    assert backend.alias_of("http://example%2ecom/old") is None
    # An alias that is one page with its target now is gone.
    assert backend.alias_of("http://example.com/a") is None
    assert backend.alias_of("http://example.org/gone?x=") == (
        "http://[::ffff:127.0.0.1]:8080/x", "canonical")


def test_other_spellings_of_a_link_find_the_page(backend: SQLPageBackend) -> None:
    _v1_store(backend)
    backend.migrate()
    # Version 1 lost whether the name was bare, or the reserved characters raw.
    for link, page in [
        ("http://example.org/show?article300", "http://example.org/show?article300="),
        ("http://example.org/r?u=http://x.example/",
         "http://example.org/r?u=http%3A%2F%2Fx.example%2F"),
    ]:
        found = backend.resolve(canonicalize(link), follow=FOLLOW)
        assert found is not None, link
        assert found.canonical_url == page
    assert backend.alias_of("http://example.org/show?article300") == (
        "http://example.org/show?article300=", MIGRATED)
    # An alias's other spellings are aliases for the same reason.
    assert backend.alias_of("http://example.org/gone?x") == (
        "http://[::ffff:127.0.0.1]:8080/x", "canonical")
    # The conditional-request middleware follows these aliases.
    assert MIGRATED in FOLLOW


def test_migration_of_an_empty_store_and_a_current_one(backend: SQLPageBackend) -> None:
    assert backend.migrate() == [m.version for m in MIGRATIONS]
    backend.begin()
    backend.put(_rec("http://example.org/show?article300", 1.0))
    backend.commit()
    assert backend.migrate() == []
    assert backend.count() == 1


def test_failing_migration_changes_nothing(backend: SQLPageBackend) -> None:
    _v1_store(backend)
    broken = (*MIGRATIONS[:1], type(MIGRATIONS[1])(2, "canonical form 2", (), run=_explode))
    with pytest.raises(RuntimeError):
        migrate(backend.execute, backend.dialect, broken)
    assert current_version(backend.execute) == 1
    urls = sorted(r[0] for r in backend.execute("SELECT canonical_url FROM pages", ()))
    assert urls == sorted(r.canonical_url for r in V1_PAGES)


def _explode(execute: Any, dialect: str) -> None:
    from polite_crawler.store.migrations.recanonicalize import recanonicalize_pages

    recanonicalize_pages(execute, dialect)
    raise RuntimeError("power cut")


@pytest.mark.parametrize(("stored", "forms"), [
    ("http://example.org/", ["http://example.org/"]),
    ("http://example.org/p?q=", ["http://example.org/p?q=", "http://example.org/p?q"]),
    ("http://example.org/p?a=b%3Dc&t=x+y", ["http://example.org/p?a=b%3Dc&t=x+y"]),
    ("http://example.org/p?u=a%3Bb%2C", ["http://example.org/p?u=a%3Bb%2C",
                                         "http://example.org/p?u=a;b,"]),
    ("http://example%2ecom/a", ["http://example.com/a"]),
    ("not a url", ["not a url"]),  # kept, never dropped
])
def test_respellings(stored: str, forms: list[str]) -> None:
    assert respellings(stored) == forms


# --- a real crawl after the upgrade ------------------------------------------------------

HOST = "127.0.8.15"
# Links whose canonical form changed with canonical form 2, and how form 1 stored them.
QUERY_LINKS = {
    "/q?article300": "/q?article300=",
    "/q?r=http://x.example/&b": "/q?b=&r=http%3A%2F%2Fx.example%2F",
    "/q?t=tl;dr": "/q?t=tl%3Bdr",
}


def _query_site(n: int = 3) -> Any:
    from demo.web.server import Req, Resp, etag_for
    from tests.pages_web import ArticleSite, article_html

    class QueryLinkSite(ArticleSite):
        """The article site, its index also linking pages by query string."""

        def handle(self, req: Req) -> Resp:
            path, _, query = req.path.partition("?")
            if path == "/":
                body = article_html("Index", "The index of all articles.",
                                    [*sorted(self.texts)[:n], *QUERY_LINKS])
            elif path == "/q":
                # A page per link, whatever the order of its parameters.
                pages = [sorted(link[3:].split("&")) for link in QUERY_LINKS]
                if sorted(query.split("&")) not in pages:
                    return Resp(404, b"<html><body>Not found</body></html>")
                i = n + pages.index(sorted(query.split("&")))
                body = article_html(f"Query {query}", self.texts[f"/a/{i}"], ["/"])
            else:
                return super().handle(req)
            return Resp(200, body, etag=etag_for(body), last_modified=self.mtime)

    return QueryLinkSite(n=n + len(QUERY_LINKS))


def _to_form_1(tmp_path: Any, base: str) -> None:
    """Make the crawl's page store look as the crawler before canonical form 2 left it."""
    import sqlite3

    conn = sqlite3.connect(tmp_path / "polite.sqlite3")
    with conn:
        for link, stored in QUERY_LINKS.items():
            new = canonicalize(base + link)
            assert conn.execute("UPDATE pages SET canonical_url = ? WHERE canonical_url = ?",
                                (base + stored, new)).rowcount == 1, new
        conn.execute("DELETE FROM page_aliases")
        conn.execute("DELETE FROM page_store_schema WHERE version >= 2")
    conn.close()


@pytest.mark.usefixtures("web_factory")
@pytest_twisted.ensureDeferred
async def test_first_crawl_after_the_upgrade_revalidates_instead_of_refetching(
        web_factory: Any, tmp_path: Any) -> None:
    from tests.crawl import run_crawl
    from tests.pages_web import PageSpider
    from tests.test_pipelines_pages import _settings

    site = _query_site()
    web = web_factory({HOST: site})
    base = web.url(HOST, "")
    first = await run_crawl(PageSpider, _settings(tmp_path), url=web.url(HOST))
    assert {i["canonical_url"] for i in first.items} >= {canonicalize(base + q)
                                                        for q in QUERY_LINKS}
    _to_form_1(tmp_path, base)
    before = len(web.entries(HOST))

    second = await run_crawl(PageSpider, _settings(tmp_path, "job2"), url=web.url(HOST),
                             recrawl="all")

    asked = [e for e in web.entries(HOST)[before:] if e.path.startswith("/q")]
    assert sorted(e.path for e in asked) == sorted(canonicalize(base + q)[len(base):]
                                                   for q in QUERY_LINKS)
    for e in asked:  # each page stored in form 1 is revalidated, not fetched as new
        assert "if-none-match" in e.headers, e.path
        assert e.status == 304, e.path
    assert second.stats.get("polite/conditional/not_modified", 0) >= len(QUERY_LINKS)


def test_doctests() -> None:
    import doctest

    from polite_crawler.store.migrations import recanonicalize

    result = doctest.testmod(recanonicalize)
    assert result.attempted >= 3
    assert result.failed == 0


# --- canonical form 3 (international hosts, migration 4) ---------------------------------

# Canonical URLs as form 2 wrote them (IDNA 2003 for hosts that are not ASCII).
V2_PAGES = [
    _rec("http://fass.de/", 40.0),                 # the link said faß.de
    _rec("http://xn--nxasmq6b.com/", 41.0),        # the link said βόλος.com
    _rec("http://xn--bcher-kva.de/a", 42.0),       # bücher.de: one spelling in both forms
    _rec("http://example.org/show?article300", 43.0),  # a bare query name (form 2)
]


def _v2_store(backend: SQLPageBackend) -> None:
    migrate(backend.execute, backend.dialect, MIGRATIONS[:3])
    backend.begin()
    for rec in V2_PAGES:
        backend.put(rec)
    backend.add_alias("http://fass.de/old", "http://fass.de/", "redirect", 39.0)
    backend.commit()
    assert current_version(backend.execute) == 3


def test_form_2_store_opens_in_form_3(backend: SQLPageBackend) -> None:
    _v2_store(backend)
    assert backend.migrate() == [4]
    assert backend.migrate() == []
    # Every URL form 2 wrote is canonical in form 3 too: nothing rewritten, nothing lost.
    urls = {r[0] for r in backend.execute("SELECT canonical_url FROM pages", ())}
    assert urls == {r.canonical_url for r in V2_PAGES}
    assert backend.alias_of("http://fass.de/old") == ("http://fass.de/", "redirect")
    # Form 1's lost spellings are not made up for a form 2 store.
    assert backend.alias_of("http://example.org/show?article300=") is None
    # The page fetched from fass.de stays fass.de's; a link to faß.de is another host now.
    assert backend.resolve(canonicalize("http://fass.de/")) is not None
    assert canonicalize("http://faß.de/") == "http://xn--fa-hia.de/"
    assert backend.resolve(canonicalize("http://faß.de/")) is None
    assert backend.resolve(canonicalize("http://bücher.de/a")) is not None


def test_form_3_pass_rewrites_and_merges_what_is_not_current(backend: SQLPageBackend) -> None:
    # A URL in no current form (none that form 2 wrote is) is rewritten and merged by the pass.
    _v2_store(backend)
    backend.begin()
    backend.put(_rec("http://XN--BCHER-KVA.de/a", 44.0, etag='"newer"'))
    backend.commit()
    assert backend.migrate() == [4]
    row = backend.get("http://xn--bcher-kva.de/a")
    assert row is not None
    assert (row.etag, row.visits) == ('"newer"', 4)
    assert backend.get("http://XN--BCHER-KVA.de/a") is None
