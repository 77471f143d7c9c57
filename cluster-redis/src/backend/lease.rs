//! The background work of the backend: lease calls and heartbeats, applying their replies,
//! the breaker, and the two tasks (network: leases and heartbeats; expiry: drops a lease
//! when its window ends).

#[allow(clippy::wildcard_imports)]
use super::*;

impl Inner {
    pub(super) fn set_status(&self, status: ClusterStatus) {
        self.status.send_if_modified(|s| {
            if *s == status {
                false
            } else {
                *s = status;
                true
            }
        });
    }

    pub(super) async fn conn(&self) -> Result<Conn, RedisError> {
        if let Some(c) = lock(&self.conn).clone() {
            return Ok(c);
        }
        let c = connect(&self.config.target, self.config.connect_timeout).await?;
        *lock(&self.conn) = Some(c.clone());
        Ok(c)
    }

    /// One lease-script call, under the call budget (`budget` overrides it; `None`: the
    /// caller bounds it).
    pub(super) async fn call(
        &self,
        flow: &Flow,
        r: Request,
        budget: Option<Duration>,
    ) -> Result<LeaseReply, RedisError> {
        let mut conn = self.conn().await?;
        let spec = flow.slot.spec();
        let per_window = spec.count * f64::from(spec.window_ms) / 1000.0;
        let args = [
            self.config.replica_id.clone(),
            r.want.to_string(),
            per_window.to_string(),
            u8::from(spec.global).to_string(),
            spec.window_ms.to_string(),
            self.config.heartbeat_ttl.as_millis().to_string(),
            r.back.to_string(),
            r.back_window.to_string(),
            u8::from(r.all_or_nothing).to_string(),
            r.charge.to_string(),
            r.charge_window.to_string(),
            format!("{:.3}", r.demand),
            (self.config.lease_horizon.as_millis() / 2).to_string(),
            r.held.to_string(),
        ];
        self.counters.calls.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("sentinel_cluster_redis_calls_total").increment(1);
        let keys = [
            flow.keys[0].as_str(),
            flow.keys[1].as_str(),
            flow.keys[2].as_str(),
        ];
        let started = Instant::now();
        let run = conn.run(&self.scripts.lease, &keys, &args);
        let bounded = async {
            match budget {
                Some(budget) => tokio::time::timeout(budget, run).await,
                None => Ok(run.await),
            }
        };
        let values = match bounded.await {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => {
                // A broken connection, or a demoted master (READONLY): reconnect next time.
                if !e.is_timeout() {
                    *lock(&self.conn) = None;
                }
                return Err(e);
            }
            Err(_) => return Err(over_budget()),
        };
        metrics::histogram!("sentinel_cluster_redis_call_seconds")
            .record(started.elapsed().as_secs_f64());
        let reply = LeaseReply::from_values(&values, started).ok_or_else(|| {
            RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "the lease script answered an unexpected shape",
            ))
        })?;
        record_reply(spec.flow_id, &reply);
        Ok(reply)
    }

    pub(super) fn succeeded(&self) {
        let mut b = lock(&self.breaker);
        b.failures = 0;
        b.failing_since = None;
        let was_open = std::mem::replace(&mut b.open, false);
        drop(b);
        if was_open {
            let now = Instant::now();
            for f in lock(&self.flows).iter() {
                // A flow in the local fallback charges what it admits and goes back to
                // leases at a window boundary ([`Inner::roll_fallback`]).
                if !self.resume_fallback(f, now) {
                    f.slot.set_degraded(false);
                }
            }
            self.counters.resumed.fetch_add(1, Ordering::Relaxed);
            metrics::gauge!("sentinel_cluster_degraded").set(0.0);
            tracing::info!(replica = %self.config.replica_id, "cluster flow checks resumed on Redis");
            if let Some(events) = self.events.get() {
                events.resumed(&format!("redis replica {}", self.config.replica_id));
            }
        }
        self.set_status(ClusterStatus::Live);
    }

    pub(super) fn failed(&self, error: &RedisError) {
        self.counters.failures.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("sentinel_cluster_redis_failures_total").increment(1);
        self.still_failing(error);
    }

    /// A call over its budget is still unanswered (or one more failed): the breaker opens
    /// once failures persist `open_after` with no answer in between.
    pub(super) fn still_failing(&self, error: &RedisError) {
        let mut b = lock(&self.breaker);
        let now = Instant::now();
        b.failures = b.failures.saturating_add(1);
        let since = *b.failing_since.get_or_insert(now);
        b.next_probe = now + self.config.probe_interval;
        // One slow call (a starved process) does not open it: failures that persist do.
        let opens = !b.open
            && b.failures >= self.config.failures_to_open
            && now.saturating_duration_since(since) >= self.config.open_after;
        if opens {
            b.open = true;
        }
        drop(b);
        if opens {
            // Probes reconnect: the connection in hand may be silently dead.
            *lock(&self.conn) = None;
            let now = Instant::now();
            for f in lock(&self.flows).iter() {
                f.slot.set_degraded(true);
                self.enter_fallback(f, now);
            }
            self.counters.degraded.fetch_add(1, Ordering::Relaxed);
            metrics::gauge!("sentinel_cluster_degraded").set(1.0);
            metrics::counter!("sentinel_cluster_degraded_total").increment(1);
            tracing::warn!(
                replica = %self.config.replica_id,
                error = %error,
                "Redis unreachable: cluster flow checks degraded to local checks"
            );
            if let Some(events) = self.events.get() {
                events.degraded(
                    &format!("redis replica {}", self.config.replica_id),
                    &format!("Redis unreachable: {error}"),
                );
            }
            self.set_status(ClusterStatus::Degraded {
                error: error.to_string(),
            });
        }
    }

    /// Records a reply: live replicas, the window, the granted tokens.
    pub(super) fn apply(&self, flow: &Flow, reply: LeaseReply, request: Request) {
        let sent = reply.sent;
        let mut st = lock(&flow.state);
        let now = Instant::now();
        st.last_call = Some(now);
        flow.slot
            .set_live_replicas(u32::try_from(reply.live).unwrap_or(u32::MAX));
        if st
            .known_window
            .is_some_and(|(known, _)| reply.window < known)
        {
            // A late reply of a window that is over (a later reply saw the next one): its
            // grant is stranded, and it must not take the lease's window back (that would
            // drain the current lease and forget what was admitted in the current window).
            if reply.granted > 0 {
                self.counters
                    .granted
                    .fetch_add(u64::try_from(reply.granted).unwrap_or(0), Ordering::Relaxed);
                self.strand(reply.granted);
            }
            if request.back > 0 {
                self.counters
                    .given_back
                    .fetch_add(u64::try_from(request.back).unwrap_or(0), Ordering::Relaxed);
            }
            // Redis may have kept less than it says here for a later call: never more.
            st.reserve = st.reserve.map(|r| r.min(reply.reserve));
            return;
        }
        flow.slot.set_window_left(reply.left);
        // Redis measured the time left after we sent: the window cannot end before this.
        let left_ms = u64::try_from(reply.ms_left).unwrap_or(0).saturating_sub(1);
        let deadline = sent + Duration::from_millis(left_ms);
        // ... and before we received the reply (`ms_left` counts from Redis's millisecond,
        // rounded down): it cannot end after this.
        let latest = now + Duration::from_millis(u64::try_from(reply.ms_left).unwrap_or(0));
        match st.known_window {
            // Another reply in the same window: keep the tighter bounds.
            Some((window, earliest)) if window == reply.window => {
                st.known_window = Some((window, earliest.max(deadline)));
                st.known_end_slack = st
                    .known_end_slack
                    .min(latest.saturating_duration_since(earliest.max(deadline)));
            }
            _ => {
                st.known_window = Some((reply.window, deadline));
                st.known_end_slack = latest.saturating_duration_since(deadline);
            }
        }
        if st.fallback.is_some() {
            // The fallback keeps the reservation it started with (Redis keeps it too: every
            // call says it holds it).
            self.fallback_reply(&mut st, reply, deadline, request);
            return;
        }
        st.reserve = Some(reply.reserve);
        if reply.window != st.window {
            // Tokens of an earlier window are no longer good.
            let old = flow.slot.drain();
            self.strand(old);
            st.last_left = 0;
            st.window = reply.window;
            st.exhausted = false;
            st.retry_at = None;
            st.redis_added = 0;
            st.local_added = 0;
        }
        st.window_left = Some(reply.left);
        st.deadline = Some(deadline);
        if request.back > 0 {
            self.counters
                .given_back
                .fetch_add(u64::try_from(request.back).unwrap_or(0), Ordering::Relaxed);
        }
        if reply.granted > 0 {
            self.counters
                .granted
                .fetch_add(u64::try_from(reply.granted).unwrap_or(0), Ordering::Relaxed);
            if now >= deadline {
                self.strand(reply.granted);
            } else {
                self.add_lease(&flow.slot, reply.granted, deadline);
                st.last_left += reply.granted;
                st.redis_added += reply.granted;
            }
        }
        if request.want > 0 && !request.all_or_nothing && reply.left <= 0 {
            st.exhausted = true;
        } else if request.want > 0 && !request.all_or_nothing && reply.granted < request.want {
            // This replica reached its fair part of the window; the rest is reserved for
            // replicas that need less than a fair share, and they may leave some: ask again
            // later in the window, not every tick.
            st.retry_at = Some(now + self.config.lease_horizon / 2);
        }
    }

    pub(super) fn strand(&self, tokens: i64) {
        if tokens > 0 {
            self.counters
                .stranded
                .fetch_add(u64::try_from(tokens).unwrap_or(0), Ordering::Relaxed);
        }
    }

    /// Drops the lease of a window that ended. Returns when the next one ends.
    pub(super) fn expire(&self, flow: &Flow, now: Instant) -> Option<Instant> {
        let mut st = lock(&flow.state);
        if st.fallback.is_some() {
            return self.roll_fallback(flow, &mut st, now);
        }
        match st.deadline {
            Some(d) if now >= d => {
                let old = flow.slot.drain();
                self.strand(old);
                st.last_left = 0;
                st.deadline = None;
                st.exhausted = false;
                st.retry_at = None;
                st.redis_added = 0;
                st.local_added = 0;
                st.window_left = None;
                None
            }
            other => other,
        }
    }

    /// What this flow needs from Redis now, if anything.
    pub(super) fn plan(&self, flow: &Flow, now: Instant) -> Option<Request> {
        self.expire(flow, now);
        let cfg = &self.config;
        let mut st = lock(&flow.state);
        if st.fallback.is_some() {
            return Self::fallback_plan(flow, &mut st, now, cfg.heartbeat_ttl / 3);
        }
        let slot = &flow.slot;
        let tokens = slot.tokens();
        let consumed = (st.last_left - tokens).max(0);
        st.last_left = tokens;
        let demand = consumed as f64 + slot.take_misses() as f64;
        let dt = now
            .saturating_duration_since(st.last_sample)
            .as_secs_f64()
            .max(1e-4);
        st.last_sample = now;
        let instant = demand / dt;
        let horizon = cfg.lease_horizon.as_secs_f64();
        let alpha = (dt / horizon).min(1.0);
        st.rate += alpha * (instant - st.rate);
        if demand > 0.0 {
            st.last_activity = Some(now);
        }
        let active = st
            .last_activity
            .is_some_and(|t| now.saturating_duration_since(t) < cfg.idle_return);
        let heartbeat_due = st
            .last_call
            .is_none_or(|t| now.saturating_duration_since(t) >= cfg.heartbeat_ttl / 3);
        if !active && tokens > 0 {
            let back = slot.drain();
            st.last_left = 0;
            st.redis_added -= back;
            return Some(Request {
                back,
                back_window: st.window,
                ..Request::HEARTBEAT
            });
        }
        let demand = st.rate.max(instant);
        let retry_due = st.retry_at.is_none_or(|t| now >= t);
        if active && !flow.exact && !st.exhausted && retry_due {
            let spec = slot.spec();
            let live = f64::from(slot.live_replicas());
            let limit = spec.window_limit(slot.live_replicas()) as f64;
            // At most `max_lease_fraction` of the limit per live replica, times the replica's
            // demand over a fair share (1 to `live`): all leases together stay within about
            // twice that fraction of the limit. Tokens a starved process holds past its
            // window's end may still be spent before the expiry drops them, so what is out
            // must stay small.
            let fair_per_s = limit / (f64::from(spec.window_ms) / 1000.0) / live;
            let weight = (st.rate / fair_per_s.max(1e-9)).clamp(1.0, live);
            let cap = (limit * cfg.max_lease_fraction * weight / live)
                .floor()
                .max(1.0);
            // About `lease_horizon` of its demand (up fast: the instant rate; down smoothly),
            // and no more than it can spend before its window ends. Redis caps it at the
            // replica's fair part of what is left.
            let until_end = st
                .deadline
                .map_or(horizon, |d| d.saturating_duration_since(now).as_secs_f64())
                .min(horizon);
            let want = (demand * until_end).ceil().clamp(1.0, cap) as i64;
            if tokens <= want / 2 {
                return Some(Request {
                    want,
                    // Smoothed: Redis reserves it for the rest of the window.
                    demand: st.rate,
                    held: st.reserve.unwrap_or(0),
                    ..Request::HEARTBEAT
                });
            }
        }
        heartbeat_due.then_some(Request {
            demand: st.rate,
            held: st.reserve.unwrap_or(0),
            ..Request::HEARTBEAT
        })
    }

    /// A call that asks for nothing, with this replica's demand and the reservation it
    /// holds (Redis must not keep less for it: its fallback may be admitting it).
    pub(super) fn heartbeat(&self, flow: &Flow) -> Request {
        let st = lock(&flow.state);
        match st.fallback {
            Some(fallback) => Request {
                held: Self::fallback_share(&flow.slot, &fallback),
                ..Request::HEARTBEAT
            },
            None => Request {
                demand: st.rate,
                held: st.reserve.unwrap_or(0),
                ..Request::HEARTBEAT
            },
        }
    }

    /// Leaves a flow's membership and gives back its remainder.
    pub(super) async fn leave(&self, flow: &Flow) {
        let back = flow.slot.drain();
        let (window, window_ms) = (lock(&flow.state).window, flow.slot.spec().window_ms);
        let Ok(mut conn) = self.conn().await else {
            return;
        };
        let args = [
            self.config.replica_id.clone(),
            back.to_string(),
            window.to_string(),
            window_ms.to_string(),
        ];
        self.counters.calls.fetch_add(1, Ordering::Relaxed);
        let keys = [
            flow.keys[0].as_str(),
            flow.keys[1].as_str(),
            flow.keys[2].as_str(),
        ];
        let run = conn.run(&self.scripts.leave, &keys, &args);
        // Not on any hot path (a reload, a shutdown): the probe's budget, which a starved
        // process meets.
        let budget = self.config.probe_interval.max(self.config.call_timeout);
        if let Ok(Ok(_)) = tokio::time::timeout(budget, run).await {
            self.counters
                .given_back
                .fetch_add(u64::try_from(back).unwrap_or(0), Ordering::Relaxed);
        }
    }

    /// One pass of the network task.
    pub(super) async fn tick(self: &Arc<Self>) {
        let leaving: Vec<Arc<Flow>> = std::mem::take(&mut *lock(&self.leaving));
        let open = lock(&self.breaker).open;
        if !open {
            for flow in leaving {
                self.leave(&flow).await;
            }
        }
        let flows: Vec<Arc<Flow>> = lock(&self.flows).clone();
        let now = Instant::now();
        if open {
            if now < lock(&self.breaker).next_probe {
                return;
            }
            // The probe: a heartbeat of the first flow, or a connect. Its budget is the probe
            // interval: a Redis that answers a starved process within it is reachable.
            let budget = self.config.probe_interval.max(self.config.call_timeout);
            let probe = match flows.first() {
                Some(flow) => {
                    let request = self.heartbeat(flow);
                    self.call(flow, request, Some(budget))
                        .await
                        .map(|r| self.apply(flow, r, request))
                }
                None => self.conn().await.map(drop),
            };
            match probe {
                Ok(()) => self.succeeded(),
                Err(e) => self.failed(&e),
            }
            return;
        }
        if flows.is_empty() {
            match self.conn().await {
                Ok(_) => self.succeeded(),
                Err(e) => self.failed(&e),
            }
            return;
        }
        let failing = lock(&self.breaker).failures > 0;
        let mut called = false;
        for flow in &flows {
            if flow.in_flight.load(Ordering::Acquire) {
                self.expire(flow, now);
                continue;
            }
            let Some(request) = self.plan(flow, now) else {
                continue;
            };
            called = true;
            match self.lease_call(flow, request).await {
                Ok(()) => self.succeeded(),
                Err(e) => {
                    self.failed(&e);
                    if lock(&self.breaker).open {
                        return;
                    }
                }
            }
        }
        // After a failure, a tick without a call sends a heartbeat (wanting no token), on
        // its own task as lease calls are: an answer, however late, says Redis is reachable
        // (a starved process reads its replies late). While a call stays unanswered past
        // its budget, each tick counts a failure: the breaker opens once no answer came for
        // `open_after`.
        if failing && !called {
            let flow = &flows[0];
            if flow.in_flight.load(Ordering::Acquire) {
                self.still_failing(&over_budget());
            } else {
                let request = self.heartbeat(flow);
                if let Err(e) = self.lease_call(flow, request).await {
                    self.failed(&e);
                }
            }
        }
    }

    /// A lease call on its own task, awaited for the call budget. Over the budget it counts
    /// as a failure, and its reply, if one comes, still goes into the lease (a grant is
    /// never lost to a slow reply); until then no other lease call of the flow goes out.
    pub(super) async fn lease_call(
        self: &Arc<Self>,
        flow: &Arc<Flow>,
        request: Request,
    ) -> Result<(), RedisError> {
        flow.in_flight.store(true, Ordering::Release);
        let inner = self.clone();
        let task_flow = flow.clone();
        let mut call = tokio::spawn(async move {
            let result = inner.call(&task_flow, request, Some(LATE_REPLY_WAIT)).await;
            match &result {
                Ok(reply) => {
                    inner.apply(&task_flow, *reply, request);
                    // Redis answered, if late (a starved process reads its replies late): it
                    // is reachable. Over its budget the call counted as a failure; only
                    // calls that get no answer add up to open the breaker.
                    inner.succeeded();
                }
                Err(_) if request.back > 0 => {
                    // Not given back: it stays counted in Redis for its window.
                    inner.strand(request.back);
                }
                Err(_) => {}
            }
            task_flow.in_flight.store(false, Ordering::Release);
            result.map(drop)
        });
        match tokio::time::timeout(self.config.call_timeout, &mut call).await {
            Ok(Ok(result)) => result,
            Ok(Err(join)) => {
                flow.in_flight.store(false, Ordering::Release);
                Err(RedisError::from((
                    redis::ErrorKind::Io,
                    "lease call task failed",
                    join.to_string(),
                )))
            }
            Err(_) => Err(over_budget()),
        }
    }
}

