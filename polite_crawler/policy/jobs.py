"""Where a scheduled job keeps its state (pure rules; the glue is extensions/jobdir.py).

scrapyd runs each job as ``scrapy crawl <spider> -a _job=<job id> ...`` and, when
its ``jobs_dir`` option is set, ``-s JOBDIR=<jobs_dir>/<project>/<spider>/<job id>``.
A job is resumed by scheduling it again with the same ``jobid``: same id, same JOBDIR.
"""

from __future__ import annotations

import re
from pathlib import Path

# scrapyd's default job ids are uuid1 hex; a chosen ``jobid`` must be a plain name,
# since it becomes a directory name.
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

# Under scrapyd, when nothing names a state directory: one per scrapyd working
# directory, shared by all its jobs (never per job: jobs coordinate through it).
SCRAPYD_STATE_DIR = ".scrapy/polite"


class JobIdError(ValueError):
    """A job id that cannot name a directory."""


def check_job_id(job: str) -> str:
    """Return ``job`` if it is a safe directory name, else raise :class:`JobIdError`.

    >>> check_job_id("6487ec79947edab326d6db28a2d86511e8247444")
    '6487ec79947edab326d6db28a2d86511e8247444'
    >>> check_job_id("../etc")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ...
    polite_crawler.policy.jobs.JobIdError: job id '../etc' is not a plain name ...
    """
    if not _JOB_ID.fullmatch(job) or job in (".", ".."):
        raise JobIdError(f"job id {job!r} is not a plain name ([A-Za-z0-9._-], at most 128)")
    return job


def state_dir_for(setting: str, environ_value: str, job: str | None, cwd: Path) -> str:
    """The shared state directory of a crawl, absolute, or "" to keep the default.

    The setting wins, then the environment (scrapyd_local exports it to every
    job); a scrapyd job with neither shares ``<cwd>/.scrapy/polite`` with the
    other jobs of its scrapyd. Outside scrapyd an unset value stays unset.
    """
    raw = setting or environ_value or (SCRAPYD_STATE_DIR if job else "")
    if not raw:
        return ""
    return str((cwd / Path(raw).expanduser()).resolve())


def job_dir_for(jobdir: str, state_dir: str, spider: str, job: str | None) -> str:
    """This job's JOBDIR, or "" for none.

    An explicit JOBDIR (scrapyd's ``jobs_dir``, or ``-s JOBDIR``) wins; a scrapyd
    job without one gets ``<state dir>/jobs/<spider>/<job id>``.
    """
    if jobdir:
        return jobdir
    if not job or not state_dir:
        return ""
    return str(Path(state_dir) / "jobs" / check_job_id(spider) / check_job_id(job))
