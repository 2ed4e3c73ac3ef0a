"""Challenge pages: a bot manager asking for a human, whatever the status.

A challenge (or a bot manager's block page) is the site saying no: the origin
is stopped for the run, as for a 403: the crawler never solves a challenge. It
is recognised from the table below. Each :class:`ChallengeRule` is a vendor
and one or more :class:`Signature`; a signature matches when *all* its
conditions hold (status, headers, body markers), and a rule matches when any
of its signatures does. To add a vendor, add a rule with a signature specific
enough that an ordinary page never matches it (a contact form with a captcha
widget on a 200 is not a challenge), and a positive and a negative sample in
``tests/test_policy_challenges.py``.

Body markers are searched in the first :data:`BODY_HEAD_BYTES` of the body
(decompressed), case-insensitively. Every page is checked, so each marker
first looks for the literal text any match of it must contain (worked out from
the pattern, :func:`needles`) with a plain substring search; the regular
expression runs only on a page that has it. Before that, the default table's
pre-check rules most pages out in one pass over the head (:class:`Anchors`,
:func:`gate_literals`).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

# The regular-expression parser of the standard library (its modules since 3.11).
_sre: Any = importlib.import_module("re._constants")
_sre_parse: Any = importlib.import_module("re._parser")

if TYPE_CHECKING:
    from collections.abc import Mapping

# How much of the body the markers are searched in. Challenge pages are small
# and put their markers near the top; 32 KiB covers their inline scripts.
BODY_HEAD_BYTES = 32 * 1024

# Statuses bot managers answer with when they challenge or block.
BLOCKING_STATUSES = frozenset({401, 403, 405, 429, 503})

# Phrases of a captcha interstitial (as opposed to a form with a captcha widget).
_HUMAN_CHECK = (
    rb"verify (?:that )?you are (?:a )?human|are you a robot|not a robot"
    rb"|complete the security check|checking (?:if the site connection is secure|your browser)"
    rb"|unusual traffic|verify you are not a bot|human verification"
)


def _rx(pattern: bytes) -> re.Pattern[bytes]:
    # Matched against a lower-cased body: for bytes, re.IGNORECASE folds ASCII only,
    # and so does bytes.lower(), but one lower() a page beats case-insensitive
    # matching in every pattern (about 3x faster over 32 KiB). Patterns use no
    # upper-case escapes (\S, \W ...), so lower-casing them keeps their meaning.
    return re.compile(pattern.lower())


# A literal shorter than this is no use as a filter ("<" is on every page).
_MIN_NEEDLE = 4


def _needles_of(items: Any) -> tuple[bytes, ...]:
    """Literals one of which every match of the parsed sequence ``items`` contains."""
    best: tuple[bytes, ...] = ()
    run = bytearray()

    def better(found: tuple[bytes, ...]) -> None:
        nonlocal best
        # Prefer one long literal over several, and longer over shorter.
        if found and (not best or (len(found), -min(map(len, found)))
                      < (len(best), -min(map(len, best)))):
            best = found

    for op, av in items:
        if op is _sre.LITERAL:
            run.append(av)
            continue
        if len(run) >= _MIN_NEEDLE:
            better((bytes(run),))
        run.clear()
        if op is _sre.BRANCH:
            alternatives = [_needles_of(branch) for branch in av[1]]
            if all(alternatives):
                better(tuple(n for alt in alternatives for n in alt))
        elif op is _sre.SUBPATTERN and not av[1] and not av[2]:  # no inline flags
            better(_needles_of(av[3]))
    if len(run) >= _MIN_NEEDLE:
        better((bytes(run),))
    return best


def needles(pattern: bytes) -> tuple[bytes, ...]:
    r"""Literals one of which is in every text ``pattern`` matches; () when none is known.

    >>> needles(rb"<title>\s*just a moment\.\.\.\s*</title>")
    (b'just a moment...',)
    >>> needles(rb"cf[-_]chl|/cdn-cgi/challenge-platform/|hcaptcha")
    ()
    >>> needles(rb"hcaptcha\.com|class=[\"']h-captcha[\"']")
    (b'hcaptcha.com', b'h-captcha')
    """
    try:
        return _needles_of(_sre_parse.parse(pattern.decode("latin-1")))
    except (re.error, ValueError, TypeError, AttributeError):
        return ()


@dataclass(frozen=True)
class Signature:
    """One way of recognising a vendor's page; every condition given must hold."""

    # Body markers (bytes regexes, case-insensitive): all must be found.
    body: tuple[re.Pattern[bytes], ...] = ()
    # Header name (lower case) -> regex on its value (case-insensitive): all must match.
    headers: Mapping[str, re.Pattern[str]] = field(default_factory=dict)
    # None: any status.
    statuses: frozenset[int] | None = None
    # Per body marker, literals one of which a page must contain for it to match.
    prefilters: tuple[tuple[bytes, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefilters", tuple(needles(rx.pattern) for rx in self.body))

    def matches(
        self, status: int, headers: Mapping[str, str], body_head: bytes, *, lowered: bool = False
    ) -> bool:
        """``lowered``: ``body_head`` is lower-cased already (:func:`detect_challenge`)."""
        if self.statuses is not None and status not in self.statuses:
            return False
        for name, rx in self.headers.items():
            value = headers.get(name)
            if value is None or not rx.search(value):
                return False
        if not self.body:
            return True
        body = body_head if lowered else body_head.lower()
        for marker, literals in zip(self.body, self.prefilters, strict=True):
            if literals and not any(lit in body for lit in literals):
                return False
            if not marker.search(body):
                return False
        return True


def sig(
    *body: bytes,
    headers: Mapping[str, str] | None = None,
    statuses: frozenset[int] | None = None,
) -> Signature:
    """A :class:`Signature` from plain patterns (compiled case-insensitive)."""
    return Signature(
        body=tuple(_rx(b) for b in body),
        headers={k.lower(): re.compile(v, re.IGNORECASE) for k, v in (headers or {}).items()},
        statuses=statuses,
    )


@dataclass(frozen=True)
class ChallengeRule:
    name: str  # stable: the verdict reason is "challenge:<name>"
    signatures: tuple[Signature, ...]
    note: str = ""

    def matches(
        self, status: int, headers: Mapping[str, str], body_head: bytes, *, lowered: bool = False
    ) -> bool:
        return any(s.matches(status, headers, body_head, lowered=lowered)
                   for s in self.signatures)


CHALLENGE_RULES: tuple[ChallengeRule, ...] = (
    ChallengeRule(
        "cloudflare",
        (
            # Cloudflare marks every challenge response with this header.
            sig(headers={"cf-mitigated": r"^\s*challenge\b"}),
            sig(rb"<title>\s*just a moment\.\.\.\s*</title>",
                rb"cf[-_]chl|/cdn-cgi/challenge-platform/|cf-browser-verification"),
            sig(rb"<title>\s*just a moment\.\.\.\s*</title>", statuses=BLOCKING_STATUSES),
            sig(rb"/cdn-cgi/challenge-platform/", rb"_cf_chl_opt|cf-chl-"),
            sig(rb"cf-browser-verification|checking your browser before accessing",
                rb"cloudflare"),
        ),
        "managed / JS challenge, Turnstile interstitial",
    ),
    ChallengeRule(
        "cloudflare_block",
        (
            sig(rb"<title>\s*attention required!\s*\|\s*cloudflare\s*</title>"),
            sig(rb"cf-error-details", rb"sorry, you have been blocked"),
        ),
        "WAF block page (error 1020 and kin)",
    ),
    ChallengeRule(
        "hcaptcha",
        (
            sig(rb"hcaptcha\.com/1/api\.js|class=[\"']h-captcha[\"']", statuses=BLOCKING_STATUSES),
            sig(rb"hcaptcha\.com|class=[\"']h-captcha[\"']", _HUMAN_CHECK),
        ),
        "captcha interstitial; a form with the widget on a 2xx page is not one",
    ),
    ChallengeRule(
        "recaptcha",
        (
            sig(rb"google\.com/recaptcha/|recaptcha/api\.js|class=[\"']g-recaptcha[\"']",
                statuses=BLOCKING_STATUSES),
            sig(rb"google\.com/recaptcha/|recaptcha/api\.js|class=[\"']g-recaptcha[\"']",
                _HUMAN_CHECK),
            # Google's own "sorry" page.
            sig(rb"our systems have detected unusual traffic from your computer network"),
        ),
        "captcha interstitial; a form with the widget on a 2xx page is not one",
    ),
    ChallengeRule(
        "datadome",
        (
            # The challenge frame is served from captcha-delivery.com.
            sig(rb"captcha-delivery\.com"),
            # Every response of a protected site carries x-datadome; only a refusal blocks.
            sig(headers={"x-datadome": r"."}, statuses=BLOCKING_STATUSES),
        ),
        "",
    ),
    ChallengeRule(
        "perimeterx",
        (
            sig(rb"id=[\"']px-captcha[\"']|captcha\.px-cdn\.net|captcha\.px-cloud\.net"),
            sig(rb"press (?:&amp;|&) hold", rb"human"),
            sig(rb"_pxappid|perimeterx|px-cdn\.net", statuses=BLOCKING_STATUSES),
        ),
        "PerimeterX / HUMAN Security press-and-hold",
    ),
    ChallengeRule(
        "akamai",
        (
            # Akamai edge refusal: "Access Denied ... Reference #18.xxxx".
            sig(rb"<title>\s*access denied\s*</title>",
                rb"reference(?:&#32;|\s)*(?:&#35;|#)\s*\d+(?:\.|&#46;)[0-9a-f]+"
                rb"|errors(?:\.|&#46;)edgesuite(?:\.|&#46;)net"),
            sig(headers={"server": r"akamaighost"}, statuses=frozenset({403})),
            # Bot Manager's proof-of-work interstitial.
            sig(rb"/_sec/cp_challenge/|sec-if-cpt-container|sec-cpt-if"),
        ),
        "Akamai edge block and Bot Manager challenge",
    ),
    ChallengeRule(
        "imperva",
        (
            sig(rb"incapsula incident id|_incapsula_resource"),
        ),
        "Imperva / Incapsula",
    ),
    ChallengeRule(
        "aws_waf",
        (
            sig(headers={"x-amzn-waf-action": r"challenge|captcha|block"}),
            sig(rb"awswafintegration|\.awswaf\.com/", rb"challenge|captcha"),
        ),
        "AWS WAF challenge and captcha actions",
    ),
    ChallengeRule(
        "vercel",
        (sig(headers={"x-vercel-mitigated": r"challenge|deny"}),),
        "Vercel firewall",
    ),
    ChallengeRule(
        "sucuri",
        (
            sig(headers={"x-sucuri-block": r"."}),
            sig(rb"sucuri website firewall", rb"access denied"),
        ),
        "",
    ),
    ChallengeRule(
        "kasada",
        (sig(headers={"x-kpsdk-ct": r"."}, statuses=BLOCKING_STATUSES),),
        "",
    ),
    ChallengeRule(
        "anubis",
        (
            sig(rb"<title>\s*making sure you(?:&#39;|')re not a bot!?\s*</title>"),
            sig(rb"within\.website/x/cmd/anubis|anubis_challenge|id=[\"']anubis_"),
        ),
        "proof-of-work interstitial in front of many forges and wikis",
    ),
)


# A gate literal shorter than this is too common in ordinary pages to rule them out,
# and has no anchor for every phase (Anchors).
_MIN_GATE = 7


def gate_literals(rules: tuple[ChallengeRule, ...]) -> tuple[bytes, ...] | None:
    r"""Literals one of which every page that a status-free body signature of ``rules``
    recognises contains (None when a signature's first marker has no known literal).

    Each such signature's first marker has literals one of which its every match
    contains (:attr:`Signature.prefilters`); a few of their common substrings cover
    them all (``captcha`` is in ``h-captcha``, ``g-recaptcha``, ``px-captcha`` ...,
    chosen greedily, most literals covered first, then the longer). A page with none
    of them is no body signature's: one search a gate instead of one a signature.

    >>> gate_literals((ChallengeRule("x", (sig(rb"g-recaptcha"), sig(rb"h-captcha\.com"))),))
    (b'captcha',)
    """
    literals: set[bytes] = set()
    for rule in rules:
        for signature in rule.signatures:
            if signature.body and signature.statuses is None:
                if not signature.prefilters[0]:
                    return None
                literals.update(signature.prefilters[0])
    gates: list[bytes] = []
    left = set(literals)
    while left:
        covers: dict[bytes, set[bytes]] = {}
        for literal in left:
            size = min(_MIN_GATE, len(literal))
            for i in range(len(literal) - size + 1):
                for j in range(i + size, len(literal) + 1):
                    covers.setdefault(literal[i:j], set()).add(literal)
        best = max(sorted(covers), key=lambda g: (len(covers[g]), len(g)))
        gates.append(best)
        left -= covers[best]
    return tuple(gates)


class Anchors:
    r"""Which of some literals a page may contain, in one pass over its head.

    Each literal's every occurrence covers whole 4-byte words of the head at its
    4-byte boundaries: an occurrence at offset ``p`` covers the words starting at
    ``p + s``, ``p + s + 4`` ... (``s = -p mod 4``). For each phase ``s`` one word of
    the literal (8 bytes, two words, when it is long enough; else 4) is its anchor
    there, the rarest-looking (:data:`_COMMON_BYTES`): a page that has none of a
    literal's four anchors at a word boundary does not have the literal. The head's
    words are looked up in one table of hashes (numpy: one pass, about 1 ns a word,
    against about 0.5 ns a byte for each substring search), and each hash hit is
    checked against the anchors themselves. Case is folded by setting bit 0x20 of
    every byte, coarser than ``bytes.lower`` (``@`` folds onto a backquote) but never
    finer: a literal in the lower-cased head is in the folded one. A literal shorter
    than 7 bytes has no word for some phase and is always a candidate.

    >>> a = Anchors((b"captcha", b"just a moment..."))
    >>> a.candidates(b"<html><title>Just a Moment...</title>"), a.candidates(b"x" * 64)
    ([b'just a moment...'], [])
    """

    _HASH = 2654435761  # Knuth's multiplicative hash (2**32 / golden ratio)
    _BITS = 16

    def __init__(self, literals: tuple[bytes, ...]) -> None:
        self.literals = literals
        self.always = tuple(lit for lit in literals if len(lit) < 7)
        self._single: dict[int, list[bytes]] = {}
        self._pair: dict[tuple[int, int], list[bytes]] = {}
        # bool, not uint8: finding the few hits in a bool array is several times faster.
        single = np.zeros(1 << self._BITS, np.bool_)
        pair = np.zeros(1 << self._BITS, np.bool_)
        for literal in literals:
            if len(literal) < 7:
                continue
            folded = _fold(literal)
            for s in range(4):
                width = 8 if len(folded) >= s + 8 else 4
                chunks = [folded[i:i + width] for i in range(s, len(folded) - width + 1, 4)]
                best = min(chunks, key=_commonness)
                first = int.from_bytes(best[:4], "little")
                if width == 4:
                    self._single.setdefault(first, []).append(literal)
                    single[self._hash(first) >> (32 - self._BITS)] = True
                else:
                    second = int.from_bytes(best[4:], "little")
                    self._pair.setdefault((first, second), []).append(literal)
                    pair[self._pair_hash(self._hash(first), self._hash(second))] = True
        self._single_table = single
        self._pair_table = pair

    @classmethod
    def _hash(cls, word: int) -> int:
        return (word * cls._HASH) & 0xFFFFFFFF

    @classmethod
    def _pair_hash(cls, first: int, second: int) -> int:
        return (first ^ (second >> 7)) >> (32 - cls._BITS)

    def candidates(self, head: bytes) -> list[bytes]:
        """The literals ``head`` may contain, case-insensitively (every one it contains,
        and a few it does not), in table order."""
        found = set(self.always)
        words = (np.frombuffer(head, np.uint8, len(head) & ~3) | np.uint8(0x20)).view("<u4")
        if words.size:
            hashed = words * np.uint32(self._HASH)
            shift = np.uint32(32 - self._BITS)
            hits = np.flatnonzero(self._single_table.take(hashed >> shift))
            # A common anchor is hit many times: its distinct words, not each hit.
            for word in self._single.keys() & set(words[hits].tolist()):
                found.update(self._single[word])
            hits = np.flatnonzero(self._pair_table.take(
                (hashed[:-1] ^ (hashed[1:] >> np.uint32(7))) >> shift))
            if hits.size:
                pairs = set(zip(words[hits].tolist(), words[hits + 1].tolist(), strict=True))
                for pair in self._pair.keys() & pairs:
                    found.update(self._pair[pair])
        return [lit for lit in self.literals if lit in found]


def _fold(text: bytes) -> bytes:
    return bytes(b | 0x20 for b in text)


# Bytes in about the order of their frequency in lower-cased web pages, most common
# first (in the python3-doc pages: space 10.8 %, e 6.9 % ... b 0.6 %); a byte not
# listed is rarer than all of them. Only the pre-check's speed depends on it.
_COMMON_BYTES = b" etaoinsrlcdhpum.f-g/ywb"


def _commonness(chunk: bytes) -> int:
    """Lower for a chunk less likely in a page: rare bytes, and a word boundary inside
    it (``ion requ`` is rarer than ``required``, though its bytes are not)."""
    bytes_ = sum(len(_COMMON_BYTES) - _COMMON_BYTES.index(b) for b in chunk if b in _COMMON_BYTES)
    inner = chunk[1:-1]
    return bytes_ - 40 * sum(not (0x61 <= b <= 0x7A) for b in inner)


def _statuses_of(rules: tuple[ChallengeRule, ...]) -> frozenset[int]:
    """Every status some signature of ``rules`` is limited to."""
    return frozenset(code for rule in rules for s in rule.signatures for code in s.statuses or ())


def _header_rules(rules: tuple[ChallengeRule, ...]) -> tuple[ChallengeRule, ...]:
    """``rules`` with their body-free signatures only (none left out: empty rules stay)."""
    return tuple(ChallengeRule(rule.name, tuple(s for s in rule.signatures if not s.body),
                               rule.note) for rule in rules)


def _rules_for(
    rules: tuple[ChallengeRule, ...], gates: tuple[bytes, ...], present: frozenset[bytes],
) -> tuple[ChallengeRule, ...]:
    """``rules`` as asked of a page with a status none of their signatures is limited to,
    whose head has the gates ``present`` and none of the other ``gates``: the signatures
    on headers alone, and those on the body one of whose first marker's literals has
    every gate it contains present (a literal with a gate absent is absent)."""

    def possible(signature: Signature) -> bool:
        if not signature.body:
            return True
        if signature.statuses is not None:
            return False
        return any(all(gate in present for gate in gates if gate in literal)
                   for literal in signature.prefilters[0])

    return tuple(ChallengeRule(rule.name, tuple(s for s in rule.signatures if possible(s)),
                               rule.note) for rule in rules)


# The default table's pre-check: the gates, the statuses they do not cover, the rules
# left to ask of a page with none of the gates, the gates' anchors.
_DEFAULT_GATES = gate_literals(CHALLENGE_RULES)
_DEFAULT_CHECK = (_DEFAULT_GATES, _statuses_of(CHALLENGE_RULES), _header_rules(CHALLENGE_RULES),
                  None if _DEFAULT_GATES is None else Anchors(_DEFAULT_GATES))
# The default table as asked of a page with some of the gates (few sets of gates occur).
_DEFAULT_FOR: dict[frozenset[bytes], tuple[ChallengeRule, ...]] = {}


def detect_challenge(
    status: int,
    headers: Mapping[str, str],
    body_head: bytes,
    rules: tuple[ChallengeRule, ...] = CHALLENGE_RULES,
) -> str | None:
    """The name of the first rule that recognises a challenge page, else None.

    ``headers`` has lower-case names (one value each).

    >>> detect_challenge(403, {"cf-mitigated": "challenge"}, b"")
    'cloudflare'
    >>> detect_challenge(200, {}, b"<html><title>Just a moment...</title></html>") is None
    True
    """
    if rules is CHALLENGE_RULES:
        # Most pages: a status no signature is limited to, and none of the gate
        # literals (gate_literals), so no body signature can match: only the
        # signatures on headers alone are asked. The anchors say which gates the
        # page may have (one pass); only those are searched for.
        gates, statuses, header_rules, anchors = _DEFAULT_CHECK
        if gates is not None and anchors is not None and status not in statuses:
            maybe = anchors.candidates(body_head[:BODY_HEAD_BYTES])
            if not maybe:
                return _first_match(header_rules, status, headers, b"")
            head = body_head[:BODY_HEAD_BYTES].lower()
            present = frozenset(gate for gate in maybe if gate in head)
            if not present:
                return _first_match(header_rules, status, headers, b"")
            asked = _DEFAULT_FOR.get(present)
            if asked is None:
                if len(_DEFAULT_FOR) >= 256:
                    _DEFAULT_FOR.clear()
                asked = _DEFAULT_FOR[present] = _rules_for(rules, gates, present)
            return _first_match(asked, status, headers, head)
    return _first_match(rules, status, headers, body_head[:BODY_HEAD_BYTES].lower())


def _first_match(
    rules: tuple[ChallengeRule, ...], status: int, headers: Mapping[str, str], head: bytes,
) -> str | None:
    """The name of the first of ``rules`` that matches; ``head`` lower-cased."""
    for rule in rules:
        if rule.matches(status, headers, head, lowered=True):
            return rule.name
    return None
