//! The server-side scripts. Every key of one `flowId` carries the hash tag `{flowId}`, so a
//! Redis Cluster keeps them in one slot and a script sees them all. The window is defined by
//! Redis's own clock (`TIME`), never by a replica's.

use redis::Script;

/// Grants a lease, gives back a remainder, and heartbeats the replica, in one call.
///
/// KEYS: 1 the window hash (`win`, `granted`, `g:<replica>` granted to each), 2 the members sorted set (score: expiry in
/// Redis ms), 3 the members' demands (a hash: replica id -> calls per second it offers).
/// ARGV: 1 replica id, 2 tokens wanted (0: heartbeat only), 3 tokens per window (per
/// instance when ARGV 4 is 0, for the cluster when 1), 4 global, 5 window ms, 6 heartbeat
/// TTL ms, 7 tokens given back, 8 the window they were granted in, 9 all-or-nothing (1 in
/// exact mode: grant `want` whole or nothing, no share), 10 calls a replica admitted locally
/// (its fallback while Redis was unreachable), charged before anything is granted, 11 the
/// window they were admitted in (`-1`: unknown, the current one; the next window counts as
/// the current one too, since a replica's windows end early by its round trip), 12 the
/// calls per second this replica offers (taken and refused, smoothed), 13 half the lease
/// horizon in ms (what a replica's lease covers ahead at least), 14 the reservation this
/// replica holds (from its last reply: what its local fallback may admit a window).
///
/// Returns `{granted, window, ms left in the window, live replicas, tokens left, reservation}`.
///
/// **Reservations.** Each live replica has a standing reservation `r:<replica>` (in the
/// demands hash): what its local fallback may admit in a window if it loses Redis, its
/// demand for a whole window, at most an equal share, computed at each of its calls. In
/// every window, each other live replica holds `max(granted to it in the window, its
/// reservation)`, and no grant takes from that: a replica that goes silent (its calls
/// starve or cannot reach Redis) keeps what it leased and its reservation for the rest of
/// the window and the windows after, until its membership expires, so the others are not
/// granted it again while its fallback admits it. The stored reservation is never below the
/// one the replica says it holds (its last reply may have been lost), and the reservations
/// of the live replicas add up to at most the limit.
///
/// **Fair shares.** What a replica holds in a window is at most its max-min fair part of
/// the window's limit: each
/// live replica needs what it was granted in the window plus its demand for the rest of it;
/// a replica needing less than the water level gets its need, so a replica offering less
/// than a fair share gets all it offers, and the heavy ones split the rest. As the window
/// runs, unused demand is released (its need shrinks with the time left), but never the
/// other replicas' reservations.
const LEASE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window_ms = tonumber(ARGV[5])
local win = math.floor(now / window_ms)
local ttl = tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if ARGV[1] ~= '' then
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
end
redis.call('PEXPIRE', KEYS[2], ttl * 2)
local live = redis.call('ZCARD', KEYS[2])
if live < 1 then live = 1 end
local limit = tonumber(ARGV[3])
if ARGV[4] == '0' then limit = limit * live end
limit = math.floor(limit)
local mine = 'g:' .. ARGV[1]
local cur = redis.call('HMGET', KEYS[1], 'win', 'granted', mine)
local granted = 0
local own = 0
if tonumber(cur[1]) == win then
  granted = tonumber(cur[2]) or 0
  own = tonumber(cur[3]) or 0
else
  -- A new window: the per-replica counts of the last one go.
  redis.call('DEL', KEYS[1])
end
local back = tonumber(ARGV[7])
if back > 0 and tonumber(ARGV[8]) == win then
  granted = math.max(granted - back, 0)
  own = math.max(own - back, 0)
end
local charge = tonumber(ARGV[10]) or 0
if charge > 0 then
  local cw = tonumber(ARGV[11])
  if cw < 0 or cw == win or cw == win + 1 then
    granted = granted + charge
    own = own + charge
  end
