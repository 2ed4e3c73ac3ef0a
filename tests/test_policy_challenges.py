"""The challenge-page table: every signature of every rule has a sample, and
ordinary pages that look a little like one are not taken for one."""

from __future__ import annotations

import doctest
import gzip
import re
from typing import NamedTuple

import brotli
import hypothesis
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scrapy.http import Headers

import polite_crawler.policy.challenges as challenges_module
from polite_crawler.policy.challenges import (
    BODY_HEAD_BYTES,
    CHALLENGE_RULES,
    ChallengeRule,
    detect_challenge,
    needles,
    sig,
)
from polite_crawler.policy.codings import Decoding
from polite_crawler.policy.verdicts import Action, HeaderView, classify_response, text_headers


class Sample(NamedTuple):
    rule: str
    signature: int  # index in the rule's signatures
    status: int
    headers: dict[str, str]
    body: bytes


CF_CHALLENGE = (
    b"<!DOCTYPE html><html lang=\"en-US\"><head><title>Just a moment...</title>"
    b"<meta http-equiv=\"refresh\" content=\"360\"></head><body><div class=\"main-wrapper\">"
    b"<noscript>Enable JavaScript and cookies to continue</noscript></div>"
    b"<script>(function(){window._cf_chl_opt={cvId: '3',cZone: 'example.org',cType: 'managed'};"
    b"var a = document.createElement('script');"
    b"a.src = '/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1?ray=8';"
    b"}());</script></body></html>"
)

SAMPLES: list[Sample] = [
    Sample("cloudflare", 0, 403, {"cf-mitigated": "challenge", "server": "cloudflare"}, b""),
    Sample("cloudflare", 0, 200, {"cf-mitigated": "challenge"}, b"<html></html>"),
    Sample("cloudflare", 1, 200, {}, CF_CHALLENGE),
    Sample("cloudflare", 2, 503, {"server": "cloudflare"},
           b"<html><head><title>Just a moment...</title></head><body>Please wait</body></html>"),
    Sample("cloudflare", 3, 200, {},
           b"<script>var x = 1; /cdn-cgi/challenge-platform/h/b/ ;"
           b" window._cf_chl_opt = {};</script>"),
    Sample("cloudflare", 4, 503, {},
           b"<title>Attention</title><div id=\"cf-browser-verification\">"
           b"Checking your browser before accessing example.org."
           b" DDoS protection by Cloudflare</div>"),
    Sample("cloudflare_block", 0, 403, {},
           b"<!DOCTYPE html><html><head><title>Attention Required! | Cloudflare</title>"
           b"</head></html>"),
    Sample("cloudflare_block", 1, 403, {},
           b"<div id=\"cf-error-details\"><h1>Sorry, you have been blocked</h1>"
           b"<h2>You are unable to access example.org</h2></div>"),
    Sample("hcaptcha", 0, 403, {},
           b"<html><script src=\"https://hcaptcha.com/1/api.js\" async defer></script></html>"),
    Sample("hcaptcha", 1, 200, {},
           b"<h1>Please verify you are human</h1>"
           b"<div class=\"h-captcha\" data-sitekey=\"x\"></div>"),
    Sample("recaptcha", 0, 429, {},
           b"<script src=\"https://www.google.com/recaptcha/api.js\"></script>"),
    Sample("recaptcha", 1, 200, {},
           b"<h1>Are you a robot?</h1><div class=\"g-recaptcha\" data-sitekey=\"x\"></div>"),
    Sample("recaptcha", 2, 429, {},
           b"<html><body>Our systems have detected unusual traffic from your computer network."
           b"</body></html>"),
    Sample("datadome", 0, 403, {"x-datadome": "protected"},
           b"<html><script>var dd={'rt':'c','cid':'AHrl','hsh':'A5','t':'fe',"
           b"'host':'geo.captcha-delivery.com'}</script></html>"),
    Sample("datadome", 0, 200, {}, b"<iframe src=\"https://geo.captcha-delivery.com/captcha/?x\"></iframe>"),
    Sample("datadome", 1, 403, {"x-datadome": "protected"}, b"blocked"),
    Sample("perimeterx", 0, 403, {},
           b"<html><body><div id=\"px-captcha\"></div></body></html>"),
    Sample("perimeterx", 1, 200, {},
           b"<p>Press &amp; Hold to confirm you are a human (and not a bot).</p>"),
    Sample("perimeterx", 2, 403, {},
           b"<script>window._pxAppId = 'PXabc123';</script>"),
    Sample("akamai", 0, 403, {},
           b"<HTML><HEAD>\n<TITLE>Access Denied</TITLE>\n</HEAD><BODY>\n<H1>Access Denied</H1>\n"
           b"You don't have permission to access "
           b"\"http&#58;&#47;&#47;example&#46;org&#47;\" on this server.<P>\n"
           b"Reference&#32;&#35;18&#46;4d7c1002&#46;1700000000&#46;1a2b3c\n"
           b"<P>https&#58;&#47;&#47;errors&#46;edgesuite&#46;net&#47;18</P></BODY></HTML>"),
    Sample("akamai", 0, 403, {},
           b"<TITLE>Access Denied</TITLE> Reference #18.4d7c1002.1700000000.1a2b3c"),
    Sample("akamai", 1, 403, {"server": "AkamaiGHost"}, b"denied"),
    Sample("akamai", 2, 200, {},
           b"<div id=\"sec-if-cpt-container\">"
           b"<script src=\"/_sec/cp_challenge/sec-4-4.js\"></script></div>"),
    Sample("imperva", 0, 200, {},
           b"<html><body>Request unsuccessful. Incapsula incident ID: 123000-456</body></html>"),
    Sample("aws_waf", 0, 405, {"x-amzn-waf-action": "captcha"}, b""),
    Sample("aws_waf", 1, 202, {},
           b"<script src=\"https://abc.token.awswaf.com/abc/challenge.js\"></script>"
           b"<script>AwsWafIntegration.getToken()</script>"),
    Sample("vercel", 0, 429, {"x-vercel-mitigated": "challenge"}, b""),
    Sample("sucuri", 0, 403, {"x-sucuri-block": "1"}, b""),
    Sample("sucuri", 1, 403, {},
           b"<title>Sucuri WebSite Firewall - Access Denied</title>"),
    Sample("kasada", 0, 429, {"x-kpsdk-ct": "abc"}, b""),
    Sample("anubis", 0, 200, {},
           b"<!doctype html><html><head>"
           b"<title>Making sure you&#39;re not a bot!</title></head></html>"),
    Sample("anubis", 1, 200, {},
           b"<script id=\"anubis_challenge\" type=\"application/json\">{}</script>"
           b"<script src=\"/.within.website/x/cmd/anubis/static/js/main.mjs\"></script>"),
]

