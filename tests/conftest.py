from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from demo.web.server import Site, TestWeb
from tests import crawl
from tests.services import check_marks

# Property tests check answers, not speed: no per-example deadline (a loaded machine
# makes a first example slow), and under CI=true the same examples every run, so a
# failure there is one anybody can run again (locally they vary, and find new cases).
try:
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # pragma: no cover - the minimum-versions venv may not have it
    pass
else:
    _hypothesis_settings.register_profile(
        "polite", deadline=None, derandomize=os.environ.get("CI") == "true")
    _hypothesis_settings.load_profile("polite")

# Doctests are collected from every module under tests/: the atheris entry point
# imports atheris, which only `make fuzz` installs.
collect_ignore = ["fuzz/atheris_main.py"]

if TYPE_CHECKING:
    from collections.abc import Iterator


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked as needing a missing service skips, or fails under CI=true
    (tests/services.py)."""
    check_marks(item)


@pytest.fixture(scope="session", autouse=True)
def _crawl_state_root(tmp_path_factory: pytest.TempPathFactory) -> None:
    """In-process crawls keep their state under the session's pytest directory, not
    in the system's temporary directory, where nothing would remove it."""
    crawl.STATE_ROOT = tmp_path_factory.mktemp("crawl-state")


@pytest.fixture
def web_factory() -> Iterator[type[TestWeb]]:
    """Start test webs with ``web_factory(sites)``; every one is stopped after the test."""
    started: list[TestWeb] = []

    def make(sites: dict[str, Site], port: int = 0) -> TestWeb:
        web = TestWeb(sites, port).start()
        started.append(web)
        return web

    yield make  # type: ignore[misc]
    for web in started:
        web.stop()
