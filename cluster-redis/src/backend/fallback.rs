//! The local fallback of a flow while Redis is unreachable (`fallbackToLocalWhenFail`).
//!
//! The backend enforces it itself, in the lease: for each window (Redis's windows,
//! extrapolated from the last reply) the lease holds this replica's share of the limit less
//! what the replica already admitted in that window, leased calls included. When Redis
//! answers again, what the fallback admitted in the current window is charged to Redis
//! before anything else is granted, and the flow goes back to leases at the first window
//! that begins [`resume_after`](crate::RedisClusterConfig::resume_after) later, by when
//! every replica has usually seen Redis back and charged its own local calls.

#[allow(clippy::wildcard_imports)]
use super::*;

/// The first window at or after `(window, end)` that ends after `now`.
fn roll(window: i64, end: Instant, length: Duration, now: Instant) -> (i64, Instant) {
    if now < end {
        return (window, end);
    }
    let behind = now.saturating_duration_since(end).as_nanos() / length.as_nanos().max(1) + 1;
    let steps = u32::try_from(behind).unwrap_or(u32::MAX);
    (
        window.saturating_add(i64::from(steps)),
        end + length.saturating_mul(steps),
    )
}

/// This replica's share of one window of `slot`'s limit: the window's limit over `live`
/// replicas (`count` per window for a per-instance threshold).
fn share(slot: &ClusterSlot, live: u32) -> i64 {
    let live = live.max(1);
    i64::try_from(slot.spec().window_limit(live) / u64::from(live)).unwrap_or(i64::MAX)
}

impl Inner {
    /// The fallback's share of a window: the reservation Redis holds for this replica (its
    /// demand for a window, at most an equal share; the other replicas are never granted
    /// it), or an equal share of the limit if Redis never answered.
    pub(super) fn fallback_share(slot: &ClusterSlot, fallback: &Fallback) -> i64 {
        let equal = share(slot, fallback.live.max(slot.live_replicas()));
        match fallback.reserve {
            Some(reserve) => reserve.clamp(0, equal),
            None => equal,
        }
    }

    /// The breaker opened: a flow with `fallbackToLocalWhenFail` is checked locally from
    /// now on. Its lease keeps what Redis granted; the fallback adds this replica's share of
    /// the current window less what it admitted in it (and no more than its part of what
    /// Redis said the window had left).
    pub(super) fn enter_fallback(&self, flow: &Flow, now: Instant) {
        let spec = flow.slot.spec();
        if !spec.fallback_to_local_when_fail {
            return;
        }
        let mut st = lock(&flow.state);
        if let Some(fallback) = st.fallback.as_mut() {
            fallback.resumed_at = None;
            return;
        }
        let length = Duration::from_millis(u64::from(spec.window_ms));
        let live = flow.slot.live_replicas();
        let mut fallback = Fallback {
            aligned: st.known_window.is_some(),
            resumed_at: None,
            charged: 0,
            live,
            reserve: st.reserve,
            seen: 0,
            share_at: None,
        };
        let share = Self::fallback_share(&flow.slot, &fallback);
        let (aligned, window, end) = match st.known_window {
            Some((window, end)) => {
                let (window, end) = roll(window, end, length, now);
                (true, window, end)
            }
            None => (false, -1, now + length),
        };
        let tokens = flow.slot.tokens();
        let mut share_at = None;
        let room = if aligned && window == st.window && st.deadline.is_some() {
            // What it was granted in the window counts, admitted or still in the lease:
            // Redis holds the larger of that and the reservation for it.
            let admitted = (st.redis_added + st.local_added - tokens).max(0);
            let mut room = share - admitted - tokens;
            if let Some(left) = st.window_left {
                room = room.min(left / i64::from(live.max(1)));
            }
            room.max(0)
        } else {
            // The lease of an earlier window is no longer good.
            let old = flow.slot.drain();
            self.strand(old);
            st.redis_added = 0;
            st.local_added = 0;
            st.window_left = None;
            share_at = Self::share_time(aligned, st.known_end_slack, end, length, now);
            share
        };
        if share_at.is_none() {
            self.add_lease(&flow.slot, room, end);
            st.local_added += room;
        }
        st.last_left = flow.slot.tokens();
        st.window = window;
        st.deadline = Some(end);
        st.exhausted = false;
        fallback.share_at = share_at;
        st.fallback = Some(fallback);
    }

    /// When the share of a window that ends at `end` (estimated early) may be spent: once it
    /// has surely begun, its estimated start plus `slack`; `None` if that is already past.
    /// Spent earlier, the share of a window would admit calls in the tail of the one before.
    fn share_time(
        aligned: bool,
        slack: Duration,
        end: Instant,
        length: Duration,
        now: Instant,
    ) -> Option<Instant> {
        if !aligned {
            return None;
        }
        let begins = end.checked_sub(length)?;
        let at = begins + slack;
        (now < at).then_some(at)
    }

