"""The bot page: what a site owner reads after following the User-Agent's +URL.

``python -m polite_crawler.botpage bot_page/index.html [-s NAME=VALUE ...]``
(``make bot-page``) renders it from the settings the crawler itself uses: the
project's settings (``scrapy.utils.project.get_project_settings``) over the
add-on's defaults (:mod:`polite_crawler.defaults`). Every number and the token
on the page come from there, so the page cannot drift from the code. Plain HTML
and CSS, no JavaScript.
"""

from __future__ import annotations

import argparse
import html
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polite_crawler import __version__
from polite_crawler.addon import ENFORCED, PINNED
from polite_crawler.defaults import load_defaults
from polite_crawler.policy.signing import (
    DIRECTORY_PATH,
    KeyRing,
    SigningError,
    describe,
    directory_json,
    parse_key_paths,
    signer_from_settings,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from scrapy.settings import BaseSettings, Settings

    from polite_crawler.policy.identity import Identity

PROJECT_SETTINGS = "polite_crawler.settings"


def load_settings(overrides: Mapping[str, Any] | None = None) -> Settings:
    """The settings a ``scrapy crawl`` of this project runs with, plus ``overrides``.

    The project's settings module (found through scrapy.cfg or
    SCRAPY_SETTINGS_MODULE, else polite_crawler.settings), over the add-on's
    defaults and pinned values, under ``overrides`` (as ``-s`` on the command line).
    """
    import os

    from scrapy.utils.conf import closest_scrapy_cfg
    from scrapy.utils.project import get_project_settings

    settings = get_project_settings()
    if not os.environ.get("SCRAPY_SETTINGS_MODULE") and not closest_scrapy_cfg():
        settings.setmodule(PROJECT_SETTINGS, priority="project")
    load_defaults(settings)
    for name, value in PINNED.items():
        settings.set(name, value, priority=ENFORCED)
    if overrides:
        settings.setdict(dict(overrides), priority="cmdline")
    return settings


# --- formatting -----------------------------------------------------------------------

def _num(value: float) -> str:
    """``3.0`` -> ``3``, ``0.25`` -> ``0.25``, ``10000`` -> ``10,000``."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:g}"


def duration(seconds: float) -> str:
    """Seconds in the unit a person would use.

    >>> duration(3), duration(60), duration(300), duration(86400), duration(2592000)
    ('3 s', '60 s', '5 min', '24 h', '30 days')
    """
    s = float(seconds)
    if s >= 2 * 86400 and s % 86400 == 0:
        return f"{_num(s / 86400)} days"
    if s >= 3600 and s % 3600 == 0:
        return f"{_num(s / 3600)} h"
    if s >= 120 and s % 60 == 0:
        return f"{_num(s / 60)} min"
    return f"{_num(s)} s"


def size(n: int) -> str:
    """>>> size(5 * 1024 * 1024), size(512 * 1024), size(100)
    ('5 MiB', '512 KiB', '100 bytes')
    """
    if n >= 1024 * 1024 and n % (1024 * 1024) == 0:
        return f"{_num(n // (1024 * 1024))} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{_num(n // 1024)} KiB"
    return f"{_num(n)} bytes"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _code(value: object) -> str:
    return f"<code>{_e(value)}</code>"


def _addresses(raw: object) -> list[str]:
    if isinstance(raw, (list, tuple)):
        items = [str(x) for x in raw]
    else:
        items = re.split(r"[,\s]+", str(raw or ""))
    return [x for x in (i.strip() for i in items) if x]


CSS = """
:root { color-scheme: light dark; --fg: #1b1f24; --bg: #fdfdfc; --muted: #4a5360;
  --accent: #0b5cad; --box: #eef3f8; --line: #c9d2dc; --warn-bg: #fff4d6; --warn: #6b4a00; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e8eaed; --bg: #16181b; --muted: #b3bac3; --accent: #8cc4ff; --box: #22272e;
    --line: #3d444d; --warn-bg: #3a2f12; --warn: #ffd98a; } }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 1.05rem/1.6 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
.wrap { max-width: 48rem; margin: 0 auto; padding: 1.5rem 1.25rem 3rem; }
a { color: var(--accent); }
a:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.skip { position: absolute; left: -999px; }
.skip:focus { left: 1rem; top: 1rem; background: var(--bg); padding: .5rem; }
h1 { font-size: 1.9rem; line-height: 1.25; margin: .5rem 0 .25rem; }
h2 { font-size: 1.35rem; margin-top: 2.25rem; padding-top: .5rem;
  border-top: 1px solid var(--line); }
h3 { font-size: 1.1rem; margin-top: 1.5rem; }
.lede { color: var(--muted); font-size: 1.1rem; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace;
  font-size: .92em; }
code { background: var(--box); padding: .1em .3em; border-radius: 3px; overflow-wrap: anywhere; }
pre { background: var(--box); padding: .75rem 1rem; border-radius: 6px; overflow-x: auto;
  border-left: 4px solid var(--accent); }
pre code { background: none; padding: 0; }
.glance { background: var(--box); border-radius: 8px; padding: .75rem 1.25rem; }
.glance dt { font-weight: 600; margin-top: .5rem; }
.glance dd { margin: 0 0 .25rem 0; }
.notice { background: var(--warn-bg); color: var(--warn); border-radius: 8px;
  padding: .75rem 1.25rem; border: 1px solid currentColor; }
.notice strong { display: block; }
nav.toc ol { columns: 2; padding-left: 1.25rem; }
table { border-collapse: collapse; width: 100%; margin: .75rem 0; }
caption { text-align: left; font-weight: 600; padding-bottom: .35rem; }
th, td { border: 1px solid var(--line); padding: .4rem .6rem; text-align: left;
  vertical-align: top; }
thead th { background: var(--box); }
footer { margin-top: 3rem; color: var(--muted); font-size: .9rem; }
@media (max-width: 36rem) { nav.toc ol { columns: 1; } }
"""


def signing_ring(settings: BaseSettings) -> tuple[KeyRing, str] | None:
    """The keys of POLITE_SIGNING_KEY and the Signature-Agent origin; None without a key."""
    from polite_crawler.middlewares.identity import LOCAL_BOT_URL

    paths = parse_key_paths(settings.get("POLITE_SIGNING_KEY"))
    if not paths:
        return None
    signer, ring = signer_from_settings(
        paths, settings.get("POLITE_SIGNATURE_AGENT") or "",
        settings.get("POLITE_BOT_URL") or LOCAL_BOT_URL)
    return ring, signer.agent


def render_directory(settings: BaseSettings) -> str | None:
    """The key directory (JWK Set, public keys only) to publish; None without a key."""
    found = signing_ring(settings)
    return directory_json(found[0].published) if found else None


def _signing_html(settings: BaseSettings) -> tuple[str, str]:
    found = signing_ring(settings)
    if found is None:
        return ("<h3>Signed requests</h3><p>The operator has not set up request signing "
                "(<code>POLITE_SIGNING_KEY</code>): its requests carry no Web Bot Auth "
                "signature.</p>", "not set up by the operator")
    ring, agent = found
    info = describe(ring, agent)
    directory = info["directory"]
    others = [k.thumbprint for k in ring.published if k != ring.signing.public]
    rotation = ("" if not others else
                "<p>The directory also lists " + ", ".join(_code(t) for t in others)
                + ", a key being retired; requests are signed with the key above.</p>")
    glance = f"yes: keyid {_code(info['keyid'])}"
    html_ = f"""<h3>Signed requests</h3>
<p>Every request it sends, robots.txt included, is signed with HTTP Message Signatures
(RFC&nbsp;9421) as Web Bot Auth defines them, so a signature proves the request came from this
crawler whatever its address. Its public key is published at
<a href="{_e(directory)}">{_e(directory)}</a> (a JWK Set).</p>
<dl>
<dt>keyid (the key's RFC&nbsp;7638 thumbprint)</dt><dd>{_code(info["keyid"])}</dd>
<dt>Signature-Agent header</dt><dd>{_code(f'sig1="{agent}"')}</dd>
</dl>
{rotation}
<p>To check a request, the way CDNs that support Web Bot Auth do it for you:</p>
<ol>
<li>Its <code>Signature-Input</code> has <code>tag="web-bot-auth"</code>, <code>alg="ed25519"</code>
and a <code>keyid</code>; its <code>Signature-Agent</code> names {_code(agent)}.</li>
<li>Fetch the key directory above and take the key whose <code>kid</code> is that
<code>keyid</code> (or whose thumbprint is).</li>
<li>Rebuild the signature base from the covered components (<code>@method</code>,
<code>@authority</code>, <code>@path</code> and the <code>signature-agent</code> member), as
RFC&nbsp;9421 section&nbsp;2.5 says, and check the Ed25519 signature in
<code>Signature</code> against it; the time must lie between <code>created</code> and
<code>expires</code> (a signature lives {duration(settings.getint("POLITE_SIGNATURE_TTL"))}).</li>
</ol>
<p>A request that verifies is from this crawler, from whatever address it comes.</p>"""
    return html_, glance


def _optout_section(settings: BaseSettings, contact_html: str) -> str:
    """The opt-out and the access log's retention (``scrapy forget``, ``scrapy history``)."""
    keep = settings.getfloat("POLITE_ACCESS_LOG_KEEP_DAYS")
    kept = (f"for {_num(keep)} days, then deleted" if keep > 0
            else "for as long as the crawler runs")
    return f"""<section aria-labelledby="forget">
<h2 id="forget">Ask it to forget your site</h2>
<p>Write to {contact_html} with your site's address, from an address at that site or with
another way to show that the site is yours. Within a day the operator puts the site on the
crawler's opt-out list: no running or later crawl asks it for anything again, not even
<code>robots.txt</code>, and everything stored of it is deleted (its pages, their text and
fingerprints, and the addresses waiting to be fetched). The reply says what was removed.</p>
<p>The crawler keeps its own access log of every request it sends: when, which address, your
server's status and size, and how long it waited before. Ask what it fetched from your site
and when, and the answer comes from that log. The log is kept {kept}; the lines of a
forgotten site stay as the record that it was forgotten.</p>
</section>"""


@dataclass(frozen=True)
class _Page:
    """What the bot page says, read from the settings once (:func:`_page_facts`); each
    section of the page is a function of it."""

    ident: Identity
    token: str
    bot_url: str
    contact: str
    purpose: str
    addresses: list[str]
    g: Callable[[str], float]
    rest_page: float
    rest_api: float
    factor: float
    duration_max: float
    crawl_delay_max: float
    backoff_max: float
    jitter: float
    robots_ttl: float
    park: float
    breaker: int
    retries: int
    budget: int
    baseline_n: int
    window_n: int
    min_rise: float
    per_hour: int
    notice: str
    contact_html: str
    from_html: str
    purpose_html: str
    addr_html: str
    signing_html: str
    signing_glance: str
    toc: str
    settings: BaseSettings


# The page's sections, in order: (id, heading).
SECTIONS = (
    ("stop", "Stop it or slow it down"),
    ("collects", "What it collects, and why"),
    ("often", "How often it comes back"),
    ("fast", "How fast it goes"),
    ("answers", "What your server's answers do"),
    ("signals", "Page rules and content signals"),
    ("verify", "Is it really this crawler?"),
    ("forget", "Ask it to forget your site"),  # the opt-out (scrapy forget)
    ("contact", "Contact"),
)


def _notice(missing: list[str]) -> str:
    """The operator's note: what is not set yet (nothing when everything is)."""
    if not missing:
        return ""
    return (
        '<aside class="notice" role="note" aria-label="Note for the operator">'
        "<strong>Not ready to publish.</strong> The crawler's operator has not set "
        + ", ".join(_code(m) for m in missing)
        + ". Set them in the project's settings, run <code>make bot-page</code> again, "
        "and publish this page at the address in <code>POLITE_BOT_URL</code>. Until "
        "<code>POLITE_BOT_URL</code> is set the crawler fetches from loopback addresses only, "
        "and its User-Agent points at the demo web's copy of this page.</aside>"
    )


def _addresses_html(addresses: list[str]) -> str:
    """The source addresses a site owner may check a request against."""
    if addresses:
        return ("<p>It connects only from these addresses (or names):</p><ul>"
                + "".join(f"<li>{_code(a)}</li>" for a in addresses) + "</ul>")
    return ("<p><strong>The operator has not published its source addresses yet</strong> "
            "(<code>POLITE_SOURCE_ADDRESSES</code>). Until it does, the User-Agent is the "
            "only sign, and a User-Agent can be copied by anyone.</p>")


def _page_facts(settings: BaseSettings) -> _Page:
    """Everything the page says, read from ``settings`` once."""
    from polite_crawler.middlewares.identity import identity_from_settings

    ident = identity_from_settings(settings)
    token = ident.token
    bot_url = settings.get("POLITE_BOT_URL") or ""
    contact = settings.get("POLITE_CONTACT") or ""
    purpose = (settings.get("POLITE_PURPOSE") or "").strip()
    addresses = _addresses(settings.get("POLITE_SOURCE_ADDRESSES"))
    g = settings.getfloat
    rest_page = g("POLITE_REST_PAGE")
    rest_api = g("POLITE_REST_API")
    factor = g("POLITE_REST_DURATION_FACTOR")
    duration_max = g("POLITE_REST_DURATION_MAX")
    crawl_delay_max = g("POLITE_CRAWL_DELAY_MAX")
    backoff_max = g("POLITE_BACKOFF_MAX")
    jitter = g("POLITE_JITTER")
    robots_ttl = g("POLITE_ROBOTS_TTL")
    park = g("POLITE_RETRY_AFTER_PARK")
    breaker = settings.getint("POLITE_BREAKER_FAILURES")
    retries = settings.getint("POLITE_RETRY_TIMES")
    budget = settings.getint("POLITE_HOST_BUDGET")
    baseline_n = settings.getint("POLITE_LATENCY_BASELINE_N")
    window_n = settings.getint("POLITE_LATENCY_WINDOW_N")
    min_rise = g("POLITE_LATENCY_MIN_RISE")
    per_hour = int(3600 // rest_page) if rest_page > 0 else 0

    missing = [name for name, value in (
        ("POLITE_BOT_URL", bot_url), ("POLITE_CONTACT", contact),
        ("POLITE_SOURCE_ADDRESSES", addresses), ("POLITE_PURPOSE", purpose)) if not value]
    contact_html = (f'<a href="mailto:{_e(contact)}">{_e(contact)}</a>' if contact
                    else "not set yet by the operator")
    from_html = _code(f"From: {contact}") if contact else "not sent (no contact address is set)"
    purpose_html = (f"<p>{_e(purpose)}</p>" if purpose else
                    "<p>The operator has not described the purpose of this crawl yet "
                    "(<code>POLITE_PURPOSE</code>).</p>")
    signing_html, signing_glance = _signing_html(settings)
    return _Page(
        ident=ident,
        token=token,
        bot_url=bot_url,
        contact=contact,
        purpose=purpose,
        addresses=addresses,
        g=g,
        rest_page=rest_page,
        rest_api=rest_api,
        factor=factor,
        duration_max=duration_max,
        crawl_delay_max=crawl_delay_max,
        backoff_max=backoff_max,
        jitter=jitter,
        robots_ttl=robots_ttl,
        park=park,
        breaker=breaker,
        retries=retries,
        budget=budget,
        baseline_n=baseline_n,
        window_n=window_n,
        min_rise=min_rise,
        per_hour=per_hour,
        notice=_notice(missing),
        contact_html=contact_html,
        from_html=from_html,
        purpose_html=purpose_html,
        addr_html=_addresses_html(addresses),
        signing_html=signing_html,
        signing_glance=signing_glance,
        toc="".join(f'<li><a href="#{sid}">{_e(label)}</a></li>' for sid, label in SECTIONS),
        settings=settings,
    )


def _top(p: _Page) -> str:
    """The header, the operator's notice, the facts at a glance and the contents."""
    return f"""
<a class="skip" href="#main">Skip to the content</a>
<div class="wrap">
<header>
<p class="lede">A note for site owners</p>
<h1>{_e(p.token)}, the crawler in your access log</h1>
<p>If your log shows the User-Agent below, this page is about the program that sent it.
It is built on <em>polite_crawler</em>, a crawler made to cost a site almost nothing and to stop
when the site says no. This page is generated from the crawler's own settings, so the numbers on
it are the ones it runs with.</p>
</header>
{p.notice}
<main id="main">
<dl class="glance" aria-label="At a glance">
<dt>User-Agent it sends</dt><dd>{_code(p.ident.user_agent)}</dd>
<dt>From header</dt><dd>{p.from_html}</dd>
<dt>Its token in robots.txt</dt><dd>{_code(p.token)}</dd>
<dt>Pace on one site</dt><dd>one request at a time, then a rest of at least {duration(p.rest_page)}
before the next one</dd>
<dt>Contact</dt><dd>{p.contact_html}</dd>
<dt>Signed requests (Web Bot Auth)</dt><dd>{p.signing_glance}</dd>
</dl>

<nav class="toc" aria-label="On this page"><ol>{p.toc}</ol></nav>
"""


def _stop_section(p: _Page) -> str:
    """How to stop it or slow it down: robots.txt (RFC 9309)."""
    delay = duration(p.crawl_delay_max)
    return f"""<section aria-labelledby="stop">
<h2 id="stop">Stop it or slow it down</h2>
<p>The crawler reads <code>/robots.txt</code> before anything else on your site and obeys it as
RFC&nbsp;9309 says. It matches the group for its token, <code>{_e(p.token)}</code>, or else the
<code>*</code> group. To keep it out of the whole site:</p>
<pre><code>User-agent: {_e(p.token)}
Disallow: /</code></pre>
<p>To keep it out of one part, and to make it wait longer between requests:</p>
<pre><code>User-agent: {_e(p.token)}
Disallow: /private/
Crawl-delay: 10</code></pre>
<ul>
<li>Only one group applies: if you write a group for <code>{_e(p.token)}</code>, your
<code>*</code> group no longer applies to it, so repeat there any line you still need.</li>
<li>It honours <code>Crawl-delay</code> up to {delay}; a larger value counts as
{delay}. To go slower than that, disallow.</li>
<li>It reads robots.txt again when its copy is {duration(p.robots_ttl)} old, so a new rule takes
effect within {duration(p.robots_ttl)}.</li>
<li>When robots.txt answers with a server error (5xx) or 429, or cannot be reached, it fetches
nothing else from the site; it keeps to the last copy it read, if it has one, and asks for
robots.txt again after {duration(p.g("POLITE_ROBOTS_RETRY_MIN"))}, then twice as long each time,
up to {duration(p.g("POLITE_ROBOTS_RETRY_MAX"))}. A 404 (or any other 4xx) for robots.txt means
no restrictions, as the RFC says.</li>
</ul>
</section>
"""


def _collects_section(p: _Page) -> str:
    """What it collects, and why."""
    return f"""<section aria-labelledby="collects">
<h2 id="collects">What it collects, and why</h2>
{p.purpose_html}
<p>It fetches the HTML pages of the sites its operator lists, and never leaves those sites. It
starts from your robots.txt <code>Sitemap:</code> lines (or <code>/sitemap.xml</code>) and your
feeds, and follows your links only for what they do not list.</p>
<p>For each page it keeps the address (and the canonical address), the status, when it fetched
it, the <code>ETag</code> and <code>Last-Modified</code> values, the title, the main text without
navigation, fingerprints to recognise duplicates, and the content signals that applied.</p>
<p>It does not log in, fill in forms (your search box included), keep cookies, or download
images, media, fonts and stylesheets. It runs no JavaScript, unless its operator turned
rendering on and a page shows its text only through scripts (with no JSON-LD, JSON form or feed
that carries it): then a browser shows that page, fetching only your origin's scripts and data
calls (GET or HEAD; no analytics, tag manager or ad hosts), each through the crawler's own rules
(robots.txt, its User-Agent, one request at a time; a 402, 403, 429, 503 or challenge answer
ends the render). The render counts as one visit, and the rest after it grows with its time.</p>
</section>
"""


def _often_section(p: _Page) -> str:
    """How often it comes back."""
    return f"""<section aria-labelledby="often">
<h2 id="often">How often it comes back</h2>
<ul>
<li>robots.txt: once its copy is {duration(p.robots_ttl)} old.</li>
<li>A page: after an interval that follows how often that page changes, between
{duration(p.g("POLITE_REVISIT_MIN"))} and {duration(p.g("POLITE_REVISIT_MAX"))}
({duration(p.g("POLITE_REVISIT_DEFAULT"))} at first). Your <code>Cache-Control: max-age</code>
or <code>Expires</code> is a floor: a page still fresh is not asked for. A sitemap
<code>lastmod</code> no newer than its copy means it is not asked for either.</li>
<li>A revisit is a conditional request (<code>If-None-Match</code>,
<code>If-Modified-Since</code>): an unchanged page costs you a <code>304</code> with no body.</li>
<li>At most {_num(p.budget)} pages from one site in a day.</li>
</ul>
</section>
"""


def _fast_section(p: _Page) -> str:
    """How fast it goes: the rest between two requests."""
    return f"""<section aria-labelledby="fast">
<h2 id="fast">How fast it goes</h2>
<p>It keeps at most one request in flight to your site. After each response ends, it rests
before it sends the next request. The rest is the longest of these times:</p>
<table>
<caption>The rest between two requests to one site</caption>
<thead><tr><th scope="col">Reason</th><th scope="col">Rest</th></tr></thead>
<tbody>
<tr><th scope="row">Every page</th><td>{duration(p.rest_page)} ({duration(p.rest_api)} for a
documented API)</td></tr>
<tr><th scope="row">A slow answer</th><td>{_num(p.factor)} &times; the time the last answer
took, up to {duration(p.duration_max)}</td></tr>
<tr><th scope="row">Your <code>Crawl-delay</code></th><td>as written, up to
{duration(p.crawl_delay_max)}</td></tr>
<tr><th scope="row">Your <code>Retry-After</code>, or a backoff after a failure</th><td>as
written; without it a random backoff that grows with each failure, up to
{duration(p.backoff_max)}</td></tr>
</tbody>
</table>
<p>To that it adds a random extra of up to {_num(p.jitter * 100)}&nbsp;% of the base rest, so it
does not fall into step with your cache or with other crawlers. If your server slows down while
it crawls (the median time of its last {p.window_n} answers is more than twice the median of its
first {p.baseline_n}, and {_num(p.min_rise * 1000)}&nbsp;ms or more above it), it takes the hint and
doubles its rest; when your server is back to its first speed, it halves the rest again, one
step per {p.window_n} answers. An answer's time runs from its request leaving the crawler to its
last byte arriving, so a crawler busy with its own work does not count as a slow server.</p>
<p>So one site sees at most {_num(p.per_hour)} requests an hour from it, fewer when your server
is slow, and at most {_num(p.budget)} pages a day. Answers larger than
{size(p.settings.getint("POLITE_MAX_BYTES"))} are cut there. It waits at most
{duration(p.g("POLITE_CONNECT_TIMEOUT"))} to connect, {duration(p.g("POLITE_HEADERS_TIMEOUT"))} for
the headers of an answer and {duration(p.g("POLITE_EXCHANGE_TIMEOUT"))} for the whole of it; a
longer wait counts as a failure.</p>
</section>
"""


def _answers_section(p: _Page) -> str:
    """What the server's answers do (the verdicts)."""
    return f"""<section aria-labelledby="answers">
<h2 id="answers">What your server's answers do</h2>
<table>
<caption>How the crawler reads each answer</caption>
<thead><tr><th scope="col">Your server answers</th><th scope="col">The crawler</th></tr></thead>
<tbody>
<tr><th scope="row">200</th><td>keeps the page; rests as usual</td></tr>
<tr><th scope="row">304 Not Modified</th><td>reuses its stored copy</td></tr>
<tr><th scope="row">429 or 503</th><td>waits as long as <code>Retry-After</code> says (seconds or
an HTTP date); without it, a random backoff up to {duration(p.backoff_max)}. After three 429s in
one run it halves its pace on your site for the rest of the run. A <code>Retry-After</code>
longer than {duration(p.park)} means no more requests until the next run.</td></tr>
<tr><th scope="row">402, 403, or a challenge page (CAPTCHA, "Just a moment…")</th><td>stops
crawling your site for the run. It does not try again with another identity, a proxy or a
browser.</td></tr>
<tr><th scope="row">408</th><td>tries again later, with backoff</td></tr>
<tr><th scope="row">Any other 4xx (404, 410 …)</th><td>never asks for that page again in the
run</td></tr>
<tr><th scope="row">Another 5xx, a timeout, a refused or reset connection (and a 503
too)</th><td>backs off;
{p.breaker} failures in a row stop the crawl of your site for the run</td></tr>
</tbody>
</table>
<p>A request is retried at most {p.retries} times, and a retry waits its turn like any other
request.</p>
</section>
"""


def _signals_section(p: _Page) -> str:
    """Page rules and content signals."""
    return f"""<section aria-labelledby="signals">
<h2 id="signals">Page rules and content signals</h2>
<ul>
<li><code>&lt;meta name="robots" content="noindex"&gt;</code>, the same with
<code>name="{_e(p.token)}"</code>, or the header <code>X-Robots-Tag: noindex</code> (or
<code>X-Robots-Tag: {_e(p.token)}: noindex</code>): the page's text is not kept as content.</li>
<li><code>nofollow</code> in those places: it follows no link of the page. A link with
<code>rel="nofollow"</code> is not followed.</li>
<li>Content signals, in robots.txt or as a header, in Cloudflare's form
(<code>Content-Signal: search=yes, ai-input=no, ai-train=no</code>) or the IETF AIPREF form
(<code>Content-Usage: ai-use=n</code>): they are stored with every page they apply to. A page
that refuses AI input is kept, but its text is held back from any AI use.
<code>ai-train=no</code> is recorded; this crawler trains no model.</li>
</ul>
</section>
"""


def _verify_section(p: _Page) -> str:
    """How to tell it is really this crawler: addresses and signatures."""
    return f"""<section aria-labelledby="verify">
<h2 id="verify">Is it really this crawler?</h2>
{p.addr_html}
<p>To check a request in your log, look up the name of its address, then the address of that
name; both must agree and fall within the list above:</p>
<pre><code>host 203.0.113.7          # the address from your log
host crawler.example.org  # the name the first answer gave</code></pre>
<p>A request that claims to be <code>{_e(p.token)}</code> from any other address is not from this
crawler: block it as you see fit, and tell us.</p>
{p.signing_html}
</section>
"""


def _closing(p: _Page) -> str:
    """The opt-out, the contact and the footer."""
    return f"""{_optout_section(p.settings, p.contact_html)}
<section aria-labelledby="contact">
<h2 id="contact">Contact</h2>
<p>Write to {p.contact_html}. The quickest way to stop the crawler is still robots.txt: it needs
no reply from anyone and takes effect within {duration(p.robots_ttl)}.</p>
</section>
</main>
<footer>
<p>Generated by <code>make bot-page</code> from the settings of polite_crawler {_e(__version__)}.
{"This page's address: " + _code(p.bot_url) + "." if p.bot_url else ""}</p>
</footer>
</div>
"""


def render_bot_page(settings: BaseSettings) -> str:
    """The bot page as an HTML document, from ``settings`` (see :func:`load_settings`)."""
    p = _page_facts(settings)
    token = p.token
    body = "\n".join(part(p) for part in (
        _top, _stop_section, _collects_section, _often_section, _fast_section,
        _answers_section, _signals_section, _verify_section, _closing))
    return (
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(token)}: a note for site owners</title>\n"
        f'<meta name="description" content="What the {_e(token)} crawler collects, how fast it '
        'goes, and how to stop it.">\n'
        f"<style>{CSS}</style>\n</head>\n<body>{body}</body>\n</html>\n"
    )


def _parse_overrides(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SystemExit(f"-s expects NAME=VALUE, got {pair!r}")
        out[name] = value
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m polite_crawler.botpage",
        description="Render the bot page from the crawler's settings.")
    parser.add_argument("output", help="file to write, e.g. bot_page/index.html ('-': stdout)")
    parser.add_argument("-s", "--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting, as with scrapy crawl -s")
    args = parser.parse_args(argv)
    settings = load_settings(_parse_overrides(args.set))
    try:
        page = render_bot_page(settings)
        directory = render_directory(settings)
    except SigningError as exc:
        raise SystemExit(f"bot-page: {exc}") from None
    if args.output == "-":
        sys.stdout.write(page)
    else:
        out = Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(page, encoding="utf-8")
        print(f"wrote {out}")
        if directory is not None:
            # The key directory beside the page, at the path the drafts reserve; served
            # with Content-Type application/http-message-signatures-directory+json.
            dpath = out.parent / DIRECTORY_PATH.lstrip("/")
            dpath.parent.mkdir(parents=True, exist_ok=True)
            dpath.write_text(directory, encoding="utf-8")
            print(f"wrote {dpath}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
