"""Published robots.txt test cases, transcribed as data (``tests/data/robots/``).

RFC 9309's own examples, Google's robotstxt suite and crawler-commons'
SimpleRobotRulesParserTest, each file naming its source. A check the project
judges differently from its peer carries ``"peer"`` (the peer's answer) and
``"rfc_conflict"`` (the RFC text followed instead) or ``"differs"`` (why).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from polite_crawler.policy.robots import RobotsRules

DATA = Path(__file__).parent / "data" / "robots"


def _checks() -> list[Any]:
    params: list[Any] = []
    for path in sorted(DATA.glob("*.json")):
        doc = json.loads(path.read_text("utf-8"))
        assert doc["source"] and doc["url"], path
        for case in doc["cases"]:
            for n, check in enumerate(case["checks"]):
                params.append(pytest.param(case, check, id=f"{path.stem}:{case['name']}:{n}"))
    return params


def _cases() -> list[Any]:
    params: list[Any] = []
    for path in sorted(DATA.glob("*.json")):
        for case in json.loads(path.read_text("utf-8"))["cases"]:
            if {"crawl_delay", "sitemaps", "signals"} & case.keys():
                params.append(pytest.param(case, id=f"{path.stem}:{case['name']}"))
    return params


@pytest.mark.parametrize(("case", "check"), _checks())
def test_published_case_allowed(case: dict[str, Any], check: dict[str, Any]) -> None:
    rules = RobotsRules.parse(case["robots"].encode("utf-8"), check["agent"])
    assert rules.allowed(check["url"]) is check["allowed"]
    if "peer" in check:  # judged differently: the reason is written down
        assert check["peer"] is not check["allowed"]
        assert check.get("rfc_conflict") or check.get("differs")


@pytest.mark.parametrize("case", _cases())
def test_published_case_crawl_delay_and_sitemaps(case: dict[str, Any]) -> None:
    for agent, delay in case.get("crawl_delay", {}).items():
        assert RobotsRules.parse(case["robots"], agent).crawl_delay == delay, agent
    if "peer_crawl_delay" in case:
        assert case["differs"]
    if "sitemaps" in case:
        assert RobotsRules.parse(case["robots"], "anybot").sitemaps == case["sitemaps"]
    for agent, signals in case.get("signals", {}).items():
        rules = RobotsRules.parse(case["robots"], agent)
        assert rules.signals("https://example.com/").as_dict() == signals, agent


def test_every_data_file_is_read() -> None:
    names = {p.name for p in DATA.glob("*.json")}
    assert {"rfc9309.json", "google_robotstxt.json", "crawler_commons.json"} <= names
    assert len(_checks()) > 250
