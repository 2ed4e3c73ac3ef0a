"""A crawl that refuses to start says so like a command-line tool.

Each case runs ``scrapy crawl`` as the operator does (a subprocess in the
project directory): one line on stderr, no traceback, no start-up log, exit 2.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def crawl(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("POLITE_BOT_URL", None)
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site",
           "-s", f"POLITE_STATE_DIR={tmp_path / 'state'}", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


@pytest.mark.parametrize(("args", "words"), [
    (("-a", "url=https://example.org/"), "POLITE_BOT_URL is not set"),
    (("-a", "url=http://127.0.0.1:9/", "-s", "USER_AGENT=Mozilla/5.0 (X11) Chrome/120"),
     "browser User-Agent"),
    (("-a", "urls=/nonexistent"), "-a urls=/nonexistent: no such file"),
    ((), "give a site"),
    (("-a", "url=ftp://example.org/"), "not an http(s) URL"),
    (("-a", "url=http://127.0.0.1:9/", "-s", "POLITE_SIGNING_KEY=/nonexistent/key.pem"),
     "POLITE_SIGNING_KEY"),
    (("-a", "url=http://127.0.0.1:9/", "-s", "POLITE_TEST_NETWORKS=10.0.0.0/33"),
     "POLITE_TEST_NETWORKS"),
    (("-a", "url=http://127.0.0.1:9/", "-a", "_job=../etc"), "not a plain name"),
], ids=["no-bot-url", "browser-ua", "missing-urls-file", "no-url", "not-http", "signing-key",
        "bad-network", "bad-job-id"])
def test_refusal_is_one_line_and_exit_2(tmp_path, args, words):
    done = crawl(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("scrapy crawl: ")
    assert words in lines[0]
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    # Refused before anything was set up: no state directory was made.
    assert not (tmp_path / "state").exists()


def test_another_spider_s_own_argument_check(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "scrapy", "crawl", "api_example",
                           "-a", "url=http://127.0.0.1:9/a,http://127.0.0.1:9/b"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "scrapy crawl: give one API URL: scrapy crawl api_example -a url=https://..."]


def test_unknown_spider_is_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "scrapy", "crawl", "nosuchspider"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["scrapy crawl: no spider named 'nosuchspider' "
                                        "(scrapy list names them)"]


def test_a_bot_url_lets_the_public_crawl_past_the_check(monkeypatch):
    # The check itself, not a crawl of the public web.
    from scrapy.utils.project import get_project_settings

    from polite_crawler.commands.crawl import start_problem
    from polite_crawler.spiders.site import SiteSpider

    monkeypatch.chdir(ROOT)
    settings = get_project_settings()
    assert start_problem(settings, SiteSpider, {"url": "https://example.org/"}) is not None
    settings.set("POLITE_BOT_URL", "https://ops.example/bot/", priority="cmdline")
    assert start_problem(settings, SiteSpider, {"url": "https://example.org/"}) is None


def test_entry_points_name_the_commands():
    import importlib
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    eps = data["project"]["entry-points"]["scrapy.commands"]
    assert set(eps) == {"crawl", "explain", "forget", "history", "report", "unblock"}
    from scrapy.commands import ScrapyCommand

    for name, target in eps.items():
        module, _, attr = target.partition(":")
        cls = getattr(importlib.import_module(module), attr)
        assert issubclass(cls, ScrapyCommand), name
        assert module.rsplit(".", 1)[1] == name  # COMMANDS_MODULE names it the same


@pytest.mark.parametrize("name", ["crawl", "explain", "forget", "history", "report", "unblock"])
def test_every_command_has_help(name):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "scrapy", name, "--help"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert f"scrapy {name}" in done.stdout
    if name != "crawl":
        assert "--json" in done.stdout and "--state-dir" in done.stdout


def test_a_recrawl_on_a_used_jobdir_is_one_line(tmp_path):
    """-a recrawl=all on a JOBDIR whose crawl finished would do nothing."""
    import sqlite3

    job = tmp_path / "job"
    job.mkdir()
    conn = sqlite3.connect(job / "polite_frontier.sqlite3")
    conn.executescript("CREATE TABLE frontier_seen (fp BLOB PRIMARY KEY);"
                       "CREATE TABLE frontier_queue (id INTEGER PRIMARY KEY, url TEXT);"
                       "INSERT INTO frontier_seen VALUES (x'01');")
    conn.commit()
    conn.close()
    done = crawl(tmp_path, "-a", "url=http://127.0.0.1:9/", "-s", f"JOBDIR={job}",
                 "-a", "recrawl=all")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "new JOBDIR" in lines[0], done.stderr
    assert "Traceback" not in done.stderr
