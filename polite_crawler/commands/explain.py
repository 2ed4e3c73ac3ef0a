"""``scrapy explain``: everything the crawler would do with a URL, and why.

``scrapy explain URL`` reads the shared state through the backend's reader
(:mod:`polite_crawler.store.reader`: origin store, robots.txt cache, page store,
opt-out list; the origin state, the robots.txt cache and the opt-out list in Redis
when run with the crawl's ``-s POLITE_FRONTIER=redis://...``) and judges with the
crawl's settings (``-s``, the project's), as the crawl does; it says: the canonical
form and which rule changed it; the robots.txt decision (the group that applied and
the line that decided, or why no file applies); page rules and content signals known
for it; the trap rule that would drop it; its origin's
state (next allowed time, the rest and the term that binds, backoff, breaker, stop,
budget); its host (the name across schemes and ports: the end of its rest, a request
of it out), its server (the address the name resolves to through the crawl's resolver
and POLITE_DNS_LOOKUP; its bound lives in a running crawl's memory only, and explain
says so) and its owner (the registrable domain: the daily budget its hosts share,
POLITE_OWNER_CONCURRENCY), and which bound decides its next request
(:func:`polite_crawler.policy.bounds.next_request`); what the store holds of it (last
fetch, status, validators, next revisit
and the rule behind that date), decided as the conditional-request middleware
decides it: the page (or the page it redirected to), else the URL's own fetch state
(``url_fetches``: a sitemap, a feed, an alias), with the crawl's ``POLITE_RECRAWL``.

``scrapy explain --robots FILE URL`` tests a robots.txt body against the crawler's
own product token, offline. ``scrapy explain --status 429 --header "Retry-After: 120"``
prints the verdict on such an answer and the wait it sets.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from scrapy.commands import ScrapyCommand

from polite_crawler.commands._base import (
    CommandError,
    add_common,
    command_state_dir,
    emit,
    fail,
    open_reader,
    when,
    with_defaults,
)
from polite_crawler.policy.bounds import (
    ADDRESS_UNKNOWN,
    HOST_BUSY,
    HOST_REST,
    NONE,
    ORIGIN_REST,
    ORIGIN_WAIT,
    SERVER_FULL,
    SERVER_REST,
    SERVER_WAIT,
    next_request,
)
from polite_crawler.policy.network import is_test_host, parse_networks
from polite_crawler.policy.owners import owner_of
from polite_crawler.policy.rest import OriginState, compute_rest, floor_params, utc_day
from polite_crawler.policy.revisit import GROW, SHRINK, Decision, Known, decide
from polite_crawler.policy.robots import (
    ContentSignals,
    RobotsRules,
    fetch_outcome,
)
from polite_crawler.policy.servers import ServerState
from polite_crawler.policy.traps import TrapLimits, url_trap
from polite_crawler.policy.urls import (
    SESSION_PARAMS,
    TRACKING_PARAMS,
    TRACKING_PREFIXES,
    URLError,
    canonicalize,
    host_of_origin,
    origin_of,
)
from polite_crawler.policy.verdicts import (
    Action,
    FailureState,
    VerdictParams,
    apply_verdict,
    classify_response,
    describe_stop,
    for_robots_txt,
)

if TYPE_CHECKING:
    import argparse

    from scrapy.settings import BaseSettings

    from polite_crawler.interfaces import StateReader


_ACTIONS = {
    Action.OK: "a success: the page is read, the origin rests as usual",
    Action.NOT_MODIFIED: "a success: the stored copy is reused, the origin rests as usual",
    Action.RETRY_LATER: "try again later: the request goes back to the frontier behind the wait",
    Action.STOP_ORIGIN: "stop: nothing more is fetched from the origin this run",
    Action.GIVE_UP: "given up: this URL is not retried, the origin carries on",
}


# --- canonical form ----------------------------------------------------------------------

def canonical_changes(url: str, strip: list[str]) -> tuple[str, list[str]]:
    """The canonical form of ``url`` and the rules that changed it (plain words)."""
    canon = canonicalize(url, strip_params=strip)
    a, b = urlsplit(url.strip()), urlsplit(canon)
    out: list[str] = []
    if url.strip().split(":", 1)[0] != b.scheme:
        out.append("scheme lower-cased")
    if "@" in a.netloc:
        out.append("user name and password dropped")
    host = a.netloc.rpartition("@")[2]
    host = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    if host and host != host.lower():
        out.append("host lower-cased")
    if host.endswith("."):
        out.append("trailing dot of the host dropped")
    if host and not host.isascii():
        out.append("internationalised host written in punycode (IDNA)")
    default = {"http": 80, "https": 443}.get(b.scheme)
    try:
        port = a.port
    except ValueError:
        port = None
    if port is not None and port == default:
        out.append(f"default port :{port} dropped")
    if a.fragment or url.strip().endswith("#"):
        out.append("fragment dropped (a browser never sends it)")
    if not a.path:
        out.append("empty path written as /")
    elif a.path != b.path:
        segments = a.path.split("/")
        if "." in segments or ".." in segments:
            out.append("dot segments (./ ../) resolved")
        if ";" in a.path and ";" not in b.path:
            out.append("session id in the path removed (;jsessionid= and the like)")
        if "(" in a.path and "(" not in b.path:
            out.append("ASP.NET session id in the path removed")
        if "%" in a.path or any(ord(c) > 127 or c == " " for c in a.path):
            out.append("percent-encoding normalised")
    before = [k for k, _ in parse_qsl(a.query, keep_blank_values=True)]
    after = [k for k, _ in parse_qsl(b.query, keep_blank_values=True)]
    extra = {s.lower() for s in strip}
    for name in before:
        if name in after:
            continue
        low = name.lower()
        if low in extra:
            out.append(f"parameter {name!r} stripped (POLITE_STRIP_PARAMS)")
        elif low in SESSION_PARAMS:
            out.append(f"session parameter {name!r} stripped")
        elif low in TRACKING_PARAMS or low.startswith(TRACKING_PREFIXES):
            out.append(f"tracking parameter {name!r} stripped")
        else:
            out.append(f"parameter {name!r} removed")
    kept = [k for k in before if k in after]
    if kept != sorted(kept) and after == sorted(after):
        out.append("query parameters sorted")
    if not out and canon != url.strip():
        out.append("escapes and spelling normalised (w3lib canonical form)")
    return canon, out


# --- robots.txt -------------------------------------------------------------------------

def robots_decision(body: bytes, token: str, url: str, max_bytes: int) -> dict[str, Any]:
    """The robots.txt decision on ``url``: group, deciding line, crawl-delay, signals.

    Built on :class:`RobotsRules`, which decides and keeps the line number of each rule
    of the group it chose: each is tried on its own; the longest match decides, Allow
    winning a tie (RFC 9309 2.2.2).
    """
    rules = RobotsRules.parse(body, token, max_bytes)
    allowed = rules.allowed(url)
    group = {"token": f"the group for {token}", "*": "the * group",
             None: f"no group names {token} or *: no restrictions"}[rules.matched]
    deciding: dict[str, Any] | None = None
    if rules.matched is not None:
        best: tuple[int, int, int, str, str] | None = None
        for n, kind, value in rules.rule_lines:
            probe = RobotsRules(token, "*", [("disallow", value)], None, [], [])
            if probe.allowed(url):
                continue  # the pattern does not match this URL
            key = (len(value), 1 if kind == "allow" else 0, -n, kind, value)
            if best is None or key[:2] > best[:2]:
                best = key
        if best is not None:
            n, kind, value = -best[2], best[3], best[4]
            deciding = {"line": n, "text": f"{kind.capitalize()}: {value}", "rule": kind}
    if deciding is None:
        reason = "no rule of the group matches this path: allowed" if rules.matched \
            else "allowed"
    else:
        reason = (f"line {deciding['line']} ({deciding['text']}) is the longest match"
                  + ("" if (deciding["rule"] == "allow") == allowed else
                     " (Protego's precedence decided otherwise)"))
    signals = rules.signals(url)
    return {"allowed": allowed, "group": group, "matched": rules.matched, "deciding": deciding,
            "why": reason, "crawl_delay": rules.crawl_delay, "sitemaps": list(rules.sitemaps),
            "signals": _signals(signals), "truncated": rules.truncated}


def _signals(signals: ContentSignals) -> dict[str, Any]:
    return {k: v for k, v in signals.as_dict().items() if v is not None}


def robots_from_store(reader: StateReader, origin: str, url: str,
                      settings: BaseSettings, now: float) -> dict[str, Any]:
    token = settings.get("POLITE_BOT_NAME")
    ttl = settings.getfloat("POLITE_ROBOTS_TTL")
    stored = reader.robots(origin)
    if stored is None:
        return {"source": "none", "allowed": None,
                "why": "no robots.txt read yet: the origin's first request will be its "
                       "robots.txt, and nothing else is fetched before it is read"}
    kind, status, body, fetched_at = stored.kind, stored.status, stored.body, stored.fetched_at
    failures, outage_since = stored.failures, stored.outage_since
    retry_at, last_error = stored.retry_at, stored.last_error
    out: dict[str, Any] = {"status": status, "fetched_at": fetched_at, "failures": failures,
                           "retry_at": retry_at, "last_error": last_error}
    fresh = fetched_at is not None and now < fetched_at + ttl
    if kind is None:
        out.update(source="unreachable", allowed=False,
                   why=f"robots.txt unreachable since {when(outage_since)} ({last_error}) and "
                       f"no copy was ever read: nothing is fetched from the origin; next try "
                       f"{when(retry_at)}")
        return out
    if failures:
        out["source"] = "cached copy (outage)"
        out["note"] = (f"robots.txt unreachable since {when(outage_since)} ({last_error}); the "
                       f"copy of {when(fetched_at)} stays in use; next try {when(retry_at)}")
    else:
        out["source"] = "cached copy" if fresh else "stale copy (fetched again first)"
        out["fresh_until"] = (fetched_at or 0) + ttl
    if kind == "allow_all":
        out.update(allowed=True, why=f"robots.txt answered {status}: no restrictions "
                                     "(RFC 9309 2.3.1.3)")
        return out
    out.update(robots_decision(bytes(body or b""), token, url,
                               settings.getint("POLITE_ROBOTS_MAX_BYTES")))
    return out


# --- origin state --------------------------------------------------------------------------

def _is_test(origin: str, settings: BaseSettings) -> bool:
    return is_test_host(urlsplit(origin).hostname or "",
                        parse_networks(settings.getlist("POLITE_TEST_NETWORKS")))


def origin_state(reader: StateReader, origin: str, settings: BaseSettings,
                 now: float) -> dict[str, Any]:
    from polite_crawler.frontier.scheduler import rest_params

    row = reader.origin_state(origin)
    params = rest_params(settings)
    if not _is_test(origin, settings):
        params = floor_params(params)[0]
    if row is None:
        return {"known": False, "rest_page": params.rest_page,
                "why": f"never fetched: its first exchange may start at once, then it rests at "
                       f"least {params.rest_page:g} s between requests"}
    state, owner, until = row
    f = state.failure
    rest = compute_rest(state, params, end=state.last_end or now, api=False,
                        rng=random.Random(0))
    terms = {"base rest (POLITE_REST_PAGE)": rest.base,
             f"{params.duration_factor:g} x the last answer's {state.last_duration:.3f} s":
                 rest.duration,
             "robots.txt Crawl-delay": rest.crawl_delay,
             "the server's wait (Retry-After or backoff)": rest.wait}
    binding = max(terms, key=lambda k: terms[k])
    eligible = state.eligible_at()
    limit = settings.getint("POLITE_HOST_BUDGET")
    used = state.budget_used if state.budget_day == utc_day(now) else 0
    breaker = settings.getint("POLITE_BREAKER_FAILURES")
    out: dict[str, Any] = {
        "known": True,
        "next_allowed": eligible,
        "may_start_now": eligible <= now,
        "last_end": state.last_end,
        "last_rest": state.last_rest,
        "rest_terms": terms,
        "binding_term": binding,
        "latency_factor": state.latency_factor,
        "rate_factor": f.rate_factor,
        "backoff": {"streak": f.backoff_streak, "last_wait": f.last_wait,
                    "wait_until": f.wait_until},
        "breaker": {"consecutive_failures": f.consecutive_failures, "limit": breaker},
        "stopped": f.stopped,
        "stopped_why": describe_stop(f.stopped) if f.stopped else None,
        "budget": {"used_today": used, "limit": limit},
        "lease": {"owner": owner, "until": until} if owner else None,
    }
    return out


# --- host, server, owner: the bounds above the origin ---------------------------------------

# What each bound of policy.bounds.next_request means, in the operator's words.
_BOUNDS = {
    NONE: "nothing the stored state holds keeps it back: it may go now",
    ORIGIN_REST: "the origin's own rest (the base rest, 5x its last answer, its Crawl-delay)",
    ORIGIN_WAIT: "a Retry-After or backoff the site asked for",
    HOST_BUSY: "another request of the host name is out, or another job crawls the host "
               "now (it holds the host's lease while it has work for it; any scheme or port)",
    HOST_REST: "the host's rest after its last request (on any of its origins)",
    ADDRESS_UNKNOWN: "the name's address is being looked up",
    SERVER_FULL: "the server's round is full (its concurrency limit)",
    SERVER_REST: "the server's rest after its last round",
    SERVER_WAIT: "a failure of the machine (503, timeout, refused) holds every site on it",
}

# A server's bound lives in a running crawl's memory only: what explain says instead.
_SERVER_MEMORY = ("its bound (a concurrency that starts at 1 and grows only while its "
                  "latency stays flat, the rest after each round, a wait after a 503, a "
                  "timeout or a refused connection) lives in a running crawl's memory "
                  "only, so explain does not see it")


def _lookup(settings: BaseSettings) -> tuple[Any, str]:
    """The crawl's name lookup (POLITE_DNS_LOOKUP, else the system's) and its name."""
    from scrapy.utils.misc import load_object

    from polite_crawler.resolver import system_lookup

    given = settings.get("POLITE_DNS_LOOKUP")
    if not given:
        return system_lookup, "the system's resolver (getaddrinfo)"
    found = load_object(given) if isinstance(given, str) else given
    return found, f"POLITE_DNS_LOOKUP ({given if isinstance(given, str) else 'injected'})"


def server_of(settings: BaseSettings, host: str) -> dict[str, Any]:
    """The server ``host`` is: the address its name connects to, as the crawl's resolver
    answers it (:class:`polite_crawler.resolver.PolicyResolver` with the crawl's lookup
    and POLITE_ALLOW_NETWORKS: the first address the policy passes, else the first of
    the answer); a name that does not resolve is a server of its own (``name:<host>``)."""
    import ipaddress

    from polite_crawler.policy.addresses import AddressPolicy
    from polite_crawler.resolver import PolicyResolver

    try:
        literal = str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        literal = None
    if literal is not None:
        return {"address": literal, "resolved": True, "how": "an IP literal: its own address",
                "state": _SERVER_MEMORY}
    lookup, how = _lookup(settings)
    try:
        answer = [str(a) for a in lookup(host, 0)]
    except (OSError, UnicodeError) as exc:
        raise CommandError(f"looking {host} up failed: {exc}") from exc
    if not answer:
        return {"address": f"name:{host}", "resolved": False, "how": how,
                "state": f"{host} does not resolve: a server of its own, and its requests "
                         "fail at the connection"}
    resolver = PolicyResolver(None, AddressPolicy(
        allow_networks=settings.getlist("POLITE_ALLOW_NETWORKS")), lookup, cache_size=0)
    allowed = resolver.filter(host, answer, 0)
    return {"address": (allowed or answer)[0], "resolved": True, "how": how,
            "answer": answer, "state": _SERVER_MEMORY}


def bounds_state(settings: BaseSettings, origin: str, reader: StateReader,
                 now: float) -> dict[str, Any]:
    """The URL's host, server and owner, and which bound decides its next request
    (:func:`polite_crawler.policy.bounds.next_request`) from what the reader finds
    stored: the origin's row, its host's (:meth:`StateReader.host_state`: its rest's end;
    the lease of the job crawling it, held while the job has work for the host, or on a
    cluster the worker that holds its owner's group) and its owner's daily budget
    (:meth:`StateReader.owner_state`). The server's bound is a running crawl's memory
    only: the decision leaves it out and says so."""
    from polite_crawler.backend import backend_of

    host = host_of_origin(origin)
    owner = owner_of(host)
    row = reader.origin_state(origin)
    ostate = row[0] if row is not None else OriginState(origin)
    origin_out = row is not None and row[1] is not None and (row[2] or 0.0) > now
    found = reader.host_state(host)
    host_next, host_busy = 0.0, origin_out
    host_out: dict[str, Any] = {"name": host, "known": found is not None}
    cluster = backend_of(settings).cluster
    if found is not None and not cluster:
        host_next = found.next_allowed
        leased = found.holder is not None and (found.lease_until or 0.0) > now
        host_busy = host_busy or leased
        host_out.update(next_allowed=host_next, busy=host_busy,
                        lease={"owner": found.holder, "until": found.lease_until}
                        if leased else None)
    elif found is not None:
        host_next = found.next_allowed
        host_out.update(next_allowed=host_next, busy=None, worker=found.holder,
                        origins=list(found.origins), waiting=list(found.waiting))
    server = server_of(settings, host)
    places = reader.server_state(server["address"]) if server["resolved"] else None
    bound = None
    if places is not None:
        # A cluster's workers share the address's places: all held is a full round.
        bound = ServerState(places.address, limit=places.limit,
                            next_allowed=places.rest_until, wait_until=places.wait_until,
                            round_n=places.held)
        server["shared"] = {"limit": places.limit, "places": dict(places.places),
                            "waiting": list(places.waiting),
                            "rest_until": places.rest_until, "wait_until": places.wait_until}
        server["state"] = (
            f"its limit, {places.limit} at once, is shared by the cluster's workers "
            f"(polite:srv): {places.held} held"
            + "".join(f", {n} by {w}" for w, n in places.places)
            + (f"; waiting: {', '.join(places.waiting)}" if places.waiting else "")
            + "; each worker's rounds and their rests are in its memory")
    decided = next_request(origin, now, origin_state=ostate, host_next=host_next,
                           host_busy=host_busy, server=bound)
    limit = settings.getint("POLITE_HOST_BUDGET")
    cap = settings.getint("POLITE_OWNER_CONCURRENCY")
    counts = reader.owner_state(owner)
    used = counts.used_on(utc_day(now)) if counts is not None else 0
    spent = limit > 0 and used >= limit
    owner_out = {"domain": owner, "budget": {"used_today": used, "limit": limit},
                 "budget_spent": spent, "concurrency": cap,
                 "worker": counts.holder if counts is not None else None,
                 # A refusal from one of its hosts stops them all for that run or crawl,
                 # until it ends or ``scrapy unblock`` lifts it (when, on one machine).
                 "stops": dict(counts.stops) if counts is not None else {},
                 "stop_lifted": counts.lifted if counts is not None else None}
    return {
        "host": host_out,
        "server": server,
        "owner": owner_out,
        "next_request": {"bound": decided.bound, "at": decided.at,
                         "may_start_now": decided.bound == NONE and not spent,
                         "why": _BOUNDS[decided.bound],
                         "server_bound_seen": bound is not None},
    }


# --- the page store ------------------------------------------------------------------------

def store_record(reader: StateReader, settings: BaseSettings, canon: str,
                 now: float) -> dict[str, Any]:
    """What the page store holds of ``canon`` and what the crawl does with it next, as
    the conditional-request middleware decides it (with the crawl's POLITE_RECRAWL):
    the page (or the page it redirected to), else the URL's own fetch state
    (``url_fetches``: a sitemap, a feed, an exact duplicate, a rel=canonical alias)."""
    from polite_crawler.middlewares.conditional import FOLLOW

    where = reader.pages_where()
    if where is None:
        return {"stored": False, "why": "no page store in this state directory"}
    rec: Any = reader.page(canon, follow=FOLLOW)
    fetch = reader.fetch(canon) if rec is None else None
    alias = reader.alias_of(canon)
    if rec is None and fetch is None:
        return {"stored": False, "where": where,
                "alias_of": {"page": alias[0], "reason": alias[1]} if alias else None,
                "why": "never stored: the next visit is an unconditional request"}
    if rec is None:
        rec = fetch
    known = Known(fetched_at=rec.fetched_at, due_at=rec.due_at, fresh_until=rec.fresh_until,
                  has_copy=rec.has_copy, has_validators=rec.has_validators,
                  no_store=rec.no_store)
    force = str(settings.get("POLITE_RECRAWL") or "").lower() == "all"
    decision = decide(known, now, force=force)
    lo, hi = settings.getfloat("POLITE_REVISIT_MIN"), settings.getfloat("POLITE_REVISIT_MAX")
    rule = (f"due {rec.revisit_interval / 3600:.1f} h after the last visit: the interval starts "
            f"at POLITE_REVISIT_DEFAULT, grows x{GROW:g} after a visit that found no change, "
            f"shrinks x{SHRINK:g} after a change, within [{lo / 3600:g} h, {hi / 3600:g} h] "
            f"({rec.visits} visits, {rec.changes} changes so far)")
    if rec.fresh_until is not None and rec.fresh_until > rec.due_at:
        rule += f"; Cache-Control/Expires keep it fresh until {when(rec.fresh_until)}"
    words = {Decision.FETCH: "fetched again without validators",
             Decision.CONDITIONAL: "revalidated now (If-None-Match / If-Modified-Since)",
             Decision.FRESH: "not requested: the site declared it fresh",
             Decision.NOT_DUE: "not requested before its revisit date",
             Decision.LASTMOD: "not requested: the sitemap says it has not changed"}
    page = fetch is None
    return {
        "stored": True, "where": where, "kind": fetch.kind if fetch is not None else "page",
        "canonical_url": rec.canonical_url,
        "alias_of": {"page": alias[0], "reason": alias[1]} if alias else None,
        "fetched_at": rec.fetched_at, "status": rec.status, "etag": rec.etag,
        "last_modified": rec.last_modified, "fresh_until": rec.fresh_until,
        "due_at": rec.due_at, "revisit_interval": rec.revisit_interval,
        "visits": rec.visits, "changes": rec.changes, "no_store": rec.no_store,
        "near_duplicate_of": rec.near_duplicate_of if page else None,
        "noindex": rec.noindex if page else None,
        "ai_input": rec.ai_input if page else None, "signals": rec.signals if page else None,
        "next_visit": {"decision": decision.value, "what": words[decision], "rule": rule},
        "recrawl_all": force,
    }


# --- the command ----------------------------------------------------------------------------

class Command(ScrapyCommand):
    requires_project = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "URL | --robots FILE URL | --status CODE [--header 'Name: value']..."

    def short_desc(self) -> str:
        return "Explain what the crawler would do with a URL or an answer, and why"

    def long_desc(self) -> str:
        return (
            "scrapy explain URL: the canonical form and the rules that changed it, the "
            "robots.txt decision (group, deciding line), page rules and content signals, "
            "the trap rule that would drop it, its origin's state (next allowed time, the "
            "rest and its binding term, backoff, breaker, stop, budget), its host, server "
            "(the address its name resolves to) and owner (registrable domain) and the bound "
            "that decides its next request, and what the store "
            "holds (last fetch, validators, next revisit and why). --robots FILE URL tests a "
            "robots.txt offline; --status CODE --header 'Retry-After: 120' prints the verdict "
            "on such an answer and the wait it sets.")

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        add_common(parser)
        parser.add_argument("--robots", metavar="FILE",
                            help="test this robots.txt body for URL (offline)")
        parser.add_argument("--status", type=int, metavar="CODE",
                            help="explain an answer with this status instead of a URL")
        parser.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'",
                            help="a header of that answer (repeatable)")
        parser.add_argument("--body", metavar="FILE",
                            help="the answer's body (challenge pages are recognised by it)")
        parser.add_argument("--for-robots-txt", action="store_true",
                            help="the answer is to a robots.txt request")
        parser.add_argument("--depth", type=int, default=0,
                            help="links from a start page, for the trap rules (0)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        settings = with_defaults(self.settings)
        try:
            if opts.status is not None:
                if args:
                    raise CommandError("--status explains an answer, not a URL")
                data = explain_status(settings, opts.status, opts.header, opts.body,
                                      opts.for_robots_txt)
                emit(opts, data, status_text(data))
                return
            if len(args) != 1:
                raise CommandError("give one URL, e.g. scrapy explain https://example.org/a")
            url = args[0]
            if opts.robots:
                data = explain_offline(settings, Path(opts.robots), url)
                emit(opts, data, offline_text(data))
                return
            data = explain_url(settings, url, opts)
            emit(opts, data, url_text(data))
        except CommandError as exc:
            fail("explain", str(exc))


def _canonical(url: str, settings: BaseSettings) -> tuple[str, list[str]]:
    try:
        return canonical_changes(url, settings.getlist("POLITE_STRIP_PARAMS"))
    except URLError as exc:
        raise CommandError(str(exc)) from exc


def explain_offline(settings: BaseSettings, path: Path, url: str) -> dict[str, Any]:
    if not path.is_file():
        raise CommandError(f"--robots {path}: no such file")
    canon, _ = _canonical(url, settings)
    token = settings.get("POLITE_BOT_NAME")
    data = robots_decision(path.read_bytes(), token, canon,
                           settings.getint("POLITE_ROBOTS_MAX_BYTES"))
    return {"url": url, "canonical": canon, "token": token, "robots_file": str(path), **data}


def explain_url(settings: BaseSettings, url: str, opts: argparse.Namespace) -> dict[str, Any]:
    canon, changes = _canonical(url, settings)
    origin = origin_of(canon)
    now = time.time()
    state = command_state_dir(settings, opts.state_dir)
    from polite_crawler.middlewares.traps import trap_limits

    limits: TrapLimits = trap_limits(settings)
    trap = url_trap(canon, opts.depth, limits)
    block = origin_block(settings, state, origin, now)
    with open_reader(settings, state) as reader:
        entry = reader.optout(origin)
        optout = {"reason": entry.reason, "since": entry.added_at} if entry else None
        robots = robots_from_store(reader, origin, canon, settings, now)
        origin_info = origin_state(reader, origin, settings, now)
        bounds = bounds_state(settings, origin, reader, now)
        stored = store_record(reader, settings, canon, now)
    page: dict[str, Any] = {"robots_signals": robots.get("signals", {})}
    if stored.get("stored"):
        page.update(noindex=stored["noindex"], ai_input=stored["ai_input"],
                    page_signals={k: v for k, v in (stored["signals"] or {}).items()
                                  if v is not None})
    return {"url": url, "canonical": canon, "changes": changes, "origin": origin,
            "state_dir": str(state) if state else None, "optout": optout, "block": block,
            "robots": robots,
            "page": page,
            "trap": {"rule": trap, "depth": opts.depth, "limits": vars(limits)},
            "origin_state": origin_info, **bounds, "store": stored, "now": now}


def origin_block(settings: BaseSettings, state: Path | None, origin: str,
                 now: float) -> dict[str, Any] | None:
    """The origin's remembered refusal (``middlewares.blocks``), on or run out; None."""
    from polite_crawler.backend import backend_of
    from polite_crawler.policy.blocks import describe
    from polite_crawler.store.paths import ORIGINS_DB

    if state is not None and not (state / ORIGINS_DB).is_file():
        return None
    store = backend_of(settings).block_store(settings, state, readonly=True)
    try:
        found = store.load(origin)
    except store.errors as exc:
        raise CommandError(f"the block list could not be read: {exc}") from exc
    finally:
        store.close()
    if found is None:
        return None
    return {"reason": found.reason, "blocked_at": found.blocked_at, "until": found.until,
            "count": found.count, "first_at": found.first_at, "url": found.url,
            "active": found.active(now), "text": describe(found, now)}


def explain_status(settings: BaseSettings, status: int, headers: list[str], body: str | None,
                   robots_txt: bool) -> dict[str, Any]:
    if not 100 <= status <= 599:
        raise CommandError(f"--status {status}: not an HTTP status (100-599)")
    parsed: dict[str, str] = {}
    for h in headers:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            raise CommandError(f"--header {h!r}: write it as 'Name: value'")
        key = name.strip().lower()
        parsed[key] = f"{parsed[key]}, {value.strip()}" if key in parsed else value.strip()
    head = b""
    if body:
        if not Path(body).is_file():
            raise CommandError(f"--body {body}: no such file")
        head = Path(body).read_bytes()  # the policy reads the head challenges are sought in
    now = time.time()
    params = VerdictParams.from_settings(settings)
    verdict = classify_response(status, parsed, head, now, params=params)
    out: dict[str, Any] = {"status": status, "headers": parsed}
    if robots_txt:
        verdict = for_robots_txt(verdict, status)
        outcome = fetch_outcome(status, has_location="location" in parsed)
        if verdict.action is Action.OK:
            out["means_for_robots"] = "the origin is not stopped: a 4xx robots.txt never " \
                "counts against it"
        out["robots_txt"] = {
            "outcome": outcome.value,
            "means": {"parse": "the body is the robots.txt",
                      "allow_all": "no robots.txt: no restrictions (RFC 9309 2.3.1.3)",
                      "unreachable": "nothing is fetched from the origin until it can be read; "
                                     "the last good copy stays in use",
                      "redirect": "followed (5 hops at most, then 'unavailable')"}[outcome.value]}
    failure = apply_verdict(FailureState(), verdict, now, params, random.Random(0))
    wait: dict[str, Any] | None = None
    if verdict.action is Action.RETRY_LATER:
        if verdict.wait is not None:
            wait = {"seconds": failure.last_wait, "source": "Retry-After, never shortened"}
        else:
            low = params.backoff_base
            wait = {"seconds_range": [low, min(2 * low, params.backoff_max)],
                    "source": f"backoff: uniform in [{low:g}, {2 * low:g}) s, doubling with each "
                              f"retry-later answer in a row, at most {params.backoff_max:g} s"}
    stop = failure.stopped
    out.update({
        "verdict": verdict.label, "action": verdict.action.value,
        "means": out.pop("means_for_robots", None) or _ACTIONS[verdict.action], "wait": wait,
        "counts_toward_breaker": verdict.failure,
        "breaker": f"{params.breaker_failures} such answers in a row stop the origin",
        "rate_limited": verdict.rate_limited,
        "rate_note": (f"{params.rate_limit_hits} of these in a run halve the origin's pace"
                      if verdict.rate_limited else None),
        "retries": params.retry_times if verdict.action is Action.RETRY_LATER else 0,
        "stops_origin": stop, "stop_why": describe_stop(stop) if stop else None,
    })
    return out


# --- text --------------------------------------------------------------------------------

def _robots_lines(r: dict[str, Any]) -> list[str]:
    lines = []
    verdict = {True: "allowed", False: "disallowed", None: "not known yet"}[r.get("allowed")]
    lines.append(f"  {verdict}: {r['why']}")
    if r.get("group"):
        lines.append(f"  group: {r['group']}")
    if r.get("note"):
        lines.append(f"  {r['note']}")
    if r.get("source") and r["source"] != "none":
        lines.append(f"  source: {r['source']} (status {r.get('status')}, fetched "
                     f"{when(r.get('fetched_at'))})")
    if r.get("crawl_delay") is not None:
        lines.append(f"  Crawl-delay: {r['crawl_delay']:g} s")
    if r.get("signals"):
        lines.append(f"  content signals: {r['signals']}")
    if r.get("truncated"):
        lines.append("  the file was longer than POLITE_ROBOTS_MAX_BYTES: only its start is read")
    return lines


def offline_text(d: dict[str, Any]) -> str:
    lines = [f"{d['canonical']} against {d['robots_file']} (token {d['token']})"]
    lines += _robots_lines(d)
    if d["sitemaps"]:
        lines.append(f"  sitemaps: {', '.join(d['sitemaps'])}")
    return "\n".join(lines)


def status_text(d: dict[str, Any]) -> str:
    head = ", ".join(f"{k}: {v}" for k, v in d["headers"].items())
    lines = [f"{d['status']}" + (f" ({head})" if head else "") + f" -> {d['verdict']}",
             f"  {d['means']}"]
    if "robots_txt" in d:
        lines.append(f"  as a robots.txt answer: {d['robots_txt']['means']}")
    w = d["wait"]
    if w and "seconds" in w:
        lines.append(f"  wait: {w['seconds']:g} s before the origin's next request ({w['source']})")
    elif w:
        lo, hi = w["seconds_range"]
        lines.append(f"  wait: {lo:g} to {hi:g} s ({w['source']})")
    if d["action"] == "retry_later":
        lines.append(f"  retried up to {d['retries']} times (POLITE_RETRY_TIMES)")
    if d["counts_toward_breaker"]:
        lines.append(f"  counts toward the circuit breaker: {d['breaker']}")
    if d["rate_note"]:
        lines.append(f"  {d['rate_note']}")
    if d["stops_origin"]:
        lines.append(f"  stops the origin: {d['stop_why']}")
    return "\n".join(lines)


def url_text(d: dict[str, Any]) -> str:
    lines = [f"{d['url']}", f"canonical: {d['canonical']}"]
    lines += [f"  {c}" for c in d["changes"]] or ["  unchanged"]
    if d["optout"]:
        lines.append(f"OPTED OUT since {when(d['optout']['since'])}"
                     + (f" ({d['optout']['reason']})" if d["optout"]["reason"] else "")
                     + ": nothing of this origin is fetched, not even robots.txt")
    block = d.get("block")
    if block and block["active"]:
        lines.append(f"BLOCKED until {when(block['until'])}: {block['text']}; last refused "
                     f"{when(block['blocked_at'])}"
                     + (f" at {block['url']}" if block["url"] else "")
                     + f"; nothing of it is fetched, not even robots.txt "
                     f"(scrapy unblock {d['origin']} lifts it)")
    elif block:
        lines.append(f"refused the crawler {block['count']} time(s) in a row, last "
                     f"{when(block['blocked_at'])} ({block['reason']}); the block ran out: "
                     "it is asked again, and a new refusal blocks it longer")
    lines.append(f"robots.txt ({d['origin']}/robots.txt):")
    lines += _robots_lines(d["robots"])
    page = d["page"]
    lines.append("page rules and content signals:")
    if "noindex" in page:
        lines.append(f"  noindex: {page['noindex']}, AI input allowed: {page['ai_input']}"
                     + (f", page signals: {page['page_signals']}" if page["page_signals"] else ""))
    else:
        lines.append("  none known (the page was not read yet)")
    trap = d["trap"]
    lines.append("trap rules: " + (f"dropped by {trap['rule']} at depth {trap['depth']}"
                                   if trap["rule"] else
                                   f"none would drop it at depth {trap['depth']}"))
    o = d["origin_state"]
    lines.append(f"origin {d['origin']}:")
    if not o["known"]:
        lines.append(f"  {o['why']}")
    else:
        start = "now" if o["may_start_now"] else when(o["next_allowed"])
        lines.append(f"  next request may start: {start}")
        lines.append(f"  last rest {o['last_rest']:.2f} s (as stored); with these settings the "
                     f"binding term is: {o['binding_term']}")
        for term, value in o["rest_terms"].items():
            lines.append(f"    {term}: {value:.2f} s")
        lines.append("    (numbers from the settings given to explain: pass the crawl's own "
                     "-s POLITE_REST_* to see its rest)")
        if o["latency_factor"] != 1 or o["rate_factor"] != 1:
            lines.append(f"    x {o['latency_factor']:g} (slower than at the start) "
                         f"x {o['rate_factor']:g} (after 429s)")
        b = o["backoff"]
        if b["streak"]:
            lines.append(f"  backoff: {b['streak']} retry-later answers in a row, last wait "
                         f"{b['last_wait']:.1f} s, until {when(b['wait_until'])}")
        br = o["breaker"]
        lines.append(f"  breaker: {br['consecutive_failures']} of {br['limit']} failures in a row")
        if o["stopped"]:
            lines.append(f"  stopped for its last run: {o['stopped_why']}")
        bu = o["budget"]
        lines.append(f"  budget: {bu['used_today']} of {bu['limit']} pages today (UTC)")
        if o["lease"]:
            lines.append(f"  in flight: leased by {o['lease']['owner']} until "
                         f"{when(o['lease']['until'])}")
    lines += bounds_lines(d)
    s = d["store"]
    lines.append("store:")
    if not s["stored"]:
        lines.append(f"  {s['why']}")
    else:
        if s["kind"] != "page":
            lines.append(f"  not a page of its own: its fetch state as a {s['kind']} "
                         f"(url_fetches)")
        if s["alias_of"]:
            lines.append(f"  an alias ({s['alias_of']['reason']}) of {s['alias_of']['page']}")
        lines.append(f"  last fetch {when(s['fetched_at'])}, status {s['status']}")
        lines.append(f"  validators: ETag {s['etag'] or '-'}, Last-Modified "
                     f"{s['last_modified'] or '-'}")
        if s["near_duplicate_of"]:
            lines.append(f"  near duplicate of {s['near_duplicate_of']}")
        lines.append(f"  next visit {when(s['due_at'])}: {s['next_visit']['what']}"
                     + (" (POLITE_RECRAWL=all: due or not)" if s["recrawl_all"] else ""))
        lines.append(f"    {s['next_visit']['rule']}")
    return "\n".join(lines)


def bounds_lines(d: dict[str, Any]) -> list[str]:
    """The host, server and owner of the URL, and the bound that decides its next request."""
    h, sv, ow, nr = d["host"], d["server"], d["owner"], d["next_request"]
    lines = [f"host {h['name']} (its name, across schemes and ports: one request at a time "
             "and the whole rest):"]
    if not h["known"]:
        lines.append("  no stored state yet")
    elif "lease" in h:
        lines.append(f"  rest ends {when(h['next_allowed'])}"
                     + (f"; leased by {h['lease']['owner']} until "
                        f"{when(h['lease']['until'])}: the job crawling it now (its "
                        "request out and its rest are in that job's memory; it gives the "
                        "host back when it has no work for it)" if h["lease"] else ""))
    else:
        lines.append(f"  rest ends {when(h['next_allowed'])} as its last worker left it"
                     + (f"; held by worker {h['worker']} (its request in flight and its "
                        "rest now are in that worker's memory)" if h["worker"] else ""))
    lines.append(f"server {sv['address']} ({h['name']} resolves to it through {sv['how']}):"
                 if sv["resolved"] and not sv["how"].startswith("an IP") else
                 f"server {sv['address']} ({sv['how']}):" if sv["resolved"] else
                 f"server {sv['address']} (through {sv['how']}):")
    lines.append(f"  {sv['state']}")
    bu = ow["budget"]
    lines.append(f"owner {ow['domain']} (registrable domain, shared by its hosts):")
    lines.append(f"  budget: {bu['used_today']} of {bu['limit']} pages today (UTC) across "
                 "its hosts (POLITE_HOST_BUDGET)"
                 + ("; spent: nothing more of its hosts today" if ow["budget_spent"] else ""))
    lines.append(f"  at most {ow['concurrency']} requests at once across its hosts "
                 "(POLITE_OWNER_CONCURRENCY)"
                 + (f"; its hosts are held by worker {ow['worker']}" if ow["worker"] else ""))
    for run, stop in sorted(ow["stops"].items()):
        lines.append(f"  stopped in {run}: {stop} (a refusal from one of its hosts stops "
                     "them all for the run; scrapy unblock lifts it)")
    if ow["stop_lifted"] is not None:
        lines.append(f"  its stop last lifted {when(ow['stop_lifted'])} (scrapy unblock): "
                     "a stop from before it ends, a refusal since stops it again")
    start = "now" if nr["at"] is None or nr["bound"] == NONE else when(nr["at"])
    lines.append(f"next request: {nr['bound']}: {nr['why']}"
                 + ("" if nr["bound"] in (NONE, HOST_BUSY) else f"; may start {start}"))
    if not nr["server_bound_seen"]:
        lines.append("  (the server's bound is not stored: a running crawl may hold it longer)")
    return lines
