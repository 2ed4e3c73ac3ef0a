"""A job's queue file has one name, declared in ``store/jobfiles.py``: the modules that
open or look for it import it from there, so a rename cannot leave one behind."""

from __future__ import annotations

import ast
from pathlib import Path

import polite_crawler
from polite_crawler.store import jobfiles

ROOT = Path(polite_crawler.__file__).parent


def _where(name: str) -> tuple[list[str], list[str]]:
    declared, imported = [], []
    for path in sorted(ROOT.rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == name for t in node.targets):
                declared.append(module)
            elif isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
                imported.append(f"{module} <- {node.module}")
    return declared, imported


def test_the_queue_file_is_named_once() -> None:
    declared, imported = _where("QUEUE_DB")
    assert declared == ["store/jobfiles.py"]
    assert [line for line in imported
            if not line.endswith("<- polite_crawler.store.jobfiles")] == []
    assert jobfiles.QUEUE_DB == "polite_frontier.sqlite3"