/// Held by each background task: when the task ends without `shutdown` (the runtime that
/// ran it shut down), the backend says so (status, a warning), marks every slot degraded and
/// leaves the checks to the engine's fallback, instead of blocking on leases nobody fetches.
struct TaskGuard(Weak<Inner>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        let Some(inner) = self.0.upgrade() else {
            return;
        };
        inner.tasks_alive.store(false, Ordering::Relaxed);
        if inner.stopped.swap(true, Ordering::Relaxed) {
            return;
        }
        for flow in lock(&inner.flows).iter() {
            flow.slot.set_degraded(true);
        }
        tracing::warn!(
            replica = %inner.config.replica_id,
            "the tokio runtime of the Redis cluster backend shut down: cluster rules fall back"
        );
        inner.set_status(ClusterStatus::Degraded {
            error: "the tokio runtime that ran the backend shut down".to_owned(),
        });
    }
}

pub(super) async fn network_task(weak: Weak<Inner>) {
    let _guard = TaskGuard(weak.clone());
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if inner.stopped.load(Ordering::Relaxed) {
            return;
        }
        inner.tick().await;
        let tick = inner.config.tick;
        drop(inner);
        tokio::time::sleep(tick).await;
    }
}

pub(super) async fn expiry_task(weak: Weak<Inner>) {
    let _guard = TaskGuard(weak.clone());
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if inner.stopped.load(Ordering::Relaxed) {
            return;
        }
        let now = Instant::now();
        let flows: Vec<Arc<Flow>> = lock(&inner.flows).clone();
        let mut next = now + Duration::from_millis(10);
        for flow in &flows {
            if let Some(d) = inner.expire(flow, now) {
                next = next.min(d);
            }
        }
        drop(inner);
        tokio::time::sleep_until(next).await;
    }
}

/// A lease reply in the `metrics` facade, labelled by the rule's `flowId` (one series per
/// cluster rule: bounded by the rules, not by traffic).
fn record_reply(flow_id: i64, reply: &LeaseReply) {
    let flow = flow_id.to_string();
    if reply.granted > 0 {
        metrics::counter!("sentinel_cluster_tokens_granted_total", "flow_id" => flow.clone())
            .increment(reply.granted.unsigned_abs());
    }
    metrics::gauge!("sentinel_cluster_live_replicas", "flow_id" => flow.clone())
        .set(reply.live as f64);
    metrics::gauge!("sentinel_cluster_window_tokens_left", "flow_id" => flow)
        .set(reply.left as f64);
}
