"""``scrapy explain``: a URL, a robots.txt offline, an answer's verdict; the host, server
and owner a URL belongs to and the bound that decides its next request."""

from __future__ import annotations

import subprocess
import time
from typing import Any

from demo.web.server import Site, page
from polite_crawler.commands.explain import canonical_changes, robots_decision
from tests.commands_util import ROOT, crawl_cmd, env, scrapy, scrapy_json
from tests.redis_server import (  # noqa: F401  (fixtures)
    redis_server_session,
    redis_url,
)
from tests.robots_numbers import ROBOTS_NUMBERS
from tests.test_commands_forget import A, make_state

ROBOTS = b"""# a comment
User-agent: Googlebot
Disallow: /

User-agent: PoliteCrawler
User-agent: OtherBot
Disallow: /private
Allow: /private/public
Allow: /tie
Disallow: /tie
Crawl-delay: 2

User-agent: *
Disallow: /
Sitemap: https://e.org/sitemap.xml
"""


def test_robots_decision_names_the_group_and_the_line():
    d = robots_decision(ROBOTS, "PoliteCrawler", "https://e.org/private/x", 512 * 1024)
    assert d["allowed"] is False
    assert d["group"] == "the group for PoliteCrawler"
    assert d["deciding"] == {"line": 7, "text": "Disallow: /private", "rule": "disallow"}
    assert d["crawl_delay"] == 2.0
    d = robots_decision(ROBOTS, "PoliteCrawler", "https://e.org/private/public/a", 512 * 1024)
    assert d["allowed"] is True and d["deciding"]["line"] == 8
    d = robots_decision(ROBOTS, "PoliteCrawler", "https://e.org/tie", 512 * 1024)
    assert d["allowed"] is True and d["deciding"]["line"] == 9  # Allow wins a tie
    d = robots_decision(ROBOTS, "PoliteCrawler", "https://e.org/other", 512 * 1024)
    assert d["allowed"] is True and d["deciding"] is None
    d = robots_decision(ROBOTS, "SomeBot", "https://e.org/other", 512 * 1024)
    assert d["group"] == "the * group" and d["deciding"]["line"] == 14
    d = robots_decision(b"User-agent: Googlebot\nDisallow: /\n", "PoliteCrawler",
                        "https://e.org/", 512 * 1024)
    assert d["allowed"] is True and d["matched"] is None


def test_robots_decision_quotes_the_line_of_a_group_that_lists_us():
    # "User-agent: OtherBot, PoliteCrawler" is our group; the deciding line is
    # found among its rules whatever the item's place in the list.
    body = (b"User-agent: *\nAllow: /\n\nUser-agent: OtherBot, PoliteCrawler/1.0\n"
            b"Crawl-delay: 3\nDisallow: /\n")
    d = robots_decision(body, "PoliteCrawler", "https://e.org/page", 512 * 1024)
    assert d["allowed"] is False and d["group"] == "the group for PoliteCrawler"
    assert d["deciding"] == {"line": 6, "text": "Disallow: /", "rule": "disallow"}
    assert d["crawl_delay"] == 3.0
    d = robots_decision(body, "SomeBot", "https://e.org/page", 512 * 1024)
    assert d["allowed"] is True and d["deciding"]["line"] == 2


def test_explain_robots_offline_with_an_agent_list(tmp_path):
    robots = tmp_path / "robots.txt"
    robots.write_bytes(b"User-agent: *\nAllow: /\n\nUser-agent: PoliteCrawler, OtherBot\n"
                       b"Disallow: /\n")
    done = scrapy("explain", "--robots", str(robots), "https://e.org/page")
    assert done.returncode == 0, done.stderr
    assert "disallowed: line 5 (Disallow: /) is the longest match" in done.stdout
    assert "group: the group for PoliteCrawler" in done.stdout


