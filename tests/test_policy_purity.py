"""The rules in polite_crawler.policy import neither Scrapy nor Twisted."""

from __future__ import annotations

import ast
from pathlib import Path

import polite_crawler.policy

POLICY_DIR = Path(polite_crawler.policy.__file__).parent
FORBIDDEN = ("scrapy", "twisted")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_policy_modules_are_scrapy_free() -> None:
    files = sorted(POLICY_DIR.glob("*.py"))
    assert len(files) >= 2
    for path in files:
        bad = _imports(path) & set(FORBIDDEN)
        assert not bad, f"{path.name} imports {bad}"
