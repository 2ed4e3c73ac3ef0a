"""International host names: UTS #46 non-transitional processing, as browsers do.

The published cases are the web platform tests' host cases for the WHATWG URL
standard's "domain to ASCII" (tests/data/idna/, see SOURCE.md there), run through
the crawler's own canonical form, its host parser (policy.addresses) and
policy.idn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from polite_crawler.frontier.admission import BAD_URL, UrlRules
from polite_crawler.policy.addresses import parse_host
from polite_crawler.policy.idn import IDNAError, to_ascii
from polite_crawler.policy.traps import TrapLimits
from polite_crawler.policy.urls import URLError, canonicalize, host_of, origin_of

DATA = Path(__file__).parent / "data" / "idna"


def _cases() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name in ("toascii.json", "IdnaTestV2.json"):
        for case in json.loads((DATA / name).read_text("utf-8")):
            if isinstance(case, dict):  # the strings between are the files' comments
                out.append((name, case))
    return out


CASES = _cases()


def test_the_published_files_are_all_there() -> None:
    assert len([c for n, c in CASES if n == "toascii.json"]) >= 80
    assert len([c for n, c in CASES if n == "IdnaTestV2.json"]) >= 2600
    assert (DATA / "SOURCE.md").read_text("utf-8").count("web-platform-tests") >= 1


def _dns_name(host: str) -> bool:
    labels = host.split(".")
    return len(host) <= 253 and all(0 < len(label) <= 63 for label in labels)


def _want(case: dict[str, Any]) -> str | None:
    # The canonical form drops a trailing dot; a host that maps to nothing is no host.
    out = case["output"]
    if out is None or not out.rstrip("."):
        return None
    out = out.rstrip(".")
    if not case["input"].isascii() and not _dns_name(out):
        # On purpose: a non-ASCII name DNS cannot hold (an empty label, one over 63
        # octets) has no canonical form (UTS #46 VerifyDnsLength, which the URL
        # standard leaves off); no request could reach it.
        return None
    return out


@pytest.mark.parametrize("case", [c for _n, c in CASES],
                         ids=[f"{n}:{i}" for i, (n, _c) in enumerate(CASES)])
def test_published_host_case(case: dict[str, Any]) -> None:
    want = _want(case)
    url = "http://" + case["input"] + "/x"
    if want is None:
        with pytest.raises(URLError):
            canonicalize(url)
        return
    assert canonicalize(url) == f"http://{want}/x"
    assert host_of(url) == want
    # The resolver's host parser names the same host wherever it takes one.
    host = parse_host(case["input"])
    assert host.invalid or host.text == want


@pytest.mark.parametrize(("link", "host"), [
    # Deviation characters: IDNA 2003 maps them away, to another registered name.
    ("https://faß.de/", "xn--fa-hia.de"),              # not fass.de
    ("https://straße.de/", "xn--strae-oqa.de"),        # not strasse.de
    ("https://βόλος.com/", "xn--nxasmm1c.com"),        # final sigma kept
    ("https://www.ශ්\u200dරී.com/", "www.xn--10cl1a0b660p.com"),  # the joiner kept
    ("https://\u0646\u0627\u0645\u0647\u200c\u0627\u06cc.com/", "xn--mgba3gch31f060k.com"),
    # Capital sigma is sigma (UTS #46 case mapping), not the final form str.lower gives.
    ("https://ΒΌΛΟΣ.COM/", "xn--nxasmq6b.com"),
    ("https://fa%C3%9F.de/", "xn--fa-hia.de"),          # an escaped host, decoded first
    ("https://FAẞ.de./", "xn--fa-hia.de"),
])
def test_deviation_characters_keep_their_own_host(link: str, host: str) -> None:
    assert host_of(link) == host
    assert canonicalize(link) == f"https://{host}/"
    assert origin_of(link) == f"https://{host}"
    assert parse_host(link.split("/")[2]).text == host


@pytest.mark.parametrize("bad", [
    "http://\u200d.example/",          # a joiner out of context (CheckJoiners)
    "http://\u064a.1/",                 # a right-to-left label before a digit label (CheckBidi)
    "http://\ufffd.com/",
    "http://xn--a.\u00df/",             # an invalid A-label beside a Unicode one
    "http://\u00ad/",                   # maps to nothing
    "http://a\u2488com/",               # disallowed
    "http://%C3%28.example/",          # escapes that are not UTF-8
    "http://a\uff0fb.example/",         # a fullwidth solidus maps to "/"
])
def test_host_without_a_browser_form_is_a_clear_refusal(bad: str) -> None:
    with pytest.raises(URLError):
        canonicalize(bad)
    # Judged, not raised: the admission rules count it as a bad URL.
    rules = UrlRules(TrapLimits(max_depth=10, max_url_length=2000, max_query_params=5,
                                max_segment_repeats=3), [])
    assert rules.judge(bad, 1).reason == BAD_URL
    assert rules.page_reason(bad, 1) == BAD_URL
    assert isinstance(host_of(bad), str)


def test_to_ascii_refuses_what_would_change_the_parse() -> None:
    for host in ["a/b.example", "a?b", "a#b", "u@ü.example", "ü:80", "a\\b", "ü%41", "ü\tb", ""]:
        with pytest.raises(IDNAError):
            to_ascii(host)
    assert to_ascii("<\u0338.example") == "xn--gdh.example"  # composed: "≮"


def test_ascii_hosts_stay_as_written() -> None:
    # The URL standard checks no xn-- label of an all-ASCII host; neither does the canonical form.
    assert canonicalize("http://XN--A.example/") == "http://xn--a.example/"
    assert canonicalize("http://fass.de/") == "http://fass.de/"
