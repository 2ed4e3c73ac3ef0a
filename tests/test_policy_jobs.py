"""Where a scheduled job keeps its state: the pure rules."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from polite_crawler.policy.jobs import JobIdError, check_job_id, job_dir_for, state_dir_for

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize("job", ["6487ec79947edab326d6db28a2d86511", "daily-2024.05_01", "a"])
def test_plain_job_ids_pass(job: str) -> None:
    assert check_job_id(job) == job


@pytest.mark.parametrize("job", ["", ".", "..", "../x", "a/b", "a\\b", "-x", "a b", "x" * 129])
def test_job_ids_that_are_not_plain_names_are_refused(job: str) -> None:
    with pytest.raises(JobIdError):
        check_job_id(job)


def test_state_dir_setting_beats_environment(tmp_path: Path) -> None:
    assert state_dir_for("/srv/a", "/srv/b", "j1", tmp_path) == "/srv/a"
    assert state_dir_for("", "/srv/b", "j1", tmp_path) == "/srv/b"


def test_state_dir_is_made_absolute_against_the_working_directory(tmp_path: Path) -> None:
    assert state_dir_for("var/state", "", None, tmp_path) == str(tmp_path / "var" / "state")


def test_scrapyd_job_without_state_dir_shares_one_under_the_cwd(tmp_path: Path) -> None:
    one = state_dir_for("", "", "job-1", tmp_path)
    two = state_dir_for("", "", "job-2", tmp_path)
    assert one == two == str(tmp_path / ".scrapy" / "polite")


def test_plain_crawl_without_state_dir_keeps_the_default(tmp_path: Path) -> None:
    assert state_dir_for("", "", None, tmp_path) == ""


def test_explicit_jobdir_wins() -> None:
    assert job_dir_for("/var/jobs/p/site/j", "/state", "site", "j") == "/var/jobs/p/site/j"


def test_scrapyd_job_gets_a_jobdir_keyed_by_spider_and_job_id() -> None:
    assert job_dir_for("", "/state", "site", "j1") == "/state/jobs/site/j1"
    assert job_dir_for("", "/state", "api_example", "j1") == "/state/jobs/api_example/j1"


def test_no_job_no_jobdir() -> None:
    assert job_dir_for("", "/state", "site", None) == ""


def test_unsafe_job_id_never_becomes_a_path() -> None:
    with pytest.raises(JobIdError):
        job_dir_for("", "/state", "site", "../../etc")
