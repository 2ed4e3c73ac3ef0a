"""A service a test needs (redis-server, PostgreSQL, Chromium, nginx) is missing.

Outside CI the test skips with the reason (``make test`` on a machine without root, or
without the Debian packages, stays usable). Under ``CI=true`` (``.ci/run`` sets it) the
test fails with the reason: CI never goes green on tests that did not run.

Fixtures call :func:`unavailable`; tests mark themselves ``@needs(missing, reason)``
(a ``service`` mark, judged in ``tests/conftest.py`` when the test is set up).
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def unavailable(reason: str) -> NoReturn:
    """Skip with ``reason``; under CI, fail with it."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: a service the test needs is missing, so it fails "
                    "instead of skipping)", pytrace=False)
    pytest.skip(reason)


def needs(missing: bool, reason: str) -> pytest.MarkDecorator:
    """A mark: the test needs a service, and ``missing`` says it is not there."""
    return pytest.mark.service(missing=missing, reason=reason)


def check_marks(item: pytest.Item) -> None:
    for mark in item.iter_markers("service"):
        if mark.kwargs.get("missing"):
            unavailable(str(mark.kwargs.get("reason", "a service is missing")))
