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


def check_user_agent(configured: str | None, identity: Identity) -> None:
    """Refuse any User-Agent other than the crawler's own.

    A spider or setting may not send a browser string, nor drop the product
    token or the +URL: the site owner must be able to tell who it is.
    """
    if configured is None or configured == identity.user_agent:
        return
    if looks_like_browser(configured):
        raise IdentityError(
            f"refusing to crawl with a browser User-Agent ({configured!r}); "
            f"the crawler always identifies itself as {identity.user_agent!r}"
        )
    has_token = configured.startswith(f"{identity.bot_name}/")
    if not has_token or f"+{identity.bot_url}" not in configured:
        raise IdentityError(
            f"User-Agent {configured!r} drops the product token or the +URL; "
            f"the crawler always sends {identity.user_agent!r}"
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