def test_canonical_changes_name_the_rules():
    canon, changes = canonical_changes(
        "HTTP://Example.ORG:80/a/./b/../c?b=2&a=1&utm_source=x&PHPSESSID=3&ref=9#top", ["ref"])
    assert canon == "http://example.org/a/c?a=1&b=2"
    assert changes == [
        "scheme lower-cased", "host lower-cased", "default port :80 dropped",
        "fragment dropped (a browser never sends it)", "dot segments (./ ../) resolved",
        "tracking parameter 'utm_source' stripped", "session parameter 'PHPSESSID' stripped",
        "parameter 'ref' stripped (POLITE_STRIP_PARAMS)", "query parameters sorted"]
    assert canonical_changes("https://e.org/a", []) == ("https://e.org/a", [])


def test_explain_robots_offline(tmp_path):
    robots = tmp_path / "robots.txt"
    robots.write_bytes(ROBOTS)
    done = scrapy("explain", "--robots", str(robots), "https://e.org/private/x")
    assert done.returncode == 0, done.stderr
    assert "disallowed: line 7 (Disallow: /private) is the longest match" in done.stdout
    assert "group: the group for PoliteCrawler" in done.stdout


def test_explain_status_retry_after():
    d = scrapy_json("explain", "--status", "429", "--header", "Retry-After: 120")
    assert d["verdict"] == "retry_later:429"
    assert d["wait"]["seconds"] == 120.0
    assert d["rate_limited"] is True
    text = scrapy("explain", "--status", "429", "--header", "Retry-After: 120").stdout
    assert "wait: 120 s" in text


def test_explain_status_backoff_breaker_and_stop():
    d = scrapy_json("explain", "--status", "503")
    assert d["wait"]["seconds_range"] == [4.0, 8.0]
    assert d["counts_toward_breaker"] is True
    d = scrapy_json("explain", "--status", "403")
    assert d["action"] == "stop_origin" and "refuses" in d["stop_why"]
    d = scrapy_json("explain", "--status", "403", "--for-robots-txt")
    assert d["action"] == "ok" and d["robots_txt"]["outcome"] == "allow_all"


def test_explain_url_from_the_shared_state(tmp_path):
    state = make_state(tmp_path)
    d = scrapy_json("explain", f"{A}/private/doc?utm_source=news", "--state-dir", str(state))
    assert d["canonical"] == f"{A}/private/doc"
    assert d["changes"] == ["tracking parameter 'utm_source' stripped"]
    r = d["robots"]
    assert r["allowed"] is False and r["deciding"]["text"] == "Disallow: /private"
    assert r["source"] == "cached copy"
    assert d["origin_state"]["known"] is True
    assert d["origin_state"]["budget"]["limit"] == 10000
    assert d["store"]["stored"] is False
    stored = scrapy_json("explain", f"{A}/x", "--state-dir", str(state))["store"]
    assert stored["stored"] is True and stored["status"] == 200
    assert stored["next_visit"]["decision"] == "not_due"
    text = scrapy("explain", f"{A}/x", "--state-dir", str(state)).stdout
    assert "next visit" in text and "binding term" in text


def test_explain_knows_the_opt_out(tmp_path):
    state = make_state(tmp_path)
    scrapy_json("forget", A, "--state-dir", str(state))
    d = scrapy_json("explain", f"{A}/x", "--state-dir", str(state))
    assert d["optout"] is not None


def test_explain_bad_input(tmp_path):
    for args, words in [
        (["mailto:x@e.org", "--state-dir", str(tmp_path)], "not an http(s) URL"),
        (["https://e.org/", "--state-dir", str(tmp_path / "none")], "no state directory"),
        (["--robots", str(tmp_path / "none.txt"), "https://e.org/"], "no such file"),
        (["--status", "42"], "not an HTTP status"),
        (["--status", "200", "--header", "nocolon"], "Name: value"),
        ([], "give one URL"),
    ]:
        done = scrapy("explain", *args)
        assert done.returncode == 2, args
        assert len(done.stderr.splitlines()) == 1 and words in done.stderr, done.stderr


