"""Give every scheduled job its own JOBDIR and the shared state directory.

A scrapyd job arrives as ``scrapy crawl <spider> -a _job=<job id>`` (plus
``-s JOBDIR=...`` when scrapyd's ``jobs_dir`` is set). This extension, built
before every other extension and before the settings freeze, settles two
settings from that (rules in :mod:`polite_crawler.policy.jobs`):

* ``POLITE_STATE_DIR``: the setting, else the ``POLITE_STATE_DIR`` environment
  variable (``make scrapyd`` exports it), else for a scrapyd job
  ``<cwd>/.scrapy/polite``; always made absolute. All jobs share it, which is
  how two jobs on the same hosts keep one request in flight per origin.
* ``JOBDIR``: as given, else for a scrapyd job
  ``<POLITE_STATE_DIR>/jobs/<spider>/<job id>``. Scheduling again with the same
  ``jobid`` resumes a cancelled job.

Scrapy builds the extensions before it freezes the settings (``Crawler._apply_settings``
in Scrapy 2.19); ``tests/test_extension_jobdir.py`` fails if that moves.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy import signals

from polite_crawler.policy.jobs import job_dir_for, state_dir_for

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

# The priority scrapyd's own ``-s JOBDIR=`` has.
_PRIORITY = "cmdline"


class JobDirExtension:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if settings.frozen:
            raise RuntimeError("JobDirExtension must be built before the settings freeze")
        spider = crawler.spider
        job = getattr(spider, "_job", None) if spider is not None else None
        self.job: str | None = str(job) if job else None
        spider_name = spider.name if spider is not None else crawler.spidercls.name
        state = state_dir_for(
            settings.get("POLITE_STATE_DIR") or "",
            os.environ.get("POLITE_STATE_DIR", ""),
            self.job,
            Path.cwd(),
        )
        if state:
            settings.set("POLITE_STATE_DIR", state, priority=_PRIORITY)
        jobdir = job_dir_for(settings.get("JOBDIR") or "", state, spider_name, self.job)
        if jobdir:
            settings.set("JOBDIR", jobdir, priority=_PRIORITY)
        self.state_dir = state
        self.jobdir = jobdir
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> JobDirExtension:
        return cls(crawler)

    def spider_opened(self) -> None:
        if self.job:
            logger.info(
                "Job %(job)s: JOBDIR %(jobdir)s, shared state %(state)s",
                {"job": self.job, "jobdir": self.jobdir, "state": self.state_dir},
            )
