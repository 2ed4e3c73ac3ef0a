"""The package's source read as a reviewer reads it, by ``ast``: one way to read a
setting, comments that say the rule instead of a tracker entry, functions short enough
to read.

- A ``POLITE_*`` default is declared once, in ``polite_crawler/defaults.py``
  (``POLITE_DEFAULTS``), and read bare: ``settings.getfloat("POLITE_REST_PAGE")`` from
  the settings :func:`polite_crawler.defaults.polite_settings` gives (they hold every
  default, add-on or not). A fallback argument (``.getint("POLITE_X", 5)``), a
  ``POLITE_DEFAULTS[...]`` lookup, a literal ``POLITE_*`` value or the bot's name
  written outside ``defaults.py`` states a default a second time, and two statements
  drift apart: the access log's rotation size once read 0 where 100 MiB was declared.
- A comment or docstring names the rule and its source (an RFC section, a measured
  figure, the rule in words), never "issue 12" or "seed 003", which a reader of the
  project cannot open.
- A function is at most 80 lines; at most three are longer, each named below with why.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import polite_crawler

ROOT = Path(polite_crawler.__file__).parent

# Modules other work is converting now (paths under polite_crawler/; a trailing "/"
# takes a whole package). They are checked once converted. This list only shrinks:
# never add a module to it, take one off when it passes.
NOT_YET_CONVERTED: tuple[str, ...] = ()

# Modules whose settings are checked whatever the list above says (the stores, and
# the components that open them): no POLITE_* read with a fallback of its own, not
# even the declared default looked up, and the bot's name not restated.
SETTINGS_CHECKED: tuple[str, ...] = (
    "backend.py",
    "botpage.py",
    "commands/forget.py",
    "commands/history.py",
    "extensions/accesslog.py",
    "extensions/storewatch.py",
    "store/",
)

# Functions allowed over MAX_LINES, "module:qualified name" -> why. At most three.
LONG_FUNCTIONS: dict[str, str] = {
    "frontier/redis_frontier.py:RedisFrontier.plan":
        "one batch's decision for each owned origin: the decisions share the batch's "
        "running excess over the share, its deferred state writes and its wake-ups, "
        "which each part of a split would pass around",
    "frontier/redis_shared.py:RedisShared.batch":
        "one pipeline round trip: the replies are read back by position, in the order "
        "the commands were queued, so the writing and the reading stay side by side",
}
MAX_LINES = 80

# Where POLITE_DEFAULTS may be named: its declaration, and the add-on that loads it.
DEFAULTS_READERS = ("defaults.py", "addon.py")
READS = frozenset({"get", "getint", "getfloat", "getbool", "getlist", "getdict",
                   "getdictorlist", "getwithbase"})
WRITES = frozenset({"set", "setdefault"})
TRACKER = re.compile(r"\bissues? \d|\bseeds? 00\d", re.IGNORECASE)
BOT_NAME = "PoliteCrawler"


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _converted(name: str) -> bool:
    return not any(name == entry or (entry.endswith("/") and name.startswith(entry))
                   for entry in NOT_YET_CONVERTED)


MODULES = sorted(p for p in ROOT.rglob("*.py") if _converted(_name(p)))


def _setting_name(node: ast.Call) -> str | None:
    if node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str) \
            and node.args[0].value.startswith("POLITE_"):
        return node.args[0].value
    return None


def _environ(func: ast.Attribute) -> bool:
    """``os.environ.get(...)``: an environment variable, not a setting."""
    return ast.unparse(func.value).split(".")[-1] == "environ"


def _or_default(node: ast.BoolOp) -> bool:
    """``settings.get("POLITE_X") or <X's declared default>``: the default stated again
    as the value of an empty setting."""
    from polite_crawler.defaults import POLITE_DEFAULTS

    first = node.values[0]
    if not (isinstance(node.op, ast.Or) and isinstance(first, ast.Call)
            and isinstance(first.func, ast.Attribute) and first.func.attr in READS):
        return False
    name = _setting_name(first)
    return name in POLITE_DEFAULTS and any(
        isinstance(value, ast.Constant) and value.value == POLITE_DEFAULTS[name]
        and value.value not in ("", None) for value in node.values[1:])


def restated_defaults(source: str) -> list[str]:
    """Where ``source`` states a POLITE_* default of its own, as ``line: code``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BoolOp) and _or_default(node):
            found.append(f"{node.lineno}: the default after 'or': {ast.unparse(node)}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and not _environ(node.func) and _setting_name(node):
            values = [*node.args[1:], *(k.value for k in node.keywords)]
            if node.func.attr in READS and values:
                found.append(f"{node.lineno}: a fallback: {ast.unparse(node)}")
            elif node.func.attr in WRITES and len(node.args) > 1 \
                    and isinstance(node.args[1], ast.Constant):
                found.append(f"{node.lineno}: a literal value: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict):
            found += [f"{key.lineno}: a literal entry: {ast.unparse(key)}"
                      for key in node.keys if isinstance(key, ast.Constant)
                      and isinstance(key.value, str) and key.value.startswith("POLITE_")]
        elif isinstance(node, ast.Name) and node.id == "POLITE_DEFAULTS":
            found.append(f"{node.lineno}: POLITE_DEFAULTS looked up")
        elif isinstance(node, ast.alias) and node.name == "POLITE_DEFAULTS":
            found.append(f"{node.lineno}: POLITE_DEFAULTS imported")
        elif isinstance(node, ast.Constant) and node.value == BOT_NAME:
            found.append(f"{node.lineno}: the bot's name, {BOT_NAME!r}")
    return sorted(found, key=lambda line: int(line.split(":")[0]))


def tracker_references(source: str) -> list[str]:
    return [f"{n}: {line.strip()}" for n, line in enumerate(source.splitlines(), 1)
            if TRACKER.search(line)]


def long_functions(source: str, module: str) -> list[str]:
    found: list[str] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                lines = (child.end_lineno or child.lineno) - child.lineno + 1
                if not isinstance(child, ast.ClassDef) and lines > MAX_LINES \
                        and f"{module}:{name}" not in LONG_FUNCTIONS:
                    found.append(f"{child.lineno}: {name} is {lines} lines")
                walk(child, f"{name}.")
            else:
                walk(child, prefix)

    walk(ast.parse(source), "")
    return found


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_a_default_is_stated_once(path: Path) -> None:
    if _name(path) in DEFAULTS_READERS:
        pytest.skip("declares or loads the defaults")
    assert restated_defaults(path.read_text(encoding="utf-8")) == []


SETTINGS_MODULES = sorted({p for p in ROOT.rglob("*.py") if any(
    _name(p) == entry or (entry.endswith("/") and _name(p).startswith(entry))
    for entry in SETTINGS_CHECKED)} | set(MODULES))


@pytest.mark.parametrize("path", SETTINGS_MODULES, ids=_name)
def test_settings_are_read_bare(path: Path) -> None:
    """The stores and the components that open them, even while on the list above."""
    if _name(path) in DEFAULTS_READERS:
        pytest.skip("declares or loads the defaults")
    assert restated_defaults(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_comment_names_a_tracker_entry(path: Path) -> None:
    assert tracker_references(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_functions_are_short(path: Path) -> None:
    assert long_functions(path.read_text(encoding="utf-8"), _name(path)) == []


def test_the_lists_name_what_exists() -> None:
    """An entry that names nothing (a module renamed, split or removed) comes off."""
    missing = [entry for entry in (*NOT_YET_CONVERTED, *SETTINGS_CHECKED)
               if not (ROOT / entry).exists()]
    assert missing == []
    assert len(LONG_FUNCTIONS) <= 3
    for key, why in LONG_FUNCTIONS.items():
        module, _, function = key.partition(":")
        assert (ROOT / module).is_file() and function and why, key


def test_the_checks_find_what_they_look_for() -> None:
    """Each check fails on the shapes it forbids (so a clean run means something)."""
    source = '''
from polite_crawler.defaults import POLITE_DEFAULTS
X = {"POLITE_REST_PAGE": 3.0}


def f(settings, os):
    """Retries as issue 5 says (seed 002)."""
    settings.getint("POLITE_RETRY_TIMES", 3)
    settings.getfloat("POLITE_REST_PAGE", default=POLITE_DEFAULTS["POLITE_REST_PAGE"])
    settings.get("POLITE_BOT_NAME") or "PoliteCrawler"
    settings.get("POLITE_RENDER_BROWSER") or "/usr/bin/chromium"
    settings.get("POLITE_CRAWL") or "default"
    settings.set("POLITE_JITTER", 0.5, priority="addon")
    os.environ.get("POLITE_STATE_DIR", "")
    return settings.getint("POLITE_RETRY_TIMES")
''' + "\n\ndef g():\n" + "    pass\n" * MAX_LINES
    assert [line.split(":")[0] for line in restated_defaults(source)] == \
        ["2", "3", "8", "9", "9", "10", "10", "11", "13"]
    assert len(tracker_references(source)) == 1
    assert long_functions(source, "x.py") == [f"18: g is {MAX_LINES + 1} lines"]
    assert long_functions("def g():\n" + "    pass\n" * (MAX_LINES - 1), "x.py") == []


def test_a_component_without_the_add_on_reads_the_declared_defaults() -> None:
    """polite_settings: a crawler without the add-on (another project's, a test's) gets
    the declared defaults, the settings it was given left as they were."""
    from scrapy.utils.test import get_crawler

    from polite_crawler.defaults import POLITE_DEFAULTS, polite_settings
    from polite_crawler.extensions.collector import CollectorTuning
    from polite_crawler.middlewares.pagerules import PageRulesMiddleware

    lookup = object()
    crawler = get_crawler(settings_dict={"POLITE_REST_PAGE": 1.5, "POLITE_DNS_LOOKUP": lookup})
    view = polite_settings(crawler.settings)
    assert view.getfloat("POLITE_REST_PAGE") == 1.5
    assert view["POLITE_DNS_LOOKUP"] is crawler.settings["POLITE_DNS_LOOKUP"]  # not copied
    assert {name: view[name] for name in POLITE_DEFAULTS if name not in (
        "POLITE_REST_PAGE", "POLITE_DNS_LOOKUP")} == {
        name: value for name, value in POLITE_DEFAULTS.items() if name not in (
            "POLITE_REST_PAGE", "POLITE_DNS_LOOKUP")}
    assert crawler.settings.getpriority("POLITE_JITTER") is None
    # The collector was switched off without the add-on (its setting read as empty).
    assert CollectorTuning.from_crawler(crawler).thresholds == (20000, 10, 50)
    assert PageRulesMiddleware(crawler).token == POLITE_DEFAULTS["POLITE_BOT_NAME"]
    addon = get_crawler(settings_dict={"ADDONS": {"polite_crawler.addon.PoliteAddon": 0}})
    addon._apply_settings()
    assert polite_settings(addon.settings) is addon.settings