def test_explain_an_outage_a_stop_and_a_backoff(tmp_path):
    import time

    from polite_crawler.frontier.store import OriginStore
    from polite_crawler.policy.rest import OriginState
    from polite_crawler.policy.verdicts import FailureState
    from polite_crawler.store.robots import RobotsBook

    state = tmp_path / "state"
    state.mkdir()
    db = state / "polite-origins.sqlite3"
    down, stopped = "http://down.example", "http://stopped.example"
    book = RobotsBook(db, "PoliteCrawler", **ROBOTS_NUMBERS)
    book.record_failure(down, "status 503")
    book.record_answer(stopped, 404)
    book.close()
    now = time.time()
    store = OriginStore(db, "test:1:x", "run")
    store.save(OriginState(stopped, last_end=now, last_duration=0.5, last_rest=3.2,
                           failure=FailureState(stopped="403", consecutive_failures=2,
                                                backoff_streak=1, last_wait=6.0,
                                                wait_until=now + 6)), now)
    store.close()
    d = scrapy_json("explain", f"{down}/a", "--state-dir", str(state))
    assert d["robots"]["source"] == "unreachable" and d["robots"]["allowed"] is False
    assert "status 503" in d["robots"]["why"]
    d = scrapy_json("explain", f"{stopped}/a", "--state-dir", str(state))
    assert d["robots"]["allowed"] is True and "404" in d["robots"]["why"]
    o = d["origin_state"]
    assert o["stopped"] == "403" and "refuses" in o["stopped_why"]
    assert o["breaker"] == {"consecutive_failures": 2, "limit": 5}
    assert o["binding_term"] == "the server's wait (Retry-After or backoff)"
    assert o["may_start_now"] is False
    text = scrapy("explain", f"{stopped}/a", "--state-dir", str(state)).stdout
    assert "stopped for its last run: 403 Forbidden" in text
    assert "backoff: 1 retry-later answers in a row" in text


def test_explain_answers_as_the_crawl_with_its_settings_and_url_fetches(tmp_path):
    """The revisit decision is the conditional-request middleware's: the crawl's
    POLITE_RECRAWL, a sitemap's own fetch state (url_fetches), and an exact duplicate
    judged by its own state, not by the page it duplicates."""
    import time

    from polite_crawler.store.pages import FetchRecord
    from polite_crawler.store.sqlite import SQLitePageBackend

    state = make_state(tmp_path)
    backend = SQLitePageBackend(str(state / "polite.sqlite3"))
    now = time.time()
    backend.begin()
    backend.put_fetch(FetchRecord(url=f"{A}/sitemap.xml", kind="sitemap", status=200,
                                  final_url=f"{A}/sitemap.xml", fetched_at=now - 7200,
                                  etag='"s1"', body=b"<urlset/>", revisit_interval=3600.0,
                                  due_at=now - 3600))
    backend.commit()
    backend.close()
    stored = scrapy_json("explain", f"{A}/x", "--state-dir", str(state))["store"]
    assert stored["next_visit"]["decision"] == "not_due"
    # The crawl run with -s POLITE_RECRAWL=all requests it now (no validators stored:
    # unconditionally): so says its explain.
    stored = scrapy_json("explain", f"{A}/x", "--state-dir", str(state),
                         "-s", "POLITE_RECRAWL=all")["store"]
    assert stored["next_visit"]["decision"] == "fetch"
    text = scrapy("explain", f"{A}/x", "--state-dir", str(state),
                  "-s", "POLITE_RECRAWL=all").stdout
    assert "POLITE_RECRAWL=all" in text
    sitemap = scrapy_json("explain", f"{A}/sitemap.xml", "--state-dir", str(state))["store"]
    assert sitemap["stored"] is True and sitemap["kind"] == "sitemap"
    assert sitemap["etag"] == '"s1"' and sitemap["next_visit"]["decision"] == "conditional"
    text = scrapy("explain", f"{A}/sitemap.xml", "--state-dir", str(state)).stdout
    assert "its fetch state as a sitemap (url_fetches)" in text
    # /print/x is a duplicate of /x: the crawl does not revalidate it with /x's
    # validators (only redirect aliases are followed); with no state of its own, it is
    # fetched unconditionally.
    dup = scrapy_json("explain", f"{A}/print/x", "--state-dir", str(state))["store"]
    assert dup["stored"] is False
    assert dup["alias_of"] == {"page": f"{A}/x", "reason": "duplicate"}


