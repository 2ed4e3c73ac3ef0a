"""The example API spider: paginated JSON, the API rest, and every other rule inherited."""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING

import pytest
import pytest_twisted

from demo.web.server import Req, Resp, Site, overlaps, short_rests
from polite_crawler.spiders.api_example import ApiExampleSpider
from polite_crawler.spiders.site import UsageError
from tests.crawl import run_crawl

if TYPE_CHECKING:
    from pathlib import Path

API = "127.0.0.1"
ELSEWHERE = "127.0.0.2"
PAGES = 4
PER_PAGE = 3
# A page rest five times the API rest: the gaps tell which one the frontier used.
REST_API = 0.2
REST_PAGE = 1.0


def api_site(port_of: dict[str, int], next_elsewhere: bool = False) -> Site:
    def things(req: Req) -> Resp:
        query = req.path.partition("?")[2] or "page=1"
        number = query.removeprefix("page=")
        page = int(number) if query.startswith("page=") and number.isdigit() else 0
        if not 1 <= page <= PAGES:
            return Resp(404, b'{"detail": "Invalid page."}', content_type="application/json")
        if page < PAGES:
            nxt: str | None = f"/api/things/?page={page + 1}"
        elif next_elsewhere:
            nxt = f"http://{ELSEWHERE}:{port_of['port']}/api/things/?page=1"
        else:
            nxt = None
        body = {
            "count": PAGES * PER_PAGE,
            "next": nxt,
            "previous": None,
            "results": [{"id": (page - 1) * PER_PAGE + i} for i in range(PER_PAGE)],
        }
        return Resp(200, json.dumps(body).encode(), content_type="application/json")

    return Site({"/api/things/": things, "/robots.txt": "User-agent: *\nAllow: /\n"})


def _settings(tmp_path: Path) -> dict[str, object]:
    return {
        "POLITE_STATE_DIR": str(tmp_path),
        "POLITE_REST_API": REST_API,
        "POLITE_REST_PAGE": REST_PAGE,
        "POLITE_JITTER": 0.0,
    }


def test_the_spider_needs_one_api_url() -> None:
    with pytest.raises(UsageError):
        ApiExampleSpider()
    with pytest.raises(UsageError):
        ApiExampleSpider(url="http://a.example/x,http://b.example/y")


@pytest_twisted.ensureDeferred
async def test_api_spider_reads_every_page_at_the_api_rest(web_factory, tmp_path: Path) -> None:
    port_of: dict[str, int] = {}
    web = web_factory({API: api_site(port_of, next_elsewhere=True), ELSEWHERE: api_site(port_of)})
    port_of["port"] = web.port
    result = await run_crawl(ApiExampleSpider, settings=_settings(tmp_path),
                             url=web.url(API, "/api/things/"))

    ids = sorted(dict(i)["result"]["id"] for i in result.items)
    assert ids == list(range(PAGES * PER_PAGE))
    api = [e for e in web.entries(API) if e.path.startswith("/api/")]
    assert len(api) == PAGES
    # A "next" on another origin is not followed.
    assert web.entries(ELSEWHERE) == []
    # Inherited: robots.txt before the first API request.
    first = web.entries(API)[0]
    assert first.path == "/robots.txt"
    entries = web.entries()
    assert overlaps(entries) == []
    assert short_rests(entries, REST_API, slack=0.01) == []
    # The API rest, not the page rest: every gap between two API calls is well under it.
    gaps = [b.started - a.finished for a, b in itertools.pairwise(api)]
    assert max(gaps) < REST_PAGE * 0.8, gaps