# Ordinary pages that share a word or a header with a challenge.
NEGATIVES: list[tuple[str, int, dict[str, str], bytes]] = [
    ("plain page", 200, {}, b"<html><title>Home</title><p>hello</p></html>"),
    ("cloudflare-served page", 200, {"server": "cloudflare", "cf-ray": "8a-AMS"},
     b"<html><title>Blog</title></html>"),
    ("blog quoting the title", 200, {},
     b"<title>Why my site said Just a moment...</title><p>a post</p>"),
    ("cf-mitigated other value", 200, {"cf-mitigated": "none"}, b""),
    ("contact form with reCAPTCHA", 200, {},
     b"<form><div class=\"g-recaptcha\" data-sitekey=\"x\"></div></form>"
     b"<script src=\"https://www.google.com/recaptcha/api.js\"></script>"),
    ("contact form with hCaptcha", 200, {},
     b"<form><div class=\"h-captcha\"></div><script src=\"https://hcaptcha.com/1/api.js\"></script></form>"),
    ("datadome-protected ordinary page", 200, {"x-datadome": "protected"},
     b"<script src=\"https://js.datadome.co/tags.js\"></script><p>shop</p>"),
    ("perimeterx sensor on a normal page", 200, {},
     b"<script>window._pxAppId = 'PXabc123';</script><p>shop</p>"),
    ("akamai-served page", 200, {"server": "AkamaiGHost"}, b"<title>News</title>"),
    ("akamai-served 404", 404, {"server": "AkamaiGHost"}, b"<title>Not found</title>"),
    ("access denied without akamai reference", 403, {},
     b"<title>Access Denied</title><p>login required</p>"),
    ("article about press and hold", 200, {},
     b"<p>Press and hold the power button</p>"),
    ("kasada header on a 200", 200, {"x-kpsdk-ct": "abc"}, b"<p>ok</p>"),
    ("a 404 page", 404, {}, b"<html>Not found</html>"),
    ("a 503 maintenance page", 503, {"retry-after": "60"},
     b"<html><title>Down for maintenance</title></html>"),
]


def _rule(name: str) -> ChallengeRule:
    return next(r for r in CHALLENGE_RULES if r.name == name)


def test_doctests() -> None:
    failed, tried = doctest.testmod(challenges_module)
    assert tried > 0
    assert failed == 0


def test_rule_names_unique() -> None:
    names = [r.name for r in CHALLENGE_RULES]
    assert len(names) == len(set(names))
    assert {"cloudflare", "cloudflare_block", "hcaptcha", "recaptcha", "datadome",
            "perimeterx", "akamai"} <= set(names)


def test_every_signature_has_a_sample() -> None:
    covered = {(s.rule, s.signature) for s in SAMPLES}
    for rule in CHALLENGE_RULES:
        for i in range(len(rule.signatures)):
            assert (rule.name, i) in covered, f"no sample for {rule.name} signature {i}"


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: f"{s.rule}-{s.signature}-{s.status}")
def test_sample_detected(sample: Sample) -> None:
    rule = _rule(sample.rule)
    assert rule.signatures[sample.signature].matches(sample.status, sample.headers, sample.body)
    assert detect_challenge(sample.status, sample.headers, sample.body) == sample.rule
    verdict = classify_response(sample.status, sample.headers, sample.body, now=0.0)
    assert verdict.action is Action.STOP_ORIGIN
    assert verdict.reason == f"challenge:{sample.rule}"


