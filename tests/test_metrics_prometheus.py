"""Real crawls on loopback with metrics on, scraped by a real Prometheus (Debian's
``prometheus``, started here on loopback with a temporary storage directory and a 1 s
scrape interval, stopped by its PID), then read back through Prometheus's HTTP API.

Each crawl is kept open after its last page until Prometheus holds its final figures
(:class:`HoldForScrape` asks it), so a loaded machine, where a scrape may time out, only
makes the test slower. ``deploy/prometheus/`` is checked by ``promtool`` and loaded into this
Prometheus (its rules must evaluate without error), and the Grafana dashboard may name
only metrics a real scrape exposes.

Outside CI a missing or failing Prometheus skips these tests with the reason; under CI
(``CI`` set) it fails them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import pytest_twisted
from scrapy import signals
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.defer import deferred_from_coro
from twisted.internet.threads import deferToThread

from tests.crawl import run_crawl
from tests.pages_web import ArticleSite, PageSpider
from tests.redis_server import redis_server_session, redis_url  # noqa: F401  (fixtures)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from scrapy.crawler import Crawler

# ruff: noqa: F811

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "polite-crawler.json"
HOLD_MAX = 90.0  # seconds a crawl waits for Prometheus to hold its final figures, at most
N = 4


def _unavailable(reason: str) -> None:
    """Fail under CI (the service must be there), skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(f"CI: {reason}")
    pytest.skip(reason)


def _binary(name: str) -> str:
    found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists()
                                   else None)
    if found is None:
        _unavailable(f"{name} is not installed (make system-deps: Debian's prometheus)")
    assert found is not None
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrometheusAPI:
    """Prometheus's HTTP API (queries), at ``url``."""

    def __init__(self, url: str) -> None:
        self.url = url

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def value(self, expr: str) -> float | None:
        """The instant value of a PromQL expression giving one series (None: no series)."""
        found = self.api("query", query=expr)["result"]
        assert len(found) <= 1, (expr, found)
        return float(found[0]["value"][1]) if found else None

    def wait_value(self, expr: str, want: float, timeout: float = 20.0) -> float | None:
        """Poll until ``expr`` equals ``want`` (the last scrape ingested) or time runs out."""
        deadline = time.monotonic() + timeout
        got = self.value(expr)
        while got != want and time.monotonic() < deadline:
            time.sleep(0.25)
            got = self.value(expr)
        return got

    def names(self) -> set[str]:
        return {n for n in self.api("label/__name__/values") if n.startswith("polite_")}


class Prometheus(PrometheusAPI):
    """A Prometheus of the test's own: loopback, temporary storage, stopped by its PID."""

    def __init__(self, binary: str, target_port: int) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="polite-prometheus-"))
        self.port = _free_port()
        super().__init__(f"http://127.0.0.1:{self.port}")
        self.target_port = target_port
        rules = self.dir / "alerts.rules.yml"
        shutil.copy(DEPLOY / "alerts.rules.yml", rules)
        (self.dir / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "  evaluation_interval: 1s\n"
            f"rule_files: ['{rules}']\n"
            "scrape_configs:\n  - job_name: polite\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{target_port}']\n")
        self.cmd = [binary, f"--config.file={self.dir / 'prometheus.yml'}",
                    f"--storage.tsdb.path={self.dir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn"]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> Prometheus:
        log = (self.dir / "log").open("wb")
        self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                # Ready, and scraping the target already (up = 0: nothing listens yet);
                # its discovery hands the first targets over some seconds after the start.
                if self.api("query", query='up{job="polite"}')["result"]:
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        text = (self.dir / "log").read_text(errors="replace")[-2000:]
        self.stop()
        _unavailable(f"prometheus did not start: {text or 'no output'}")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)

@pytest.fixture(scope="module")
def prometheus() -> Iterator[Prometheus]:
    server = Prometheus(_binary("prometheus"), _free_port()).start()
    try:
        yield server
    finally:
        server.stop()


