"""The garbage collector's thresholds for a crawl (extensions.collector), with a real crawler."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

import pytest
from scrapy import Spider, signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from polite_crawler.extensions.collector import CollectorTuning, thresholds_of
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
