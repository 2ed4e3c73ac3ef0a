"""The bot page shows the crawler's real settings, and the committed copy is current."""

from __future__ import annotations

import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest

from polite_crawler import __version__
from polite_crawler.botpage import duration, load_settings, main, render_bot_page, size

ROOT = Path(__file__).resolve().parent.parent


def page(**overrides: object) -> str:
    return render_bot_page(load_settings(overrides))


def text_of(html: str) -> str:
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


def test_formatting() -> None:
    assert [duration(x) for x in (3, 0.5, 60, 300, 3600, 86400, 2592000)] == [
        "3 s", "0.5 s", "60 s", "5 min", "1 h", "24 h", "30 days"]
    assert [size(x) for x in (5 * 1024 * 1024, 512 * 1024, 100)] == [
        "5 MiB", "512 KiB", "100 bytes"]


def test_default_page_carries_the_default_numbers() -> None:
    text = text_of(page())
    assert f"PoliteCrawler/{__version__} (+http://127.0.0.1:8900/bot/)" in text
    assert "User-agent: PoliteCrawler Disallow: /" in text
    assert "a rest of at least 3 s" in text
    assert "Every page 3 s (1 s for a documented API)" in text
    assert "5 \N{MULTIPLICATION SIGN} the time the last answer took, up to 30 s" in text
    assert "honours Crawl-delay up to 60 s" in text
    assert "up to 5 min" in text
    assert "5 failures in a row stop" in text
    assert "at most 1,200 requests an hour" in text
    assert "10,000 pages" in text
    assert "when its copy is 24 h old" in text
    assert "between 1 h and 30 days" in text
    assert "cut there" in text and "5 MiB" in text
    assert "retried at most 3 times" in text
    assert "again after 60 s, then twice as long each time, up to 1 h" in text
    assert "at most 10 s to connect, 20 s for the headers of an answer and 45 s" in text
    # Nothing is set by the operator yet: the page says so instead of inventing it.
    assert "Not ready to publish" in text
    assert "has not published its source addresses yet" in text


def test_changing_a_setting_changes_the_page() -> None:
    text = text_of(page(POLITE_REST_PAGE=7.5, POLITE_BREAKER_FAILURES=9,
                        POLITE_CRAWL_DELAY_MAX=120, POLITE_BACKOFF_MAX=600,
                        POLITE_HOST_BUDGET=2500, POLITE_REST_DURATION_FACTOR=10))
    assert "a rest of at least 7.5 s" in text
    assert "a rest of at least 3 s" not in text
    assert "9 failures in a row" in text
    assert "Crawl-delay up to 2 min" in text
    assert "up to 10 min" in text
    assert "2,500 pages" in text
    assert "10 \N{MULTIPLICATION SIGN} the time" in text
    assert "at most 480 requests an hour" in text


def test_token_contact_and_addresses_come_from_the_settings() -> None:
    html = page(POLITE_BOT_NAME="FriendlyBot", POLITE_CONTACT="crawl@example.org",
                POLITE_BOT_URL="https://example.org/bot/",
                POLITE_SOURCE_ADDRESSES="192.0.2.10, 2001:db8::10 crawler.example.org",
                POLITE_PURPOSE="We build a search index of local news.")
    text = text_of(html)
    assert f"FriendlyBot/{__version__} (+https://example.org/bot/; crawl@example.org)" in text
    assert "User-agent: FriendlyBot Disallow: /" in text
    assert "PoliteCrawler" not in text
    assert 'href="mailto:crawl@example.org"' in html
    assert "From: crawl@example.org" in text
    for addr in ("192.0.2.10", "2001:db8::10", "crawler.example.org"):
        assert f"<li><code>{addr}</code></li>" in html
    assert "We build a search index of local news." in text
    assert "Not ready to publish" not in text
    assert "https://example.org/bot/" in text


def test_operator_text_is_escaped() -> None:
    html = page(POLITE_PURPOSE="<script>alert(1)</script> & more")
    assert "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in html


class _Checker(HTMLParser):
    VOID = {"meta", "link", "br", "img", "hr", "input"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.ids: set[str] = set()
        self.labelledby: list[str] = []
        self.tags: set[str] = set()
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"] or "")
        if a.get("aria-labelledby"):
            self.labelledby.append(a["aria-labelledby"] or "")
        if tag == "th" and "scope" not in a:
            self.errors.append("th without scope")
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unbalanced </{tag}> (open: {self.stack[-3:]})")
            return
        self.stack.pop()


def test_page_is_plain_accessible_html() -> None:
    html = page()
    checker = _Checker()
    checker.feed(html)
    assert not checker.errors
    assert not checker.stack
    assert 'lang="en"' in html
    assert "script" not in checker.tags  # no JavaScript
    assert {"main", "header", "footer", "nav", "table", "caption"} <= checker.tags
    assert checker.labelledby and set(checker.labelledby) <= checker.ids
    anchors = set(re.findall(r'href="#([^"]+)"', html))
    assert anchors <= checker.ids


def test_cli_writes_the_page(tmp_path: Path) -> None:
    out = tmp_path / "site" / "index.html"
    assert main([str(out), "-s", "POLITE_REST_PAGE=4"]) == 0
    assert "a rest of at least 4 s" in text_of(out.read_text(encoding="utf-8"))
    with pytest.raises(SystemExit):
        main([str(out), "-s", "NOEQUALS"])


def test_committed_bot_page_matches_the_settings() -> None:
    committed = (ROOT / "bot_page" / "index.html").read_text(encoding="utf-8")
    assert committed == render_bot_page(load_settings()), (
        "bot_page/index.html is out of date with the settings: run `make bot-page`")
