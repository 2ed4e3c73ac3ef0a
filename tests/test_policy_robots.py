"""robots.txt rules (RFC 9309), page-level rules and content signals: the pure layer.

The conformance part is built from RFC 9309's own examples and rules (section
numbers in the test names); each correction this layer makes to Protego has
a test that also shows Protego alone getting it wrong.
"""

from __future__ import annotations

import pytest
from protego import Protego

from polite_crawler.policy.robots import (
    NO_SIGNALS,
    ContentSignals,
    Outcome,
    RobotsRules,
    agent_tokens,
    clip_robots,
    decode_robots,
    fetch_outcome,
    page_rules,
    parse_meta_robots,
    parse_signal_list,
    parse_x_robots_tag,
    redirect_outcome,
    retry_delay,
    signals_from_headers,
)

TOKEN = "PoliteCrawler"
BASE = "https://example.com"


def allowed(text: str | bytes, path: str, token: str = TOKEN) -> bool:
    return RobotsRules.parse(text, token).allowed(BASE + path)


# ---------------------------------------------------------------------------
# RFC 9309 section 5.1, "Simple Example" (the figure as printed, EOF marker included)

RFC_5_1 = """\
User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF
"""


@pytest.mark.parametrize(
    ("bot", "path", "expected"),
    [
        # "*": every crawler without a group of its own
        ("otherbot", "/example/page.html", False),
        ("otherbot", "/image.gif", False),
        ("otherbot", "/image.gif?size=2", True),  # "$" ends the match
        ("otherbot", "/publications/report.html", True),
        ("otherbot", "/publications/report.gif", True),  # longer Allow beats *.gif$
        ("otherbot", "/", True),
        # foobot: everything disallowed but two paths; the "*" rules do not apply
        ("foobot", "/example/page.html", True),
        ("foobot", "/example/allowed.gif", True),
        ("foobot", "/example/other.html", False),
        ("foobot", "/publications/report.html", False),
        ("foobot", "/", False),
        # barbot and bazbot share one group
        ("barbot", "/example/page.html", False),
        ("barbot", "/example/other.html", True),
        ("barbot", "/image.gif", True),
        ("bazbot", "/example/page.html", False),
        ("BazBot", "/example/page.html", False),  # 2.2.1: case-insensitive
        # quxbot: an empty group of its own, so everything is allowed
        ("quxbot", "/example/page.html", True),
        ("quxbot", "/image.gif", True),
    ],
)
def test_rfc9309_5_1_simple_example(bot: str, path: str, expected: bool) -> None:
    assert allowed(RFC_5_1, path, bot) is expected


def test_rfc9309_5_2_longest_match() -> None:
    text = "User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n"
    assert allowed(text, "/example/page/", "foobot")
    assert allowed(text, "/example/page/other.gif", "foobot")
    assert not allowed(text, "/example/page/disallowed.gif", "foobot")


# ---------------------------------------------------------------------------
# 2.2.1 The User-Agent line


def test_rfc9309_2_2_1_product_token_of_a_user_agent_string() -> None:
    # "ExampleBot/1.1" in the figure; a crawler matches its product token only
    text = "User-agent: ExampleBot\nDisallow: /foo\n"
    assert not allowed(text, "/foo", "ExampleBot")
    assert not allowed(text, "/foo", "examplebot")
    assert allowed(text, "/foo", "OtherBot")
    assert agent_tokens("ExampleBot/1.1") == ("examplebot",)
    assert agent_tokens("  *  ") == ("*",)


def test_rfc9309_2_2_1_matching_groups_are_combined() -> None:
    text = (
        "user-agent: ExampleBot\ndisallow: /foo\ndisallow: /bar\n\n"
        "user-agent: ExampleBot\ndisallow: /baz\n"
    )
    for path in ("/foo", "/bar", "/baz"):
        assert not allowed(text, path, "ExampleBot")
    assert allowed(text, "/qux", "ExampleBot")


