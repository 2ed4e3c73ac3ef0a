"""The installed package holds the crawler: the wheel's file list.

The wheel is built as pip builds it (``pip wheel --no-deps --no-build-isolation``,
offline) from a copy of the working tree, the demo, the tests and the benches
included, so a package discovery that picked them up would show here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PKG = "polite_crawler"
# Package data shipped beside the modules (pyproject.toml's package-data).
DATA = {f"{PKG}/py.typed", f"{PKG}/render/blocked_hosts.txt"}


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    src = tmp_path_factory.mktemp("tree")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
    for name in (PKG, "demo", "tests", "bench", "scripts"):
        shutil.copytree(REPO / name, src / name, ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "--quiet", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr + done.stdout
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def test_the_wheel_holds_only_the_crawler(wheel_names: list[str]) -> None:
    outside = [n for n in wheel_names
               if not n.startswith(f"{PKG}/") and not n.startswith(f"{PKG}-0.1.0.dist-info/")]
    assert not outside, outside
    assert not [n for n in wheel_names if "/web/" in n or Path(n).stem in ("demo", "cluster_demo")]


def test_the_wheel_holds_every_crawler_module_and_its_data(wheel_names: list[str]) -> None:
    on_disk = {p.relative_to(REPO).as_posix() for p in (REPO / PKG).rglob("*.py")}
    shipped = {n for n in wheel_names if n.startswith(f"{PKG}/")}
    assert shipped == on_disk | DATA, (sorted(on_disk - shipped), sorted(shipped - on_disk - DATA))
