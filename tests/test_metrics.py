"""The metrics exposition: names, units, labels and the OpenMetrics format, on a crawler
built with get_crawler (a real frontier under it), and the endpoint served from the reactor.
"""

from __future__ import annotations

import re
import socket
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

import pytest
import pytest_twisted
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from scrapy import Spider
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from polite_crawler.context import polite_context
from polite_crawler.extensions.metrics import Metrics, Recorder
from tests.clock import Clock
from tests.crawl import project_settings_dict
from tests.frontier_fixtures import Env
from tests.redis_server import redis_server_session, redis_url  # noqa: F401  (fixtures)

if TYPE_CHECKING:
    from pathlib import Path

# ruff: noqa: F811

# Prometheus's naming rules: https://prometheus.io/docs/practices/naming/
NAME = re.compile(r"^polite_[a-z0-9_]+$")


class _Spider(Spider):
    name = "news"


class _Frontier:
    """What the scheduler offers the extension: its core frontier (a real one), and no
    cluster (interfaces.FrontierService.shared)."""

    shared = None

    def __init__(self, frontier: Any) -> None:
        self.frontier = frontier


def _metrics(tmp_path: Path, **settings: Any) -> Metrics:
    crawler = get_crawler(_Spider, project_settings_dict(
        POLITE_STATE_DIR=str(tmp_path), POLITE_METRICS_PORT=0, POLITE_CRAWL="news", **settings))
    crawler._apply_settings()
    found = [m for m in crawler.extensions.middlewares if isinstance(m, Metrics)]
    assert found, "the add-on did not install the metrics extension"
    return found[0]


def _families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_off_without_a_port(tmp_path: Path) -> None:
    crawler = get_crawler(_Spider, project_settings_dict(POLITE_STATE_DIR=str(tmp_path)))
    crawler._apply_settings()
    assert not [m for m in crawler.extensions.middlewares if isinstance(m, Metrics)]
    assert polite_context(crawler).metrics is None  # the gate and the store pay nothing
    with pytest.raises(NotConfigured):
        Metrics(crawler)


def test_a_port_that_is_not_one_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="POLITE_METRICS_PORT must be a TCP port"):
        crawler = get_crawler(_Spider, project_settings_dict(POLITE_STATE_DIR=str(tmp_path),
                                                             POLITE_METRICS_PORT="metrics"))
        crawler._apply_settings()


def test_exposition_names_units_labels_and_values(tmp_path: Path) -> None:
    m = _metrics(tmp_path)
    crawler = m.crawler
    assert crawler.stats is not None
    ctx = polite_context(crawler)
    clock = Clock()
    env = Env(tmp_path, clock)
    ctx.frontier, ctx.clock = _Frontier(env.f), clock
    for i in range(3):
        env.push(f"http://127.0.0.1/{i}")
    env.push("http://127.0.0.2/a")
    env.f.stop("http://127.0.0.2", "403")
    stats = crawler.stats
    for key, n in (("polite/verdicts/429", 2), ("polite/verdicts/200", 5),
                   ("polite/origin/stopped/403", 1), ("polite/origin/stopped/breaker", 2),
                   ("polite/robots/outcome/parse", 4), ("polite/robots/outcome/allow_all", 1),
                   ("polite/robots/outage_with_copy", 1), ("polite/conditional/bytes_saved", 900),
                   ("downloader/response_bytes", 12345), ("polite/pages/stored/new", 3),
                   ("polite/frontier/duplicate", 7), ("polite/redis/origin_taken_over", 1)):
        stats.set_value(key, n)
    rec = ctx.metrics
    assert isinstance(rec, Recorder)
    rec.settled("ok", 200, False, 3.0, 1.0)
    rec.settled("retry_later", 429, True, 8.0, 2.0)
    rec.settled("retry_later", None, False, 4.0, 2.0)
    rec.page_written(0.003)

    text = m.render().decode()
    assert text.endswith("# EOF\n")  # OpenMetrics, not the old text format
    fams = _families(text)
    for name, fam in fams.items():
        assert NAME.match(name), name
        for s in fam.samples:
            assert s.labels["crawl"] == "news"
            if not name.startswith("polite_cluster_"):
                assert re.fullmatch(r".+:\d+", s.labels["worker"]), s.labels
    # Counters end in _total, units are in the names and declared.
    assert {f.type for f in fams.values()} <= {"counter", "gauge", "histogram"}
    for name, fam in fams.items():
        if fam.type == "counter":
            assert all(s.name == f"{name}_total" for s in fam.samples), name
        if fam.unit:
            assert name.endswith(f"_{fam.unit}"), name
    assert fams["polite_rest_seconds"].unit == "seconds"
    assert fams["polite_received_bytes"].unit == "bytes"
    assert re.search(r"^# UNIT polite_rest_seconds seconds$", text, re.M)

    def value(name: str, **labels: str) -> float:
        found = [s.value for s in fams[name].samples
                 if s.name.startswith(name) and all(s.labels.get(k) == v
                                                    for k, v in labels.items())]
        assert len(found) == 1, (name, labels, found)
        return float(found[0])

    assert value("polite_requests", verdict="ok", status_class="2xx") == 1
    assert value("polite_requests", verdict="retry_later", status_class="4xx") == 1
    assert value("polite_requests", verdict="retry_later", status_class="none") == 1
    assert value("polite_retry_after", status="429") == 1
    assert value("polite_retry_after", status="503") == 0
    assert value("polite_verdict_reasons", reason="429") == 2
    assert value("polite_verdict_reasons", reason="503") == 0  # seeded: rate() sees its rise
    assert value("polite_origins_stopped", reason="breaker") == 2
    assert value("polite_origins_stopped", reason="402") == 0
    assert value("polite_robots_txt", outcome="ok") == 4
    assert value("polite_robots_txt", outcome="unavailable") == 1
    assert value("polite_robots_txt", outcome="stale_used") == 1
    assert value("polite_robots_txt", outcome="unreachable") == 0
    assert value("polite_saved_bytes") == 900
    assert value("polite_received_bytes") == 12345
    assert value("polite_pages_stored", outcome="new") == 3
    assert value("polite_urls_refused", reason="duplicate") == 7
    # The histograms: cumulative buckets, sum and count.
    rest = {s.labels["le"]: s.value for s in fams["polite_rest_seconds"].samples
            if s.name == "polite_rest_seconds_bucket"}
    assert (rest["2.0"], rest["3.0"], rest["5.0"], rest["10.0"], rest["+Inf"]) == (0, 1, 2, 3, 3)
    sums = {s.name: s.value for s in fams["polite_rest_seconds"].samples
            if not s.name.endswith("_bucket")}
    assert sums == {"polite_rest_seconds_sum": 15.0, "polite_rest_seconds_count": 3.0}
    factor = {s.labels["le"]: s.value for s in fams["polite_latency_watch_factor"].samples
              if s.name.endswith("_bucket")}
    assert (factor["1.0"], factor["2.0"]) == (1, 3)
    # The frontier's snapshot: three URLs of one origin queued, one origin stopped.
    assert value("polite_urls_queued") == 3
    assert value("polite_origins", state="stopped") == 1
    assert value("polite_origins", state="ready") == 1
    assert value("polite_origins_active") == 1
    assert value("polite_rate_ceiling_requests_per_second") > 0
    assert value("polite_cpu_seconds") > 0
    # No Redis frontier: no Redis families (a stats key alone does not make one), no
    # lease, no cluster figures.
    assert not [n for n in fams if n.startswith("polite_redis_")]
    assert not [n for n in fams if n.startswith("polite_cluster_")]
    assert m.scrapes == 1
    env.close()


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, "", ""


