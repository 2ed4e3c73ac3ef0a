"""A test whose service is missing skips outside CI and fails under CI=true
(tests/services.py), through the fixtures' helper and through the ``needs`` mark."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CASES = '''
import pytest

from tests.services import needs, unavailable


@pytest.fixture
def service():
    unavailable("the service is not installed (make system-deps)")


def test_fixture(service):
    pass


@needs(True, "the binary is not installed (make system-deps)")
def test_mark():
    pass


@needs(False, "never said")
def test_there():
    pass
'''


def run(tmp: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    (tmp / "test_cases.py").write_text(CASES, encoding="utf-8")
    (tmp / "conftest.py").write_text("from tests.conftest import pytest_runtest_setup  "
                                     "# noqa: F401\n", encoding="utf-8")
    (tmp / "pytest.ini").write_text("[pytest]\nmarkers =\n    service: x\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(ROOT)
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider",
                           "-c", str(tmp / "pytest.ini"), str(tmp)], check=False, cwd=tmp,
                          env=env, capture_output=True, text=True, timeout=120)


def test_outside_ci_a_missing_service_skips_with_its_reason(tmp_path: Path) -> None:
    done = run(tmp_path, None)
    assert done.returncode == 0, done.stdout
    assert "1 passed, 2 skipped" in done.stdout
    assert "the service is not installed" in done.stdout
    assert "the binary is not installed" in done.stdout


@pytest.mark.parametrize("ci", ["true", "1"])
def test_under_ci_a_missing_service_fails_with_its_reason(tmp_path: Path, ci: str) -> None:
    done = run(tmp_path, ci)
    assert done.returncode == 1, done.stdout
    assert "1 passed" in done.stdout and "skipped" not in done.stdout
    assert "FAILED" in done.stdout or "ERROR" in done.stdout
    assert "the service is not installed" in done.stdout
    assert "the binary is not installed" in done.stdout


def test_the_ci_script_sets_ci_and_runs_make_test() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "export CI=true" in script
    assert script.index("export CI=true") < script.index("make test")