class HoldForScrape:
    """Keeps a crawl open after its last page until Prometheus holds its final figures.

    At each idle check (Scrapy's, every few seconds) it asks Prometheus, on a thread,
    whether the last ``polite_requests_total`` and ``polite_pages_stored_total`` it
    scraped equal the crawl's stats now (nothing changes them once the crawl is idle);
    until then, and for HOLD_MAX seconds at most, the spider stays open.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.prometheus = PrometheusAPI(crawler.settings["METRICS_TEST_PROMETHEUS"])
        self.crawl = crawler.settings["POLITE_CRAWL"]
        self.since: float | None = None
        self.asking = False
        self.done = False
        crawler.signals.connect(self.spider_idle, signal=signals.spider_idle)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> HoldForScrape:
        return cls(crawler)

    def _has_final(self, want: tuple[int, int]) -> bool:
        p = self.prometheus
        return (p.value(_last("polite_requests_total", self.crawl)),
                p.value(_last("polite_pages_stored_total", self.crawl))) == want

    def spider_idle(self) -> None:
        if self.done:
            return
        if self.since is None:
            self.since = time.monotonic()
        if time.monotonic() - self.since > HOLD_MAX:
            return  # the comparison after the crawl says what is missing
        if not self.asking:
            assert self.crawler.stats is not None
            stats = self.crawler.stats.get_stats()
            want = (_total(stats, "polite/gate/verdict/"), _total(stats, "polite/pages/stored/"))
            self.asking = True
            d = deferToThread(self._has_final, want)

            def answered(final: Any) -> None:
                self.asking = False
                self.done = final is True
                if self.done:  # closed now, not at the engine's next idle check (5 s on)
                    assert self.crawler.engine is not None
                    deferred_from_coro(
                        self.crawler.engine.close_spider_async(reason="finished"))

            d.addBoth(answered)
        raise DontCloseSpider


def _settings(tmp_path: Path, prometheus: Prometheus, crawl: str,
              **extra: Any) -> dict[str, Any]:
    return {"POLITE_STATE_DIR": str(tmp_path), "JOBDIR": str(tmp_path / crawl),
            "POLITE_METRICS_PORT": prometheus.target_port, "POLITE_CRAWL": crawl,
            "METRICS_TEST_PROMETHEUS": prometheus.url,
            "EXTENSIONS": {"tests.test_metrics_prometheus.HoldForScrape": 10}, **extra}


def _total(stats: dict[str, Any], prefix: str) -> int:
    return sum(int(v) for k, v in stats.items() if k.startswith(prefix))


def _last(metric: str, crawl: str, extra: str = "") -> str:
    """The series' last sample, wherever the crawl ended (its target is down since)."""
    return f'sum(last_over_time({metric}{{crawl="{crawl}"{extra}}}[10m]))'


@pytest_twisted.ensureDeferred
async def test_a_crawl_and_its_recrawl_agree_with_prometheus(web_factory, tmp_path,
                                                             prometheus) -> None:
    site = ArticleSite(n=N, validators="etag")
    web = web_factory({"127.0.8.9": site})
    first = await run_crawl(PageSpider, _settings(tmp_path, prometheus, "first"),
                            url=web.url("127.0.8.9"))
    second = await run_crawl(PageSpider, _settings(tmp_path, prometheus, "second"),
                             url=web.url("127.0.8.9"), recrawl="all")
    s1, s2 = first.stats, second.stats
    assert _total(s1, "polite/pages/stored/") == N + 1
    # Every page answered 304 (the conditional middleware hands the stored copy on, so
    # Scrapy's own status counts say 200).
    assert s2["polite/verdicts/304"] == s2["polite/gate/verdict/not_modified"] == N + 1

    def check() -> dict[str, Any]:
        p = prometheus
        return {
            "first requests": (p.wait_value(_last("polite_requests_total", "first"),
                                            _total(s1, "polite/gate/verdict/")),
                               _total(s1, "polite/gate/verdict/")),
            "first stored": (p.wait_value(_last("polite_pages_stored_total", "first"), N + 1),
                             N + 1),
            "first bytes": (p.value(_last("polite_received_bytes_total", "first")),
                            s1["downloader/response_bytes"]),
            "second requests": (p.wait_value(_last("polite_requests_total", "second"),
                                             _total(s2, "polite/gate/verdict/")),
                                _total(s2, "polite/gate/verdict/")),
            "second 304s": (p.value(_last("polite_requests_total", "second",
                                          ',verdict="not_modified",status_class="3xx"')),
                            s2["polite/verdicts/304"]),
            "second not modified": (p.value(_last("polite_pages_not_modified_total",
                                                  "second")),
                                    s2["polite/pages/not_modified"]),
            "second saved bytes": (p.value(_last("polite_saved_bytes_total", "second")),
                                   s2["polite/conditional/bytes_saved"]),
            "second stored": (p.value(_last("polite_pages_stored_total", "second")),
                              _total(s2, "polite/pages/stored/")),
            "rests observed": (p.value(_last("polite_rest_seconds_count", "first")),
                               _total(s1, "polite/gate/verdict/")),
            "names": p.names(),
            "rules": p.api("rules"),
        }

    got = await deferToThread(check)
    names, rules = got.pop("names"), got.pop("rules")
    for what, (seen, want) in got.items():
        assert seen == want, f"{what}: Prometheus has {seen}, the crawl's stats {want}"
    # The series exist, each labelled with its crawl and worker.
    for name in ("polite_requests_total", "polite_rest_seconds_bucket",
                 "polite_latency_watch_factor_bucket", "polite_page_store_write_seconds_bucket",
                 "polite_origins", "polite_urls_queued", "polite_robots_txt_total",
                 "polite_rate_ceiling_requests_per_second", "polite_cpu_seconds_total",
                 "polite_page_store_queue_length"):
        assert name in names, name
    documented = set(re.findall(r"`(polite_[a-z0-9_]+)[`{]", (ROOT / "docs" / "METRICS.md")
                                .read_text()))
    undocumented = {n for n in names if n not in documented
                    and re.sub(r"_(bucket|sum|count|total)$", "", n) not in documented}
    assert not undocumented, f"exported but not in docs/METRICS.md: {sorted(undocumented)}"
    # The project's alert rules load and evaluate on these series without error.
    groups = rules["groups"]
    assert groups and all(r["health"] == "ok" for g in groups for r in g["rules"]), groups


