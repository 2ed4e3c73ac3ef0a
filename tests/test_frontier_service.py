"""The frontier service and the context's other slots are declared seams.

``polite_context(crawler)`` holds the frontier scheduler, the robots.txt book, the page
store, the access log and the metrics recorder; :mod:`polite_crawler.interfaces`
declares what the components may call on each (``FrontierService`` and the core's
``FrontierView``, ``RobotsService``, ``PageStoreView``, ``AccessLogSink``,
``MetricsSink``). Here: the scheduler serves the declared service with the declared
signatures, and no component calls on a slot what its interface does not declare, nor
asks a slot with ``getattr``/``hasattr`` what it holds.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import pytest_twisted
from scrapy import Spider
from scrapy.utils.test import get_crawler

import polite_crawler
from polite_crawler import interfaces
from polite_crawler.context import PoliteContext, polite_context
from tests.crawl import project_settings_dict
from tests.redis_server import redis_server_session, redis_url  # noqa: F401  (fixtures)

if TYPE_CHECKING:
    from collections.abc import Iterator

# ruff: noqa: F811

ROOT = Path(polite_crawler.__file__).parent

# The context's slots and the interface each is declared as.
SLOTS: dict[str, type[Any]] = {
    "frontier": interfaces.FrontierService,
    "robots": interfaces.RobotsService,
    "pages": interfaces.PageStoreView,
    "access_log": interfaces.AccessLogSink,
    "metrics": interfaces.MetricsSink,
}
VIEW = "frontier.frontier"  # FrontierService.frontier: the core, as FrontierView


def _members(proto: type[Any]) -> set[str]:
    return {n for n in vars(proto) if not n.startswith("_")}


MEMBERS = {**{slot: _members(p) for slot, p in SLOTS.items()},
           VIEW: _members(interfaces.FrontierView)}

# Modules still reading a slot beyond its interface (a strict xfail each, so the day one
# is mended the test says so).
PENDING: dict[str, str] = {}


def _consumer_modules() -> Iterator[tuple[str, Path]]:
    """Every module that reads the context, not the frontier's own implementation."""
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name.startswith("polite_crawler.frontier.") and name != "polite_crawler.frontier.done":
            continue
        if name in ("polite_crawler.context", "polite_crawler.interfaces"):
            continue
        text = path.read_text(encoding="utf-8")
        if "polite_context" in text or ".ctx." in text:
            yield name, path


def _is_ctx(node: ast.expr) -> bool:
    """``ctx``, ``self.ctx`` or ``polite_context(...)``."""
    if isinstance(node, ast.Name):
        return node.id == "ctx"
    if isinstance(node, ast.Attribute):
        return node.attr == "ctx" and isinstance(node.value, ast.Name) \
            and node.value.id == "self"
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
        and node.func.id == "polite_context"


