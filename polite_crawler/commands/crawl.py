"""``scrapy crawl``: Scrapy's own command, with the add-on's refusals checked first.

A crawl that cannot start (no site given, a missing ``-a urls=`` file, a browser
User-Agent, no POLITE_BOT_URL for a public host) says so in one line on stderr and
exits with status 2, before Scrapy writes its start-up log: the same checks the
spider and the identity middleware make when the crawl starts, made here on the
spider's class and arguments. Projects that do not use the add-on get Scrapy's
command unchanged.

This command wins over Scrapy's: Scrapy reads its own commands, then the
``scrapy.commands`` entry points (which replace a built-in of the same name), then
``COMMANDS_MODULE`` (which replaces both; this project's settings name this package).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.settings import SETTINGS_PRIORITIES

from polite_crawler.commands._base import fail, with_defaults
from polite_crawler.policy.identity import IdentityError, check_user_agent
from polite_crawler.policy.network import parse_networks

if TYPE_CHECKING:
    import argparse

    from scrapy.settings import BaseSettings

ADDON = "polite_crawler.addon.PoliteAddon"


def uses_addon(settings: BaseSettings) -> bool:
    for key in settings.getdict("ADDONS"):
        name = key if isinstance(key, str) else f"{key.__module__}.{key.__qualname__}"
        if name == ADDON:
            return True
    return False


def descriptor_problem(settings: BaseSettings, spider: Any) -> str | None:
    """Why the open-file limit cannot hold the crawl (None: it can), from the plan the
    add-on makes at start (:func:`~polite_crawler.extensions.descriptors.fit_descriptors`:
    the soft limit raised toward the hard one, as the crawl would raise it)."""
    from polite_crawler.extensions.descriptors import fit_descriptors
    from polite_crawler.render.settings import render_mode

    planned = settings.copy()
    mode = render_mode(planned, spider)  # the browser's files counted when it renders
    if mode:
        planned.set("POLITE_RENDER", mode, priority="cmdline")
    return fit_descriptors(planned, None, SETTINGS_PRIORITIES["cmdline"]).plan.refusal


def start_problem(settings: BaseSettings, spidercls: type, spargs: dict[str, Any]) -> str | None:
    """Why a crawl of ``spidercls`` with ``spargs`` would refuse to start, or None.

    The same refusals as :class:`~polite_crawler.spiders.site.SiteSpider` (its
    arguments) and :class:`~polite_crawler.middlewares.identity.IdentityMiddleware`
    (the identity) raise when the crawl opens.
    """
    from polite_crawler.middlewares.identity import identity_from_settings
    from polite_crawler.spiders.site import UsageError

    merged = settings.copy()
    with_defaults(merged)
    update = getattr(spidercls, "update_settings", None)
    if callable(update):
        update(merged)
    # The spider checks its own arguments when it is built (read_start_urls and the
    # like raise UsageError); built here once first, as Scrapy builds it.
    try:
        spider = spidercls(**spargs)
    except UsageError as exc:
        return str(exc)
    except Exception:  # not a refusal of ours: Scrapy reports it as it does
        return None
    start: list[str] = [u for u in (getattr(spider, "start_urls", None) or [])
                        if isinstance(u, str)]
    for named in ("polite_start_urls", "sitemap_urls"):  # -a url, a SitemapSpider's
        start.extend(u for u in (getattr(spider, named, None) or []) if isinstance(u, str))
    try:
        identity = identity_from_settings(merged)
        user_set = (merged.getpriority("USER_AGENT") or 0) > SETTINGS_PRIORITIES["default"]
        check_user_agent(merged.get("USER_AGENT") if user_set else None, identity)
        check_user_agent(getattr(spidercls, "user_agent", None), identity)
    except IdentityError as exc:
        return str(exc)
    from polite_crawler.spidersettings import settings_problem

    scrapy_setting = settings_problem(merged, str(getattr(spidercls, "name", "") or ""))
    if scrapy_setting is not None:
        return scrapy_setting
    for name in ("POLITE_TEST_NETWORKS", "POLITE_ALLOW_NETWORKS"):
        try:
            parse_networks(merged.getlist(name))
        except ValueError as exc:
            return f"{name}: {exc} (write networks as 10.0.0.0/8 or addresses)"
    if spargs.get("_job") is not None:
        from polite_crawler.policy.jobs import JobIdError, check_job_id

        try:
            check_job_id(str(spargs["_job"]))
        except JobIdError as exc:
            return str(exc)
    signing = signing_problem(merged)
    if signing is not None:
        return signing
    from polite_crawler.render.settings import render_problem  # POLITE_RENDER's needs

    rendering = render_problem(merged, spider)
    if rendering is not None:
        return rendering
    descriptors = descriptor_problem(merged, spider)
    if descriptors is not None:
        return descriptors
    from polite_crawler.extensions.jobdir import recrawl_jobdir_problem  # recrawl + JOBDIR

    recrawl = getattr(spider, "recrawl", None) or merged.get("POLITE_RECRAWL") or ""
    jobdir = recrawl_jobdir_problem(str(merged.get("JOBDIR") or ""), str(recrawl))
    if jobdir is not None:
        return jobdir
    if not merged.get("POLITE_BOT_URL"):
        from polite_crawler.middlewares.identity import needs_bot_url, no_bot_url_message

        networks = parse_networks(merged.getlist("POLITE_TEST_NETWORKS"))
        for url in start:
            if needs_bot_url(url, networks):
                return no_bot_url_message(url)
    return None


def signing_problem(settings: BaseSettings) -> str | None:
    """What the signing middleware would refuse at start (a bad key, a bad directory)."""
    from polite_crawler.middlewares.signing import SigningError, signer_for

    try:
        signer_for(settings)
    except SigningError as exc:
        return f"{exc} (POLITE_SIGNING_KEY)"
    return None


class Command(ScrapyCrawlCommand):
    def long_desc(self) -> str:
        return ("Run a spider of the current project, by name. With the polite_crawler "
                "add-on, a crawl that would refuse to start says why in one line and "
                "exits with status 2; one closed because its page store stayed away "
                "exits with status 1; one that sent nothing because a rule refused every "
                "request (the address policy, the opt-out list, a site's remembered "
                "refusal, no POLITE_BOT_URL) exits with status 3.")

    def _create_crawler(self, spidercls: Any) -> Any:
        crawler = super()._create_crawler(spidercls)
        self._crawler = crawler
        return crawler

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        super().run(args, opts)
        from polite_crawler.closing import exit_status

        crawler = getattr(self, "_crawler", None)
        stats = getattr(crawler, "stats", None)
        if stats is not None:
            self.exitcode = self.exitcode or exit_status(stats.get_value("finish_reason"))

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        if len(args) != 1 or self.settings is None or not uses_addon(self.settings):
            return
        from scrapy.spiderloader import get_spider_loader

        try:
            spidercls = get_spider_loader(self.settings).load(args[0])
        except KeyError:
            fail("crawl", f"no spider named {args[0]!r} (scrapy list names them)")
            return
        problem = start_problem(self.settings, spidercls, dict(opts.spargs))
        if problem is not None:
            fail("crawl", problem)
