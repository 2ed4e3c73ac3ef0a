"""Scrapy settings a spider or project sets: gentler honoured, exceeded said once, the
impossible refused; an honest bot User-Agent told what to set; off features silent; the
shared state said once. Also a fresh ``scrapy startproject`` with the add-on enabled.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import pytest_twisted
import scrapy
from scrapy.utils.test import get_crawler

from demo.web.server import Resp, Site, page, short_rests
from polite_crawler.spidersettings import SettingsRefused
from tests.crawl import project_settings_dict, run_crawl

if TYPE_CHECKING:
    from demo.web.server import TestWeb

ROOT = Path(__file__).resolve().parent.parent
A = "127.0.0.1"
ROBOTS = "User-agent: *\nDisallow: /private/\n"


def small_site() -> Site:
    return Site({"/robots.txt": ROBOTS,
                 "/": Resp(200, page("home", "home", ["/a", "/b", "/c", "/private/x"])),
                 "/a": Resp(200, page("a", "a")), "/b": Resp(200, page("b", "b")),
                 "/c": Resp(200, page("c", "c"))})


def follower(url: str, custom: dict[str, Any]) -> type[scrapy.Spider]:
    class Follower(scrapy.Spider):
        name = "follower"
        start_urls = [url]
        custom_settings = custom

        def parse(self, response: Any) -> Any:
            yield {"url": response.url}
            yield from response.follow_all(css="a")

    return Follower


@pytest_twisted.ensureDeferred
async def test_a_gentler_download_delay_is_a_floor_on_the_rest(
        web_factory: Any, caplog: pytest.LogCaptureFixture) -> None:
    web: TestWeb = web_factory({A: small_site()})
    caplog.set_level(logging.INFO)
    spider = follower(web.url(A, "/"), {"DOWNLOAD_DELAY": 0.6})
    result = await run_crawl(spider, {"POLITE_REST_PAGE": 0.05, "POLITE_REST_API": 0.05,
                                      "POLITE_JITTER": 0.0})
    log = web.entries(A)
    assert len(log) == 5  # robots.txt, /, /a, /b, /c
    assert not short_rests(log, 0.6, slack=0.02), "the spider's DOWNLOAD_DELAY was not kept"
    assert len(result.items) == 4
    said = [r.getMessage() for r in caplog.records
            if r.getMessage().startswith("DOWNLOAD_DELAY")]
    assert len(said) == 1 and "floor" in said[0] and "POLITE_REST_PAGE" in said[0]
    assert "spider follower's custom_settings" in said[0]


@pytest.mark.parametrize(("custom", "words"), [
    ({"CONCURRENT_REQUESTS_PER_DOMAIN": 16}, "one request at a time per host"),
    ({"DOWNLOAD_DELAY": 0}, "POLITE_REST_PAGE"),
    ({"ROBOTSTXT_OBEY": False}, "robots.txt is always obeyed"),
], ids=["per-domain", "no-delay", "robots-off"])
def test_a_setting_the_rules_cannot_grant_refuses_the_start(custom: dict[str, Any],
                                                            words: str) -> None:
    with pytest.raises(SettingsRefused) as refused:  # get_crawler applies the settings
        get_crawler(follower("http://127.0.0.1:9/", custom), project_settings_dict())
    line = str(refused.value)
    assert "\n" not in line
    assert next(iter(custom)) in line and "spider follower's custom_settings" in line
    assert words in line


def test_the_template_s_delay_is_said_once_and_kept(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    crawler = get_crawler(follower("http://127.0.0.1:9/", {}),
                          project_settings_dict(DOWNLOAD_DELAY=1, ROBOTSTXT_OBEY=True,
                                                CONCURRENT_REQUESTS_PER_DOMAIN=1,
                                                POLITE_REST_PAGE=3.0, POLITE_REST_API=1.0))
    assert crawler.settings.getfloat("POLITE_REST_PAGE") == 3.0
    said = [r.getMessage() for r in caplog.records
            if r.getMessage().startswith("DOWNLOAD_DELAY")]
    assert len(said) == 1, said
    assert "POLITE_REST_PAGE" in said[0] and "the project's settings.py" in said[0]
    assert "spider follower" in said[0]


def crawl_cmd(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site",
           "-s", f"POLITE_STATE_DIR={tmp_path / 'state'}", "-a", "url=http://127.0.0.1:9/",
           *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


@pytest.mark.parametrize(("args", "words"), [
    (("-s", "CONCURRENT_REQUESTS_PER_DOMAIN=16"), "CONCURRENT_REQUESTS_PER_DOMAIN = '16'"),
    (("-s", "DOWNLOAD_DELAY=0"), "DOWNLOAD_DELAY = '0'"),
    (("-s", "ROBOTSTXT_OBEY=False"), "ROBOTSTXT_OBEY = 'False'"),
    (("-s", "USER_AGENT=AcmeBot/1.0 (+https://acme.example/bot)"),
     'set POLITE_BOT_NAME = "AcmeBot" and POLITE_BOT_URL = "https://acme.example/bot"'),
], ids=["per-domain", "no-delay", "robots-off", "bot-user-agent"])
def test_scrapy_crawl_refuses_in_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...],
                                                      words: str) -> None:
    done = crawl_cmd(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert words in lines[0]
    assert "drops the product token" not in lines[0]


STARTPROJECT_SPIDER = '''
import scrapy


class PagesSpider(scrapy.Spider):
    name = "pages"

    def __init__(self, start="", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [start]

    def parse(self, response):
        yield {"url": response.url, "title": response.css("title::text").get()}
        yield from response.follow_all(css="a")
'''


def test_a_fresh_startproject_with_the_add_on(tmp_path: Path, web_factory: Any) -> None:
    web: TestWeb = web_factory({A: small_site()})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("POLITE_STATE_DIR", None)
    # The new project's own settings: an earlier test's get_project_settings() leaves
    # this project's module in the environment, and a child scrapy would read it.
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    env.pop("SCRAPY_PROJECT", None)
    subprocess.run([sys.executable, "-m", "scrapy", "startproject", "acme"], cwd=tmp_path,
                   env=env, check=True, capture_output=True, timeout=120)
    project = tmp_path / "acme"
    settings = project / "acme" / "settings.py"
    text = settings.read_text()
    assert "DOWNLOAD_DELAY = 1" in text  # the template as Scrapy writes it
    settings.write_text(text.replace("ADDONS = {}",
                                     'ADDONS = {"polite_crawler.addon.PoliteAddon": 0}'))
    (project / "acme" / "spiders" / "pages.py").write_text(STARTPROJECT_SPIDER)
    out = tmp_path / "items.jsonl"
    # A shorter rest on the command line (loopback may), still above the template's
    # DOWNLOAD_DELAY = 1, and no jitter: the default 3 s and up to as much again made
    # the six requests' crawl 15 to 30 s.
    done = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "pages", "-a", f"start={web.url(A, '/')}",
         "-s", "POLITE_PROGRESS_INTERVAL=0", "-s", "POLITE_REST_PAGE=1.1",
         "-s", "POLITE_JITTER=0", "-O", str(out)],
        cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    log = done.stderr
    paths = [e.path for e in web.entries(A)]
    assert paths[0] == "/robots.txt" and "/private/x" not in paths
    assert {"/", "/a", "/b", "/c"} <= set(paths)
    items = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(set(i) == {"url", "title"} for i in items) and len(items) == 4
    said = [ln for ln in log.splitlines() if "DOWNLOAD_DELAY = 1" in ln]
    assert len(said) == 1 and "POLITE_REST_PAGE" in said[0] and "spider pages" in said[0]
    assert "Disabled polite_crawler" not in log  # optional features that are off: silent
    shared = [ln for ln in log.splitlines() if "Shared state:" in ln]
    assert len(shared) == 1 and "POLITE_STATE_DIR" in shared[0] and "INFO" in shared[0]
    assert ".scrapy/polite" in shared[0]
