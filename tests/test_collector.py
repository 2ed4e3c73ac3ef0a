"""The garbage collector's thresholds for a crawl (extensions.collector), with a real crawler."""

from __future__ import annotations

import gc
import weakref
from typing import TYPE_CHECKING, Any

import pytest
from scrapy import Spider, signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from polite_crawler.extensions.collector import CollectorTuning, thresholds_of
from tests.clock import Clock
from tests.crawl import project_settings_dict

if TYPE_CHECKING:
    from pathlib import Path


class _Spider(Spider):
    name = "gc"


def _tuning(tmp_path: Path, **settings: Any) -> tuple[Any, CollectorTuning | None]:
    crawler = get_crawler(_Spider, project_settings_dict(POLITE_STATE_DIR=str(tmp_path),
                                                         **settings))
    crawler._apply_settings()
    found = [m for m in crawler.extensions.middlewares if isinstance(m, CollectorTuning)]
    return crawler, found[0] if found else None


def test_thresholds_are_three_positive_integers() -> None:
    assert thresholds_of("50000, 20,100") == (50000, 20, 100)
    assert thresholds_of([700, 10, 10]) == (700, 10, 10)
    assert thresholds_of("") is None
    for bad in ("50000,20", "a,b,c", "0,10,10", "1,2,3,4"):
        with pytest.raises(ValueError, match="POLITE_GC_THRESHOLDS must be three"):
            thresholds_of(bad)


def test_the_crawl_runs_with_the_thresholds_and_puts_python_s_back(tmp_path: Path) -> None:
    crawler, tuning = _tuning(tmp_path, POLITE_GC_THRESHOLDS="12345,7,9")
    assert tuning is not None, "the add-on did not install the collector extension"
    before = gc.get_threshold()
    assert before != (12345, 7, 9)
    crawler.signals.send_catch_log(signal=signals.engine_started)
    try:
        assert gc.get_threshold() == (12345, 7, 9)
        gc.collect(0)
        gc.collect(2)
    finally:
        tuning.spider_closed()
    assert gc.get_threshold() == before
    assert tuning._watch not in gc.callbacks
    stats = crawler.stats.get_stats()
    assert stats["polite/gc/collections/0"] >= 1
    assert stats["polite/gc/collections/2"] >= 1
    assert stats["polite/gc/seconds"] >= 0.0


def test_empty_leaves_python_s_collector_alone(tmp_path: Path) -> None:
    crawler, tuning = _tuning(tmp_path, POLITE_GC_THRESHOLDS="")
    assert tuning is None
    with pytest.raises(NotConfigured):
        CollectorTuning(crawler)


def test_a_bad_value_fails_the_crawl_at_build_time(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="POLITE_GC_THRESHOLDS"):
        _tuning(tmp_path, POLITE_GC_THRESHOLDS="lots")


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def _make_cycle() -> weakref.ref[_Cycle]:
    return weakref.ref(_Cycle())  # unreachable at once, freed only by a collection


def _timed(tmp_path: Path, interval: float) -> tuple[Any, CollectorTuning, Clock]:
    """A started collector on an injected clock, thresholds no test run reaches."""
    crawler, _ = _tuning(tmp_path, POLITE_GC_THRESHOLDS="1000000,1000,1000",
                         POLITE_GC_FULL_INTERVAL=interval)
    clock = Clock()
    tuning = CollectorTuning(crawler, clock=clock)
    tuning.engine_started()
    return crawler, tuning, clock


def test_a_full_collection_comes_once_the_interval_passed_without_one(tmp_path: Path) -> None:
    crawler, tuning, clock = _timed(tmp_path, 30.0)
    try:
        cycle = _make_cycle()
        clock.t += 29.9
        assert not tuning.collect_if_due()
        assert cycle() is not None  # no collection before the interval
        clock.t += 0.1
        assert tuning.collect_if_due()
        assert cycle() is None  # the full collection freed it
        assert not tuning.collect_if_due()  # the interval starts again
        # A full collection the thresholds made also starts it again.
        clock.t += 25
        gc.collect()
        clock.t += 25
        assert not tuning.collect_if_due()
        clock.t += 5
        assert tuning.collect_if_due()
    finally:
        tuning.spider_closed()
    assert crawler.stats.get_value("polite/gc/timed") == 2
    assert not tuning.collect_if_due()  # closed: nothing more


def test_an_interval_of_zero_never_collects_by_time(tmp_path: Path) -> None:
    _, tuning, clock = _timed(tmp_path, 0)
    try:
        cycle = _make_cycle()
        clock.t += 3600
        assert not tuning.collect_if_due()
        assert cycle() is not None
    finally:
        tuning.spider_closed()
    with pytest.raises(ValueError, match="POLITE_GC_FULL_INTERVAL"):
        _tuning(tmp_path, POLITE_GC_FULL_INTERVAL=-1)