# --- host, server, owner and the bound that decides ----------------------------------------

SHARED = "127.0.0.3"  # one machine serving every name below
NAMES = ("a.test", "www.b.test", "cdn.b.test")
LOOKUP = "tests.test_commands_explain.shared_lookup"


def shared_lookup(name: str, port: int) -> list[str]:
    """The crawl's injected lookup (POLITE_DNS_LOOKUP): every test name is one machine."""
    return [SHARED] if name in NAMES or name == "h.test" else []


def _site() -> Site:
    words = " ".join(f"w{k}" for k in range(150))
    return Site({"/robots.txt": "User-agent: *\nAllow: /\n",
                 "/": page("home", words, ["/p1"]), "/p1": page("p1", words + " p1", [])})


def test_explain_names_host_server_and_owner_after_a_crawl(web_factory, tmp_path):
    """Three names on one loopback machine, two of them one owner's, crawled for real:
    explain names each URL's host, the address its name resolves to through the crawl's
    lookup, and its owner with the budget its hosts share (as the crawl stored it)."""
    web = web_factory({SHARED: _site()})
    state = tmp_path / "state"
    urls = [f"http://{n}:{web.port}/" for n in NAMES]
    cmd = crawl_cmd(urls, state, tmp_path / "job", POLITE_DNS_LOOKUP=LOOKUP,
                    POLITE_BOT_URL="https://bot.example/", LOG_FILE=tmp_path / "crawl.log")
    done = subprocess.run(cmd, cwd=ROOT, env=env(), timeout=300, check=False)
    assert done.returncode == 0, (tmp_path / "crawl.log").read_text()
    args = ("--state-dir", str(state), "-s", f"POLITE_DNS_LOOKUP={LOOKUP}")
    d = scrapy_json("explain", f"http://cdn.b.test:{web.port}/p1", *args)
    assert d["host"]["name"] == "cdn.b.test" and d["host"]["known"] is True
    assert d["server"]["address"] == SHARED and d["server"]["resolved"] is True
    assert "POLITE_DNS_LOOKUP" in d["server"]["how"]
    assert "memory" in d["server"]["state"]  # its limit and rounds are not stored
    assert d["owner"]["domain"] == "b.test"
    # The owner's count is its hosts' together (each origin keeps its own too).
    import sqlite3

    from polite_crawler.policy.rest import OriginState

    conn = sqlite3.connect(state / "polite-origins.sqlite3")
    used = {o: OriginState.from_json(raw).budget_used
            for o, raw in conn.execute("SELECT origin, state FROM polite_origin")}
    conn.close()
    b_pages = sum(n for o, n in used.items() if o.split("//")[1].split(":")[0] in NAMES[1:])
    assert b_pages >= 4 and used[f"http://www.b.test:{web.port}"] < b_pages
    assert d["owner"]["budget"] == {"used_today": b_pages, "limit": 10000}
    assert d["next_request"]["bound"] in {"none", "origin_rest", "host_rest", "origin_wait"}
    a = scrapy_json("explain", f"http://a.test:{web.port}/", *args)
    assert a["server"]["address"] == SHARED and a["owner"]["domain"] == "a.test"
    assert a["owner"]["budget"]["used_today"] == used[f"http://a.test:{web.port}"]
    text = scrapy("explain", f"http://www.b.test:{web.port}/", *args).stdout
    assert f"server {SHARED} (www.b.test resolves to it through POLITE_DNS_LOOKUP" in text
    assert f"owner b.test (registrable domain, shared by its hosts):\n  budget: {b_pages} of " \
        "10000 pages today (UTC) across its hosts" in text
    assert "next request: " in text