def test_rfc9309_2_2_1_star_group_only_without_a_matching_group() -> None:
    text = "User-agent: *\nDisallow: /private\n\nUser-agent: PoliteCrawler\nDisallow: /mine\n"
    rules = RobotsRules.parse(text, TOKEN)
    assert rules.matched == "token"
    assert not rules.allowed(BASE + "/mine")
    assert rules.allowed(BASE + "/private")  # the "*" group does not mix in
    other = RobotsRules.parse(text, "OtherBot")
    assert other.matched == "*"
    assert not other.allowed(BASE + "/private")
    assert other.allowed(BASE + "/mine")


def test_rfc9309_2_2_1_no_matching_group_and_no_star_means_no_rules() -> None:
    rules = RobotsRules.parse("User-agent: OtherBot\nDisallow: /\n", TOKEN)
    assert rules.matched is None
    assert rules.allowed(BASE + "/anything")
    assert RobotsRules.parse("", TOKEN).allowed(BASE + "/x")


def test_rfc9309_2_2_start_lines_may_be_separated_by_empty_lines() -> None:
    # group = startgroupline *(startgroupline / emptyline) *(rule / emptyline)
    text = "User-agent: OtherBot\n\nUser-agent: PoliteCrawler\n\nDisallow: /x\n"
    assert not allowed(text, "/x")
    assert not allowed(text, "/x", "OtherBot")


# ---------------------------------------------------------------------------
# 2.2.2 The Allow and Disallow lines


def test_rfc9309_2_2_2_allow_wins_an_equivalent_match() -> None:
    assert allowed("User-agent: *\nDisallow: /page\nAllow: /page\n", "/page")
    assert allowed("User-agent: *\nAllow: /page\nDisallow: /page\n", "/page")


def test_rfc9309_2_2_2_robots_txt_is_implicitly_allowed() -> None:
    assert allowed("User-agent: *\nDisallow: /\n", "/robots.txt")
    assert not allowed("User-agent: *\nDisallow: /\n", "/robots.txt.bak")


def test_rfc9309_2_2_2_no_match_or_no_rules_allows() -> None:
    assert allowed("User-agent: *\nDisallow: /a\n", "/b")
    assert allowed("User-agent: *\n", "/b")
    assert allowed("User-agent: *\nDisallow:\n", "/b")  # an empty path matches nothing


def test_rfc9309_2_2_2_paths_are_case_sensitive() -> None:
    text = "User-agent: *\nDisallow: /Private\n"
    assert not allowed(text, "/Private/a")
    assert allowed(text, "/private/a")


@pytest.mark.parametrize(
    ("rule", "path"),
    [
        # the percent-encoding table of 2.2.2
        ("/foo/bar?baz=quz", "/foo/bar?baz=quz"),
        ("/foo/bar?baz=https://foo.bar", "/foo/bar?baz=https%3A%2F%2Ffoo.bar"),
        ("/foo/bar/\u30c4", "/foo/bar/%E3%83%84"),
        ("/foo/bar/%E3%83%84", "/foo/bar/%E3%83%84"),
        ("/foo/bar/baz", "/foo/bar/%62%61%7A"),
    ],
)
def test_rfc9309_2_2_2_percent_encoding(rule: str, path: str) -> None:
    assert not allowed(f"User-agent: *\nDisallow: {rule}\n", path)


# ---------------------------------------------------------------------------
# 2.2.3 Special characters


def test_rfc9309_2_2_3_comments() -> None:
    text = "# comment on its own line\nUser-agent: * # trailing\nDisallow: /a # comment in line\n"
    assert not allowed(text, "/a")
    assert allowed(text, "/b")
    # "#" starts a comment even in a path, so the rule is "/x"
    assert not allowed("User-agent: *\nDisallow: /x#y\n", "/x/z")


