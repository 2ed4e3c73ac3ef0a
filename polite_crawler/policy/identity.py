"""The crawler's identity: User-Agent, From header and robots.txt product token."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

# A product token is what a site owner writes after ``User-agent:`` in
# robots.txt; RFC 9309 section 2.2.1 allows letters, "_" and "-".
_TOKEN_RE = re.compile(r"^[A-Za-z_-]+$")
_MAILBOX_RE = re.compile(r"^[^@\s;()]+@[^@\s;()]+\.[^@\s;()]+$")
# Words that only a browser (or a bot pretending to be one) sends.
_BROWSER_MARKERS = ("mozilla/", "applewebkit", "chrome/", "safari/", "gecko/", "edg/", "opr/")


class IdentityError(ValueError):
    """The configured identity would hide the crawler from the site owner."""


@dataclass(frozen=True)
class Identity:
    bot_name: str
    version: str
    bot_url: str
    contact: str = ""

    @property
    def token(self) -> str:
        """The robots.txt product token (RFC 9309 section 2.2.1)."""
        return self.bot_name

    @property
    def user_agent(self) -> str:
        """``<name>/<version> (+<url>[; <contact>])``.

        >>> Identity("PoliteCrawler", "0.1.0", "https://e.org/bot", "ops@e.org").user_agent
        'PoliteCrawler/0.1.0 (+https://e.org/bot; ops@e.org)'
        """
        extra = f"; {self.contact}" if self.contact else ""
        return f"{self.bot_name}/{self.version} (+{self.bot_url}{extra})"

    @property
    def from_header(self) -> str | None:
        return self.contact or None


def build_identity(bot_name: str, version: str, bot_url: str, contact: str = "") -> Identity:
    """Validate the parts and return the identity, or raise :class:`IdentityError`."""
    if not _TOKEN_RE.match(bot_name or ""):
        raise IdentityError(
            f"POLITE_BOT_NAME {bot_name!r} is not a robots.txt product token "
            "(letters, '_' and '-' only, RFC 9309 section 2.2.1)"
        )
    if any(m in bot_name.lower() for m in ("mozilla", "chrome", "safari")):
        raise IdentityError(f"POLITE_BOT_NAME {bot_name!r} looks like a browser name")
    if bot_url and not re.match(r"^https?://[^\s()]+$", bot_url):
        raise IdentityError(f"POLITE_BOT_URL {bot_url!r} must be an http(s) URL")
    if contact and not _MAILBOX_RE.match(contact):
        raise IdentityError(f"POLITE_CONTACT {contact!r} must be a mail address")
    return Identity(bot_name, version, bot_url, contact)


def looks_like_browser(user_agent: str) -> bool:
    ua = user_agent.lower()
    return any(marker in ua for marker in _BROWSER_MARKERS)


# ``<token>/<version> (+<url>[; <anything>])``: how a bot names itself (the +URL
# convention of Googlebot, bingbot and this crawler's own User-Agent).
_BOT_UA_RE = re.compile(r"^(?P<token>[A-Za-z_-]+)/\S+\s+\(\+(?P<url>https?://[^\s;()]+)")


def check_user_agent(configured: str | None, identity: Identity) -> None:
    """Refuse any User-Agent other than the crawler's own, saying exactly why.

    A spider or setting may not send a browser string (the site owner must be able to
    tell who it is), nor a User-Agent of its own: the crawler builds it from
    POLITE_BOT_NAME (the token robots.txt is judged by) and POLITE_BOT_URL, so the
    token a site's robots.txt names is the one sent.

    >>> me = Identity("PoliteCrawler", "1", "https://e.org/bot")
    >>> try:
    ...     check_user_agent("AcmeBot/1.0 (+https://acme.example/bot)", me)
    ... except IdentityError as exc:
    ...     print(str(exc).split(": ", 1)[1])
    it builds the User-Agent itself, and robots.txt is judged by its token. To crawl as \
AcmeBot, set POLITE_BOT_NAME = "AcmeBot" and POLITE_BOT_URL = "https://acme.example/bot" \
instead of USER_AGENT
    """
    if configured is None or configured == identity.user_agent:
        return
    if looks_like_browser(configured):
        raise IdentityError(
            f"refusing to crawl with a browser User-Agent ({configured!r}); "
            f"the crawler always identifies itself as {identity.user_agent!r}; remove it "
            "(the crawler sets its own User-Agent)"
        )
    found = _BOT_UA_RE.match(configured.strip())
    if found is not None:
        token, url = found["token"], found["url"]
        if token == identity.bot_name and url == identity.bot_url:
            return  # the crawler's own name and page (another version or contact)
        raise IdentityError(
            f"USER_AGENT {configured!r} names the bot {token} at {url}, but the "
            f"crawler's identity is {identity.bot_name} at {identity.bot_url}: it builds "
            "the User-Agent itself, and robots.txt is judged by its token. To crawl as "
            f'{token}, set POLITE_BOT_NAME = "{token}" and POLITE_BOT_URL = "{url}" '
            "instead of USER_AGENT")
    raise IdentityError(
        f"USER_AGENT {configured!r} is not a bot's name (<token>/<version> "
        f"(+<bot page URL>)); the crawler sends {identity.user_agent!r}, built from "
        "POLITE_BOT_NAME, POLITE_BOT_URL and POLITE_CONTACT: set those instead of USER_AGENT"
    )


def is_loopback_host(host: str) -> bool:
    """True for loopback literals and ``localhost`` names.

    >>> is_loopback_host("127.0.0.2"), is_loopback_host("localhost"), is_loopback_host("e.org")
    (True, True, False)
    """
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
