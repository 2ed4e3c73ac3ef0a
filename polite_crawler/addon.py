"""The politeness add-on: one line switches every rule on, for every spider.

``ADDONS = {"polite_crawler.addon.PoliteAddon": 0}`` in any Scrapy project's
settings installs the frontier scheduler, the middlewares, the pipelines and
the extensions below, and pins the Scrapy settings that would otherwise add
timing of their own (the frontier owns all timing). Settings tune numbers; a
spider or a project cannot switch a rule off: the pinned settings are applied
above every other priority, and the components re-check them when they start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polite_crawler.defaults import POLITE_DEFAULTS

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import Settings

# Above "cmdline" (40): a spider's custom_settings or -s cannot undo these.
ENFORCED = 100

# Scrapy settings the politeness depends on. The frontier holds a request until
# its origin may be fetched, so the downloader must add no delay, keep one
# request per origin, and have room for many origins at once.
PINNED: dict[str, Any] = {
    "DOWNLOAD_DELAY": 0,
    "DOWNLOAD_DELAY_JITTER": 0,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
    "AUTOTHROTTLE_ENABLED": False,
    "ROBOTSTXT_OBEY": False,  # replaced by polite_crawler's own robots.txt middleware
    "COOKIES_ENABLED": False,  # a crawler has no session to keep; cookies grow traps
    "REDIRECT_MAX_TIMES": 5,
    "METAREFRESH_ENABLED": False,
    "DOWNLOAD_HANDLERS": dict.fromkeys(  # address check at connect, timeouts, head cap
        ("http", "https"), "polite_crawler.handlers.GuardedHTTPDownloadHandler"),
}

# Scrapy settings the add-on tunes, at add-on priority (a project may set its own).
# CONCURRENT_ITEMS: Scrapy starts that many workers for every response's output,
# whatever it holds; a page yields an item or two, and 100 workers a page cost
# more CPU than the rest of the engine's work on it.
# LOG_FORMATTER: Scrapy's, minus the per-page DEBUG records when DEBUG is not logged.
TUNED: dict[str, Any] = {
    "CONCURRENT_ITEMS": 8,
    "LOG_FORMATTER": "polite_crawler.logformatter.PoliteLogFormatter",
}

METRICS = "polite_crawler.extensions.metrics.Metrics"

# Components by setting: {import path: order}. ``None`` removes a stock
# component that the project replaces.
COMPONENTS: dict[str, dict[str, int | None]] = {
    "DOWNLOADER_MIDDLEWARES": {
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
        "scrapy.downloadermiddlewares.useragent.UserAgentMiddleware": None,
        "scrapy.downloadermiddlewares.retry.RetryMiddleware": None,
        "polite_crawler.middlewares.robotstxt.RobotsTxtMiddleware": 100,  # robots.txt answers
        "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware": None,
        "polite_crawler.middlewares.sizecap.SizeCapMiddleware": 590,  # decoding + size cap
        "polite_crawler.middlewares.charset.CharsetMiddleware": 585,  # unusable charset labels
        "polite_crawler.middlewares.addresses.AddressPolicyMiddleware": 50,  # SSRF guard, first
        "polite_crawler.middlewares.traps.TrapStopMiddleware": 60,  # origins stopped for low yield
        "polite_crawler.middlewares.settled.SettledFailureMiddleware": 40,  # no tracebacks
        "polite_crawler.middlewares.optout.OptOutMiddleware": 45,  # opt-outs, robots.txt too
        "polite_crawler.middlewares.blocks.BlockMiddleware": 46,  # sites that refused us before
        "polite_crawler.middlewares.blocks.BlockRecordMiddleware": 993,  # their Retry-After
        "polite_crawler.middlewares.conditional.ConditionalRequestMiddleware": 900,  # 304s
        "polite_crawler.middlewares.identity.IdentityMiddleware": 980,
        "polite_crawler.middlewares.gate.GateMiddleware": 990,  # last before the network
        "polite_crawler.middlewares.signing.SigningMiddleware": 995,  # Web Bot Auth, last
    },
    "SPIDER_MIDDLEWARES": {
        "polite_crawler.frontier.done.FrontierDoneMiddleware": 10,  # outermost
        "polite_crawler.middlewares.pagerules.PageRulesMiddleware": 60,  # meta robots, signals
        "polite_crawler.middlewares.traps.TrapMiddleware": 70,  # trap rules, yield monitoring
        "polite_crawler.middlewares.trapmemory.TrapMemoryMiddleware": 75,  # remembered traps
        "polite_crawler.middlewares.authored.AuthoredHostsMiddleware": 900,  # start() hosts
    },
    "ITEM_PIPELINES": {
        "polite_crawler.pipelines.identity.PageIdentityPipeline": 100,  # canonical URL, hashes
        "polite_crawler.pipelines.duplicates.DuplicatesPipeline": 200,  # aliases, near dups
        "polite_crawler.pipelines.store.PageStorePipeline": 300,  # the page store
    },
    "EXTENSIONS": {
        "scrapy.extensions.throttle.AutoThrottle": None,
        "polite_crawler.extensions.jobdir.JobDirExtension": -1000,  # first: settles JOBDIR
        "polite_crawler.extensions.statsfile.StatsFile": 1000,  # POLITE_STATS_FILE
        "polite_crawler.extensions.accesslog.AccessLog": 0,  # POLITE_ACCESS_LOG
        "polite_crawler.extensions.progress.Progress": 0,  # the periodic "where it stands" line
        METRICS: 0,  # POLITE_METRICS_PORT: /metrics (not installed without it)
        "polite_crawler.extensions.collector.CollectorTuning": 0,  # POLITE_GC_THRESHOLDS
        "polite_crawler.extensions.storewatch.StoreWatch": 0,  # page store away: pause, close
        "polite_crawler.extensions.nothingsent.NothingSent": 0,  # nothing sent: say which rule
        "polite_crawler.extensions.sharedstate.SharedState": 0,  # the shared state, said once
        "polite_crawler.extensions.descriptors.DescriptorBudget": 0,  # RLIMIT_NOFILE, EMFILE
        "polite_crawler.extensions.yieldrelease.YieldRelease": 0,  # finished sites' hashes
        "polite_crawler.extensions.slots.IdleSlots": 0,  # idle downloader slots dropped
        "polite_crawler.extensions.sendsfirst.SendsFirst": 0,  # a wave's sends before answers
    },
}

# Single-class settings the add-on installs (and SCHEDULER: the backend's,
# polite_crawler.backend).
CLASSES: dict[str, str] = {
    "DUPEFILTER_CLASS": "polite_crawler.frontier.dupefilter.CanonicalDupeFilter",
}


class PoliteAddon:
    """Scrapy add-on that wires polite_crawler's components into a crawl."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PoliteAddon:
        return cls(crawler)

    def update_settings(self, settings: Settings) -> None:
        for name, value in {**POLITE_DEFAULTS, **TUNED}.items():
            settings.set(name, value, priority="addon")
        from polite_crawler.spidersettings import apply as apply_scrapy_settings

        # Scrapy settings the author set: a gentler one honoured, the rest said or refused.
        apply_scrapy_settings(settings, str(getattr(self.crawler.spidercls, "name", "") or ""))
        for name, value in PINNED.items():
            settings.set(name, value, priority=ENFORCED)
        for name, value in CLASSES.items():
            settings.set(name, value, priority=ENFORCED)
        from polite_crawler.backend import backend_of

        # The frontier's backend: embedded, or Redis (docs/CLUSTER.md).
        settings.set("SCHEDULER", backend_of(settings).scheduler, priority=ENFORCED)
        for name, components in COMPONENTS.items():
            merged = dict(settings.getdict(name))
            merged.update(components)
            settings.set(name, merged, priority=ENFORCED)
        if settings.get("POLITE_METRICS_PORT") in ("", None):
            # Off by default: not installed, so Scrapy logs no "Disabled" warning for it.
            extensions = dict(settings.getdict("EXTENSIONS"))
            extensions[METRICS] = None
            settings.set("EXTENSIONS", extensions, priority=ENFORCED)
        # The browser's handler and trigger (rendering a page in Chromium), only when
        # POLITE_RENDER asks for rendering.
        from polite_crawler.render.settings import install as install_render

        install_render(settings, getattr(self.crawler, "spider", None), ENFORCED)
        # The open-file limit raised, and the requests in flight fitted under it.
        from polite_crawler.extensions.descriptors import fit_descriptors

        fit_descriptors(settings, self.crawler, ENFORCED)
