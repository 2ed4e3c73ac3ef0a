"""The AI-input export: pages whose content signals refuse AI input are kept without their text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest_twisted

from demo.web.server import Resp
from tests.crawl import run_crawl
from tests.pages_web import ArticleSite, PageSpider, article_html
from tests.test_pipelines_pages import _settings

HOST = "127.0.8.3"


@pytest_twisted.ensureDeferred
async def test_ai_input_export_withholds_refused_text(web_factory, tmp_path: Any) -> None:
    site = ArticleSite(n=2)
    text = "A page with its own words about a subject that matters to someone somewhere."
    site.extra = {
        "/refused-cf": Resp(200, article_html("Refused (Cloudflare)", text + " one"),
                            headers={"Content-Signal": "search=yes, ai-input=no"}),
        "/refused-aipref": Resp(200, article_html("Refused (AIPREF)", text + " two"),
                                headers={"Content-Usage": "ai-use=n"}),
        "/train-only": Resp(200, article_html("No training", text + " three"),
                            headers={"Content-Signal": "ai-train=no"}),
        "/noindex": Resp(200, article_html("Not for indexes", text + " four"),
                         headers={"X-Robots-Tag": "noindex"}),
    }
    web = web_factory({HOST: site})
    await run_crawl(PageSpider, _settings(tmp_path), url=web.url(HOST))

    out = tmp_path / "ai.jsonl"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    done = subprocess.run([sys.executable, "-m", "polite_crawler.export", "--ai-input", str(out),
                           "--state-dir", str(tmp_path)], capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    assert "text withheld from 3" in done.stderr
    rows = {r["canonical_url"]: r for r in map(json.loads, out.read_text().splitlines())}

    def url(path: str) -> str:
        return web.url(HOST, path)

    assert set(rows) == {url(p) for p in ("/", "/a/0", "/a/1", *site.extra)}
    for path in ("/refused-cf", "/refused-aipref"):
        row = rows[url(path)]
        assert "text" not in row and "title" not in row and row["withheld"] == "ai-input refused"
        assert row["signals"]["ai_input"] is False
    assert rows[url("/noindex")]["withheld"] == "noindex" and "text" not in rows[url("/noindex")]
    # ai-train=no is recorded, not a reason to hold the text back from AI input.
    train = rows[url("/train-only")]
    assert train["signals"]["ai_train"] is False and "three" in train["text"]
    assert "Article /a/0" in rows[url("/a/0")]["text"] and "withheld" not in rows[url("/a/0")]

    everything = tmp_path / "all.jsonl"
    subprocess.run([sys.executable, "-m", "polite_crawler.export", "--all", str(everything),
                    "--state-dir", str(tmp_path)], capture_output=True, env=env, timeout=120,
                   check=True)
    rows = {r["canonical_url"]: r for r in map(json.loads, everything.read_text().splitlines())}
    assert "one" in rows[url("/refused-cf")]["text"]  # not an AI export: the text is there
    assert "text" not in rows[url("/noindex")]
