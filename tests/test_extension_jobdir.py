"""A scheduled job gets its own JOBDIR and the shared state directory (in-process crawls)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import pytest_twisted
from scrapy import signals
from scrapy.crawler import CrawlerRunner
from scrapy.utils.test import get_reactor_settings

from demo.web.server import Site, page
from polite_crawler.policy.jobs import JobIdError
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import CrawlResult, _Collector, project_settings_dict

if TYPE_CHECKING:
    from pathlib import Path

HOST = "127.0.0.1"


async def run_crawl(spidercls: type, settings: dict[str, Any] | None = None,
                    **spider_args: Any) -> CrawlResult:
    """As ``scrapy crawl`` does it: the spider exists before the settings are applied.

    (``tests.crawl.run_crawl`` builds its crawler with ``get_crawler``, which applies the
    settings before any spider exists, so it cannot show what a scrapyd job gets.)
    """
    full = {"TELNETCONSOLE_ENABLED": False, **get_reactor_settings(),
            **project_settings_dict(**(settings or {}))}
    crawler = CrawlerRunner(full).create_crawler(spidercls)
    result = CrawlResult(crawler)
    collector = _Collector(result)
    crawler.signals.connect(collector.item_scraped, signal=signals.item_scraped)
    await crawler.crawl(**spider_args)
    return result


def _site() -> Site:
    return Site({
        "/": page("home", links=["/a", "/b"]),
        "/a": page("a"),
        "/b": page("b"),
        "/robots.txt": "User-agent: *\nAllow: /\n",
    })


@pytest_twisted.ensureDeferred
async def test_scrapyd_job_id_gives_a_jobdir_under_the_shared_state_dir(
    web_factory, tmp_path: Path
) -> None:
    web = web_factory({HOST: _site()})
    state = tmp_path / "state"
    result = await run_crawl(SiteSpider, settings={"POLITE_STATE_DIR": str(state)},
                             url=web.url(HOST), _job="job-1")
    jobdir = state / "jobs" / "site" / "job-1"
    assert result.crawler.settings["JOBDIR"] == str(jobdir)
    assert result.crawler.settings["POLITE_STATE_DIR"] == str(state)
    # The scheduler really kept its queue there (not only the setting).
    assert jobdir.is_dir() and any(jobdir.iterdir())
    # Built before Scrapy's own extensions: SpiderState saw the JOBDIR too.
    assert (jobdir / "spider.state").is_file()
    assert len(result.items) == 3


@pytest_twisted.ensureDeferred
async def test_state_dir_from_the_environment_is_made_absolute(
    web_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    web = web_factory({HOST: _site()})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("POLITE_STATE_DIR", "shared")
    result = await run_crawl(SiteSpider, url=web.url(HOST), _job="job-2")
    assert result.crawler.settings["POLITE_STATE_DIR"] == str(tmp_path / "shared")
    assert result.crawler.settings["JOBDIR"] == str(tmp_path / "shared" / "jobs" / "site" / "job-2")


@pytest_twisted.ensureDeferred
async def test_explicit_jobdir_is_kept(web_factory, tmp_path: Path) -> None:
    web = web_factory({HOST: _site()})
    mine = tmp_path / "mine"
    result = await run_crawl(
        SiteSpider, settings={"POLITE_STATE_DIR": str(tmp_path / "state"), "JOBDIR": str(mine)},
        url=web.url(HOST), _job="job-3",
    )
    assert result.crawler.settings["JOBDIR"] == str(mine)
    assert not (tmp_path / "state" / "jobs").exists()


@pytest_twisted.ensureDeferred
async def test_plain_crawl_is_left_alone(
    web_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    web = web_factory({HOST: _site()})
    monkeypatch.delenv("POLITE_STATE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    result = await run_crawl(SiteSpider, settings={"POLITE_STATE_DIR": str(tmp_path / "s")},
                             url=web.url(HOST))
    assert not result.crawler.settings["JOBDIR"]


@pytest_twisted.ensureDeferred
async def test_unsafe_job_id_stops_the_crawl_before_any_request(
    web_factory, tmp_path: Path
) -> None:
    web = web_factory({HOST: _site()})
    with pytest.raises(JobIdError):
        await run_crawl(SiteSpider, settings={"POLITE_STATE_DIR": str(tmp_path)},
                        url=web.url(HOST), _job="../escape")
    assert web.entries() == []
    assert not (tmp_path.parent / "escape").exists()


@pytest_twisted.ensureDeferred
async def test_recrawl_on_a_jobdir_that_crawled_before_is_refused_before_any_request(
    web_factory, tmp_path: Path
) -> None:
    """``-s JOBDIR=X -a recrawl=all`` on a used X would resume the old queue and
    filter every start URL as seen, silently. It is refused at start, saying what to do;
    a new JOBDIR recrawls (conditionally)."""
    from polite_crawler.extensions.jobdir import RecrawlOnUsedJobDir

    web = web_factory({HOST: _site()})
    settings = {"POLITE_STATE_DIR": str(tmp_path / "state"), "JOBDIR": str(tmp_path / "X")}
    first = await run_crawl(SiteSpider, settings=settings, url=web.url(HOST))
    assert len(first.items) == 3
    before = len(web.entries())
    with pytest.raises(RecrawlOnUsedJobDir, match=r"new JOBDIR .*conditional"):
        await run_crawl(SiteSpider, settings=settings, url=web.url(HOST), recrawl="all")
    with pytest.raises(RecrawlOnUsedJobDir):  # the setting says the same as the argument
        await run_crawl(SiteSpider, settings={**settings, "POLITE_RECRAWL": "all"},
                        url=web.url(HOST))
    assert len(web.entries()) == before
    # A plain resume of the finished job is still allowed (it has nothing left to do) ...
    await run_crawl(SiteSpider, settings=settings, url=web.url(HOST))
    # ... and the recrawl with a fresh JOBDIR happens: every page asked again, conditionally.
    before = len(web.entries())
    await run_crawl(SiteSpider, settings={**settings, "JOBDIR": str(tmp_path / "Y")},
                    url=web.url(HOST), recrawl="all")
    again = {e.path for e in web.entries()[before:]}
    assert {"/", "/a", "/b"} <= again


def test_an_unfinished_recrawl_resumes(tmp_path: Path) -> None:
    """A recrawl cancelled half-way (its queue not empty) resumes with the same arguments."""
    import sqlite3

    from polite_crawler.extensions.jobdir import RecrawlOnUsedJobDir, check_recrawl_jobdir

    job = tmp_path / "job"
    check_recrawl_jobdir(str(job), "all")  # a new JOBDIR: noted as a recrawl
    conn = sqlite3.connect(job / "polite_frontier.sqlite3")
    conn.executescript("CREATE TABLE frontier_seen (fp BLOB PRIMARY KEY);"
                       "CREATE TABLE frontier_queue (id INTEGER PRIMARY KEY, url TEXT);"
                       "INSERT INTO frontier_seen VALUES (x'01');"
                       "INSERT INTO frontier_queue (url) VALUES ('http://127.0.0.1/a');")
    conn.commit()
    check_recrawl_jobdir(str(job), "all")  # resumes: not refused
    conn.execute("DELETE FROM frontier_queue")
    conn.commit()
    conn.close()
    with pytest.raises(RecrawlOnUsedJobDir, match="finished"):
        check_recrawl_jobdir(str(job), "all")
