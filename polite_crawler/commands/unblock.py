"""``scrapy unblock ORIGIN...``: ask a site again that refused the crawler.

A site that answered 402, 403 or a challenge page is not asked again for 24 h,
doubling for each refusal in a row up to a week (``middlewares.blocks``,
``policy.blocks``); the block is in the shared state (the state directory's origin
store, or Redis with ``-s POLITE_FRONTIER=redis://...``). An operator who knows the
site will have the crawler again (an agreement, a fixed firewall rule) lifts it here:
the next request of any job asks the site (a running job reads the blocks again within
a second; an origin it already stopped for this run stays stopped until the job ends).
It also lifts the stop the origin's owner keeps (a refusal from one host of a
registrable domain stops its every host for the run, docs/ARCHITECTURE.md "Owner"): on
one machine the owner's stored row keeps it for the run (``polite_owner``), on a cluster
the owner's group for each crawl (docs/CLUSTER.md "Owners"); a host of the owner that a
job has not stopped itself is asked again (by a resumed job, another job of the run, the
worker that takes it); a running job that stopped the owner's hosts asks them again
from its next checkpoint (one machine: the lift's time is kept, ``polite_owner_lift``)
or its next batches (a cluster: ``P:lifts`` counts the lifts), and a job restarted on
its JOBDIR does not take the lifted stops on again from its saved queue.
``scrapy explain URL`` shows a block, when it ends and why. ``--list`` prints them all.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from scrapy.commands import ScrapyCommand

from polite_crawler.commands._base import (
    CommandError,
    add_common,
    command_state_dir,
    emit,
    fail,
    origins_db,
    parse_origin,
    when,
    with_defaults,
)
from polite_crawler.policy.blocks import describe
from polite_crawler.policy.owners import owner_of
from polite_crawler.policy.urls import host_of_origin
from polite_crawler.store.paths import ORIGINS_DB

if TYPE_CHECKING:
    import argparse
    from pathlib import Path


class Command(ScrapyCommand):
    requires_project = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "ORIGIN... | --list"

    def short_desc(self) -> str:
        return "Lift the block of a site that refused the crawler (402, 403, challenge)"

    def long_desc(self) -> str:
        return ("scrapy unblock https://example.org: the site is asked again by the next "
                "request of any job, although it refused the crawler (402, 403 or a "
                "challenge page) and its block has not run out. --list prints every block. "
                "Bad input is one line on stderr and exit status 2.")

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        add_common(parser)
        parser.add_argument("--list", action="store_true", help="print every block")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        settings = with_defaults(self.settings)
        try:
            if opts.list == bool(args):
                raise CommandError("give one or more origins (e.g. https://example.org) "
                                   "or --list")
            origins = [parse_origin(a) for a in args]
            state = command_state_dir(settings, opts.state_dir)
            if state is not None:
                origins_db(state)
            from polite_crawler.backend import backend_of

            backend = backend_of(settings)
            store = backend.block_store(settings, state)
            groups: Any = None
            owners: Path | None = None  # the embedded backend's owner rows
            if backend.cluster and not opts.list:
                from polite_crawler.store.redis_keys import redis_client

                groups = redis_client(backend.frontier_url,
                                      settings.getfloat("POLITE_REDIS_STATE_TIMEOUT"))
            elif not backend.cluster and state is not None:
                owners = state / ORIGINS_DB
            now = time.time()
            try:
                if opts.list:
                    blocks = store.all()
                    data: Any = [{"origin": b.origin, "reason": b.reason, "count": b.count,
                                  "blocked_at": b.blocked_at, "until": b.until,
                                  "active": b.active(now)} for b in blocks]
                    text = "\n".join(f"{describe(b, now)} (until {when(b.until)})"
                                     for b in blocks) or "no site is blocked"
                    emit(opts, data, text)
                    return
                data = []
                lines = []
                for origin in origins:
                    found = store.load(origin)
                    store.delete(origin)
                    lifted = _lift_owner_stops(groups, owners, origin, now)
                    data.append({"origin": origin, "was_blocked": found is not None
                                 and found.active(now), "owner_stops_lifted": lifted})
                    if found is None:
                        line = f"{origin}: not blocked"
                    else:
                        line = (f"{origin}: block lifted ({describe(found, now)}); "
                                "the next request of any job asks it")
                    lines.append(line + "".join(
                        f"; its owner's stop in crawl {crawl} lifted ({stop})"
                        for crawl, stop in sorted(lifted.items())))
                emit(opts, data, "\n".join(lines))
            except store.errors as exc:
                raise CommandError(f"the block list could not be changed: {exc}") from exc
            finally:
                store.close()
                if groups is not None:
                    groups.close()
        except CommandError as exc:
            fail("unblock", str(exc))


# KEYS: an origin's hash; ARGV: the owner's stop reason. Its ``stop:<crawl>`` fields
# that stop it for its owner's refusal, deleted; returns how many.
_UNSTOP_FOR_OWNER = """
local n = 0
for _, k in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(k, 1, 5) == 'stop:' and redis.call('HGET', KEYS[1], k) == ARGV[1] then
    redis.call('HDEL', KEYS[1], k)
    n = n + 1
  end
end
return n
"""


def _unstop_owners_origins(groups: Any, origin: str) -> int:
    """On a cluster, the crawls' stops of the owner's origins for its refusal
    (``stop:<crawl>`` = ``owner_refused``, which refuse their rows), deleted with the
    owner's stop: an origin no worker holds is asked again when a page finds it. The
    keys are found by one SCAN over the origins' hashes (an operator's command, not the
    crawl's path); the refusing origin's own stop stays. Returns how many."""
    from polite_crawler.frontier.core import OWNER_REFUSED
    from polite_crawler.store.redis_keys import origin_key, origin_of_key

    owner = owner_of(host_of_origin(origin))
    glob = "".join(f"\\{c}" if c in "*?[]\\" else c for c in owner)
    n = 0
    for key in groups.scan_iter(match=origin_key(f"*{glob}*"), count=1000):
        other = origin_of_key(key)
        if other and owner_of(host_of_origin(other)) == owner:
            n += int(groups.eval(_UNSTOP_FOR_OWNER, 1, key, OWNER_REFUSED))
    return n


def _lift_owner_stops(groups: Any, owners: Path | None, origin: str,
                      now: float) -> dict[str, str]:
    """The stops the origin's owner keeps, deleted: crawl (a cluster's) or run (one
    machine's) -> the stop. ``groups``: a cluster's Redis client (the owner's group
    keeps one for each crawl); ``owners``: the origin store holding the embedded
    backend's owner rows (the owner's row keeps its run's)."""
    if groups is not None:
        from polite_crawler.frontier.redis_shared import lift_owner_stops
        from polite_crawler.store.redis_keys import lifts_key

        lifted = lift_owner_stops(groups, origin)
        if _unstop_owners_origins(groups, origin) or lifted:
            # After the stops are gone: a worker that sees the count move reads its
            # stopped owners' groups and ends the stops no longer there.
            groups.incr(lifts_key())
        return lifted
    if owners is None:
        return {}
    from polite_crawler.frontier.store import lift_owner_stop

    return lift_owner_stop(owners, owner_of(host_of_origin(origin)), now)
