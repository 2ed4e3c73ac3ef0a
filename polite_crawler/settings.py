"""Scrapy settings of the polite_crawler project.

Every politeness component comes from the add-on; the POLITE_* knobs and their
defaults are in :mod:`polite_crawler.defaults`.
"""

BOT_NAME = "polite_crawler"
SPIDER_MODULES = ["polite_crawler.spiders"]
NEWSPIDER_MODULE = "polite_crawler.spiders"
# The operator's commands (crawl, explain, forget, history, report); other projects
# get them through the scrapy.commands entry point.
COMMANDS_MODULE = "polite_crawler.commands"

ADDONS = {"polite_crawler.addon.PoliteAddon": 0}

# Many origins at once is where throughput comes from; the frontier keeps one
# request in flight per origin.
CONCURRENT_REQUESTS = 128
REACTOR_THREADPOOL_MAXSIZE = 20
DOWNLOAD_TIMEOUT = 45
LOG_LEVEL = "INFO"
TELNETCONSOLE_ENABLED = False
FEED_EXPORT_ENCODING = "utf-8"
