"""robots.txt by RFC 9309, page-level robots rules and content signals (pure).

A thin layer over Protego. Protego matches paths well (longest match, Allow
wins a tie, ``*`` and ``$``, percent-encoding), so it keeps that job. Finding
the one group that applies is done here, because Protego departs from RFC 9309
there:

* a ``User-agent`` value is matched as a whole (``PoliteCrawler/1.0`` never
  matches) and as a substring of the bot's name (``User-agent: polite`` matches
  ``PoliteCrawler``); RFC 9309 section 2.2.1 matches the product token exactly
  and case-insensitively. Here a value names a token when any of its comma- or
  whitespace-separated items, cut at its first character that is not a letter,
  ``_`` or ``-``, equals it (:func:`agent_tokens`): ``PoliteCrawler/1.0``,
  ``politecrawler``, ``PoliteCrawler, OtherBot`` and ``PoliteCrawler2`` all
  name ``PoliteCrawler``. Google's reference parser cuts the value the same way
  (at its first non-token character) and crawler-commons splits agent lists:
  a site owner who lists us in either form means us;
* a line it does not know (``Foo: bar``, ``Crawl-delay``) ends the run of
  ``User-agent`` lines of a group; in RFC 9309 section 2.2 only a rule does
  (section 2.2.4: other records "MUST NOT interfere" with the defined ones);
* a UTF-8 byte order mark makes the first line unknown;
* ``str.splitlines`` breaks lines at characters other than CR and LF
  (VT, FF, NEL, U+2028 ...); RFC 9309 section 2.2 ends a line at CR, LF or CRLF.

The parsed group is handed to Protego as a one-group file of its own.

Everything here is pure: no Scrapy, no I/O, no clock.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from protego import Protego

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

# RFC 9309 section 2.5: parse at least the first 500 KiB.
DEFAULT_MAX_BYTES = 512 * 1024
# RFC 9309 section 2.3.1.2: follow at least five consecutive redirects.
DEFAULT_MAX_REDIRECTS = 5

_EOL = re.compile(r"\r\n|\r|\n")
# RFC 9309 section 2.2.1: a product token is letters, "-" and "_". A User-agent
# value is a list of names (commas or whitespace between them); each names the
# token it starts with, up to its first other character.
_AGENT_ITEMS = re.compile(r"[,\s]+")
_PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]*")
# A crawler name with digits is no product token (ours never has one: policy.identity
# refuses it), but published test suites use such names ("crawler2"): for them an
# item is read up to its first character that is not a letter, digit, "_" or "-".
_NAME_WITH_DIGITS = re.compile(r"[A-Za-z0-9_-]*")
_UTF8_BOM = b"\xef\xbb\xbf"

# Directive names, lower case, with the misspellings Google's parser accepts.
_USER_AGENT = {"user-agent", "useragent", "user agent"}
_ALLOW = {"allow"}
_DISALLOW = {"disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"}
_SITEMAP = {"sitemap", "site-map"}
_CRAWL_DELAY = {"crawl-delay", "crawl delay"}
_CONTENT_SIGNAL = {"content-signal"}  # Cloudflare's Content Signals Policy
_CONTENT_USAGE = {"content-usage"}  # IETF AIPREF (draft-ietf-aipref-attach)
_KNOWN = (
    _USER_AGENT | _ALLOW | _DISALLOW | _SITEMAP | _CRAWL_DELAY | _CONTENT_SIGNAL | _CONTENT_USAGE
)


# ---------------------------------------------------------------------------
# Fetch outcome (RFC 9309 section 2.3.1)


class Outcome(enum.Enum):
    PARSE = "parse"  # 2xx: the body is the robots.txt
    ALLOW_ALL = "allow_all"  # 4xx but 429: "unavailable", no restrictions
    UNREACHABLE = "unreachable"  # 429, 5xx, network errors: disallow all
    REDIRECT = "redirect"  # 3xx with a Location: follow it (up to the hop limit)


def fetch_outcome(status: int, has_location: bool = True) -> Outcome:
    """What an answer to a robots.txt request means (RFC 9309 section 2.3.1).

    >>> [fetch_outcome(s).value for s in (200, 301, 404, 403, 429, 503)]
    ['parse', 'redirect', 'allow_all', 'allow_all', 'unreachable', 'unreachable']
    """
    if 200 <= status < 300:
        return Outcome.PARSE
    if 300 <= status < 400:
        # 2.3.1.2: redirects are followed; a 3xx that leads nowhere (no Location,
        # 304 to a request that was not conditional) gives no file: unreachable.
        return Outcome.REDIRECT if has_location and status != 304 else Outcome.UNREACHABLE
    if status == 429:
        # Not "unavailable": the server asks us to slow down. Treated like 5xx,
        # as Google does and as the seeds ask.
        return Outcome.UNREACHABLE
    if 400 <= status < 500:
        return Outcome.ALLOW_ALL  # 2.3.1.3
    return Outcome.UNREACHABLE  # 2.3.1.4 (5xx) and anything unexpected


# robots.txt fetched this many times in a row without ever becoming usable (an
# outage that does not end, a 429 forever) stops the origin for the run: nothing
# else may be fetched from it, and the crawl must end. Outages that count as
# failures (5xx) reach the circuit breaker (five in a row) first.
MAX_UNUSABLE_FETCHES = 10


def redirect_outcome(hops: int, max_hops: int = DEFAULT_MAX_REDIRECTS) -> Outcome:
    """``hops`` is the number of the redirect about to be followed (1 for the first).

    RFC 9309 section 2.3.1.2: after five consecutive redirects a crawler may
    assume the file is unavailable, which section 2.3.1.3 reads as "no
    restrictions" (as for a 4xx). A server error is an outage; a redirect loop
    is the site's own answer that there is no file.

    >>> redirect_outcome(5).value, redirect_outcome(6).value
    ('redirect', 'allow_all')
    """
    return Outcome.REDIRECT if hops <= max_hops else Outcome.ALLOW_ALL


def retry_delay(failures: int, base: float, cap: float, retry_after: float | None = None) -> float:
    """Seconds before robots.txt is asked for again after ``failures`` outages in a row.

    Doubles from ``base`` up to ``cap``; a server's Retry-After is honoured
    when it asks for longer (still capped).

    >>> [retry_delay(n, 60, 3600) for n in (1, 2, 3, 10)]
    [60.0, 120.0, 240.0, 3600.0]
    >>> retry_delay(1, 60, 3600, retry_after=900)
    900.0
    """
    delay = float(min(cap, base * 2 ** max(0, failures - 1)))
    if retry_after is not None and retry_after > delay:
        delay = float(min(cap, retry_after))
    return delay


# ---------------------------------------------------------------------------
# Decoding


def clip_robots(
    body: bytes, max_bytes: int = DEFAULT_MAX_BYTES, cut: bool = False
) -> tuple[bytes, bool]:
    """The part of ``body`` that is parsed, and whether anything was cut.

    A body longer than ``max_bytes`` is cut there and its last, incomplete
    line dropped (half a ``Disallow`` path would allow more than the site meant).
    ``cut`` says the body was already cut on its way here (a download stopped
    at its size cap): its last line is dropped in the same way.

    >>> clip_robots(b"Disallow: /a\\nDisallow: /private", 20)
    (b'Disallow: /a\\n', True)
    >>> clip_robots(b"Disallow: /a\\nAllow: /ab", 100, cut=True)
    (b'Disallow: /a\\n', True)
    """
    if len(body) <= max_bytes and not cut:
        return body, False
    body = body[:max_bytes]
    last_eol = max(body.rfind(b"\n"), body.rfind(b"\r"))
    return (body[: last_eol + 1] if last_eol >= 0 else b""), True


def decode_robots(body: bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[str, bool]:
    """The text of a robots.txt body and whether it was cut.

    RFC 9309 section 2.5: at least the first 500 KiB are parsed; a longer file
    is cut at ``max_bytes`` (:func:`clip_robots`). A UTF-8 byte order
    mark is skipped. The file is UTF-8 (section 2.3); a UTF-16 file with a
    byte order mark is read as UTF-16 rather than thrown away, and bytes that
    are not UTF-8 become U+FFFD, so garbage parses to nothing instead of failing.
    """
    body, cut = clip_robots(body, max_bytes)
    if body.startswith(_UTF8_BOM):
        return body[len(_UTF8_BOM):].decode("utf-8", "replace"), cut
    if body.startswith((b"\xff\xfe", b"\xfe\xff")):
        return body.decode("utf-16", "replace"), cut
    return body.decode("utf-8", "replace"), cut


# ---------------------------------------------------------------------------
# Content signals (Cloudflare Content-Signal, IETF AIPREF Content-Usage)


@dataclass(frozen=True)
class ContentSignals:
    """A site's stated preferences for the use of its content.

    Each is True (allowed), False (refused) or None (nothing said). The names
    are Cloudflare's (``search``, ``ai-input``, ``ai-train``); the AIPREF
    vocabulary (draft-ietf-aipref-vocab) maps ``search`` to ``search``,
    ``ai-use`` to ``ai_input`` and ``train-ai`` to ``ai_train``.
    """

    search: bool | None = None
    ai_input: bool | None = None
    ai_train: bool | None = None

    def combine(self, other: ContentSignals) -> ContentSignals:
        """The most restrictive of two statements (draft-ietf-aipref-vocab, "Combining").

        >>> ContentSignals(ai_train=True).combine(ContentSignals(ai_train=False, search=True))
        ContentSignals(search=True, ai_input=None, ai_train=False)
        """
        return ContentSignals(
            _restrictive(self.search, other.search),
            _restrictive(self.ai_input, other.ai_input),
            _restrictive(self.ai_train, other.ai_train),
        )

    @property
    def empty(self) -> bool:
        return self.search is None and self.ai_input is None and self.ai_train is None

    @property
    def ai_input_allowed(self) -> bool:
        """False only when the site refused AI input; unknown is not a refusal."""
        return self.ai_input is not False

    def as_dict(self) -> dict[str, bool | None]:
        return {"search": self.search, "ai_input": self.ai_input, "ai_train": self.ai_train}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ContentSignals:
        data = data or {}
        return cls(data.get("search"), data.get("ai_input"), data.get("ai_train"))


NO_SIGNALS = ContentSignals()

# key in either syntax -> field name
_SIGNAL_KEYS = {
    "search": "search",
    "ai-input": "ai_input",
    "ai-train": "ai_train",
    "ai-use": "ai_input",
    "train-ai": "ai_train",
}
_YES = {"y", "yes"}
_NO = {"n", "no"}


def _restrictive(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    if a is True or b is True:
        return True
    return None


def parse_signal_list(value: str) -> ContentSignals:
    """``search=yes, ai-train=no`` (Cloudflare) or ``train-ai=n, search=y`` (AIPREF).

    A Structured Fields dictionary, read leniently: members are split at
    commas, parameters (``;...``) are dropped, keys are compared in lower case,
    ``y``/``yes`` allow and ``n``/``no`` refuse, anything else is unknown. As in
    Structured Fields, the last value of a repeated key wins.

    >>> parse_signal_list("search=yes, ai-train=no")
    ContentSignals(search=True, ai_input=None, ai_train=False)
    >>> parse_signal_list('train-ai=n;x="1", ai-use=y, bogus=n')
    ContentSignals(search=None, ai_input=True, ai_train=False)
    """
    found: dict[str, bool | None] = {}
    for member in value.split(","):
        key, _, raw = member.partition("=")
        key = key.split(";", 1)[0].strip().lower()
        name = _SIGNAL_KEYS.get(key)
        if name is None:
            continue
        word = raw.split(";", 1)[0].strip().strip('"').lower()
        found[name] = True if word in _YES else False if word in _NO else None
    return ContentSignals(**found)


def signals_from_headers(headers: Mapping[str, Iterable[str]]) -> ContentSignals:
    """Signals of the HTTP header forms: ``Content-Usage`` (AIPREF) and ``Content-Signal``.

    ``headers`` maps lower-case names to every value of that header.
    """
    out = NO_SIGNALS
    for name in ("content-usage", "content-signal"):
        for value in headers.get(name, ()):
            out = out.combine(parse_signal_list(value))
    return out


@dataclass(frozen=True)
class _SignalRule:
    pattern: str
    regex: re.Pattern[str]
    signals: ContentSignals


def _signal_rule(value: str) -> _SignalRule | None:
    # AIPREF: "<path> <preferences>"; Cloudflare: "<preferences>" for the whole
    # group (a leading path is accepted there too).
    value = value.strip()
    if value.startswith("/"):
        path, _, prefs = value.partition(" ")
        if not prefs.strip():
            path, _, prefs = value.partition("\t")
        path = path.strip()
    else:
        path, prefs = "/", value
    signals = parse_signal_list(prefs)
    if signals.empty:
        return None
    return _SignalRule(path, _pattern_regex(path), signals)


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    parts = [re.escape(p) for p in body.split("*")]
    return re.compile(".*".join(parts) + ("$" if anchored else ""), re.DOTALL)


# Characters str.splitlines() (inside Protego) takes for line breaks, though
# RFC 9309 does not: they must reach Protego escaped, inside their line.
_PY_LINE_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def _normalise(value: str) -> str:
    """A rule's path or a URL, made ready for Protego.

    In the query, percent-escapes are decoded (but ``%25``), so that a rule
    ``/foo/bar?baz=https://foo.bar`` matches ``/foo/bar?baz=https%3A%2F%2Ffoo.bar``
    as RFC 9309 section 2.2.2's table says; Protego keeps ``%2F`` apart there.
    """
    value = _PY_LINE_BREAKS.sub(lambda m: f"%{ord(m.group(0)):02X}", value)
    head, sep, query = value.partition("?")
    if not sep or "%" not in query:
        return value
    decoded = _ESCAPE.sub(
        lambda m: m.group(0) if m.group(1) == "25" else _byte_char(int(m.group(1), 16)), query
    )
    return f"{head}?{decoded}"


def _byte_char(code: int) -> str:
    # Only ASCII is decoded here; UTF-8 sequences stay escaped for Protego,
    # which compares them as escapes on both sides.
    return chr(code) if code < 0x80 and chr(code) not in "#\r\n" else f"%{code:02X}"


def _path_of(url: str) -> str:
    parts = urlsplit(url)
    path = parts.path or "/"
    return f"{path}?{parts.query}" if parts.query else path


# ---------------------------------------------------------------------------
# Groups (RFC 9309 section 2.2)


@dataclass
class _Group:
    agents: list[str] = field(default_factory=list)  # the User-agent values, as written
    rules: list[tuple[str, str]] = field(default_factory=list)  # ("allow"|"disallow", value)
    lines: list[int] = field(default_factory=list)  # the line number of each rule
    crawl_delay: float | None = None
    signals: list[str] = field(default_factory=list)
    has_rule: bool = False


def _split_line(line: str) -> tuple[str, str] | None:
    """``key: value`` (or ``key value``, which Google also accepts), comment removed."""
    line = line.split("#", 1)[0].strip()
    if not line:
        return None
    if ":" in line:
        key, _, value = line.partition(":")
        key = " ".join(key.split()).lower()
        if key in _KNOWN:
            return key, value.strip()
    words = line.split()
    for n in (2, 1):  # "user agent foo" before "user-agent foo"
        if len(words) > n and " ".join(words[:n]).lower() in _KNOWN:
            return " ".join(words[:n]).lower(), " ".join(words[n:])
    if ":" in line:
        key, _, value = line.partition(":")
        return key.strip().lower(), value.strip()
    return None


def agent_tokens(value: str, cut: re.Pattern[str] = _PRODUCT_TOKEN) -> tuple[str, ...]:
    """The product tokens a ``User-agent`` value names, lower case (``*`` for the star).

    Its comma- or whitespace-separated items, each cut at its first character that
    is not a letter, ``_`` or ``-`` (RFC 9309 section 2.2.1's product token); an
    item that is ``*`` is the star.

    >>> agent_tokens("PoliteCrawler/1.0 (+https://e.org)")
    ('politecrawler',)
    >>> agent_tokens("PoliteCrawler, OtherBot"), agent_tokens("PoliteCrawler2")
    (('politecrawler', 'otherbot'), ('politecrawler',))
    >>> agent_tokens("* ignored"), agent_tokens("One,Two  Three")
    (('*', 'ignored'), ('one', 'two', 'three'))
    """
    out: list[str] = []
    for item in _AGENT_ITEMS.split(value.strip()):
        match = cut.match(item)
        token = "*" if item == "*" else match.group(0).lower() if match else ""
        if token and token not in out:
            out.append(token)
    return tuple(out)


def _parse_groups(text: str) -> tuple[list[_Group], list[str], list[str]]:
    """The groups, the sitemaps and the Content-Signal values before any group."""
    groups: list[_Group] = []
    sitemaps: list[str] = []
    global_signals: list[str] = []
    current: _Group | None = None
    for number, raw in enumerate(_EOL.split(text), start=1):
        parsed = _split_line(raw)
        if parsed is None:
            continue
        key, value = parsed
        if key in _USER_AGENT:
            # A rule ends the run of user-agent lines; only then does a
            # user-agent line start a new group (RFC 9309 section 2.2).
            if current is None or current.has_rule:
                current = _Group()
                groups.append(current)
            current.agents.append(value)
        elif key in _SITEMAP:
            if value:
                sitemaps.append(value)  # not part of any group (section 2.2.4)
        elif current is None:
            if key in _CONTENT_SIGNAL:
                # Not in a group: like Sitemap, it speaks for the whole file
                # (as crawler-commons reads it); a signal restricts, so
                # honouring it costs the site nothing.
                global_signals.append(value)
            continue  # a rule before any user-agent line applies to nobody
        elif key in _ALLOW or key in _DISALLOW:
            current.has_rule = True
            if value:
                current.rules.append(("allow" if key in _ALLOW else "disallow", value))
                current.lines.append(number)
        elif key in _CRAWL_DELAY:
            # Not in RFC 9309's grammar: an "other record" (section 2.2.4), which
            # "MUST NOT interfere" with the defined ones, so it does not end the
            # run of user-agent lines ("User-agent: a / Crawl-delay: 1 /
            # User-agent: b / Disallow: /" is one group for a and b). It belongs
            # to the group it appears in, every agent of it; the largest wins.
            delay = _parse_delay(value)
            if delay is not None:
                old = current.crawl_delay
                current.crawl_delay = delay if old is None else max(old, delay)
        elif key in _CONTENT_USAGE:
            # draft-ietf-aipref-attach section 3 extends RFC 9309's grammar with
            # "rule =/ content-usage": a rule, so it ends the user-agent lines
            # as Allow and Disallow do.
            current.has_rule = True
            current.signals.append(value)
        elif key in _CONTENT_SIGNAL:
            # Cloudflare's Content Signals Policy (contentsignals.org) and
            # draft-romm-aipref-contentsignals define a vocabulary only; nothing
            # adds the line to RFC 9309's "rule" grammar, so it is an other
            # record like Crawl-delay: it belongs to its group and ends nothing.
            current.signals.append(value)
        # Any other line is ignored and changes nothing (section 2.2.4).
    return groups, sitemaps, global_signals


def _parse_delay(value: str) -> float | None:
    words = value.split(maxsplit=1)
    try:
        delay = float(words[0]) if words else None
    except ValueError:
        return None
    if delay is None or not math.isfinite(delay) or delay < 0:
        return None
    return delay


class RobotsRules:
    """The rules one product token must obey in one robots.txt.

    >>> text = "User-agent: *\\nDisallow: /admin/\\nAllow: /admin/public/"
    >>> rules = RobotsRules.parse(text, "PoliteCrawler")
    >>> rules.allowed("https://e.org/admin/public/faq"), rules.allowed("https://e.org/admin/x")
    (True, False)
    >>> rules.allows_all, RobotsRules.parse("User-agent: *\\nAllow: /", "PoliteCrawler").allows_all
    (False, True)
    """

    def __init__(  # noqa: PLR0917
        self,
        token: str,
        matched: str | None,
        rules: list[tuple[str, str]],
        crawl_delay: float | None,
        sitemaps: list[str],
        signal_rules: list[_SignalRule],
        truncated: bool = False,
        lines: list[int] | None = None,
    ) -> None:
        self.token = token
        self.matched = matched  # "token", "*" or None (no group applies: allow all)
        self.rules = rules
        # No Disallow line: no URL can match one, so every URL is allowed (a batch of
        # listed URLs is then let through without a match each).
        self.allows_all = all(kind == "allow" for kind, _value in rules)
        # (line number, "allow"|"disallow", value) of every rule, when parsed from a file
        self.rule_lines = [(n, k, v) for n, (k, v) in zip(lines or (), rules, strict=False)]
        self.crawl_delay = crawl_delay
        self.sitemaps = sitemaps
        self.truncated = truncated
        self._signal_rules = signal_rules
        # Built when a URL is first judged against a Disallow line: a file that allows
        # everything (most of them) keeps no matcher.
        self._protego: Protego | None = None

    @classmethod
    def parse(
        cls, content: str | bytes, token: str, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> RobotsRules:
        """Parse a robots.txt (bytes as fetched, or text) for the product ``token``.

        The groups whose user-agent lines name ``token`` (:func:`agent_tokens`)
        apply, combined (section 2.2.1); else the ``*`` groups; else none (allow
        all). Rules of other groups never mix in.
        """
        truncated = False
        if isinstance(content, bytes):
            text, truncated = decode_robots(content, max_bytes)
        else:
            text = content.removeprefix("\ufeff")
            if len(text.encode("utf-8", "replace")) > max_bytes:
                text, truncated = decode_robots(text.encode("utf-8", "replace"), max_bytes)
        groups, sitemaps, global_signals = _parse_groups(text)
        own = token.lower()
        cut = _PRODUCT_TOKEN if _PRODUCT_TOKEN.fullmatch(token) else _NAME_WITH_DIGITS
        chosen = [g for g in groups if any(own in agent_tokens(v, cut) for v in g.agents)]
        matched: str | None = "token"
        if not chosen:
            chosen = [g for g in groups if any("*" in agent_tokens(v) for v in g.agents)]
            matched = "*" if chosen else None
        rules: list[tuple[str, str]] = []
        lines: list[int] = []
        delays: list[float] = []
        signal_rules = [r for r in map(_signal_rule, global_signals) if r is not None]
        for group in chosen:
            rules.extend(group.rules)
            lines.extend(group.lines)
            if group.crawl_delay is not None:
                delays.append(group.crawl_delay)
            for value in group.signals:
                rule = _signal_rule(value)
                if rule is not None:
                    signal_rules.append(rule)
        return cls(token, matched, rules, max(delays) if delays else None, sitemaps,
                   signal_rules, truncated, lines)

    @classmethod
    def allow_all(cls, token: str) -> RobotsRules:
        return cls(token, None, [], None, [], [])

    def allowed(self, url: str) -> bool:
        """May ``url`` be fetched? Longest match wins, Allow wins a tie (section 2.2.2)."""
        if self.allows_all:
            return True
        if self._protego is None:
            group = ["User-agent: *"]
            group.extend(
                f"{'Allow' if k == 'allow' else 'Disallow'}: {_normalise(v)}"
                for k, v in self.rules
            )
            self._protego = Protego.parse("\n".join(group))
        return bool(self._protego.can_fetch(_normalise(url), self.token))

    def signals(self, url: str) -> ContentSignals:
        """Content signals of the matched group for ``url``.

        Per signal, the rule with the longest matching path that states it
        wins (draft-ietf-aipref-attach, "Content-Usage Rule Semantics"); rules
        of the same length are combined, the most restrictive winning.
        """
        if not self._signal_rules:
            return NO_SIGNALS
        path = _path_of(url)
        matching = [r for r in self._signal_rules if r.regex.match(path)]
        result: dict[str, bool | None] = {}
        for name in ("search", "ai_input", "ai_train"):
            best_len = -1
            value: bool | None = None
            for rule in matching:
                stated = getattr(rule.signals, name)
                if stated is None:
                    continue
                if len(rule.pattern) > best_len:
                    best_len, value = len(rule.pattern), stated
                elif len(rule.pattern) == best_len:
                    value = _restrictive(value, stated)
            result[name] = value
        return ContentSignals(**result)


# ---------------------------------------------------------------------------
# Page-level rules: <meta name="robots">, <meta name="<token>">, X-Robots-Tag


@dataclass(frozen=True)
class PageRules:
    noindex: bool = False
    nofollow: bool = False
    signals: ContentSignals = NO_SIGNALS

    def combine(self, other: PageRules) -> PageRules:
        return PageRules(
            self.noindex or other.noindex,
            self.nofollow or other.nofollow,
            self.signals.combine(other.signals),
        )


NO_PAGE_RULES = PageRules()

# X-Robots-Tag directives that carry a value after a colon: not a user agent.
_VALUED_DIRECTIVES = {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
_SCOPE = re.compile(r"^\s*([A-Za-z_-]+)\s*:\s*(.*)$", re.DOTALL)


def _apply_directives(words: Iterable[str]) -> PageRules:
    noindex = nofollow = False
    signals = NO_SIGNALS
    for word in words:
        w = word.strip().lower()
        if w in ("noindex", "none"):
            noindex = True
        if w in ("nofollow", "none"):
            nofollow = True
        if w == "noai":  # the "noai" convention: no AI use of any kind
            signals = signals.combine(ContentSignals(ai_input=False, ai_train=False))
    return PageRules(noindex, nofollow, signals)


def parse_meta_robots(metas: Iterable[tuple[str, str]], token: str) -> PageRules:
    """Rules of ``<meta name=... content=...>`` pairs: ``robots`` and the bot's own token.

    >>> metas = [("robots", "noindex"), ("PoliteCrawler", "nofollow"), ("otherbot", "none")]
    >>> rules = parse_meta_robots(metas, "PoliteCrawler")
    >>> rules.noindex, rules.nofollow
    (True, True)
    """
    own = token.lower()
    out = NO_PAGE_RULES
    for name, content in metas:
        if name.strip().lower() in ("robots", own):
            out = out.combine(_apply_directives(content.split(",")))
    return out


def parse_x_robots_tag(values: Iterable[str], token: str) -> PageRules:
    """Rules of every ``X-Robots-Tag`` value; ``<bot>: ...`` applies to that bot only.

    A user-agent prefix scopes the directives after it in the same value.

    >>> values = ["otherbot: noindex", "PoliteCrawler: nofollow"]
    >>> rules = parse_x_robots_tag(values, "PoliteCrawler")
    >>> rules.noindex, rules.nofollow
    (False, True)
    """
    own = token.lower()
    out = NO_PAGE_RULES
    for value in values:
        scope: str | None = None
        mine: list[str] = []
        for part in value.split(","):
            directive = part
            match = _SCOPE.match(part)
            if match and match.group(1).lower() not in _VALUED_DIRECTIVES:
                scope = match.group(1).lower()
                directive = match.group(2)
            if scope is None or scope == own:
                mine.append(directive)
        out = out.combine(_apply_directives(mine))
    return out


def page_rules(
    headers: Mapping[str, Iterable[str]],
    metas: Iterable[tuple[str, str]],
    token: str,
    robots_signals: ContentSignals = NO_SIGNALS,
) -> PageRules:
    """Everything a page says about itself, plus its robots.txt signals.

    ``headers`` maps lower-case header names to all their values.
    """
    tags = parse_x_robots_tag(headers.get("x-robots-tag", ()), token)
    rules = parse_meta_robots(metas, token).combine(tags)
    signals = robots_signals.combine(signals_from_headers(headers))
    return PageRules(rules.noindex, rules.nofollow, rules.signals.combine(signals))


__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_REDIRECTS",
    "NO_PAGE_RULES",
    "NO_SIGNALS",
    "ContentSignals",
    "Outcome",
    "PageRules",
    "RobotsRules",
    "agent_tokens",
    "clip_robots",
    "decode_robots",
    "fetch_outcome",
    "page_rules",
    "parse_meta_robots",
    "parse_signal_list",
    "parse_x_robots_tag",
    "redirect_outcome",
    "retry_delay",
    "signals_from_headers",
]