def test_rfc9309_2_2_3_dollar_and_star() -> None:
    exactly = "User-agent: *\nDisallow: /this/path/exactly$\n"
    assert not allowed(exactly, "/this/path/exactly")
    assert allowed(exactly, "/this/path/exactly/more")
    star = "User-agent: *\nDisallow: /this/*/exactly\n"
    assert not allowed(star, "/this/a/b/exactly")
    assert not allowed(star, "/this//exactly")  # zero characters
    assert allowed(star, "/this/exactly")


# ---------------------------------------------------------------------------
# 2.2.4 Other records


def test_rfc9309_2_2_4_sitemaps_are_collected_and_interfere_with_nothing() -> None:
    text = (
        "User-agent: PoliteCrawler\n"
        "Sitemap: https://example.com/a.xml\n"
        "User-agent: OtherBot\n"
        "Disallow: /private\n"
        "Sitemap: https://example.com/b.xml\n"
    )
    rules = RobotsRules.parse(text, TOKEN)
    assert rules.sitemaps == ["https://example.com/a.xml", "https://example.com/b.xml"]
    assert not rules.allowed(BASE + "/private")  # the Sitemap line did not split the group


# ---------------------------------------------------------------------------
# 2.3.1 Access results, 2.4 caching helpers, 2.5 limits


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, Outcome.PARSE), (203, Outcome.PARSE), (204, Outcome.PARSE),
        (301, Outcome.REDIRECT), (302, Outcome.REDIRECT), (307, Outcome.REDIRECT),
        (308, Outcome.REDIRECT),
        (400, Outcome.ALLOW_ALL), (401, Outcome.ALLOW_ALL), (403, Outcome.ALLOW_ALL),
        (404, Outcome.ALLOW_ALL), (410, Outcome.ALLOW_ALL), (451, Outcome.ALLOW_ALL),
        (429, Outcome.UNREACHABLE),
        (500, Outcome.UNREACHABLE), (502, Outcome.UNREACHABLE), (503, Outcome.UNREACHABLE),
        (504, Outcome.UNREACHABLE), (599, Outcome.UNREACHABLE),
        (100, Outcome.UNREACHABLE), (999, Outcome.UNREACHABLE),
    ],
)
def test_rfc9309_2_3_1_fetch_outcomes(status: int, outcome: Outcome) -> None:
    assert fetch_outcome(status) is outcome


def test_rfc9309_2_3_1_2_redirect_without_location_is_unreachable() -> None:
    assert fetch_outcome(302, has_location=False) is Outcome.UNREACHABLE
    assert fetch_outcome(304) is Outcome.UNREACHABLE


def test_rfc9309_2_3_1_2_five_redirects_followed_the_sixth_is_unavailable() -> None:
    # "If there are more than five consecutive redirects, crawlers MAY assume that
    # the robots.txt file is unavailable" (2.3.1.2), and unavailable means no
    # restrictions (2.3.1.3).
    outcomes = [redirect_outcome(n) for n in range(1, 7)]
    assert outcomes == [Outcome.REDIRECT] * 5 + [Outcome.ALLOW_ALL]


def test_retry_delay_backs_off_and_honours_retry_after() -> None:
    assert [retry_delay(n, 10, 100) for n in range(1, 6)] == [10, 20, 40, 80, 100]
    assert retry_delay(1, 10, 100, retry_after=50) == 50
    assert retry_delay(1, 10, 100, retry_after=5000) == 100
    assert retry_delay(3, 10, 100, retry_after=5) == 40


