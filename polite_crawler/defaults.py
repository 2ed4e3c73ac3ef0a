"""Every POLITE_* setting with its default, documented where it is declared.

The add-on (:mod:`polite_crawler.addon`) loads these at ``addon`` priority, so a
project's settings.py, a spider's ``custom_settings`` or ``-s`` on the command
line can tune a number. No setting turns a rule off: numbers below the seeds'
floors are clamped for public hosts (see :mod:`polite_crawler.policy.rest`).

Each entry's meaning is the comment above it (after the entry before it) and the
comment beside it; a sentence starting "Bounds:" says where the code clamps the
value. The manual's settings reference is generated from these comments
(docs/_ext/polite_settings.py, ``make docs``) and the build fails on an entry
without one, so a new setting gets its meaning here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

DEMO_PORT = 8900

POLITE_DEFAULTS: dict[str, Any] = {
    # --- identity ----------------------------------------------------------------------
    # Product token: the User-Agent's first word and the robots.txt token.
    "POLITE_BOT_NAME": "PoliteCrawler",
    # URL of the published bot page (bot_page/). No fake default: crawling a
    # host that is not loopback without it stops the crawl at start.
    "POLITE_BOT_URL": "",
    # Contact address (mailbox), sent in the User-Agent and the From header.
    "POLITE_CONTACT": "",
    # Source addresses or reverse-DNS domain site owners can verify (bot page).
    "POLITE_SOURCE_ADDRESSES": "",
    "POLITE_PURPOSE": "",  # why the crawl collects pages, one sentence for the bot page
    # --- Web Bot Auth signing ----------------------------------------------------------
    # Ed25519 private key file(s), PEM, mode 0600 (make bot-key). Several, comma
    # separated: the first (the newest) signs, every one is published in the key
    # directory (a rotation; later ones may be public-key PEMs). Empty: no signing.
    "POLITE_SIGNING_KEY": "",
    # https origin serving /.well-known/http-message-signatures-directory, sent in
    # Signature-Agent. Empty: the origin of POLITE_BOT_URL.
    "POLITE_SIGNATURE_AGENT": "",
    # The key directory as make bot-page writes it; when the file exists the signing
    # key must be in it (checked at start). Empty: no check.
    "POLITE_SIGNATURE_DIRECTORY": "bot_page/.well-known/http-message-signatures-directory",
    "POLITE_SIGNATURE_TTL": 60,  # seconds from a signature's created to its expires
    # --- rest and frontier -------------------------------------------------------------
    # Seconds between two pages of one origin. Bounds: at least 3 for a public host
    # (a lower value applies to loopback and POLITE_TEST_NETWORKS only, policy/rest.py).
    "POLITE_REST_PAGE": 3.0,
    # Seconds between two requests marked meta["polite_api"] = True (a documented API).
    # Bounds: at least 1 for a public host.
    "POLITE_REST_API": 1.0,
    # The rest is at least this many times the last exchange's duration.
    # Bounds: at least 5 for a public host.
    "POLITE_REST_DURATION_FACTOR": 5.0,
    # Seconds: cap of the duration-based rest. Bounds: at least 30 for a public host.
    "POLITE_REST_DURATION_MAX": 30.0,
    # Seconds: a robots.txt Crawl-delay above it counts as this much.
    # Bounds: at least 60 for a public host.
    "POLITE_CRAWL_DELAY_MAX": 60.0,
    "POLITE_BACKOFF_MAX": 300.0,  # cap of backoff and Retry-After-driven rests
    # Random extra on every rest, up to this fraction of the base rest. Bounds: at least 0.
    "POLITE_JITTER": 1.0,
    # Loopback (and these networks) may use rests below the public floors.
    "POLITE_TEST_NETWORKS": [],
    "POLITE_HOST_BUDGET": 10_000,  # pages per origin per day, and per owner (registrable domain)
    # Requests at once across the hosts of one owner (registrable domain, policy.owners).
    "POLITE_OWNER_CONCURRENCY": 2,
    # Answers whose median is an origin's latency baseline. Bounds: at least 1.
    "POLITE_LATENCY_BASELINE_N": 5,
    # Latest answers whose median is compared with the baseline (over twice it: the rest
    # doubles; back near it: halves again). Bounds: at least 1.
    "POLITE_LATENCY_WINDOW_N": 20,
    # Seconds the window median must also exceed the baseline by before the rest
    # doubles (with the 2x): 1 ms becoming 3 ms is noise.
    # Bounds: at least 0; at most 0.05 for a public host.
    "POLITE_LATENCY_MIN_RISE": 0.05,
    # Seconds between durable checkpoints of the frontier. Bounds: at least 0.05.
    "POLITE_CHECKPOINT_INTERVAL": 2.0,
    # Shared durable state (origin state, robots cache, page store). Empty:
    # .scrapy/polite, shared by every run whatever its JOBDIR.
    "POLITE_STATE_DIR": "",
    # Seconds a cross-process host lease lives (a dead process's lease frees itself),
    # and the longest turn a job holds a host it has work for while another job may be
    # waiting for it. Bounds: at least 1.
    "POLITE_LEASE_TTL": 60.0,
    # Seconds before its origin's time a request may be handed out to Scrapy's
    # downloader; the download handler holds it until the time (the steps between the
    # scheduler and the socket are taken before it, not after).
    # Bounds: 0 to 2, and at most a quarter of the origin's page rest.
    "POLITE_DISPATCH_LEAD": 0.25,
    # --- the frontier on Redis (docs/CLUSTER.md) ---------------------------------------
    # redis://HOST:PORT/DB: the frontier shared by many workers; empty: embedded (SQLite).
    "POLITE_FRONTIER": "",
    "POLITE_CRAWL": "",  # the shared crawl's name (its queues and seen set); empty: "default"
    # Seconds a worker's lease lives (its origins' hold). Bounds: at least 1.
    "POLITE_REDIS_LEASE_TTL": 15.0,
    # Seconds between a worker's batches to Redis.
    # Bounds: at least 0.02, at most a quarter of POLITE_REDIS_LEASE_TTL.
    "POLITE_REDIS_SYNC_INTERVAL": 0.5,
    # Seconds added to a time another worker wrote. Bounds: at least 0.
    "POLITE_CLOCK_SKEW": 1.0,
    # Seconds a robots.txt cache or opt-out list call to Redis may take (they run on the
    # reactor, rarely: a failure makes the origin wait, it does not block the crawl).
    "POLITE_REDIS_STATE_TIMEOUT": 2.0,
    # Seconds an origin's robots.txt entry stays in Redis after its last write (renewed
    # by every answer; an origin asked about again after that fetches robots.txt anew).
    "POLITE_ROBOTS_REDIS_KEEP": 30 * 86400.0,
    # --- robots.txt --------------------------------------------------------------------
    "POLITE_ROBOTS_TTL": 24 * 3600.0,  # seconds a robots.txt copy is fresh
    # Bytes of robots.txt parsed (the rest is ignored). Bounds: at least 500 KiB
    # (RFC 9309 2.5: a smaller value reads 500 KiB).
    "POLITE_ROBOTS_MAX_BYTES": 512 * 1024,
    # Redirects followed for robots.txt; more means "unavailable", no restrictions
    # (RFC 9309 2.3.1.2).
    "POLITE_ROBOTS_MAX_REDIRECTS": 5,
    "POLITE_ROBOTS_RETRY_MIN": 60.0,  # first retry of an unreachable robots.txt; doubles
    "POLITE_ROBOTS_RETRY_MAX": 3600.0,  # cap of that backoff
    # --- verdicts ----------------------------------------------------------------------
    # Retries per request (408/429/503/5xx/errors). Bounds: at least 0.
    "POLITE_RETRY_TIMES": 3,
    # Consecutive failures that stop an origin for the run. Bounds: at least 1.
    "POLITE_BREAKER_FAILURES": 5,
    "POLITE_RETRY_AFTER_PARK": 24 * 3600.0,  # longer Retry-After parks the origin
    # First backoff uniform in [base, 2 x base), doubling per failure.
    "POLITE_BACKOFF_BASE": 4.0,
    "POLITE_MAX_BYTES": 5 * 1024 * 1024,  # body cap, decompressed size included
    # Path of the access log (one JSON line per exchange); a fixed path is appended to.
    # Empty: <state dir>/access-<spider>-<start>-<pid>.jsonl.
    "POLITE_ACCESS_LOG": "",
    "POLITE_STATS_FILE": "",  # path: the final stats as JSON when the spider closes
    # --- discovery and traps -----------------------------------------------------------
    "POLITE_MAX_DEPTH": 10,  # links followed from a start page, sitemap or feed
    "POLITE_MAX_URL_LENGTH": 2000,  # characters; a longer URL is a trap
    "POLITE_MAX_QUERY_PARAMS": 5,  # query parameters; more is a trap
    "POLITE_MAX_SEGMENT_REPEATS": 3,  # one path segment repeated this often is a trap
    "POLITE_STRIP_PARAMS": [],  # extra tracking parameters to strip
    "POLITE_MAX_LINKS_PER_PAGE": 5000,  # links read from one page; the rest are ignored
    # Yield monitoring (policy/traps.py): an origin is stopped when fewer than
    # MIN_SHARE of its last WINDOW pages each brought MIN_NOVELTY new text.
    "POLITE_YIELD_WINDOW": 30,  # the last pages judged
    "POLITE_YIELD_MIN_SHARE": 0.1,  # share of them that must bring new text
    "POLITE_YIELD_MIN_NOVELTY": 0.2,  # share of a page's text that must be new
    # Trap memory (store/traps.py): seconds a URL judged a trap page stays unrequested.
    "POLITE_TRAP_MEMORY": 30 * 24 * 3600.0,
    # Query variants (policy/traps.py QueryVariants): past this many distinct query
    # strings on one path, new ones are admitted only while at least MIN_SHARE of the
    # path's fetched query pages brought new text (faceted navigation stops there).
    "POLITE_MAX_QUERY_VARIANTS": 20,  # query strings of one path admitted freely
    "POLITE_QUERY_VARIANTS_MIN_SHARE": 0.5,  # past them: share that must bring new text
    "POLITE_SITEMAP_MAX_BYTES": 50 * 1024 * 1024,  # sitemaps.org: uncompressed size
    "POLITE_SITEMAP_MAX_URLS": 50_000,  # sitemaps.org: URLs per file
    # --- conditional requests ----------------------------------------------------------
    # Seconds before a stored page is due again: x1.5 after a visit without change, x0.5
    # after a change, within MIN and MAX; DEFAULT at first.
    "POLITE_REVISIT_MIN": 3600.0,  # shortest revisit interval
    "POLITE_REVISIT_MAX": 30 * 24 * 3600.0,  # longest revisit interval
    "POLITE_REVISIT_DEFAULT": 24 * 3600.0,  # a page's first revisit interval
    # --- storage -----------------------------------------------------------------------
    "POLITE_STORE": "",  # empty: SQLite in the state dir; or postgresql://...
    "POLITE_SIMHASH_DISTANCE": 8,  # bits; measured: bench/simhash_tuning.py
    "POLITE_STORE_BATCH": 200,  # page-store writes per transaction (a crash loses one batch)
    "POLITE_STORE_FLUSH": 1.0,  # seconds before an open batch is committed anyway
    # A page store whose database went away (a PostgreSQL restart): writes wait and are
    # retried; past this many waiting, fetching pauses until they are made.
    "POLITE_STORE_BUFFER": 2000,
    # Seconds the database may stay away before the crawl closes (page_store_down), the
    # writes not made kept in the state directory (made when a store opens there next).
    "POLITE_STORE_GIVE_UP": 300.0,
    "POLITE_RECRAWL": "",  # "all": revisit every stored page (as -a recrawl=all), conditionally
    # --- hostile input -----------------------------------------------------------------
    # Networks (CIDR list) the address policy allows besides the hosts of the start
    # URLs: an intranet the operator means to crawl. Everything private, loopback,
    # link-local or reserved stays refused otherwise.
    "POLITE_ALLOW_NETWORKS": [],
    "POLITE_CONNECT_TIMEOUT": 10.0,  # seconds for DNS and connect
    "POLITE_HEADERS_TIMEOUT": 20.0,  # seconds to the end of the response head
    # Seconds for the whole exchange; download_timeout in meta may shorten it, never
    # lengthen it.
    "POLITE_EXCHANGE_TIMEOUT": 45.0,
    "POLITE_MAX_HEADER_BYTES": 64 * 1024,  # status line + headers of one response
    # --- descriptors and kept-alive connections (policy/descriptors.py) -----------
    # Seconds an idle kept-alive connection waits for its host's next request; a host
    # whose rest is longer has its connection closed at once. Below Apache's default
    # KeepAliveTimeout (5 s), the shortest of the common servers' (nginx 75 s): a
    # connection idle longer is one the server may be closing as the request goes.
    "POLITE_KEEPALIVE_IDLE": 4.0,
    # Idle kept-alive connections held at most, all hosts together (the oldest closed
    # first); fewer when the open-file limit cannot hold them (policy/descriptors.py).
    "POLITE_KEEPALIVE_MAX": 256,
    # Seconds between two sweeps of the yield monitor (extensions.yieldrelease): a site
    # whose crawl is over at two sweeps in a row lets its pages' hashes go.
    "POLITE_YIELD_RELEASE_SWEEP": 5.0,
    # Seconds between two sweeps of Scrapy's downloader slots (extensions.slots): a slot
    # with no request in it is dropped at the next sweep, not after Scrapy's 60 s.
    "POLITE_SLOT_SWEEP": 5.0,
    # Seconds at most an answer already in waits, unread, while the engine is behind the
    # frontier's sends (extensions.sendsfirst: a wave of due requests goes out before
    # the pages that came back ahead of it are read; when the engine keeps up none
    # waits). Above a wave's time at 110 requests a second (2.5 to 4 s): 2 s read the
    # wave's first answers in its tail and its last sites fell behind
    # (bench/DESCRIPTORS.md). Bounds: 0 reads every answer at once, as Scrapy does.
    "POLITE_SENDS_FIRST_MAX_WAIT": 5.0,
    # Answers at most held unread at once by sends first (the oldest are read beyond it):
    # a held answer is about 17 KB of the process, and a wave grows with the sites
    # (2,000 sites at 20 s held 35 MB without a bound). Bounds: 0 holds none.
    "POLITE_SENDS_FIRST_MAX_HELD": 512,
    "POLITE_DNS_LOOKUP": "",  # (name, port) -> [address]; empty: getaddrinfo (tests inject one)
    # --- the operator's side -----------------------------------------------------------
    # Seconds between two reads of the opt-out list's version by a running crawl
    # (scrapy forget waits for every live crawl to acknowledge). With the frontier on
    # Redis, also the period of the worker's heartbeat there (on a thread).
    # Bounds: at least 0.01.
    "POLITE_OPTOUT_POLL": 0.2,
    # Access log rotation: a file this big goes on in <name>.2.jsonl, ... (0: never).
    "POLITE_ACCESS_LOG_MAX_BYTES": 100 * 1024 * 1024,
    # Access log retention: files last written longer ago are deleted when a crawl
    # opens (0: kept for ever). The bot page states it.
    "POLITE_ACCESS_LOG_KEEP_DAYS": 365,
    # Seconds between two progress lines (active sites, rests, queue, the polite
    # rate ceiling); 0: none.
    "POLITE_PROGRESS_INTERVAL": 60.0,
    # Python's garbage collector during a crawl (extensions.collector): the three
    # thresholds of gc.set_threshold, "t0,t1,t2"; empty: Python's own (700,10,10),
    # unmeasured. With these, collections took 2.7 CPU-s of a small-site crawl's ~60
    # where Python's took 8.3 (bench.realweb --workload polite), peak RSS +2 %.
    "POLITE_GC_THRESHOLDS": "20000,10,50",
    # Seconds after which a crawl without a full collection makes one (extensions.
    # collector): with the thresholds above a crawl almost never makes one, and cyclic
    # garbage would wait for its end, growing with its length; 0: never timed. At 10 s,
    # 9 full collections added 0.39 CPU-s to a small-site crawl's ~48 (bench.realweb
    # --workload polite) and peak RSS grew 16.3 KB a site from 1,000 to 2,000 sites
    # (21-22 with none before the first page wave).
    "POLITE_GC_FULL_INTERVAL": 10.0,
    # --- Prometheus metrics (docs/METRICS.md; the [metrics] extra) ---------------------
    # TCP port of the worker's /metrics (OpenMetrics text, served from the reactor);
    # empty: no endpoint. 0: any free port (tests).
    "POLITE_METRICS_PORT": "",
    "POLITE_METRICS_HOST": "127.0.0.1",  # address it listens on: loopback unless opened
    # Seconds between two reads of the cluster's figures (Redis frontier only: one
    # worker at a time, the holder of a small lock key, exports them) and of the Redis
    # round trip every worker measures; on a thread, never on a scrape.
    # Bounds: at least 0.1.
    "POLITE_METRICS_CLUSTER_INTERVAL": 15.0,
    # --- rendering in a browser --------------------------------------------------------
    # "" never; "meta": requests marked meta["polite_render"]; "auto": also pages
    # built by scripts (as the site spider's -a render=auto).
    "POLITE_RENDER": "",
    "POLITE_RENDER_BROWSER": "/usr/bin/chromium",  # Chromium's executable (Debian's)
    "POLITE_RENDER_TIMEOUT": 30.0,  # seconds: the whole render, hard limit
    "POLITE_RENDER_IDLE": 0.5,  # seconds without a sub-request that end a render (no selector)
    "POLITE_RENDER_MAX_PAGES": 2,  # browser pages open at once
    "POLITE_RENDER_MAX_SUBREQUESTS": 50,  # sub-requests one render may send
    "POLITE_RENDER_BLOCK_STYLESHEETS": True,  # stylesheets are not fetched
    "POLITE_RENDER_BLOCK_HOSTS": [],  # hosts never reached, added to render/blocked_hosts.txt
    "POLITE_RENDER_CACHE_BYTES": 16 * 1024 * 1024,  # scripts kept for the crawl (memory)
    "POLITE_RENDER_MAX_RSS": 1024 * 1024 * 1024,  # browser bytes resident: beyond, restart it
}


def load_defaults(settings: BaseSettings) -> BaseSettings:
    """``settings`` itself, every POLITE_* setting it lacks set to its default at
    ``default`` priority (a command's settings, as the add-on loads them for a crawl)."""
    for name, value in POLITE_DEFAULTS.items():
        if settings.getpriority(name) is None:
            settings.set(name, value, priority="default")
    return settings


def polite_settings(settings: BaseSettings) -> BaseSettings:
    """The settings a component reads its POLITE_* settings from, bare
    (``settings.getfloat("POLITE_REST_PAGE")``): ``settings`` itself when it holds every
    one (a crawl with the add-on), else a copy (values shared, not copied) with the
    missing ones at their defaults, so a component built without the add-on (a test's
    crawler, another project's) behaves as with it."""
    if all(settings.getpriority(name) is not None for name in POLITE_DEFAULTS):
        return settings
    from scrapy.settings import BaseSettings

    view = BaseSettings()
    for name in settings:
        view.set(name, settings[name], priority=settings.getpriority(name) or 0)
    return load_defaults(view)
