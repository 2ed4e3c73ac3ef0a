"""The challenge check's pre-check: a page with none of the gate literals is asked only
the signatures on headers, and every verdict is the full table's."""

from __future__ import annotations

import re

import hypothesis
from hypothesis import given
from hypothesis import strategies as st

from polite_crawler.policy.challenges import (
    BLOCKING_STATUSES,
    CHALLENGE_RULES,
    detect_challenge,
    gate_literals,
)

# The same table in another tuple: detect_challenge asks it in full, without the pre-check.
FULL = (*CHALLENGE_RULES,)
assert FULL is not CHALLENGE_RULES
_PATTERNS = sorted({rx.pattern for rule in CHALLENGE_RULES for s in rule.signatures
                    for rx in s.body})
_HEADERS = [{}, {"server": "nginx"}, {"cf-mitigated": "challenge"}, {"x-datadome": "1"},
            {"server": "AkamaiGHost"}, {"x-sucuri-block": "yes"}]


def test_every_status_free_body_signature_is_covered_by_a_gate() -> None:
    gates = gate_literals(CHALLENGE_RULES)
    assert gates is not None and len(gates) < sum(
        len(s.prefilters[0]) for r in CHALLENGE_RULES for s in r.signatures if s.body)
    for rule in CHALLENGE_RULES:
        for signature in rule.signatures:
            if signature.body and signature.statuses is None:
                for literal in signature.prefilters[0]:
                    assert any(gate in literal for gate in gates), (rule.name, literal)


def test_a_marker_without_a_known_literal_leaves_no_gate() -> None:
    from polite_crawler.policy.challenges import ChallengeRule, sig

    assert gate_literals((ChallengeRule("x", (sig(rb"cf[-_]chl"),)),)) is None


@hypothesis.settings(max_examples=400, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
@given(data=st.data())
def test_the_pre_check_never_changes_a_verdict(data: st.DataObject) -> None:
    markers = data.draw(st.lists(st.sampled_from(_PATTERNS), max_size=3))
    parts = [data.draw(st.from_regex(re.compile(p), fullmatch=True)) for p in markers]
    prose = data.draw(st.binary(max_size=200))
    body = prose.join(parts) if parts else prose
    status = data.draw(st.sampled_from([200, 404, 301, *sorted(BLOCKING_STATUSES)]))
    headers = data.draw(st.sampled_from(_HEADERS))
    assert detect_challenge(status, headers, body) == detect_challenge(
        status, headers, body, FULL)