@pytest.mark.parametrize(("label", "status", "headers", "body"), NEGATIVES,
                         ids=[n[0] for n in NEGATIVES])
def test_ordinary_pages_are_not_challenges(label: str, status: int, headers: dict[str, str],
                                           body: bytes) -> None:
    assert detect_challenge(status, headers, body) is None


def test_case_insensitive_markers() -> None:
    assert detect_challenge(200, {"cf-mitigated": "Challenge"}, b"") == "cloudflare"
    assert detect_challenge(200, {}, CF_CHALLENGE.upper()) == "cloudflare"


def test_markers_beyond_the_head_are_not_searched() -> None:
    body = b"x" * BODY_HEAD_BYTES + b"Incapsula incident ID"
    assert detect_challenge(200, {}, body) is None
    assert detect_challenge(200, {}, body[-BODY_HEAD_BYTES:]) == "imperva"


def test_issue24_the_verdict_reads_the_whole_head_of_a_whole_body() -> None:
    # Callers hand classify_response the body as received; it cuts it, once.
    import gzip

    for at in (5_000, 10_000, BODY_HEAD_BYTES - len(CF_CHALLENGE)):
        body = b"<style>" + b"x" * at + b"</style>" + CF_CHALLENGE
        assert classify_response(200, {}, body, 0.0).label == \
            "stop_origin:challenge:cloudflare", at
        zipped = {"content-encoding": "gzip"}
        assert classify_response(200, zipped, gzip.compress(body), 0.0).action is \
            Action.STOP_ORIGIN, at
    body = b"<style>" + b"x" * BODY_HEAD_BYTES + b"</style>" + CF_CHALLENGE
    assert classify_response(200, {}, body, 0.0).action is Action.OK


def test_table_is_extensible() -> None:
    acme = ChallengeRule("acme", (sig(rb"acme-shield", statuses=frozenset({403})),))
    extra = (*CHALLENGE_RULES, acme)
    assert detect_challenge(403, {}, b"<p>acme-shield</p>", extra) == "acme"
    assert detect_challenge(200, {}, b"<p>acme-shield</p>", extra) is None
    assert detect_challenge(403, {}, b"<p>acme-shield</p>") is None


@given(st.binary(max_size=2048), st.integers(min_value=100, max_value=599))
def test_random_bytes_never_raise(body: bytes, status: int) -> None:
    got = detect_challenge(status, {}, body)
    assert got is None or got in {r.name for r in CHALLENGE_RULES}


@given(st.text(alphabet=st.characters(codec="ascii"), max_size=400))
def test_plain_prose_is_not_a_challenge(text: str) -> None:
    # Lowercase prose with no markup and no vendor name is never a challenge.
    body = text.lower().replace("<", " ").encode()
    for word in (b"captcha", b"incapsula", b"cf-", b"sec-", b"anubis", b"awswaf", b"press",
                 b"sucuri", b"px-"):
        if word in body:
            return
    assert detect_challenge(200, {}, body) is None


# --- the literal prefilter never changes an answer -----------------------------------
_BODY_PATTERNS = sorted({rx.pattern for rule in CHALLENGE_RULES for s in rule.signatures
                         for rx in s.body})


@hypothesis.settings(max_examples=1500, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
@given(data=st.data())
def test_every_text_a_marker_matches_holds_one_of_its_literals(data: st.DataObject) -> None:
    pattern = data.draw(st.sampled_from(_BODY_PATTERNS))
    literals = needles(pattern)
    text = data.draw(st.from_regex(re.compile(pattern)))
    if literals:
        assert any(lit in text for lit in literals), (pattern, literals, text)


def test_the_prefilter_is_used_for_most_markers() -> None:
    # A marker without literals is searched by its expression alone: keep those few.
    without = [p for p in _BODY_PATTERNS if not needles(p)]
    assert len(without) <= 2, without


@pytest.mark.parametrize(("status", "headers", "body"),
                         [(s.status, s.headers, s.body) for s in SAMPLES]
                         + [(status, headers, body) for _, status, headers, body in NEGATIVES])
@pytest.mark.parametrize("coding", [None, "gzip", "br"])
def test_the_gates_reading_gives_the_same_verdict(status: int, headers: dict[str, str],
                                                  body: bytes, coding: str | None) -> None:
    # The gate reads Scrapy's headers as asked (HeaderView) and keeps its body decoding
    # for the size cap (Decoding): the verdict is the one of every header converted and
    # the body decoded on its own, for every sample and every ordinary page above.
    raw = Headers(headers)
    if coding is not None:
        raw[b"Content-Encoding"] = coding
        body = gzip.compress(body) if coding == "gzip" else brotli.compress(body)
    view = HeaderView(raw)
    assert dict(view) == text_headers(raw)
    decoding = Decoding.of(body, view.get("content-encoding"))
    assert classify_response(status, view, decoding, 0.0) == \
        classify_response(status, text_headers(raw), body, 0.0)
