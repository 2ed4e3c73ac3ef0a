"""The declared dependencies: every import declared, every floor pinned in the minimum set.

``make test-minimum`` (run by CI) installs constraints/minimum.txt and runs the policy
tests, this file and a few crawls on it; these checks keep that file and pyproject.toml
from drifting apart.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import pkgutil
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import polite_crawler

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
MINIMUM = ROOT / "constraints" / "minimum.txt"


def _requirements(specs: list[str]) -> dict[str, Requirement]:
    reqs = (Requirement(s) for s in specs)
    return {canonicalize_name(r.name): r for r in reqs}


RUNTIME = _requirements(PYPROJECT["dependencies"])
EXTRAS = {name: _requirements(specs)
          for name, specs in PYPROJECT["optional-dependencies"].items()}


def _floor(req: Requirement) -> str | None:
    floors = [s.version for s in req.specifier if s.operator == ">="]
    return floors[0] if len(floors) == 1 else None


def _pins() -> dict[str, str]:
    pins = {}
    for text in MINIMUM.read_text("utf-8").splitlines():
        line = text.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints/minimum.txt: {line!r} pins no version"
            pins[canonicalize_name(name)] = version.strip()
    return pins


def test_every_runtime_dependency_has_a_floor_pinned_in_the_minimum_set() -> None:
    pins = _pins()
    assert set(pins) == set(RUNTIME), "constraints/minimum.txt and pyproject.toml name " \
        "different runtime dependencies"
    for name, req in RUNTIME.items():
        floor = _floor(req)
        assert floor is not None, f"{req}: one >= floor, please"
        assert pins[name] == floor, f"{name}: pyproject.toml says >={floor}, " \
            f"constraints/minimum.txt pins {pins[name]}"


def _third_party_imports() -> dict[str, set[str]]:
    """Top-level modules imported anywhere in polite_crawler (lazy imports too) -> files."""
    found: dict[str, set[str]] = {}
    for path in Path(polite_crawler.__file__).parent.rglob("*.py"):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top != "polite_crawler" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(path.name)
    return found


def _declared() -> set[str]:
    names = set(RUNTIME)
    for reqs in EXTRAS.values():
        names |= set(reqs)
    return names


def test_every_imported_package_is_declared() -> None:
    provided = importlib.metadata.packages_distributions()
    declared = _declared()
    undeclared = {}
    for module, files in _third_party_imports().items():
        # An installed module names its distribution; one not installed here (an extra
        # left out of the minimum set) is named like its distribution.
        dists = {canonicalize_name(d) for d in provided.get(module, [module])}
        if not dists & declared:
            undeclared[module] = sorted(files)
    assert not undeclared, f"imported, not declared in pyproject.toml: {undeclared}"


def test_the_installed_runtime_dependencies_meet_their_floors() -> None:
    from packaging.version import Version

    for name, req in RUNTIME.items():
        installed = importlib.metadata.version(name)
        assert req.specifier.contains(Version(installed), prereleases=True), \
            f"{name} {installed} installed, {req} declared"


def _optional_modules() -> set[str]:
    out = set()
    for reqs in EXTRAS.values():
        out |= {re.sub(r"[-.]", "_", name) for name in reqs}
    return out


def test_every_module_imports() -> None:
    # The floors are real only if the code loads on them (a name that moved fails here).
    optional = _optional_modules()
    for info in pkgutil.walk_packages(polite_crawler.__path__, "polite_crawler."):
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as exc:
            missing = (exc.name or "").split(".")[0]
            if missing in optional:
                continue  # an extra that is not installed (the minimum set has none)
            pytest.fail(f"{info.name}: {exc}")
