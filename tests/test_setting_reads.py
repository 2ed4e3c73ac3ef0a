"""A default is declared once (polite_crawler/defaults.py) and read bare.

In the modules below no ``POLITE_*`` read passes a fallback of its own (a literal or a
constant, which may disagree with the declared default, as the access log's rotation
size once did: 0 against 100 MiB); the only fallback is the declared default itself
(``POLITE_DEFAULTS[name]``, for a component used without the add-on). The bot's name
is not restated.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import polite_crawler

ROOT = Path(polite_crawler.__file__).parent
MODULES = sorted([
    ROOT / "backend.py",
    ROOT / "botpage.py",
    ROOT / "commands" / "forget.py",
    ROOT / "commands" / "history.py",
    ROOT / "extensions" / "accesslog.py",
    ROOT / "extensions" / "storewatch.py",
    *(ROOT / "store").glob("*.py"),
])


def _declared(fallback: ast.expr, name: str) -> bool:
    """``POLITE_DEFAULTS["<name>"]``: the default as declared."""
    return isinstance(fallback, ast.Subscript) and ast.unparse(fallback.value) == \
        "POLITE_DEFAULTS" and isinstance(fallback.slice, ast.Constant) \
        and fallback.slice.value == name


def _reads_with_a_fallback(tree: ast.AST) -> list[int]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr.startswith("get") and node.args \
                and isinstance(node.args[0], ast.Constant) \
                and str(node.args[0].value).startswith("POLITE_"):
            name = str(node.args[0].value)
            fallbacks = [*node.args[1:], *(k.value for k in node.keywords)]
            if any(not _declared(f, name) for f in fallbacks):
                found.append(node.lineno)
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_setting_read_states_a_default_of_its_own(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert not _reads_with_a_fallback(tree), (path, _reads_with_a_fallback(tree))
    names = [n.lineno for n in ast.walk(tree)
             if isinstance(n, ast.Constant) and n.value == "PoliteCrawler"]
    assert not names, (path, names)