end
local left = limit - granted
local want = tonumber(ARGV[2])
local me = tonumber(ARGV[12]) or 0
local exact = ARGV[9] == '1'
-- The other live replicas: what each holds of this window, max(granted to it, its
-- reservation), and their reservations.
local live_members = redis.call('ZRANGEBYSCORE', KEYS[2], now, '+inf')
local others = {}
for i = 1, #live_members do
  if live_members[i] ~= ARGV[1] then others[#others + 1] = live_members[i] end
end
local held_by_others = 0
if #others > 0 then
  local rf = {}
  local gf = {}
  for i = 1, #others do
    rf[i] = 'r:' .. others[i]
    gf[i] = 'g:' .. others[i]
  end
  local rs = redis.call('HMGET', KEYS[3], unpack(rf))
  local gs = redis.call('HMGET', KEYS[1], unpack(gf))
  for i = 1, #others do
    held_by_others = held_by_others + math.max(tonumber(gs[i]) or 0, tonumber(rs[i]) or 0)
  end
end
local reserve = 0
if exact then
  -- Exact calls carry no demand: the reservation stays as the last lease call left it.
  reserve = tonumber(redis.call('HGET', KEYS[3], 'r:' .. ARGV[1]) or '0') or 0
else
  redis.call('HSET', KEYS[3], ARGV[1], me)
  -- Its demand for a whole window, at most an equal share, at most what the others leave.
  reserve = math.min(math.floor(limit / live), math.ceil(me * window_ms / 1000),
    limit - held_by_others)
  if reserve < 0 then reserve = 0 end
  local held = tonumber(ARGV[14]) or 0
  redis.call('HSET', KEYS[3], 'r:' .. ARGV[1], math.max(reserve, held))
end
redis.call('PEXPIRE', KEYS[3], ttl * 2)
-- No grant takes from what the other live replicas hold of the window.
local avail = limit - held_by_others - own
local grant = 0
if want > 0 and left > 0 and avail > 0 then
  if exact then
    if left >= want and avail >= want then grant = want end
  else
    -- Max-min fair over the window: a live replica needs what it was granted in it plus
    -- its demand for the rest of it. Those that need less than an equal split get their
    -- need; the others split the rest equally (the level). The caller may hold up to the
    -- level in the window.
    -- A lease holds between half and all of `ARGV[13]` of its holder's demand: what was
    -- granted already covers the demand of that much of the rest.
    local rest = math.max(((win + 1) * window_ms - now - tonumber(ARGV[13])) / 1000, 0)
    local members = redis.call('ZRANGEBYSCORE', KEYS[2], now, '+inf')
    local needs = {}
    local fields = {}
    for i = 1, #members do fields[i] = 'g:' .. members[i] end
    if #members > 0 then
      local demands = redis.call('HMGET', KEYS[3], unpack(members))
      local grants = redis.call('HMGET', KEYS[1], unpack(fields))
      for i = 1, #members do
        if members[i] ~= ARGV[1] then
          needs[#needs + 1] = (tonumber(grants[i]) or 0) + (tonumber(demands[i]) or 0) * rest
        end
      end
    end
    needs[#needs + 1] = own + me * rest
    table.sort(needs)
    local remaining = limit
    local k = #needs
    local level = limit
    for i = 1, #needs do
      if needs[i] * k <= remaining then
        remaining = remaining - needs[i]
        k = k - 1
      else
        level = remaining / k
        break
      end
    end
    if k == 0 then level = own + me * rest + remaining end
    grant = math.min(want, math.floor(level) - own, left, avail)
    if grant < 0 then grant = 0 end
  end
end
granted = granted + grant
own = own + grant
redis.call('HSET', KEYS[1], 'win', win, 'granted', granted, mine, own)
redis.call('PEXPIRE', KEYS[1], window_ms * 2 + 1000)
return {grant, win, (win + 1) * window_ms - now, live, limit - granted, reserve}
";

/// Removes a replica from the members of a flow (a clean shutdown), giving back its
/// remainder. KEYS as [`LEASE`]; ARGV: 1 replica id, 2 tokens given back, 3 their window,
/// 4 window ms.
const LEAVE: &str = r"
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1], 'r:' .. ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local win = math.floor(now / tonumber(ARGV[4]))
local back = tonumber(ARGV[2])
if back > 0 and tonumber(ARGV[3]) == win then
  local granted = tonumber(redis.call('HGET', KEYS[1], 'granted') or '0') - back
  if granted < 0 then granted = 0 end
  redis.call('HSET', KEYS[1], 'granted', granted)
end
return {back}
";

/// The scripts, hashed once (`EVALSHA`, with `EVAL` when the server does not know them yet,
/// after a restart or a failover).
#[derive(Debug)]
pub(crate) struct Scripts {
    pub(crate) lease: Script,
    pub(crate) leave: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Self {
            lease: Script::new(LEASE),
            leave: Script::new(LEAVE),
        }
    }
}

/// The keys of one flow: `{prefix}:{<flowId>}:w` (window), `{prefix}:{<flowId>}:m`
/// (members) and `{prefix}:{<flowId>}:d` (their demands).
pub(crate) fn keys(prefix: &str, flow_id: i64) -> [String; 3] {
    [
        format!("{prefix}:{{{flow_id}}}:w"),
        format!("{prefix}:{{{flow_id}}}:m"),
        format!("{prefix}:{{{flow_id}}}:d"),
    ]
}

/// The reply of [`LEASE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LeaseReply {
    /// When the call was sent (after the connection was at hand): Redis measured the time
    /// left in the window after it.
    pub(crate) sent: tokio::time::Instant,
    pub(crate) granted: i64,
    pub(crate) window: i64,
    pub(crate) ms_left: i64,
    pub(crate) live: i64,
    pub(crate) left: i64,
    /// This replica's reservation: what its local fallback may admit in a window.
    pub(crate) reserve: i64,
}

impl LeaseReply {
    pub(crate) fn from_values(v: &[i64], sent: tokio::time::Instant) -> Option<Self> {
        match *v {
            [granted, window, ms_left, live, left, reserve] => Some(Self {
                sent,
                granted,
                window,
                ms_left,
                live,
                left,
                reserve,
            }),
            _ => None,
        }
    }
}