    /// The breaker closed: a flow in the fallback starts charging what it admits. Returns
    /// whether the flow is in the fallback (its slot stays degraded until it goes back to
    /// leases).
    pub(super) fn resume_fallback(&self, flow: &Flow, now: Instant) -> bool {
        let mut st = lock(&flow.state);
        match st.fallback.as_mut() {
            Some(fallback) => {
                fallback.resumed_at.get_or_insert(now);
                true
            }
            None => false,
        }
    }

    /// A window of a flow in the fallback ended: the lease gets the share of the next one,
    /// or the flow goes back to leases. Returns when the current window ends.
    pub(super) fn roll_fallback(
        &self,
        flow: &Flow,
        st: &mut LeaseState,
        now: Instant,
    ) -> Option<Instant> {
        let fallback = st.fallback?;
        let length = Duration::from_millis(u64::from(flow.slot.spec().window_ms));
        let end = *st.deadline.get_or_insert(now + length);
        if now < end {
            return match fallback.share_at {
                Some(at) if now < at => Some(at.min(end)),
                Some(_) => {
                    // The window has surely begun: its share goes into the lease.
                    let share = Self::fallback_share(&flow.slot, &fallback);
                    self.add_lease(&flow.slot, share, end);
                    st.local_added = share;
                    st.last_left = flow.slot.tokens();
                    st.fallback = Some(Fallback {
                        share_at: None,
                        ..fallback
                    });
                    Some(end)
                }
                None => Some(end),
            };
        }
        let (window, end) = roll(st.window, end, length, now);
        // The local lease of the window that ended is no longer good (not Redis's tokens).
        flow.slot.drain();
        st.redis_added = 0;
        st.local_added = 0;
        st.window_left = None;
        st.window = window;
        st.exhausted = false;
        let begins = end.checked_sub(length).unwrap_or(now);
        // Back to leases once every replica has likely seen Redis back: `resume_after`, and
        // Redis counts again the replicas it counted before the outage (a starved one that
        // has not called yet is unknown to Redis, which would grant the others its share
        // while its fallback admits it), or a heartbeat TTL passed (one that is still
        // missing is gone).
        let everyone_back = |at: Instant| {
            fallback.seen >= fallback.live || begins >= at + self.config.heartbeat_ttl
        };
        if fallback
            .resumed_at
            .is_some_and(|at| begins >= at + self.config.resume_after && everyone_back(at))
        {
            st.fallback = None;
            st.deadline = None;
            st.last_left = 0;
            flow.slot.set_degraded(false);
            return None;
        }
        // The most replicas seen: one that joined during the outage counts once it calls.
        let live = fallback.live.max(flow.slot.live_replicas());
        let share_at = Self::share_time(fallback.aligned, st.known_end_slack, end, length, now);
        if share_at.is_none() {
            let share = Self::fallback_share(&flow.slot, &Fallback { live, ..fallback });
            self.add_lease(&flow.slot, share, end);
            st.local_added = share;
            st.last_left = share;
        } else {
            st.last_left = 0;
        }
        st.deadline = Some(end);
        st.fallback = Some(Fallback {
            charged: 0,
            live,
            share_at,
            ..fallback
        });
        Some(share_at.unwrap_or(end))
    }

    /// What a flow in the fallback asks of Redis once it answers again: a charge of what it
    /// admitted locally in the current window and Redis does not know yet, or a heartbeat.
    /// Nothing is granted until the flow goes back to leases.
    pub(super) fn fallback_plan(
        flow: &Flow,
        st: &mut LeaseState,
        now: Instant,
        heartbeat_every: Duration,
    ) -> Option<Request> {
        let fallback = st.fallback?;
        fallback.resumed_at?;
        let local = (st.local_added - flow.slot.tokens()).max(0);
        let charge = (local - fallback.charged).max(0);
        if charge > 0 {
            // Demand: the flow asks for a lease as soon as it goes back to leases.
            st.last_activity = Some(now);
        }
        let heartbeat_due = st
            .last_call
            .is_none_or(|t| now.saturating_duration_since(t) >= heartbeat_every);
        (charge > 0 || heartbeat_due).then_some(Request {
            charge,
            charge_window: if fallback.aligned { st.window } else { -1 },
            held: Self::fallback_share(&flow.slot, &fallback),
            ..Request::HEARTBEAT
        })
    }

    /// A reply to a flow in the fallback: the charge is known to Redis, and the window's
    /// end is measured again.
    pub(super) fn fallback_reply(
        &self,
        st: &mut LeaseState,
        reply: LeaseReply,
        deadline: Instant,
        request: Request,
    ) {
        let window = st.window;
        let Some(fallback) = st.fallback.as_mut() else {
            return;
        };
        if request.charge > 0 && (!fallback.aligned || request.charge_window == window) {
            fallback.charged += request.charge;
        }
        fallback.seen = u32::try_from(reply.live).unwrap_or(u32::MAX);
        // Both are times the window cannot have ended before: the later one is the closer.
        if fallback.aligned && reply.window == window {
            st.deadline = st.deadline.max(Some(deadline));
        }
    }
}
