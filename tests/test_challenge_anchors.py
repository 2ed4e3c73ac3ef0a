"""The challenge check's one-pass pre-check (policy.challenges.Anchors) never changes a
verdict: detect_challenge against a plain reading of the table kept here (every
signature, every marker searched in the lower-cased head), over random pages with the
table's markers at random places and in random case, and over real pages."""

from __future__ import annotations

import random
import re
from pathlib import Path

import hypothesis
import pytest
from hypothesis import given
from hypothesis import strategies as st

from polite_crawler.policy.challenges import (
    BLOCKING_STATUSES,
    BODY_HEAD_BYTES,
    CHALLENGE_RULES,
    Anchors,
    detect_challenge,
    gate_literals,
)

_PATTERNS = sorted({rx.pattern for rule in CHALLENGE_RULES for s in rule.signatures
                    for rx in s.body})
_HEADERS = [{}, {"server": "nginx"}, {"cf-mitigated": "challenge"}, {"x-datadome": "1"},
            {"server": "AkamaiGHost"}, {"x-sucuri-block": "yes"}, {"x-kpsdk-ct": "1"}]
_STATUSES = [200, 204, 301, 304, 404, 410, 500, *sorted(BLOCKING_STATUSES)]
_DOCS = Path("/usr/share/doc/python3/html")


def reference(status: int, headers: dict[str, str], body: bytes) -> str | None:
    """The table read as its doc says, with no shortcut."""
    head = body[:BODY_HEAD_BYTES].lower()
    for rule in CHALLENGE_RULES:
        for s in rule.signatures:
            if s.statuses is not None and status not in s.statuses:
                continue
            if not all(name in headers and rx.search(headers[name])
                       for name, rx in s.headers.items()):
                continue
            if all(rx.search(head) for rx in s.body):
                return rule.name
    return None


def _mixed_case(text: bytes, rng: random.Random) -> bytes:
    return bytes(b ^ 0x20 if 0x61 <= (b | 0x20) <= 0x7A and rng.random() < 0.5 else b
                 for b in text)


@hypothesis.settings(max_examples=500, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
@given(data=st.data())
def test_verdicts_are_the_plain_tables_on_random_pages(data: st.DataObject) -> None:
    markers = data.draw(st.lists(st.sampled_from(_PATTERNS), max_size=3))
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    parts = [_mixed_case(data.draw(st.from_regex(re.compile(p), fullmatch=True)), rng)
             for p in markers]
    body = bytearray(data.draw(st.binary(max_size=300)))
    for part in parts:  # anywhere, at every 4-byte phase, near the head's end too
        at = data.draw(st.one_of(st.integers(0, len(body)),
                                 st.just(max(0, BODY_HEAD_BYTES - len(part) - 3))))
        if at > len(body):
            body += b"x" * (at - len(body))
        body[at:at] = part
    status = data.draw(st.sampled_from(_STATUSES))
    headers = data.draw(st.sampled_from(_HEADERS))
    assert detect_challenge(status, headers, bytes(body)) == reference(
        status, headers, bytes(body))


def _real_pages() -> list[bytes]:
    pages = sorted(_DOCS.resolve().rglob("*.html"))[::10] if _DOCS.is_dir() else []
    return [p.read_bytes()[:BODY_HEAD_BYTES] for p in pages]


def test_verdicts_are_the_plain_tables_on_real_pages() -> None:
    pages = _real_pages()
    if not pages:
        pytest.skip(f"no pages under {_DOCS} (Debian's python3-doc)")
    rng = random.Random(7)
    samples = sorted({lit for rule in CHALLENGE_RULES for s in rule.signatures
                      for lits in s.prefilters for lit in lits})
    for page in pages:
        variants = [page]
        for _ in range(3):  # a marker's literal text at a random place in the page
            literal = rng.choice(samples)
            at = rng.randrange(len(page) + 1)
            variants.append(page[:at] + _mixed_case(literal, rng) + page[at:])
        for body in variants:
            for status in (200, 403, 404, 503):
                for headers in ({}, {"server": "AkamaiGHost"}):
                    assert detect_challenge(status, headers, body) == reference(
                        status, headers, body)


@hypothesis.settings(max_examples=300, deadline=None)
@given(literals=st.lists(st.binary(min_size=1, max_size=24), min_size=1, max_size=6,
                         unique=True),
       prose=st.binary(max_size=200), at=st.integers(0, 200), seed=st.integers(0, 2**16))
def test_anchors_name_every_literal_a_head_has(
    literals: list[bytes], prose: bytes, at: int, seed: int,
) -> None:
    lowered = tuple(dict.fromkeys(lit.lower() for lit in literals))
    anchors = Anchors(lowered)
    rng = random.Random(seed)
    head = prose[:at] + _mixed_case(rng.choice(lowered), rng) + prose[at:]
    found = anchors.candidates(head)
    assert [lit for lit in lowered if lit in head.lower()] == \
        [lit for lit in found if lit in head.lower()]


def test_anchors_rule_out_a_page_without_the_gates() -> None:
    gates = gate_literals(CHALLENGE_RULES)
    assert gates is not None
    anchors = Anchors(gates)
    assert anchors.always == ()  # every gate has an anchor for each 4-byte phase
    page = b"<html><head><title>Notes</title></head><body>" + b"<p>Lorem ipsum.</p>" * 500
    assert anchors.candidates(page) == []
    assert anchors.candidates(page + b"Just a Moment...") == [b"just a moment..."]
