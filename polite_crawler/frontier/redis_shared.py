"""The frontier's shared state in Redis: keys, Lua scripts and the batched calls.

Every call here is a batch (one pipeline, one round trip, or a few in sequence) and
runs on a worker thread, never on the reactor (:mod:`polite_crawler.frontier.redis_frontier`
plans a batch on the reactor, runs it here, and applies its results on the reactor).

Keys (``P`` is the prefix, ``C`` the crawl's name, ``O`` an origin; their names are
:mod:`polite_crawler.store.redis_keys`, which the stores and commands use too). Every key of one
origin carries the hash tag ``{O}``, so a Lua script that touches an origin's keys runs
on one Redis Cluster slot:

- ``P:o:{O}`` hash, shared by every crawl: ``state`` (:class:`OriginState` as JSON: the
  next-allowed time, rest, latency watch, failure state and breaker, daily budget),
  ``run`` (the crawl that wrote it), ``owner`` (the worker that holds the origin, or
  empty), ``seq:C`` (row counter), ``stop:C`` (why the crawl stopped the origin).
- ``P:q:{O}:C`` sorted set: the crawl's queued rows of the origin. A row is
  ``b"<prio> <seq> <url>\\n<data>"``, scored ``-prio * 1e9 + seq`` (highest priority
  first, then first in); ``<url>`` is the path and query alone when the URL lies under
  ``O`` (:func:`row_body`; whole URLs, as rows were first written, are read too).
- ``P:f:{O}:C`` hash ``seq -> row``: rows the owner has claimed (buffered or in flight).
  A worker taking the origin over puts them back into the queue.
- ``P:s:{O}:C`` set: the crawl's seen set for the origin, 64-bit fingerprints as
  integers (Redis keeps a set of integers as an *intset*: 8 bytes each).
- ``P:g:{D}`` hash, shared by every crawl: the group of an owner ``D`` (a registrable
  domain, :func:`polite_crawler.policy.owners.owner_of`: every origin of its hosts,
  across schemes and ports). A worker owns every origin of an owner it holds or none:
  before it takes an origin it takes the group (``owner``; ``m:<O>`` for each origin it
  holds), and when it gives its last one back the group is free again, with
  ``u:<host>``, each host's rest end, for the next owner. ``b:<O>`` is each origin's
  budget count ("<day> <used>", written after its state): their sum for today is the
  owner's daily count a worker taking the group starts from. ``s:<C>`` is the owner's
  stop for crawl C: a refusal (402, 403, a challenge page) from one of its hosts,
  "<reason> from <O>", written with that origin's stop; a worker taking an origin of the
  group stops it too; ``scrapy unblock`` of any origin of the owner deletes them
  (:func:`lift_owner_stops`). An origin another worker
  found held waits in ``w:<O>`` (and in the owner's nudge set: the owner takes it); the
  release puts those back in the free set.
- ``P:active:C`` set of origins with rows queued or claimed; ``P:free:C`` those of them
  that nobody owns (a worker with room pops from it); ``P:workers:C`` sorted set
  worker -> last heartbeat; ``P:nudge:C:W`` origins W owns that others queued rows
  for; ``P:tpl:C`` hash of URL-row templates; ``P:seed:C`` the
  worker that seeds the start URLs and ``P:seeded:C`` set once it has.
- ``P:alive:W`` the worker's lease (a TTL key, renewed in every batch) and ``P:w:W``
  the end of its last lease (no dispatch of the worker can start after it); ``P:n:W``
  its batch counter (a batch whose count is not above the last one's finds that Redis
  lost the end of its log: see :attr:`RedisShared.kept`).

An origin belongs to the worker named in its ``owner`` field while that worker's
``alive`` key exists. A worker whose ``alive`` key vanished (it died, or stalled past
its TTL) has lost every origin it held; it never renews the key again (a new worker id
would be needed). See docs/CLUSTER.md for the rules built on this.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from polite_crawler.policy.blocks import is_refusal
from polite_crawler.policy.owners import owner_of
from polite_crawler.policy.urls import host_of_origin
from polite_crawler.store.redis_keys import (
    PREFIX,
    active_key,
    alive_key,
    claimed_key,
    free_key,
    group_key,
    lifts_key,
    mark_key,
    nudge_key,
    origin_key,
    owned_key,
    queue_key,
    redis_client,
    seed_key,
    seeded_key,
    seen_key,
    server_key,
    templates_key,
    until_key,
    workers_key,
)

# Rows into the claimed hash f (seq -> row) from every second item of a list from
# ``first`` (ZPOPMIN's {row, score, ...}: 1; {score, row, ...}: 2), each added to out.
_CLAIM_LUA = """
local function claim(f, list, first, out)
  local claimed = {}
  for i = first, #list, 2 do
    local m = list[i]
    local a = string.find(m, ' ', 1, true)
    local b = string.find(m, ' ', a + 1, true)
    claimed[#claimed + 1] = string.sub(m, a + 1, b - 1)
    claimed[#claimed + 1] = m
    out[#out + 1] = m
  end
  for lo = 1, #claimed, 2000 do  -- one HSET for every 1,000 rows claimed
    redis.call('HSET', f, unpack(claimed, lo, math.min(#claimed, lo + 1999)))
  end
end
"""

# KEYS: o, q, s, f.  ARGV: crawl, me, claim n, then (fingerprint or '', prio,
# url\ndata) per row. The seen check of several rows is one SMISMEMBER, the new
# fingerprints one SADD and the rows one ZADD (a fingerprint twice in one call is queued
# once). When the caller owns the origin and asks for up to n rows, and the new rows are
# no more than n, they are claimed at once (one HSET into the claimed hash, not the
# queue: the claim of the next batch is saved). Returns {added, dup, owned, rows
# claimed...}; owner is the origin's owner ('' none).
_PUSH = _CLAIM_LUA + """
local seqf = 'seq:' .. ARGV[1]
-- The stop, the row counter and the owner in one read; the counter is written once
-- (the script runs alone: the same numbers as one HINCRBY a row).
local v = redis.call('HMGET', KEYS[1], seqf, 'owner', 'stop:' .. ARGV[1])
if v[3] then return {-1, 0, 1} end
local fps = {}
for i = 4, #ARGV, 3 do
  if ARGV[i] ~= '' then fps[#fps + 1] = ARGV[i] end
end
local seen, fresh = {}, {}
if #fps == 1 then
  if redis.call('SADD', KEYS[3], fps[1]) == 0 then seen[fps[1]] = true end
  fresh = nil
elseif #fps > 1 then
  for lo = 1, #fps, 1000 do
    local hi = math.min(#fps, lo + 999)
    local m = redis.call('SMISMEMBER', KEYS[3], unpack(fps, lo, hi))
    for j = lo, hi do
      if m[j - lo + 1] == 1 then seen[fps[j]] = true end
    end
  end
end
local added, dup = 0, 0
local seq0 = tonumber(v[1] or '0')
local rows = {}
for i = 4, #ARGV, 3 do
  local fp = ARGV[i]
  if fp ~= '' and seen[fp] then
    dup = dup + 1
  else
    if fp ~= '' then
      seen[fp] = true
      if fresh then fresh[#fresh + 1] = fp end
    end
    added = added + 1
    local seq = seq0 + added
    local prio = tonumber(ARGV[i + 1])
    rows[#rows + 1] = -prio * 1e9 + seq
    rows[#rows + 1] = ARGV[i + 1] .. ' ' .. seq .. ' ' .. ARGV[i + 2]
  end
end
if fresh then
  for lo = 1, #fresh, 1000 do
    redis.call('SADD', KEYS[3], unpack(fresh, lo, math.min(#fresh, lo + 999)))
  end
end
local out = {added, dup, v[2] or ''}
if added > 0 and ARGV[2] ~= '' and v[2] == ARGV[2] and added <= tonumber(ARGV[3]) then
  claim(KEYS[4], rows, 2, out)
else
  for lo = 1, #rows, 2000 do
    redis.call('ZADD', KEYS[2], unpack(rows, lo, math.min(#rows, lo + 1999)))
  end
end
if added > 0 then redis.call('HSET', KEYS[1], seqf, seq0 + added) end
return out
"""

# Rows claimed by an owner that is gone go back to the queue, with their own score.
_REQUEUE_LUA = """
local function requeue(q, f)
  local rows = redis.call('HVALS', f)
  for _, m in ipairs(rows) do
    local a = string.find(m, ' ', 1, true)
    local b = string.find(m, ' ', a + 1, true)
    local prio = tonumber(string.sub(m, 1, a - 1))
    local seq = tonumber(string.sub(m, a + 1, b - 1))
    redis.call('ZADD', q, -prio * 1e9 + seq, m)
  end
  if #rows > 0 then redis.call('DEL', f) end
  return #rows
end
"""

# KEYS: o, q, f.  ARGV: me, the dead owner the caller verified ('' if none), crawl.
# Takes the origin when it has no owner, or its owner is the dead one; its claimed
# rows go back to the queue. Returns {1, state, run, requeued, queued, stop, last owner}
# or {0, owner}.
_TAKE = _REQUEUE_LUA + """
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner and owner ~= '' and owner ~= ARGV[1] and owner ~= ARGV[2] then return {0, owner} end
redis.call('HSET', KEYS[1], 'owner', ARGV[1])
local n = requeue(KEYS[2], KEYS[3])
local v = redis.call('HMGET', KEYS[1], 'state', 'run', 'stop:' .. ARGV[3])
if v[3] then redis.call('DEL', KEYS[2]) end
return {1, v[1] or '', v[2] or '', n, redis.call('ZCARD', KEYS[2]), v[3] or '', owner or ''}
"""

# KEYS: o, q, f.  ARGV: me, crawl, state JSON ('' unchanged), claim n, give back (0/1),
# n done, then the done seqs, then the done rows, then n check and the seqs to check.
# Done rows leave the claimed set and the queue whoever owns the origin now (a row put
# back by a takeover is not fetched again). A row still claimed is in no queue (a claim
# pops it), so the queue is searched only for rows the claimed set no longer held.
# A call that only reports done rows returns {3} there: no fixed reads. The rest only
# for the owner: the state is written, rows are claimed, or the origin is given back
# (its claimed rows requeued; the caller has nothing of it in flight). Checked seqs no
# longer claimed were done by the last owner after it lost the origin: the caller drops
# them. Returns {0} (not the owner), {1, queued, claimed count, n gone, gone seqs...,
# rows...} (queued and claimed count -1 when no rows were asked for: not read),
# {2, queued} or {3}.
_SYNC = _REQUEUE_LUA + _CLAIM_LUA + """
local nd = tonumber(ARGV[6])
for lo = 1, nd, 1000 do  -- one HDEL (and at most one ZREM) for every 1,000 done rows
  local hi = math.min(nd, lo + 999)
  if redis.call('HDEL', KEYS[3], unpack(ARGV, 6 + lo, 6 + hi)) < hi - lo + 1 then
    redis.call('ZREM', KEYS[2], unpack(ARGV, 6 + nd + lo, 6 + nd + hi))
  end
end
local nc = tonumber(ARGV[7 + 2 * nd])
local n = tonumber(ARGV[4])
if ARGV[3] == '' and ARGV[5] ~= '1' and n == 0 and nc == 0 then return {3} end
local v = redis.call('HMGET', KEYS[1], 'owner', 'stop:' .. ARGV[2])
if v[1] ~= ARGV[1] then return {0} end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'state', ARGV[3], 'run', ARGV[2]) end
if v[2] then redis.call('DEL', KEYS[2]) end
if ARGV[5] == '1' then
  requeue(KEYS[2], KEYS[3])
  redis.call('HSET', KEYS[1], 'owner', '')
  return {2, redis.call('ZCARD', KEYS[2])}
end
local out = {1, -1, -1, 0}
for i = 1, nc do
  local seq = ARGV[7 + 2 * nd + i]
  if redis.call('HEXISTS', KEYS[3], seq) == 0 then
    out[#out + 1] = seq
    out[4] = out[4] + 1
  end
end
if n > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[2], n)
  claim(KEYS[3], popped, 1, out)
  -- Fewer rows than asked for: the queue is empty, no need to count it.
  out[2] = (#popped < 2 * n) and 0 or redis.call('ZCARD', KEYS[2])
  out[3] = redis.call('HLEN', KEYS[3])
end
return out
"""


# KEYS: g.  ARGV: me, the dead owner the caller verified ('' if none), n hosts, the
# hosts, then origins. The group is taken when it has no owner, or its owner is me or
# the dead one; the origins become members. A group taken from another owner (or free)
# forgets that owner's members and returns the origins that waited for it, and its
# origins' budget counts of today's owner (``b:<origin>``: "<day> <used>", written with
# each origin's state). Returns {1, fresh, n counts, counts..., until of each host
# asked, waiting...} or {0, owner} (the origins then wait: w:<origin>).
_GROUP_TAKE = """
local owner = redis.call('HGET', KEYS[1], 'owner')
local nh = tonumber(ARGV[3])
if owner and owner ~= '' and owner ~= ARGV[1] and owner ~= ARGV[2] then
  for i = 4 + nh, #ARGV do redis.call('HSET', KEYS[1], 'w:' .. ARGV[i], '1') end
  return {0, owner}
end
local counts, waiting = {}, {}
local fresh = 0
if owner ~= ARGV[1] then
  fresh = 1
  for _, k in ipairs(redis.call('HKEYS', KEYS[1])) do
    local p = string.sub(k, 1, 2)
    if p == 'm:' then
      redis.call('HDEL', KEYS[1], k)
    elseif p == 'w:' then
      redis.call('HDEL', KEYS[1], k)
      waiting[#waiting + 1] = string.sub(k, 3)
    elseif p == 'b:' then
      counts[#counts + 1] = redis.call('HGET', KEYS[1], k)
    end
  end
  redis.call('HSET', KEYS[1], 'owner', ARGV[1])
end
local out = {1, fresh, #counts}
for _, c in ipairs(counts) do out[#out + 1] = c end
for i = 4, 3 + nh do out[#out + 1] = redis.call('HGET', KEYS[1], 'u:' .. ARGV[i]) or '0' end
for _, o in ipairs(waiting) do out[#out + 1] = o end
for i = 4 + nh, #ARGV do
  redis.call('HSET', KEYS[1], 'm:' .. ARGV[i], '1')
  redis.call('HDEL', KEYS[1], 'w:' .. ARGV[i])
end
return out
"""

# KEYS: g.  ARGV: me, n hosts, then (host, the end of its rest) pairs, then the origins
# given back (or not taken). Only the owner's call counts. Each host's rest end is kept
# (``u:<host>``) for the next owner; when no member is left the group is free and the
# origins that waited for it are returned (the caller puts them in the free set).
_GROUP_RELEASE = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return {} end
local nh = tonumber(ARGV[2])
for i = 3 + 2 * nh, #ARGV do redis.call('HDEL', KEYS[1], 'm:' .. ARGV[i]) end
for i = 3, 2 + 2 * nh, 2 do
  local f = 'u:' .. ARGV[i]
  if tonumber(ARGV[i + 1]) > tonumber(redis.call('HGET', KEYS[1], f) or '0') then
    redis.call('HSET', KEYS[1], f, ARGV[i + 1])
  end
end
local keys = redis.call('HKEYS', KEYS[1])
for _, k in ipairs(keys) do
  if string.sub(k, 1, 2) == 'm:' then return {} end
end
redis.call('HSET', KEYS[1], 'owner', '')
local out = {}
for _, k in ipairs(keys) do
  if string.sub(k, 1, 2) == 'w:' then
    redis.call('HDEL', KEYS[1], k)
    out[#out + 1] = string.sub(k, 3)
  end
end
return out
"""

# KEYS: g.  ARGV: me, then (origin, "<day> <used>") pairs: the origins' budget counts as
# their states were written in the same batch (just before), kept with the group for the
# owner's shared daily budget; only the group's owner writes them.
_GROUP_BUDGET = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
for i = 2, #ARGV, 2 do redis.call('HSET', KEYS[1], 'b:' .. ARGV[i], ARGV[i + 1]) end
return 1
"""


# KEYS: srv.  ARGV: me, in flight (places in use: kept whatever the answer), want,
# limit reported ('' none), my rest end, my machine wait, now, grace (exchange timeout
# plus clock skew), window (seconds after Redis's start in which a grant the restart may
# have lost is guarded), prefix, places held as I know them, probing ('1': the raise I
# reported is not judged yet), no probe before (a failed probe's wait, ``np``: shared,
# so each worker does not try the same concurrency again on its own).
# A worker's places count while its lease lives and, once gone, until its lease end
# plus the grace (a request of it may be out until then); then they are dropped and the
# grace's end is kept as the rest end. The limit is lowered by anyone and raised only
# by a worker whose full rounds found the latency flat while every place was in use
# (the machine at the limit); until that probe is judged (``pr``: the prober, while it
# lives) the new place is the prober's and nobody else gets one, so the machine is at
# the new limit while the prober's answers measure it. Free places
# go first to the workers that waited longest, each at most a fair share of the limit
# when several want places. Within the window after a restart, a hash that outlived it
# grants nobody more than it held (a grant of the lost second may still be in use).
# A limit nobody asked about for SERVER_IDLE seconds starts again at one (a later
# crawl learns it afresh, as one process does). Returns {granted, limit, rest end,
# wait, others waiting, no probe before, holders...}.
SERVER_IDLE = 600.0
_SERVER = f"local IDLE = {SERVER_IDLE!r}" + """
local K = KEYS[1]
local me, hold, want = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now, grace, window, P = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), ARGV[10]
local f, held, dem = {}, {}, {}
local all = redis.call('HGETALL', K)
for i = 1, #all, 2 do
  local k, v = all[i], all[i + 1]
  local pre, w = string.sub(k, 1, 2), string.sub(k, 3)
  if pre == 'h:' then held[w] = tonumber(v)
  elseif pre == 'd:' then dem[w] = v
  else f[k] = v end
end
local lim = tonumber(f['lim'] or '1')
if now - tonumber(f['t'] or '0') > IDLE and lim ~= 1 then
  lim = 1  -- nobody asked for a while: the limit is learnt again from one, as in one run
  redis.call('HSET', K, 'lim', 1)
end
redis.call('HSET', K, 't', ARGV[7])
local u0 = tonumber(f['u'] or '0')
local u, x, np = u0, tonumber(f['x'] or '0'), tonumber(f['np'] or '0')
local status = {}
local function alive(w)  -- 2 alive, 1 gone within the grace, 0 gone
  if status[w] == nil then
    if redis.call('EXISTS', P .. ':alive:' .. w) == 1 then status[w] = 2
    else
      local e = tonumber(redis.call('GET', P .. ':w:' .. w) or '0') + grace
      if now < e then status[w] = 1 else
        status[w] = 0
        if e > u then u = e end
      end
    end
  end
  return status[w]
end
local others, holders = 0, {}
for w, n in pairs(held) do
  if w ~= me then
    if alive(w) > 0 then
      others = others + n
      holders[#holders + 1] = w
    else
      redis.call('HDEL', K, 'h:' .. w, 'd:' .. w)
    end
  end
end
local wants, since = {}, {}
local mysince = now
for w, v in pairs(dem) do
  local a, b = string.match(v, '(%S+) (%S+)')
  if w == me then mysince = tonumber(b)
  elseif alive(w) == 2 then wants[w], since[w] = tonumber(a), tonumber(b)
  else redis.call('HDEL', K, 'd:' .. w) end
end
local pr = f['pr']
if pr and pr ~= me and alive(pr) == 0 then
  redis.call('HDEL', K, 'pr')
  pr = nil
end
if ARGV[4] ~= '' then
  local rl = math.max(tonumber(ARGV[4]), 1)
  if rl < lim or (rl > lim and not pr and others + (held[me] or 0) >= lim) then
    if rl > lim then
      pr = me  -- a probe: the prober alone sends until it is judged
      redis.call('HSET', K, 'pr', me)
    end
    lim = rl
    redis.call('HSET', K, 'lim', lim)
  end
end
if pr == me and ARGV[12] ~= '1' then
  redis.call('HDEL', K, 'pr')
  pr = nil
end
if tonumber(ARGV[6]) > x then
  x = tonumber(ARGV[6])
  redis.call('HSET', K, 'x', ARGV[6])
end
if tonumber(ARGV[13]) > np then
  np = tonumber(ARGV[13])
  redis.call('HSET', K, 'np', ARGV[13])
end
local n = (want > 0) and 1 or 0
for _ in pairs(wants) do n = n + 1 end
local fair = math.max(1, math.floor(lim / math.max(n, 1)))
local before, waiting = 0, 0
for w, a in pairs(wants) do
  local unmet = math.min(a, fair) - (held[w] or 0)
  if unmet > 0 then
    waiting = waiting + 1
    if since[w] < mysince then before = before + unmet end
  end
end
local new = math.min(want, math.max(lim - others - before, 0))
if n > 1 then new = math.min(new, fair) end
if pr == me then
  new = math.min(want, math.max(lim - others, 0))  -- its probe's full round
elseif pr then
  new = 0  -- a probe under way: the machine is the prober's until it is judged
end
local had = held[me] or 0
local kept = math.max(tonumber(ARGV[11]), had)
if new > kept then
  -- More places than held: unless Redis restarted moments ago and this hash outlived
  -- the restart (a grant of the lost second may be in use), read only then.
  local up = tonumber(string.match(redis.call('INFO', 'server'),
                                   'uptime_in_seconds:(%d+)')) or 1e9
  local start = tonumber(redis.call('TIME')[1]) - up
  local r, p = tonumber(f['r'] or '-1'), tonumber(f['p'] or '-1')
  if r >= 0 and math.abs(r - start) > 2 then
    p = start
    redis.call('HSET', K, 'p', start)
  end
  if r < 0 or math.abs(r - start) > 2 then redis.call('HSET', K, 'r', start) end
  -- (Its start and clock in whole seconds: Redis may have been up only up - 1 seconds.)
  if math.max(up - 1, 0) < window and p >= 0 and math.abs(p - start) <= 2 then new = kept end
end
new = math.max(new, hold)
if new ~= had then
  if new > 0 then redis.call('HSET', K, 'h:' .. me, new) else redis.call('HDEL', K, 'h:' .. me) end
end
if new == 0 and pr == me then redis.call('HDEL', K, 'pr') end
if want > new then
  redis.call('HSET', K, 'd:' .. me, want .. ' ' .. mysince)
elseif dem[me] then
  redis.call('HDEL', K, 'd:' .. me)
end
if new < had and tonumber(ARGV[5]) > u then u = tonumber(ARGV[5]) end
if u ~= u0 then redis.call('HSET', K, 'u', tostring(u)) end
local out = {new, lim, tostring(u), tostring(x), waiting, tostring(np)}
for _, w in ipairs(holders) do out[#out + 1] = w end
return out
"""


# A nudge that names a server address, not an origin (an origin has no space).
SERVER_NUDGE = "srv "


def seen_fp(canonical: str) -> int:
    """The seen set's 64-bit fingerprint of a canonical URL (a signed integer: an intset)."""
    digest = hashlib.blake2b(canonical.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@dataclass
class OriginSync:
    """One owned origin's part of a batch."""

    origin: str
    state: str = ""  # JSON to write, or '' when unchanged
    claim: int = 0
    give_back: bool = False
    done: list[tuple[bytes, bytes]] = field(default_factory=list)  # (seq, row)
    check: list[bytes] = field(default_factory=list)  # claimed seqs to confirm
    # The worker held the origin as the batch was planned (owned, its lease valid): no
    # takeover can have put its claimed rows back in the queue, so done rows alone may
    # go as a plain HDEL. Otherwise they go through the sync script: HDEL and ZREM in one.
    held: bool = True
    # Given back: the end of its host's rest (kept with the owner's group for the next
    # owner of the host).
    host_until: float = 0.0
    # With a state written: its budget count ("<day> <used>"), kept with the owner's
    # group for the owner's shared daily budget ('' when none is counted).
    budget: str = ""

    @property
    def done_only(self) -> bool:
        """Only done rows to report, of an origin held: no state, claim, give back or
        check (a plain HDEL)."""
        return bool(self.done) and self.held and not (self.state or self.claim
                                                      or self.give_back or self.check)


@dataclass
class ServerCall:
    """One server address's places in a batch (the ``_SERVER`` script)."""

    address: str
    in_flight: int  # places in use now: kept whatever the answer
    want: int  # places wanted (0: give back every place not in use)
    limit: int  # the limit as this worker judges it (reported)
    until: float  # the end of its rounds' rest (kept with places given back)
    wait: float  # a failure of the machine: every worker's sites wait until then
    held: int  # places held as this worker knows them
    probing: bool = False  # the limit it raised is not judged yet
    no_probe: float = 0.0  # no probe before this (a probe found the machine queue ours)


@dataclass
class ServerGrant:
    address: str
    granted: int
    limit: int
    until: float
    wait: float
    waiting: int  # other workers waiting for places
    no_probe: float  # no worker probes a larger limit before this
    holders: list[str] = field(default_factory=list)  # other workers holding places


@dataclass
class SyncResult:
    origin: str
    status: int  # 0 not the owner, 1 owned (claimed rows), 2 given back, 3 done rows only,
    # 4 rows claimed with their push
    queued: int = 0  # -1: not read (no rows asked for)
    claimed_total: int = 0  # -1: not read
    rows: list[bytes] = field(default_factory=list)
    gone: list[bytes] = field(default_factory=list)


@dataclass
class Taken:
    origin: str
    state: str
    run: str
    requeued: int
    queued: int
    stop: str
    last_owner: str
    last_owner_until: float  # end of the last owner's lease (0: it gave the origin back)
    # Seconds since Redis started, read with the take: a Redis restarted from its AOF may
    # have lost the last second's writes (this origin's last take and state among them).
    redis_up: float = float("inf")
    # The end of the host's rest as the group's last owner left it (0: none known).
    host_until: float = 0.0
    # The group was taken afresh (not held here): its origins' budget counts, each
    # "<day> <used>", whose today's sum is the owner's count (None: held here already,
    # this worker's own count is newer).
    owner_budget: list[str] | None = None
    # The owner's stop for this crawl, as its group holds it (a refusal from one of its
    # hosts, "<reason> from <origin>"; "" none): the worker that takes the group stops
    # the origin as the refusal stopped the owner's hosts for the holder that saw it.
    owner_stop: str = ""


def row_body(origin: str, url: str, data: bytes) -> bytes:
    """A queue row after its priority and sequence: the URL, without its origin when it
    lies under it (the row's key names the origin: ~25 bytes a row fewer), then the data."""
    if url.startswith(origin) and url[len(origin):len(origin) + 1] == "/":
        url = url[len(origin):]
    return url.encode("utf-8") + b"\n" + data


def parse_row(row: bytes, origin: str) -> tuple[int, bytes, str, bytes]:
    """``(prio, seq, url, data)`` of a stored row of ``origin``: a URL stored without its
    origin (it starts with ``/``) gets it back; a whole URL (rows written before rows
    left their origin out, or a URL not under it) is read as it is."""
    a = row.index(b" ")
    b = row.index(b" ", a + 1)
    nl = row.index(b"\n", b + 1)
    url = row[b + 1:nl].decode("utf-8")
    if url.startswith("/"):
        url = origin + url
    return int(row[:a]), row[a + 1:b], url, row[nl + 1:]


class RedisShared:
    """Batched access to one crawl's shared frontier (thread-safe: redis-py pools)."""

    def __init__(self, url: str, crawl: str, worker: str, *, prefix: str = PREFIX) -> None:
        self.r: Any = redis_client(url, 30.0)  # a batch may be long: not the small calls
        self.crawl = crawl
        self.worker = worker
        self.p = prefix
        self._push = self.r.register_script(_PUSH)
        self._take = self.r.register_script(_TAKE)
        self._sync = self.r.register_script(_SYNC)
        self._group_take = self.r.register_script(_GROUP_TAKE)
        self._group_release = self.r.register_script(_GROUP_RELEASE)
        self._group_budget = self.r.register_script(_GROUP_BUDGET)
        self._server = self.r.register_script(_SERVER)
        self._mark = 0  # the batch counter as last acknowledged
        # Whether everything Redis acknowledged to this worker is still there, as the
        # last batch found: its count in Redis is above the one before (a log cut back
        # by a restart counts from less; the writes of a batch precede its count).
        self.kept = True
        # Owned origins another worker queued rows for, read in the last batch.
        self.nudged: list[str] = []
        # Server addresses where another worker waits for places, read in the last batch.
        self.server_nudged: list[str] = []
        # The places of servers asked for in the last batch (RedisShared.batch's
        # ``servers``), and how long a dead worker's places stay counted and a
        # restart's grants are guarded (set by the frontier: see _SERVER).
        self.grants: list[ServerGrant] = []
        self.server_grace = 0.0
        self.server_window = 0.0
        # The count of ``scrapy unblock``'s owner-stop lifts (lifts_key) as the last
        # batch read it, and whether each owner the batch checked still has its stop.
        self.lifts = 0
        self.owner_stops_kept: list[bool] = []

    # --- keys ------------------------------------------------------------------
    def okey(self, origin: str) -> str:
        return origin_key(origin, self.p)

    def gkey(self, origin: str) -> str:
        """The group key of the origin's owner (its host's registrable domain)."""
        return group_key(owner_of(host_of_origin(origin)), self.p)

    @property
    def owner_stop_field(self) -> str:
        """The field of an owner's group that holds its stop for this crawl."""
        return f"s:{self.crawl}"

    def qkey(self, origin: str) -> str:
        return queue_key(origin, self.crawl, self.p)

    def fkey(self, origin: str) -> str:
        return claimed_key(origin, self.crawl, self.p)

    def skey(self, origin: str) -> str:
        return seen_key(origin, self.crawl, self.p)

    @property
    def active_key(self) -> str:
        return active_key(self.crawl, self.p)

    @property
    def free_key(self) -> str:
        return free_key(self.crawl, self.p)

    @property
    def workers_key(self) -> str:
        return workers_key(self.crawl, self.p)

    def alive_key(self, worker: str) -> str:
        return alive_key(worker, self.p)

    def owned_key(self, worker: str) -> str:
        return owned_key(worker, self.crawl, self.p)

    def until_key(self, worker: str) -> str:
        return until_key(worker, self.p)

    # --- the worker's own lease --------------------------------------------------
    def register(self, now: float, ttl: float) -> None:
        pipe = self.r.pipeline(transaction=False)
        pipe.set(self.until_key(self.worker), repr(now + ttl), ex=86400)
        pipe.set(self.alive_key(self.worker), "1", px=int(ttl * 1000), nx=True)
        pipe.zadd(self.workers_key, {self.worker: now})
        pipe.execute()

    def _heartbeat(self, pipe: Any, now: float, ttl: float) -> None:
        # The end of the lease is written before the lease is extended: a reader that
        # finds the lease gone reads an end no earlier than the real one.
        pipe.set(self.until_key(self.worker), repr(now + ttl), ex=86400)
        pipe.set(self.alive_key(self.worker), "1", px=int(ttl * 1000), xx=True)
        pipe.zadd(self.workers_key, {self.worker: now})

    def resign(self) -> None:
        """The worker leaves (it gave every origin back): its lease ends now."""
        pipe = self.r.pipeline(transaction=False)
        pipe.delete(self.alive_key(self.worker), self.owned_key(self.worker),
                    nudge_key(self.worker, self.crawl, self.p))
        pipe.set(self.until_key(self.worker), "0", ex=86400)
        pipe.zrem(self.workers_key, self.worker)
        pipe.execute()

    # --- one batch -----------------------------------------------------------------
    def batch(
        self,
        *,
        now: float,
        ttl: float,
        pushes: dict[str, list[tuple[int | None, int, bytes]]],
        seen: dict[str, list[int]],
        templates: dict[int, bytes],
        stops: dict[str, str],
        drops: list[str],
        owned: list[OriginSync],
        push_claims: dict[str, int] | None = None,
        servers: list[ServerCall] | None = None,
        unstops: list[str] | None = None,
        owner_checks: list[str] | None = None,
    ) -> tuple[bool, dict[str, tuple[int, int]], list[SyncResult], int, int]:
        """Write what the worker queued and did, renew its lease, claim rows.

        ``push_claims``: owned origin -> rows its push may claim at once. ``servers``:
        the server addresses whose places to ask for (their answers: ``self.grants``).
        ``unstops``: origins whose stop for the crawl ends (their owner's stop was
        lifted: before the pushes, which a stop refuses). ``owner_checks``: owners whose
        group to read for the crawl's stop (``self.owner_stops_kept``, in order; the
        lifts' count ``lifts_key`` is read in every batch: ``self.lifts``).
        Returns (lease renewed, origin -> (added, duplicates) of the pushes, the owned
        origins' results (status 4: rows claimed with the push), active origins, live
        workers).
        """
        push_claims = push_claims or {}
        pipe = self.r.pipeline(transaction=False)
        tpl = templates_key(self.crawl, self.p)
        for tid, data in templates.items():
            pipe.hsetnx(tpl, str(tid), data)
        refusals = 0
        for origin, reason in stops.items():
            pipe.hset(self.okey(origin), f"stop:{self.crawl}", reason)
            pipe.delete(self.qkey(origin))
            if is_refusal(reason):
                refusals += 1
                # The owner's answer: kept with its group for the crawl (``s:<crawl>``),
                # so a worker taking the group later stops its hosts without asking.
                pipe.hsetnx(self.gkey(origin), self.owner_stop_field,
                            f"{reason} from {origin}")
        for origin in drops:
            pipe.delete(self.qkey(origin))
        unstops = unstops or []
        for origin in unstops:
            pipe.hdel(self.okey(origin), f"stop:{self.crawl}")
        push_order = []
        for origin, rows in pushes.items():
            n = push_claims.get(origin, 0)
            args: list[Any] = [self.crawl, self.worker if n > 0 else "", str(n)]
            for fp, prio, body in rows:
                args += ["" if fp is None else str(fp), str(prio), body]
            self._push(keys=[self.okey(origin), self.qkey(origin), self.skey(origin),
                             self.fkey(origin)], args=args, client=pipe)
            push_order.append(origin)
        for origin, fps in seen.items():
            pipe.sadd(self.skey(origin), *fps)
        for s in owned:
            if s.done_only:
                # Done rows alone: one HDEL, no script. A row the claimed hash no longer
                # held (a takeover put it back in the queue) leaves in the script below.
                pipe.hdel(self.fkey(s.origin), *[d[0] for d in s.done])
                continue
            self._sync_call(pipe, s)
        # The budget counts of the states just written, after them: a log cut back by a
        # restart that keeps a count keeps the state it came with.
        # An origin held with a valid lease as the batch was planned is in a group no
        # takeover can have taken (as for done rows alone): a plain HSET; else the script.
        budgets: dict[tuple[str, bool], list[str]] = {}
        for s in owned:
            if s.state and s.budget:
                budgets.setdefault((self.gkey(s.origin), s.held), []).extend(
                    (s.origin, s.budget))
        for (g, held), pairs in budgets.items():
            if held:
                pipe.hset(g, mapping={f"b:{o}": v for o, v in zip(pairs[::2], pairs[1::2],
                                                                   strict=True)})
            else:
                self._group_budget(keys=[g], args=[self.worker, *pairs], client=pipe)
        self._heartbeat(pipe, now, ttl)
        pipe.incr(mark_key(self.worker, self.p))
        pipe.expire(mark_key(self.worker, self.p), 86400)
        pipe.spop(nudge_key(self.worker, self.crawl, self.p), 100_000)
        servers = servers or []
        for c in servers:
            self._server(keys=[server_key(c.address, self.p)],
                         args=[self.worker, str(c.in_flight), str(c.want), str(c.limit)
                               if c.limit else "", repr(c.until), repr(c.wait), repr(now),
                               repr(self.server_grace), repr(self.server_window), self.p,
                               str(c.held), "1" if c.probing else "0",
                               repr(c.no_probe)], client=pipe)
        # After the stops written above: a refusal's own stop is in its group by now.
        pipe.get(lifts_key(self.p))
        owner_checks = owner_checks or []
        for name in owner_checks:
            pipe.hexists(group_key(name, self.p), self.owner_stop_field)
        out = pipe.execute()
        i = len(templates) + 2 * len(stops) + refusals + len(drops) + len(unstops)
        pushed: dict[str, tuple[int, int]] = {}
        unowned: list[str] = []
        nudges: dict[str, list[str]] = {}
        results = []
        for origin in push_order:
            added, dup, owner, *claimed = out[i]
            pushed[origin] = (int(added), int(dup))
            w = bytes(owner).decode("utf-8") if isinstance(owner, bytes) else ""
            if int(added) > 0 and not w:
                unowned.append(origin)
            elif int(added) > 0 and w != self.worker:
                nudges.setdefault(w, []).append(origin)  # its owner claims them
            if claimed:
                results.append(SyncResult(origin, 4, -1, -1, [bytes(m) for m in claimed]))
            i += 1
        i += len(seen)
        requeued_done = []
        for s in owned:
            res = out[i]
            i += 1
            if s.done_only:
                if int(res) < len(s.done):
                    requeued_done.append(s)
                results.append(SyncResult(s.origin, 3, -1, -1))
                continue
            status = int(res[0])
            if status == 1:
                ng = int(res[3])
                results.append(SyncResult(s.origin, 1, int(res[1]), int(res[2]),
                                          [bytes(m) for m in res[4 + ng:]],
                                          [bytes(m) for m in res[4:4 + ng]]))
            elif status == 2:
                results.append(SyncResult(s.origin, 2, int(res[1])))
                if int(res[1]) > 0:
                    unowned.append(s.origin)
            elif status == 3:
                results.append(SyncResult(s.origin, 3, -1, -1))
            else:
                results.append(SyncResult(s.origin, 0))
        i += len(budgets)
        renewed = out[i + 1] is not None and out[i + 1] is not False
        mark = int(out[i + 3])
        self.kept = mark > self._mark
        self._mark = mark
        nudged = [bytes(o).decode("utf-8") for o in out[i + 5] or []]
        self.nudged = [o for o in nudged if not o.startswith(SERVER_NUDGE)]
        self.server_nudged = [o[len(SERVER_NUDGE):] for o in nudged
                              if o.startswith(SERVER_NUDGE)]
        self.grants = []
        served = i + 6 + len(servers)
        self.lifts = int(out[served] or 0)
        self.owner_stops_kept = [bool(x) for x in out[served + 1:]]
        for c, res in zip(servers, out[i + 6:served], strict=True):
            grant = ServerGrant(c.address, int(res[0]), int(res[1]), float(res[2]),
                                float(res[3]), int(res[4]), float(res[5]),
                                [bytes(w).decode() for w in res[6:]])
            self.grants.append(grant)
            if grant.granted < c.want:  # the holders learn that this worker waits
                for w in grant.holders:
                    nudges.setdefault(w, []).append(SERVER_NUDGE + c.address)
        # Active origins: pushed ones join (after their rows are in: see drop_empty).
        pipe = self.r.pipeline(transaction=False)
        for s in requeued_done:
            self._sync_call(pipe, s)  # HDEL and ZREM as one: the queue may be claimed from
        added_origins = [o for o, (a, _d) in pushed.items() if a > 0]
        if added_origins:
            pipe.sadd(self.active_key, *added_origins)
        if unowned:
            pipe.sadd(self.free_key, *unowned)
        for w, origins in nudges.items():
            pipe.sadd(nudge_key(w, self.crawl, self.p), *origins)
            pipe.expire(nudge_key(w, self.crawl, self.p), 86400)
        left = [r.origin for r in results if r.status in (0, 2)]
        if left:
            pipe.srem(self.owned_key(self.worker), *left)
        pipe.scard(self.active_key)
        pipe.zcount(self.workers_key, now - ttl, "+inf")
        counts = pipe.execute()
        counts = counts[len(requeued_done):]
        given = {s.origin: s.host_until for s in owned if s.give_back}
        self.release_groups({r.origin: given.get(r.origin, 0.0) for r in results
                             if r.status in (0, 2)})
        return renewed, pushed, results, int(counts[-2]), max(int(counts[-1]), 1)

    def release_groups(self, origins: dict[str, float]) -> None:
        """The origins (-> their host's rest end) are no longer this worker's: they leave
        their owners' groups (each host's rest end kept there); a group left empty is
        free, and the origins that waited for it go to the free set (one round trip,
        none when there is nothing to release)."""
        if not origins:
            return
        by_group: dict[str, list[str]] = {}
        for o in origins:
            by_group.setdefault(self.gkey(o), []).append(o)
        pipe = self.r.pipeline(transaction=False)
        for g, members in by_group.items():
            until: dict[str, float] = {}
            for o in members:
                h = host_of_origin(o)
                until[h] = max(until.get(h, 0.0), origins[o])
            pairs = [x for h, u in until.items() for x in (h, repr(u))]
            self._group_release(keys=[g], args=[self.worker, str(len(until)), *pairs,
                                                *members], client=pipe)
        waiting = [bytes(o).decode("utf-8") for res in pipe.execute() for o in res or []]
        self.make_free(waiting)

    def _sync_call(self, pipe: Any, s: OriginSync) -> None:
        args = [self.worker, self.crawl, s.state, str(s.claim), "1" if s.give_back else "0",
                str(len(s.done)), *[d[0] for d in s.done], *[d[1] for d in s.done],
                str(len(s.check)), *s.check]
        self._sync(keys=[self.okey(s.origin), self.qkey(s.origin), self.fkey(s.origin)],
                   args=args, client=pipe)

    def drop_empty(self, origins: list[str]) -> list[str]:
        """Origins with nothing queued or claimed leave the active set (a push since puts
        them back: the pusher adds to the set after its rows are in, and the check here
        comes after the removal). Returns those still active."""
        if not origins:
            return []
        pipe = self.r.pipeline(transaction=False)
        pipe.srem(self.active_key, *origins)
        pipe.execute()
        pipe = self.r.pipeline(transaction=False)
        for o in origins:
            pipe.exists(self.qkey(o), self.fkey(o))
        left = [o for o, n in zip(origins, pipe.execute(), strict=True) if n]
        if left:
            self.r.sadd(self.active_key, *left)
        return left

    # --- taking origins over --------------------------------------------------------
    def free(self, n: int) -> list[str]:
        """Pop up to ``n`` active origins nobody owns (each goes to one popper)."""
        found = self.r.spop(self.free_key, n) or []
        return sorted({bytes(o).decode("utf-8") for o in found})

    def make_free(self, origins: list[str]) -> None:
        """Put origins popped and not taken back into the free set."""
        if origins:
            self.r.sadd(self.free_key, *origins)

    def candidates(self, n: int) -> list[str]:
        found = self.r.srandmember(self.active_key, n) or []
        return sorted({bytes(o).decode("utf-8") for o in found})

    def take(self, origins: list[str]) -> list[Taken]:
        """Take the origins that have no owner or a dead one (three round trips)."""
        if not origins:
            return []
        groups = sorted({self.gkey(o) for o in origins})
        pipe = self.r.pipeline(transaction=False)
        for o in origins:
            pipe.hget(self.okey(o), "owner")
        for g in groups:
            pipe.hget(g, "owner")
        pipe.info("server")
        *found, server = pipe.execute()
        up = float(server.get("uptime_in_seconds", float("inf")))
        owners = [bytes(v).decode() if v else "" for v in found[:len(origins)]]
        group_owners = dict(zip(groups, [bytes(v).decode() if v else ""
                                         for v in found[len(origins):]], strict=True))
        others = sorted({w for w in (*owners, *group_owners.values())
                         if w and w != self.worker})
        dead: dict[str, float] = {}
        if others:
            pipe = self.r.pipeline(transaction=False)
            for w in others:
                pipe.exists(self.alive_key(w))
                pipe.get(self.until_key(w))
            res = pipe.execute()
            for k, w in enumerate(others):
                if not res[2 * k]:
                    until = res[2 * k + 1]
                    # No record of its lease's end: assume it ended now (the caller
                    # adds the request timeout and a rest).
                    dead[w] = float(until) if until is not None else float("inf")
        # The host's group first: a worker holds all of a host's origins or none.
        members: dict[str, list[tuple[str, str]]] = {}
        for o, w in zip(origins, owners, strict=True):
            if w and w != self.worker and w not in dead:
                continue
            members.setdefault(self.gkey(o), []).append((o, w))
        tried, group_until, group_budget, freed, nudges, group_stop = self._take_groups(
            members, group_owners, dead)
        pipe = self.r.pipeline(transaction=False)
        for o, w in tried:
            self._take(keys=[self.okey(o), self.qkey(o), self.fkey(o)],
                       args=[self.worker, w if w in dead else "", self.crawl], client=pipe)
        for holder, waiting in nudges.items():
            pipe.sadd(nudge_key(holder, self.crawl, self.p), *waiting)
            pipe.expire(nudge_key(holder, self.crawl, self.p), 86400)
        out = []
        missed = {}
        for (o, w), res in zip(tried, pipe.execute()[:len(tried)], strict=True):
            if int(res[0]) != 1:
                missed[o] = 0.0
                continue
            last = bytes(res[6]).decode() if res[6] else ""
            g = self.gkey(o)
            out.append(Taken(o, bytes(res[1]).decode(), bytes(res[2]).decode(), int(res[3]),
                             int(res[4]), bytes(res[5]).decode(), last,
                             dead.get(w, 0.0) if last else 0.0, up,
                             group_until.get((g, host_of_origin(o)), 0.0),
                             group_budget.get(g), group_stop.get(g, "")))
        if out:
            self.r.sadd(self.owned_key(self.worker), *[t.origin for t in out])
        self.release_groups(missed)  # members not taken after all
        self.make_free([o for o in freed if o not in {t.origin for t in out}])
        return out

    def _take_groups(self, members: dict[str, list[tuple[str, str]]],
                     group_owners: dict[str, str], dead: dict[str, float],
                     ) -> tuple[list[tuple[str, str]], dict[tuple[str, str], float],
                                dict[str, list[str]], list[str], dict[str, list[str]],
                                dict[str, str]]:
        """Take the owners' groups of the origins (group -> (origin, its owner)): the
        origins whose group is taken (to take), each (group, host)'s rest end, the budget
        counts of groups taken afresh, the origins that waited for a group taken from a
        dead owner, the origins a live holder takes (holder -> origins), and the owner's
        stop for the crawl of each group taken that holds one."""
        pipe = self.r.pipeline(transaction=False)
        group_hosts: dict[str, list[str]] = {}
        for g, group in members.items():
            gw = group_owners[g]
            hosts = group_hosts[g] = sorted({host_of_origin(o) for o, _w in group})
            self._group_take(keys=[g], args=[self.worker, gw if gw in dead else "",
                                             str(len(hosts)), *hosts,
                                             *[o for o, _w in group]], client=pipe)
            pipe.hget(g, self.owner_stop_field)
        tried = []
        group_until: dict[tuple[str, str], float] = {}
        group_budget: dict[str, list[str]] = {}
        freed: list[str] = []
        nudges: dict[str, list[str]] = {}
        group_stop: dict[str, str] = {}
        found = pipe.execute()
        for (g, group), res, stop in zip(members.items(), found[::2], found[1::2],
                                         strict=True):
            if int(res[0]) != 1:
                # Held by a live worker: it takes them (its nudge set), none of them here.
                holder = bytes(res[1]).decode()
                nudges.setdefault(holder, []).extend(o for o, _w in group)
                continue
            nb = int(res[2])
            if int(res[1]) == 1:
                group_budget[g] = [bytes(c).decode() for c in res[3:3 + nb]]
            hosts = group_hosts[g]
            for h, u in zip(hosts, res[3 + nb:3 + nb + len(hosts)], strict=True):
                group_until[(g, h)] = float(u)
            freed += [bytes(o).decode("utf-8") for o in res[3 + nb + len(hosts):]]
            tried += group
            if stop:
                group_stop[g] = bytes(stop).decode("utf-8")
        return tried, group_until, group_budget, freed, nudges, group_stop

    def dead_owned(self, n: int, now: float, ttl: float) -> list[str]:
        """Up to ``n`` origins held by workers whose lease is gone (from each worker's
        ``owned`` set, a hint the take script checks): a dead worker's share is taken
        over in a few batches, not found one random sample of the active set at a time.
        A dead worker whose set is empty leaves the registry."""
        out: list[str] = []
        stale = self.r.zrangebyscore(self.workers_key, "-inf", now - ttl)
        for raw in stale:
            w = bytes(raw).decode("utf-8")
            if w == self.worker or self.r.exists(self.alive_key(w)):
                continue
            got = self.r.spop(self.owned_key(w), n - len(out)) or []
            if not got:
                self.r.zrem(self.workers_key, w)
            out += [bytes(o).decode("utf-8") for o in got]
            if len(out) >= n:
                break
        return out

    # --- templates, seeding, completion --------------------------------------------
    def templates(self, tids: list[int]) -> dict[int, bytes]:
        """The stored templates of ``tids`` (one HMGET; those missing are left out)."""
        if not tids:
            return {}
        found = self.r.hmget(templates_key(self.crawl, self.p), [str(t) for t in tids])
        return {t: bytes(v) for t, v in zip(tids, found, strict=True) if v is not None}

    def template(self, tid: int) -> bytes | None:
        found = self.r.hget(templates_key(self.crawl, self.p), str(tid))
        return bytes(found) if found is not None else None

    def claim_seeding(self) -> bool:
        """Whether this worker seeds the start URLs: the first, or the seeder died unfinished."""
        key = seed_key(self.crawl, self.p)
        if self.r.set(key, self.worker, nx=True):
            return True
        if self.r.exists(seeded_key(self.crawl, self.p)):
            return False
        holder = self.r.get(key)
        if holder is not None and not self.r.exists(self.alive_key(bytes(holder).decode())):
            self.r.set(key, self.worker)
            return True
        return False

    def mark_seeded(self) -> None:
        self.r.set(seeded_key(self.crawl, self.p), self.worker)

    def seeded(self) -> bool:
        return bool(self.r.exists(seeded_key(self.crawl, self.p)))

    def active(self) -> int:
        return int(self.r.scard(self.active_key))

    def close(self) -> None:
        self.r.close()


# KEYS: g.  The owner's stops (``s:<crawl>``) of every crawl deleted in one step, so a
# stop a worker writes meanwhile is either returned or kept. Returns {crawl, stop, ...}.
_LIFT_OWNER_STOPS = """
local out = {}
for _, k in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(k, 1, 2) == 's:' then
    out[#out + 1] = string.sub(k, 3)
    out[#out + 1] = redis.call('HGET', KEYS[1], k)
    redis.call('HDEL', KEYS[1], k)
  end
end
return out
"""


def lift_owner_stops(r: Any, origin: str, prefix: str = PREFIX) -> dict[str, str]:
    """Delete the stops the origin's owner's group keeps for every crawl (a refusal from
    one of its hosts stops them all): the operator lifted the origin's block, so hosts of
    the owner that a crawl has not stopped yet are asked again when taken. Returns
    crawl -> the stop lifted ("<reason> from <origin>")."""
    key = group_key(owner_of(host_of_origin(origin)), prefix)
    out = r.eval(_LIFT_OWNER_STOPS, 1, key)
    pairs = [bytes(x).decode("utf-8") for x in out or []]
    return dict(zip(pairs[::2], pairs[1::2], strict=True))


def row_template(raw: bytes) -> int | None:
    """The template id of a URL row (``b"u" + digits + ...`` after the row's URL line),
    or None for a row that carries a whole request."""
    nl = raw.find(b"\n")
    if nl < 0 or raw[nl + 1:nl + 2] != b"u":
        return None
    body = raw[nl + 2:nl + 24]
    digits = len(body) - len(body.lstrip(b"0123456789"))
    return int(body[:digits]) if digits else None


def template_id(data: bytes) -> int:
    """A URL-row template's id from its bytes (every worker names it the same)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=6).digest(), "big")