def _host_rows(state: Any, now: float) -> None:
    """The rows a crawl keeps of host h.test (its rest ends in 10 minutes: another of its
    origins was fetched) and of owner h.test (7 pages today), written by the stores."""
    from polite_crawler.frontier.store import HOST_TABLE, ORIGIN_TABLE, OWNER_TABLE, OriginStore
    from polite_crawler.policy.rest import OriginState, utc_day

    db = state / "polite-origins.sqlite3"
    hosts = OriginStore(db, "test:1:x", "run", table=HOST_TABLE)
    hosts.save(OriginState("h.test", next_allowed=now + 600), now)
    hosts.close()
    owners = OriginStore(db, "test:1:x", "run", table=OWNER_TABLE)
    owners.save(OriginState("h.test", budget_day=utc_day(now), budget_used=7), now)
    owners.close()
    origins = OriginStore(db, "test:1:x", "run", table=ORIGIN_TABLE)
    origins.save(OriginState("http://h.test:8080", next_allowed=now + 900), now)
    origins.close()


def test_explain_names_the_bound_from_the_host_and_owner_rows(tmp_path):
    from polite_crawler.frontier.store import HOST_TABLE, OriginStore, process_owner
    from polite_crawler.policy.rest import OriginState

    state = tmp_path / "state"
    state.mkdir()
    now = time.time()
    _host_rows(state, now)
    args = ("--state-dir", str(state), "-s", f"POLITE_DNS_LOOKUP={LOOKUP}")
    # https://h.test has no row of its own: its host's rest (set by http://h.test:8080,
    # the same name on another scheme and port) holds it.
    d = scrapy_json("explain", "https://h.test/a", *args)
    assert d["host"]["name"] == "h.test" and d["host"]["busy"] is False
    assert abs(d["host"]["next_allowed"] - (now + 600)) < 1
    nr = d["next_request"]
    assert nr["bound"] == "host_rest" and abs(nr["at"] - (now + 600)) < 1
    assert nr["may_start_now"] is False
    assert d["server"]["address"] == SHARED
    assert d["owner"] == {"domain": "h.test", "budget": {"used_today": 7, "limit": 10000},
                          "budget_spent": False, "concurrency": 2, "worker": None,
                          "stops": {}, "stop_lifted": None}
    # The origin's own rest is longer: it decides.
    d = scrapy_json("explain", "http://h.test:8080/a", *args)
    assert d["next_request"]["bound"] == "origin_rest"
    assert abs(d["next_request"]["at"] - (now + 900)) < 1
    # The owner's budget shared by its hosts, spent at this limit.
    d = scrapy_json("explain", "https://h.test/a", *args, "-s", "POLITE_HOST_BUDGET=7")
    assert d["owner"]["budget_spent"] is True
    text = scrapy("explain", "https://h.test/a", *args, "-s", "POLITE_HOST_BUDGET=7").stdout
    assert "spent: nothing more of its hosts today" in text
    assert "next request: host_rest: the host's rest after its last request" in text
    # A request of the host is out (its row leased by a live process): host_busy.
    hosts = OriginStore(state / "polite-origins.sqlite3", process_owner(), "run",
                        table=HOST_TABLE)
    hosts.save(OriginState("h.test"), now)
    assert hosts.try_lease("h.test", now, 600.0, 1.0).taken
    d = scrapy_json("explain", "https://h.test/a", *args)
    hosts.close()
    assert d["host"]["busy"] is True and d["host"]["lease"]["owner"]
    assert d["next_request"]["bound"] == "host_busy"
    # An IP literal is its own server; a name that does not resolve is a server of its own.
    d = scrapy_json("explain", "http://127.0.0.1:1/", *args)
    assert d["server"]["address"] == "127.0.0.1" and d["owner"]["domain"] == "127.0.0.1"
    d = scrapy_json("explain", "http://nowhere.test/", *args)
    assert d["server"] == {"address": "name:nowhere.test", "resolved": False,
                           "how": f"POLITE_DNS_LOOKUP ({LOOKUP})",
                           "state": d["server"]["state"]}
    assert d["host"]["known"] is False and d["next_request"]["bound"] == "none"


