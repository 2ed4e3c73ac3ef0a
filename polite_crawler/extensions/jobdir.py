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

A recrawl (``-a recrawl=all`` or POLITE_RECRAWL = "all") on a JOBDIR whose
crawl ran before would resume that crawl's queue and find every start URL in
its seen set: nothing would be revisited. The crawl is refused before anything
is sent (:class:`RecrawlOnUsedJobDir`, a message that says what to do), unless
the JOBDIR is an unfinished recrawl being resumed (its queue not empty, and
``polite_job.json`` says it was started as a recrawl).

Scrapy builds the extensions before it freezes the settings (``Crawler._apply_settings``
in Scrapy 2.19); ``tests/test_extension_jobdir.py`` fails if that moves.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy import signals

from polite_crawler.policy.jobs import job_dir_for, state_dir_for
from polite_crawler.store.jobfiles import QUEUE_DB

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

# The priority scrapyd's own ``-s JOBDIR=`` has.
_PRIORITY = "cmdline"
# What a JOBDIR's crawl was started as (written at start, read by the next run).
JOB_FILE = "polite_job.json"


class RecrawlOnUsedJobDir(RuntimeError):
    """``recrawl=all`` on a JOBDIR that holds a finished (or a non-recrawl) crawl."""


def _jobdir_counts(jobdir: Path) -> tuple[int, int]:
    """(URLs seen, requests queued) in a JOBDIR's frontier; (0, 0) when there is none."""
    path = jobdir / QUEUE_DB
    if not path.is_file():
        return 0, 0
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            seen = conn.execute("SELECT COUNT(*) FROM frontier_seen").fetchone()[0]
            queued = conn.execute("SELECT COUNT(*) FROM frontier_queue").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return 0, 0  # not a frontier we know: the scheduler will say so
    return int(seen), int(queued)


def recrawl_jobdir_problem(jobdir: str, recrawl: str) -> str | None:
    """Why a recrawl on ``jobdir`` would do nothing (what to do instead), or None.

    Reads only; ``scrapy crawl`` can ask it before the crawl starts.
    """
    if not jobdir or recrawl.lower() != "all":
        return None
    path = Path(jobdir)
    seen, queued = _jobdir_counts(path)
    before = ""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        before = str(json.loads((path / JOB_FILE).read_text()).get("recrawl", ""))
    if not seen or (queued > 0 and before.lower() == "all"):
        return None  # a new JOBDIR, or an unfinished recrawl resumed
    what = "finished" if not queued else "was not started as a recrawl"
    return (f"JOBDIR {jobdir} holds a crawl that ran before ({seen} URLs seen; it {what}): "
            "-a recrawl=all would resume it and skip every page as already seen. "
            "Give the recrawl a new JOBDIR (-s JOBDIR=<new directory>, or a new scrapyd "
            "job id): the page store in POLITE_STATE_DIR keeps every page's validators, "
            f"so it is conditional. Or delete {jobdir}.")


def check_recrawl_jobdir(jobdir: str, recrawl: str) -> None:
    """Refuse a recrawl that a used JOBDIR would turn into nothing; note what this run is.

    Raises :class:`RecrawlOnUsedJobDir` with what to do instead.
    """
    if not jobdir:
        return
    problem = recrawl_jobdir_problem(jobdir, recrawl)
    if problem is not None:
        raise RecrawlOnUsedJobDir(problem)
    path = Path(jobdir)
    all_ = recrawl.lower() == "all"
    path.mkdir(parents=True, exist_ok=True)
    if not (path / JOB_FILE).exists() or all_:
        (path / JOB_FILE).write_text(json.dumps({"recrawl": "all" if all_ else ""}))


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
        recrawl = getattr(spider, "recrawl", None) or settings.get("POLITE_RECRAWL") or ""
        check_recrawl_jobdir(settings.get("JOBDIR") or "", str(recrawl))
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
