"""The backend is chosen in one place, and the stores import no cycle.

Every import counts, at module level, inside a function (a deferred import is still
a dependency) or under ``if TYPE_CHECKING:`` (a type a module names is a dependency of
its meaning: mypy reads it).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import polite_crawler

ROOT = Path(polite_crawler.__file__).parent
PKG = "polite_crawler"


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for raw in targets:
            target = raw
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target.startswith(PKG) and target != name \
                    and target not in (PKG, f"{PKG}.store", f"{PKG}.frontier"):
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {name: _imports(name, path, known) for name, path in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read() -> None:
    graph = _graph()
    assert "polite_crawler.store.page_backend" in graph["polite_crawler.store.postgres"]
    assert "polite_crawler.store.redis_keys" in graph["polite_crawler.frontier.redis_shared"]


def test_no_import_cycle_goes_through_a_store() -> None:
    bad = [c for c in _cycles(_graph())
           if any(m.startswith(f"{PKG}.store.") or m == f"{PKG}.backend" for m in c)]
    assert not bad, bad


def test_the_interfaces_import_no_implementation() -> None:
    """The declared interfaces and their records name only each other and the pure
    rules (``policy``): every store imports them, none of them a store."""
    graph = _graph()
    for name in (f"{PKG}.interfaces", f"{PKG}.records"):
        named = {d for d in graph[name]
                 if d not in (f"{PKG}.interfaces", f"{PKG}.records")
                 and not d.startswith(f"{PKG}.policy.")}
        assert not named, (name, named)


def test_the_stores_do_not_import_the_frontier() -> None:
    graph = _graph()
    for name, deps in graph.items():
        if name.startswith(f"{PKG}.store."):
            assert not {d for d in deps if d.startswith(f"{PKG}.frontier")}, name


# Modules that name the two settings only to set them for a crawl they start.
_SETTERS = {"polite_crawler.backend", "polite_crawler.defaults"}


@pytest.mark.parametrize("name", ["POLITE_FRONTIER", "POLITE_STORE"])
def test_only_the_backend_reads_which_storage_is_in_use(name: str) -> None:
    readers = []
    for module, path in _modules().items():
        if module in _SETTERS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr.startswith("get") and node.args \
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value == name:
                readers.append(f"{module}:{node.lineno}")
            if isinstance(node, ast.Constant) and node.value in (
                    "redis://", "rediss://", "postgresql://", "postgres://"):
                readers.append(f"{module}:{node.lineno} ({node.value})")
    assert not readers, readers
