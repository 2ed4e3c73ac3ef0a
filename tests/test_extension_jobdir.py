"""A scheduled job gets its own JOBDIR and the shared state directory (in-process crawls)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import pytest_twisted
from scrapy import signals
from scrapy.crawler import CrawlerRunner
from scrapy.utils.test import get_reactor_settings

from polite_crawler.policy.jobs import JobIdError
from polite_crawler.spiders.site import SiteSpider
from polite_crawler.web.server import Site, page
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