def test_explain_reads_the_owners_group_on_a_cluster(redis_url):  # noqa: F811
    """On a cluster the owner's group (polite:g:{owner}) names the worker that holds
    the host and, once given back, the end of the host's rest; the owner's daily count
    is its origins' counts written there with their states, whoever wrote them."""
    from polite_crawler.frontier.redis_shared import OriginSync, RedisShared
    from polite_crawler.policy.rest import OriginState, utc_day

    now = time.time()
    shared = RedisShared(redis_url, "site", "w1")
    shared.register(now, 60.0)
    origin = "http://h.test:8080"
    assert [t.origin for t in shared.take([origin])] == [origin]
    shared.batch(now=now, ttl=60.0, pushes={}, seen={}, templates={}, stops={}, drops=[],
                 owned=[OriginSync(origin, state=OriginState(origin).to_json(),
                                   budget=f"{utc_day(now)} 3")])
    args = ("-s", f"POLITE_FRONTIER={redis_url}", "-s", f"POLITE_DNS_LOOKUP={LOOKUP}")
    d = scrapy_json("explain", "https://h.test/a", *args)
    assert d["host"]["worker"] == "w1" and d["host"]["origins"] == [origin]
    assert d["server"]["address"] == SHARED
    assert d["owner"]["budget"]["used_today"] == 3 and d["owner"]["worker"] == "w1"
    text = scrapy("explain", "https://h.test/a", *args, "-s", "POLITE_HOST_BUDGET=3").stdout
    assert "held by worker w1" in text and "spent: nothing more of its hosts today" in text
    shared.release_groups({origin: now + 600})
    d = scrapy_json("explain", "https://h.test/a", *args)
    shared.close()
    assert d["host"]["worker"] is None and abs(d["host"]["next_allowed"] - (now + 600)) < 1
    assert d["next_request"]["bound"] == "host_rest"


def test_explain_reads_a_servers_places_on_a_cluster(redis_url):  # noqa: F811
    """On a cluster the server's limit and places are shared in Redis (polite:srv):
    explain says who holds them, and a server whose every place is held decides the
    next request (server_full)."""
    from polite_crawler.frontier.redis_shared import RedisShared, ServerCall

    now = time.time()
    shared = RedisShared(redis_url, "site", "w1")
    shared.register(now, 60.0)
    shared.batch(now=now, ttl=60.0, pushes={}, seen={}, templates={}, stops={}, drops=[],
                 owned=[], servers=[ServerCall(SHARED, 0, 1, 0, 0.0, 0.0, 0)])
    assert [g.granted for g in shared.grants] == [1]
    args = ("-s", f"POLITE_FRONTIER={redis_url}", "-s", f"POLITE_DNS_LOOKUP={LOOKUP}")
    d = scrapy_json("explain", "https://h.test/a", *args)
    assert d["server"]["shared"]["places"] == {"w1": 1} and d["server"]["shared"]["limit"] == 1
    assert d["next_request"]["bound"] == "server_full"
    assert d["next_request"]["server_bound_seen"] is True
    text = scrapy("explain", "https://h.test/a", *args).stdout
    assert "shared by the cluster's workers (polite:srv): 1 held, 1 by w1" in text
    shared.close()