class _Seams(ast.NodeVisitor):
    """Finds what a module does with the context's slots: attributes read off a slot
    (or a local name bound to one) that its interface does not declare, and
    ``getattr``/``hasattr`` on a slot."""

    def __init__(self, frontier_property: bool) -> None:
        self.frontier_property = frontier_property  # a ``self.frontier`` property (the gate)
        self.names: dict[str, str] = {}  # local name -> slot, in the current function
        self.problems: list[str] = []

    def slot(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.IfExp):  # ``x.frontier if x is not None else None``
            return self.slot(node.body)
        if not isinstance(node, ast.Attribute):
            return None
        if _is_ctx(node.value) and node.attr in SLOTS:
            return node.attr
        if self.frontier_property and node.attr == "frontier" \
                and isinstance(node.value, ast.Name) and node.value.id == "self":
            return "frontier"
        if node.attr == "frontier" and self.slot(node.value) == "frontier":
            return VIEW
        return None

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        saved, self.names = self.names, {}
        self.generic_visit(node)
        self.names = saved

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def _bind(self, target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, ast.Name) and value is not None:
            slot = self.slot(value)
            if slot is not None:
                self.names[target.id] = slot
            else:
                self.names.pop(target.id, None)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        for target in node.targets:
            self._bind(target, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.generic_visit(node)
        self._bind(node.target, node.value)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.generic_visit(node)
        self._bind(node.target, node.value)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        slot = self.slot(node.value)
        if slot is not None and isinstance(node.ctx, ast.Load) \
                and node.attr not in MEMBERS[slot]:
            self.problems.append(f"{node.lineno}: {slot}.{node.attr} is not declared")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
                and node.args:
            slot = self.slot(node.args[0])
            if slot is not None:
                self.problems.append(f"{node.lineno}: {node.func.id} on {slot}")
        self.generic_visit(node)


def _problems(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    prop = any(isinstance(n, ast.FunctionDef) and n.name == "frontier"
               and "self.ctx.frontier" in ast.unparse(n) for n in ast.walk(tree))
    seams = _Seams(prop)
    seams.visit(tree)
    return seams.problems


def _module_params() -> list[Any]:
    out = []
    for name, path in _consumer_modules():
        marks = [pytest.mark.xfail(strict=True, reason=PENDING[name])] if name in PENDING else []
        out.append(pytest.param(path, id=name, marks=marks))
    return out


def test_the_check_reads_what_it_should() -> None:
    """The checker finds a bad read of each kind (so a clean module is clean for a reason)."""
    src = (
        "def f(self, crawler):\n"
        "    a = getattr(self.ctx.frontier, 'ttl', 15.0)\n"
        "    s = polite_context(crawler).frontier\n"
        "    s.enqueue_request(None)\n"
        "    s.frontier._origins\n"
        "    hasattr(self.ctx.access_log, 'record')\n"
        "    store = self.ctx.pages\n"
        "    store._jobs\n"
        "    s.stop('o', 'r')\n"
        "    s.frontier.stopped\n"
    )
    seams = _Seams(False)
    seams.visit(ast.parse(src))
    assert seams.problems == [
        "2: getattr on frontier",
        "4: frontier.enqueue_request is not declared",
        "5: frontier.frontier._origins is not declared",
        "6: hasattr on access_log",
        "8: pages._jobs is not declared",
    ]


@pytest.mark.parametrize("path", _module_params())
def test_a_component_calls_only_what_the_context_declares(path: Path) -> None:
    assert _problems(path) == []


# Slots still typed Any (a strict xfail each).
PENDING_SLOTS: dict[str, str] = {}


@pytest.mark.parametrize("slot", [
    pytest.param(slot, marks=[pytest.mark.xfail(strict=True, reason=PENDING_SLOTS[slot])]
                 if slot in PENDING_SLOTS else [])
    for slot in SLOTS])
def test_every_slot_is_typed_as_its_interface(slot: str) -> None:
    src = inspect.getsource(PoliteContext.__init__)
    assert f"self.{slot}: {SLOTS[slot].__name__} | None = None" in src


class _Spider(Spider):
    name = "news"


def _scheduler(tmp_path: Path, **settings: Any) -> Any:
    from polite_crawler.frontier.scheduler import FrontierScheduler

    crawler = get_crawler(_Spider, project_settings_dict(POLITE_STATE_DIR=str(tmp_path),
                                                         **settings))
    return FrontierScheduler(crawler)


def test_the_scheduler_serves_the_declared_frontier_service(tmp_path: Path) -> None:
    """The scheduler puts itself on the context and has every member of the service,
    each method with the declared parameters (names, kinds, defaults)."""
    sched = _scheduler(tmp_path)
    assert polite_context(sched.crawler).frontier is sched
    assert isinstance(sched, interfaces.FrontierService)
    for name in _members(interfaces.FrontierService):
        declared = inspect.getattr_static(interfaces.FrontierService, name)
        if isinstance(declared, property):
            assert hasattr(type(sched), name) or hasattr(sched, name), name
            continue
        want = [(p.name, p.kind, p.default)
                for p in inspect.signature(declared).parameters.values()][1:]  # self
        got = [(p.name, p.kind, p.default)
               for p in inspect.signature(getattr(sched, name)).parameters.values()]
        assert got == want, name


def test_the_core_serves_the_declared_view(tmp_path: Path) -> None:
    from polite_crawler.frontier.core import Frontier

    for name in _members(interfaces.FrontierView):
        declared = inspect.getattr_static(interfaces.FrontierView, name)
        if isinstance(declared, property):
            continue  # attributes of the instance (stopped, queue): set in __init__
        assert callable(getattr(Frontier, name)), name
    src = inspect.getsource(Frontier.__init__)
    assert "self.stopped" in src and "self.queue" in src


@pytest_twisted.ensureDeferred
async def test_the_live_workers_figure_uses_the_lease_ttl(tmp_path: Path,
                                                          redis_url: str) -> None:
    """On a cluster, the metrics' crawl-wide figures (workers alive) judge a worker by
    the lease TTL the crawl runs with (POLITE_REDIS_LEASE_TTL), not by 15 s."""
    from scrapy.utils.defer import deferred_from_coro

    from polite_crawler.extensions.metrics import Metrics
    from polite_crawler.frontier.redis_scheduler import ClusterDriver
    from polite_crawler.frontier.redis_shared import RedisShared

    sched = _scheduler(tmp_path, POLITE_FRONTIER=redis_url, POLITE_CRAWL="news",
                       POLITE_REDIS_LEASE_TTL=40, POLITE_METRICS_PORT=0)
    crawler = sched.crawler
    crawler._apply_settings()
    polite_context(crawler).frontier = sched  # the one the crawl would use
    driver = ClusterDriver(sched)
    assert driver.ttl == 40.0
    driver.shared = RedisShared(redis_url, "news", "host-a:1:aa")
    sched.driver = driver  # opened as far as the metrics read it (no batches run)
    found = [m for m in crawler.extensions.middlewares if isinstance(m, Metrics)]
    assert found, "the add-on did not install the metrics extension"
    m = found[0]
    try:
        m.spider_opened(crawler.spider)
        assert m.cluster is not None
        assert m.cluster.ttl == 40.0
    finally:
        await deferred_from_coro(m.engine_stopped())
        driver.shared.close()
