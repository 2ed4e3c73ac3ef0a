"""``scrapy explain``: a URL, a robots.txt offline, an answer's verdict (issue 18)."""

from __future__ import annotations

from polite_crawler.commands.explain import canonical_changes, robots_decision
from tests.commands_util import scrapy, scrapy_json
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
    # Issue 24: "User-agent: OtherBot, PoliteCrawler" is our group; the deciding line is
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