def test_rfc9309_2_5_at_least_500_kib_are_parsed() -> None:
    filler = "# " + "x" * 97 + "\n"  # 100 bytes a line
    head = "User-agent: *\n" + filler * (500 * 1024 // 100)
    text = head + "Disallow: /late\n"
    assert len(text.encode()) > 500 * 1024
    rules = RobotsRules.parse(text.encode(), TOKEN)  # default limit: 512 KiB
    assert not rules.allowed(BASE + "/late")
    assert not rules.truncated


def test_a_longer_file_is_cut_not_rejected_and_its_cut_line_dropped() -> None:
    body = b"User-agent: *\nDisallow: /early\n" + b"# pad\n" * 400_000 + b"Disallow: /late\n"
    assert len(body) > 2 * 1024 * 1024
    rules = RobotsRules.parse(body, TOKEN)
    assert rules.truncated
    assert not rules.allowed(BASE + "/early")
    assert rules.allowed(BASE + "/late")
    # A cut in the middle of a line drops the line: "Allow: /abcdef" cut to
    # "Allow: /a" would allow more than the site meant.
    clipped, cut = clip_robots(b"Disallow: /\nAllow: /abcdef\n", 20)
    assert cut
    assert clipped == b"Disallow: /\n"


# ---------------------------------------------------------------------------
# Corrections to Protego (each shown wrong in Protego alone)


def _protego(text: str, path: str, agent: str = TOKEN) -> bool:
    return bool(Protego.parse(text).can_fetch(BASE + path, agent))


def test_fix_user_agent_value_is_matched_up_to_its_first_non_token_character() -> None:
    for line in ("PoliteCrawler/1.0", "PoliteCrawler (+https://example.com/bot)",
                 "PoliteCrawler extra words", "politecrawler/2"):
        text = f"User-agent: {line}\nDisallow: /private\n"
        assert not allowed(text, "/private"), line
    assert _protego("User-agent: PoliteCrawler/1.0\nDisallow: /private\n", "/private")
    assert _protego("User-agent: PoliteCrawler extra words\nDisallow: /private\n", "/private")


def test_fix_user_agent_token_is_matched_exactly_not_as_a_part() -> None:
    text = "User-agent: polite\nDisallow: /\n\nUser-agent: *\nDisallow: /star-only\n"
    assert allowed(text, "/page")
    assert not allowed(text, "/star-only")  # the "*" group applies instead
    assert not _protego(text, "/page")  # Protego takes "polite" for PoliteCrawler


def test_fix_byte_order_mark_is_skipped() -> None:
    body = b"\xef\xbb\xbfUser-agent: PoliteCrawler\nDisallow: /private\n"
    assert not allowed(body, "/private")
    assert not allowed(body.decode("utf-8"), "/private")  # as text too
    assert _protego(body.decode("utf-8"), "/private")


def test_fix_unknown_line_does_not_end_the_user_agent_lines() -> None:
    text = "User-agent: OtherBot\nFoo: bar\nUser-agent: PoliteCrawler\nDisallow: /x\n"
    assert not allowed(text, "/x")
    assert not allowed(text, "/x", "OtherBot")
    assert _protego(text, "/x", "OtherBot")  # Protego: OtherBot's group ended at "Foo"


def test_issue15_crawl_delay_does_not_end_the_user_agent_lines() -> None:
    # Failed before the fix (Crawl-delay ended the run of user-agent lines).
    # RFC 9309 section 2.2.4: "Parsing of other records MUST NOT interfere with
    # the parsing of explicitly defined records": one group, both agents.
    text = "User-agent: googlebot\nCrawl-delay: 1\nUser-agent: qihoobot\nDisallow: /\n"
    for bot in ("googlebot", "qihoobot"):
        rules = RobotsRules.parse(text, bot)
        assert not rules.allowed(BASE + "/page"), bot
        assert rules.crawl_delay == 1, bot  # it belongs to the group it is in
    assert RobotsRules.parse(text, TOKEN).allowed(BASE + "/page")
    assert _protego(text, "/page", "googlebot")  # Protego: googlebot's group ended


def test_issue15_star_disallow_reaches_every_agent_above_it_across_crawl_delay() -> None:
    # Failed before the fix. The university's file of the issue.
    text = "User-agent: Applebot\nCrawl-delay: 10\nUser-agent: *\nDisallow: /node\n"
    for bot in ("Applebot", TOKEN):
        rules = RobotsRules.parse(text, bot)
        assert not rules.allowed(BASE + "/node/1"), bot
        assert rules.allowed(BASE + "/about"), bot
        assert rules.crawl_delay == 10, bot
    text = "User-agent: *\nCrawl-delay: 7\n\nUser-agent: BadBot\nDisallow: /\n"
    assert not RobotsRules.parse(text, TOKEN).allowed(BASE + "/x")
    assert RobotsRules.parse(text, TOKEN).crawl_delay == 7
    assert RobotsRules.parse(text, "BadBot").crawl_delay == 7


@pytest.mark.parametrize(
    "line", ["Sitemap: https://example.com/s.xml", "Foo: bar", "Crawl-delay: 5",
             "Content-Signal: search=yes, ai-train=no", "Host: example.com"],
)
def test_issue15_other_records_do_not_end_the_user_agent_lines(line: str) -> None:
    # Failed before the fix for Crawl-delay and Content-Signal.
    text = f"User-agent: OtherBot\n{line}\nUser-agent: PoliteCrawler\nDisallow: /x\n"
    assert not allowed(text, "/x")
    assert not allowed(text, "/x", "OtherBot")


def test_issue15_content_usage_is_a_rule_and_ends_the_user_agent_lines() -> None:
    # draft-ietf-aipref-attach section 3: "rule =/ content-usage".
    text = (
        "User-agent: OtherBot\nContent-Usage: / train-ai=n\n"
        "User-agent: PoliteCrawler\nDisallow: /x\n"
    )
    assert not allowed(text, "/x")
    assert allowed(text, "/x", "OtherBot")
    assert RobotsRules.parse(text, "OtherBot").signals(BASE + "/x").ai_train is False
    assert RobotsRules.parse(text, TOKEN).signals(BASE + "/x").ai_train is None


def test_issue15_content_signal_belongs_to_its_whole_group() -> None:
    # Failed before the fix: the line split the group in two.
    text = (
        "User-agent: OtherBot\nContent-Signal: ai-input=no\n"
        "User-agent: PoliteCrawler\nAllow: /\n"
    )
    assert RobotsRules.parse(text, TOKEN).signals(BASE + "/x").ai_input is False
    assert RobotsRules.parse(text, "OtherBot").signals(BASE + "/x").ai_input is False


@pytest.mark.parametrize(
    "name", ["PoliteCrawler2", "PoliteCrawler.beta", "PoliteCrawler's", "PoliteCrawler!",
             "PoliteCrawler:x", "PoliteCrawler*", "PoliteCrawler, OtherBot",
             "OtherBot, PoliteCrawler", "OtherBot PoliteCrawler/1.0", "OtherBot,politecrawler",
             "PoliteCrawler", "politecrawler", "PoliteCrawler/1.0", "PoliteCrawler/",
             "PoliteCrawler (+https://example.com/bot)", "PoliteCrawler\tcomment"],
)
def test_issue24_a_value_names_us_when_one_of_its_items_cut_at_a_non_token_character_does(
        name: str) -> None:
    # Failed before the fix for the lists and for "PoliteCrawler2" ... "PoliteCrawler*"
    # (the earlier reading took them as other bots' names; Google's parser cuts the value
    # at its first non-token character, crawler-commons splits the list).
    text = f"User-agent: {name}\nDisallow: /\n\nUser-agent: *\nAllow: /\n"
    rules = RobotsRules.parse(text, TOKEN)
    assert rules.matched == "token"
    assert not rules.allowed(BASE + "/page")
    assert TOKEN.lower() in agent_tokens(name)


@pytest.mark.parametrize(
    "name", ["OtherBot", "PoliteCrawler_x", "PoliteCrawler-", "Polite", "polite crawler",
             "xPoliteCrawler", "(PoliteCrawler)", "Mozilla/5.0;PoliteCrawler"],
)
def test_issue24_a_value_none_of_whose_items_is_our_token_is_another_bots(name: str) -> None:
    text = f"User-agent: {name}\nDisallow: /\n\nUser-agent: *\nAllow: /\n"
    rules = RobotsRules.parse(text, TOKEN)
    assert rules.matched == "*"
    assert rules.allowed(BASE + "/page")
    assert TOKEN.lower() not in agent_tokens(name)


def test_issue24_groups_naming_us_in_a_list_are_merged_and_the_star_group_stays_out() -> None:
    text = ("User-agent: *\nDisallow: /star\n\nUser-agent: OtherBot, PoliteCrawler\n"
            "Disallow: /a\n\nUser-agent: PoliteCrawler/2.0\nDisallow: /b\n")
    rules = RobotsRules.parse(text, TOKEN)
    assert rules.matched == "token"
    assert not rules.allowed(BASE + "/a") and not rules.allowed(BASE + "/b")
    assert rules.allowed(BASE + "/star")
    other = RobotsRules.parse(text, "OtherBot")
    assert not other.allowed(BASE + "/a") and other.allowed(BASE + "/b")
    assert rules.rule_lines == [(5, "disallow", "/a"), (8, "disallow", "/b")]


def test_issue24_names_with_digits_name_their_leading_letters() -> None:
    # As in Google's parser: "MJ12bot" names "MJ" (the earlier reading kept it whole).
    assert agent_tokens("MJ12bot") == ("mj",)
    assert agent_tokens("Iron33/1.0.2") == ("iron",)
    assert not RobotsRules.parse("User-agent: MJ12bot\nDisallow: /\n", "MJ").allowed(BASE + "/")
    assert RobotsRules.parse("User-agent: MJ12bot\nDisallow: /\n", "MJbot").allowed(BASE + "/")


def test_fix_query_escapes_match_their_characters() -> None:
    # RFC 9309 section 2.2.2's table: "/foo/bar?baz=https://foo.bar" matches
    # "/foo/bar?baz=https%3A%2F%2Ffoo.bar"; Protego keeps "%2F" apart from "/".
    text = "User-agent: *\nDisallow: /foo/bar?baz=https://foo.bar\n"
    assert not allowed(text, "/foo/bar?baz=https%3A%2F%2Ffoo.bar")
    assert _protego(text, "/foo/bar?baz=https%3A%2F%2Ffoo.bar")
    # a literal percent sign stays one
    assert allowed("User-agent: *\nDisallow: /q?a=%41\n", "/q?a=%2541")


def test_fix_only_cr_lf_and_crlf_end_a_line() -> None:
    # A form feed, a vertical tab, NEL or LINE SEPARATOR inside a line does
    # not split it (Python's str.splitlines would).
    for sep in ("\x0c", "\x0b", "\x85", "\u2028"):
        text = f"User-agent: *\nDisallow: /a{sep}b\n"
        rules = RobotsRules.parse(text, TOKEN)
        assert allowed(text, "/a"), repr(sep)
        assert not _protego(text, "/a"), repr(sep)  # Protego broke the line there
        assert rules.rules == [("disallow", f"/a{sep}b")]


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_line_endings(eol: str) -> None:
    text = eol.join(["User-agent: *", "Disallow: /a", "", "User-agent: PoliteCrawler",
                     "Disallow: /b", "Crawl-delay: 2"]) + eol
    rules = RobotsRules.parse(text.encode(), TOKEN)
    assert rules.matched == "token"
    assert not rules.allowed(BASE + "/b")
    assert rules.allowed(BASE + "/a")
    assert rules.crawl_delay == 2


def test_binary_garbage_does_not_crash_and_keeps_readable_lines() -> None:
    garbage = bytes(range(256)) * 64
    rules = RobotsRules.parse(garbage, TOKEN)
    assert rules.allowed(BASE + "/x")
    mixed = garbage + b"\nUser-agent: *\nDisallow: /x\n" + b"\xff\xfe\x00" * 100
    assert not RobotsRules.parse(mixed, TOKEN).allowed(BASE + "/x")
    assert RobotsRules.parse(b"\x00\x00\x00", TOKEN).allowed(BASE + "/")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_does_not_crash(encoding: str) -> None:
    text = "User-agent: *\nDisallow: /x\n"
    body = text.encode(encoding)
    rules = RobotsRules.parse(body, TOKEN)  # must not raise
    if encoding == "utf-16":  # with a byte order mark: read as UTF-16
        assert not rules.allowed(BASE + "/x")
    else:  # without one it is not UTF-8 text: nothing parses, nothing crashes
        assert rules.allowed(BASE + "/x")


def test_decode_robots() -> None:
    assert decode_robots(b"\xef\xbb\xbfa") == ("a", False)
    assert decode_robots(b"a\xffb") == ("a\ufffdb", False)
    assert decode_robots("ab".encode("utf-16")) == ("ab", False)


# ---------------------------------------------------------------------------
# Crawl-delay, groups beside "*"


def test_crawl_delay_of_the_matched_group_only() -> None:
    text = (
        "User-agent: *\nCrawl-delay: 30\nDisallow: /tmp\n\n"
        "User-agent: PoliteCrawler\nCrawl-delay: 2.5\nAllow: /\n"
    )
    assert RobotsRules.parse(text, TOKEN).crawl_delay == 2.5
    assert RobotsRules.parse(text, "OtherBot").crawl_delay == 30
    assert RobotsRules.parse("User-agent: *\nCrawl-delay: soon\n", TOKEN).crawl_delay is None
    assert RobotsRules.parse("User-agent: *\nCrawl-delay: -1\n", TOKEN).crawl_delay is None
    assert RobotsRules.parse("User-agent: *\nCrawl-delay: inf\n", TOKEN).crawl_delay is None


def test_directive_without_colon_and_misspelled_disallow() -> None:
    assert not allowed("User-agent *\nDisallow /x\n", "/x")
    assert not allowed("User-agent: *\nDissallow: /x\n", "/x")


def test_rules_before_any_user_agent_apply_to_nobody() -> None:
    assert allowed("Disallow: /x\nUser-agent: *\nDisallow: /y\n", "/x")


# ---------------------------------------------------------------------------
# Content signals


def test_cloudflare_content_signal_line_in_the_matched_group() -> None:
    text = (
        "User-Agent: *\nContent-Signal: search=yes, ai-train=no\nAllow: /\n\n"
        "User-Agent: PoliteCrawler\n"
        "Content-Signal: search=yes, ai-input=no, ai-train=no\nAllow: /\n"
    )
    mine = RobotsRules.parse(text, TOKEN).signals(BASE + "/page")
    assert mine == ContentSignals(search=True, ai_input=False, ai_train=False)
    assert not mine.ai_input_allowed
    other = RobotsRules.parse(text, "OtherBot").signals(BASE + "/page")
    assert other == ContentSignals(search=True, ai_input=None, ai_train=False)
    assert other.ai_input_allowed


def test_aipref_content_usage_example_of_the_attach_draft() -> None:
    text = (
        "User-Agent: *\nAllow: /\nDisallow: /never/\n"
        "Content-Usage: / train-ai=n\nContent-Usage: /ai-ok/ train-ai=y\n\n"
        "User-Agent: ExampleBot\nAllow: /\nContent-Usage: / train-ai=y\n"
    )
    rules = RobotsRules.parse(text, TOKEN)
    assert rules.signals(BASE + "/test").ai_train is False
    assert rules.signals(BASE + "/ai-ok/test").ai_train is True
    assert not rules.allowed(BASE + "/never/test")
    assert RobotsRules.parse(text, "ExampleBot").signals(BASE + "/test").ai_train is True


def test_aipref_ai_use_maps_to_ai_input_and_conflicts_take_the_stricter() -> None:
    text = "User-Agent: *\nContent-Usage: /a ai-use=y\nContent-Usage: /a ai-use=n, search=y\n"
    signals = RobotsRules.parse(text, TOKEN).signals(BASE + "/a/page")
    assert signals == ContentSignals(search=True, ai_input=False, ai_train=None)
    assert RobotsRules.parse(text, TOKEN).signals(BASE + "/b") == NO_SIGNALS


def test_signals_per_category_longest_path() -> None:
    text = (
        "User-Agent: *\nContent-Signal: search=yes, ai-input=no\n"
        "Content-Usage: /docs/ ai-use=y\n"
    )
    rules = RobotsRules.parse(text, TOKEN)
    assert rules.signals(BASE + "/docs/x") == ContentSignals(search=True, ai_input=True)
    assert rules.signals(BASE + "/blog/x") == ContentSignals(search=True, ai_input=False)


def test_parse_signal_list_and_headers() -> None:
    search_no_train = ContentSignals(search=True, ai_train=False)
    assert parse_signal_list("search=yes,ai-train=no") == search_no_train
    assert parse_signal_list("train-ai=n, search=y") == search_no_train
    assert parse_signal_list('train-ai="maybe", ai-use') == NO_SIGNALS
    # as in Structured Fields, the last value of a key wins
    assert parse_signal_list("train-ai=y, train-ai=n") == ContentSignals(ai_train=False)
    headers = {
        "content-usage": ["train-ai=y, ai-use=n"],
        "content-signal": ["ai-train=no, search=yes"],
    }
    expected = ContentSignals(search=True, ai_input=False, ai_train=False)
    assert signals_from_headers(headers) == expected
    assert signals_from_headers({}) == NO_SIGNALS


def test_signals_combine_most_restrictive() -> None:
    a = ContentSignals(search=True, ai_input=True)
    b = ContentSignals(ai_input=False, ai_train=True)
    assert a.combine(b) == ContentSignals(search=True, ai_input=False, ai_train=True)
    assert ContentSignals.from_dict(a.as_dict()) == a


# ---------------------------------------------------------------------------
# Page-level rules


def test_meta_robots_and_meta_token() -> None:
    assert parse_meta_robots([("robots", "noindex, follow")], TOKEN).noindex
    assert parse_meta_robots([("ROBOTS", "NOFOLLOW")], TOKEN).nofollow
    both = parse_meta_robots([("robots", "none")], TOKEN)
    assert both.noindex and both.nofollow
    assert parse_meta_robots([("politecrawler", "noindex")], TOKEN).noindex
    metas = [("googlebot", "noindex, nofollow"), ("description", "noindex")]
    other = parse_meta_robots(metas, TOKEN)
    assert not other.noindex and not other.nofollow
    assert not parse_meta_robots([("robots", "index, follow, all")], TOKEN).noindex


def test_x_robots_tag_scoped_and_unscoped() -> None:
    assert parse_x_robots_tag(["noindex"], TOKEN).noindex
    assert parse_x_robots_tag(["PoliteCrawler: noindex, nofollow"], TOKEN).nofollow
    rules = parse_x_robots_tag(["googlebot: noindex", "otherbot: nofollow"], TOKEN)
    assert not rules.noindex and not rules.nofollow
    # a scope runs to the next one within the value
    mixed = parse_x_robots_tag(["googlebot: noindex, politecrawler: nofollow"], TOKEN)
    assert mixed.nofollow and not mixed.noindex
    # valued directives are not user agents
    dated = parse_x_robots_tag(["unavailable_after: 25 Jun 2010 15:00:00 PST, noindex"], TOKEN)
    assert dated.noindex
    assert parse_x_robots_tag(["noai"], TOKEN).signals.ai_input is False


def test_page_rules_combine_everything() -> None:
    headers = {"x-robots-tag": ["politecrawler: nofollow"], "content-usage": ["train-ai=n"]}
    rules = page_rules(headers, [("robots", "noindex")], TOKEN, ContentSignals(search=True))
    assert rules.noindex and rules.nofollow
    assert rules.signals == ContentSignals(search=True, ai_train=False)