@pytest.mark.slow
@pytest_twisted.ensureDeferred
async def test_a_redis_crawl_exports_its_lease_and_the_cluster(web_factory, tmp_path,
                                                               prometheus, redis_url) -> None:
    """A worker on the Redis frontier: its lease, Redis round trip and the crawl-wide
    figures (it holds the cluster lock: it is the only worker); then the Grafana
    dashboard may name only series such a scrape exposes."""
    site = ArticleSite(n=N, validators="etag")
    web = web_factory({"127.0.8.10": site, "127.0.8.11": ArticleSite(n=N)})
    result = await run_crawl(PageSpider, _settings(
        tmp_path, prometheus, "cluster", POLITE_FRONTIER=redis_url,
        POLITE_REDIS_LEASE_TTL=2, POLITE_REDIS_SYNC_INTERVAL=0.1,
        POLITE_METRICS_CLUSTER_INTERVAL=0.2, POLITE_REST_PAGE=0.3),  # a few refreshes
        url=",".join(web.url(h) for h in ("127.0.8.10", "127.0.8.11")))
    stats = result.stats

    def check() -> dict[str, Any]:
        p = prometheus
        want = _total(stats, "polite/gate/verdict/")
        return {
            "requests": (p.wait_value(_last("polite_requests_total", "cluster"), want), want),
            "workers": (p.value(_last("polite_cluster_workers_alive", "cluster")), 1.0),
            "queued at the end": (p.value(_last("polite_cluster_urls_queued", "cluster")), 0.0),
            "unowned at the end": (p.value(_last("polite_cluster_origins_unowned",
                                                 "cluster")), 0.0),
            "lease renewed": (p.value(_last("polite_redis_lease_renewals_total", "cluster")
                                      + " > 0") is not None, True),
            "lease left": (p.value(_last("polite_redis_lease_remaining_seconds", "cluster")
                                   + " > 0") is not None, True),
            "ping": (p.value(_last("polite_redis_ping_seconds", "cluster") + " > 0")
                     is not None, True),
            "batch time": (p.value(_last("polite_redis_batch_seconds_total", "cluster")
                                   + " > 0") is not None, True),
            "names": p.names(),
            "max queued": p.value('max(max_over_time(polite_cluster_urls_queued'
                                  '{crawl="cluster"}[10m]))'),
        }

    got = await deferToThread(check)
    names, most = got.pop("names"), got.pop("max queued")
    for what, (seen, want) in got.items():
        assert seen == want, f"{what}: Prometheus has {seen}, expected {want}"
    assert most is not None and most > 0  # it did see URLs queued while the crawl ran
    renewals = stats.get("polite/redis/batches", 0)
    assert renewals > 0
    # The dashboard's queries name only metrics the crawler exports.
    used = dashboard_metrics(json.loads(DASHBOARD.read_text()))
    assert used, "no query found in the dashboard"
    exported = {re.sub(r"_(bucket|sum|count)$", "", n) for n in names} | names
    missing = sorted(used - exported)
    assert not missing, f"the dashboard names metrics no scrape exposes: {missing}"


def dashboard_metrics(node: Any) -> set[str]:
    """Every ``polite_*`` name in the dashboard's queries (panels' ``expr``, the template
    variables' ``query`` and ``definition``)."""
    out: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "query", "definition") and isinstance(value, str):
                out |= set(re.findall(r"\bpolite_[a-z0-9_]+", value))
            else:
                out |= dashboard_metrics(value)
    elif isinstance(node, list):
        for value in node:
            out |= dashboard_metrics(value)
    return out


def test_promtool_checks_the_deploy_files() -> None:
    promtool = _binary("promtool")
    rules = subprocess.run([promtool, "check", "rules", str(DEPLOY / "alerts.rules.yml")],
                           capture_output=True, text=True, timeout=60, check=False)
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert "SUCCESS" in rules.stdout
    config = subprocess.run([promtool, "check", "config", str(DEPLOY / "prometheus.yml")],
                            capture_output=True, text=True, timeout=60, cwd=DEPLOY,
                            check=False)
    assert config.returncode == 0, config.stdout + config.stderr


def test_every_alert_names_exported_metrics() -> None:
    """The alert rules' expressions use only families docs/METRICS.md lists."""
    text = "\n".join(line for line in (DEPLOY / "alerts.rules.yml").read_text().splitlines()
                     if not line.lstrip().startswith("#"))
    used = set(re.findall(r"\bpolite_[a-z0-9_]+", text))
    documented = set(re.findall(r"`(polite_[a-z0-9_]+)[`{]", (ROOT / "docs" / "METRICS.md")
                                .read_text()))
    base = {re.sub(r"_(bucket|sum|count|total)$", "", n) for n in used}
    assert used, "no metric in the alert rules"
    assert not {n for n in base if n not in documented
                and f"{n}_total" not in documented}, sorted(base - documented)