@pytest_twisted.ensureDeferred
async def test_the_endpoint_is_served_by_the_reactor(tmp_path: Path) -> None:
    """GET /metrics on the listening port, from the reactor: OpenMetrics, its content type;
    any other path is 404; the port is closed when the engine stops."""
    from scrapy.utils.defer import deferred_from_coro
    from twisted.internet.threads import deferToThread

    m = _metrics(tmp_path)
    m.spider_opened(m.crawler.spider)  # type: ignore[arg-type]
    assert m.port > 0 and m.listening is not None
    # The client on a thread: the reactor is free to answer.
    code, ctype, body = await deferToThread(_get, f"http://127.0.0.1:{m.port}/metrics")
    assert code == 200
    assert ctype.startswith("application/openmetrics-text; version=1.0.0")
    assert "polite_requests_total{" in body and body.endswith("# EOF\n")
    code, _t, _b = await deferToThread(_get, f"http://127.0.0.1:{m.port}/")
    assert code == 404
    assert m.scrape_cpu > 0  # the endpoint's own cost, timed on the reactor thread
    assert m.scrapes == 1
    await deferred_from_coro(m.engine_stopped())  # as Scrapy runs it: an asyncio task
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", m.port)) != 0  # nothing listens any more


def test_one_worker_at_a_time_exports_the_cluster(redis_url: str) -> None:
    """Two workers' refreshes on one real Redis: the first holds the lock and reads the
    crawl-wide figures, the second exports none; once the first resigns, the second
    takes over. The figures come from the frontier's own keys."""
    from polite_crawler.extensions.metrics import ClusterFigures
    from polite_crawler.frontier.redis_shared import RedisShared

    a = RedisShared(redis_url, "news", "host-a:1:aa")
    b = RedisShared(redis_url, "news", "host-b:2:bb")
    clock = Clock()
    try:
        a.register(clock(), 15.0)
        b.register(clock(), 15.0)
        origins = ["http://127.0.0.1", "http://127.0.0.2"]
        a.r.sadd(a.active_key, *origins)
        a.r.sadd(a.free_key, origins[1])  # work and no owner
        a.r.zadd(a.qkey(origins[0]), {b"r1": 0, b"r2": 1})
        a.r.hset(a.fkey(origins[0]), "9", b"claimed")
        a.r.zadd(a.qkey(origins[1]), {b"r3": 0})
        fa, fb = ClusterFigures(a, 15.0, clock), ClusterFigures(b, 15.0, clock)
        fa.refresh(45.0)
        fb.refresh(45.0)
        assert fa.holder and not fb.holder
        assert fb.values == {}
        assert fa.values == {"origins_active": 2.0, "origins_unowned": 1.0,
                             "workers_alive": 2.0, "urls_queued": 4.0}
        assert fa.ping is not None and fb.ping is not None and fa.ping > 0
        fa.refresh(45.0)  # the holder renews its own lock
        assert fa.holder
        fa.resign()
        fb.refresh(45.0)
        assert fb.holder and fb.values["urls_queued"] == 4.0
    finally:
        a.close()
        b.close()


def test_a_port_in_use_is_one_error_line_and_the_crawl_goes_on(tmp_path: Path, caplog) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        m = _metrics(tmp_path)
        m.port = port
        m.spider_opened(m.crawler.spider)  # type: ignore[arg-type]
    assert m.listening is None
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [
        f"Metrics: cannot listen on 127.0.0.1:{port} (Address already in use); this crawl "
        "serves no metrics"]
    assert m.crawler.stats is not None
    assert m.crawler.stats.get_value("polite/metrics/listen_failed") == 1
