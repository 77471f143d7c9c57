//! The backend: registered flows, their leases, the breaker, and the two background tasks
//! (network: leases and heartbeats; expiry: drops a lease when its window ends).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use redis::RedisError;
use sentinel_core::cluster::{
    ClusterBackend, ClusterDecision, ClusterEvents, ClusterRuleSpec, ClusterSlot,
};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::config::RedisClusterConfig;
use crate::connect::{connect, Conn};
use crate::scripts::{keys, LeaseReply, Scripts};
use crate::{ClusterError, ClusterStats, ClusterStatus};

/// How long a lease call over its budget may still answer into the lease; past it the
/// call is abandoned (a silently dead connection cannot hold a flow's lease calls forever).
const LATE_REPLY_WAIT: Duration = Duration::from_secs(1);

/// The shortest and longest window the backend serves, in ms.
pub(crate) const WINDOW_RANGE_MS: (u32, u32) = (100, 60_000);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the background work knows of one flow's lease. Only the two background tasks and
/// exact-mode calls touch it, never the hot path.
#[derive(Debug)]
struct LeaseState {
    /// The Redis window the lease belongs to.
    window: i64,
    /// When that window ends, by this replica's clock (conservative: never after its end).
    deadline: Option<Instant>,
    /// The window has no token left: ask again in the next.
    exhausted: bool,
    /// The tokens the lease would hold had nothing been taken since the last look.
    last_left: i64,
    /// The replica's demand on this flow: tokens taken and refused (per second, smoothed).
    rate: f64,
    /// The tokens it took (per second, smoothed): its share of the limit.
    used_rate: f64,
    last_sample: Instant,
    last_activity: Option<Instant>,
    last_call: Option<Instant>,
}

/// One registered flow.
#[derive(Debug)]
struct Flow {
    slot: Arc<ClusterSlot>,
    window_key: String,
    members_key: String,
    exact: bool,
    /// A lease call of this flow is on its way (at most one: a stalled server that wakes
    /// up answers at most one request per flow and replica).
    in_flight: AtomicBool,
    state: Mutex<LeaseState>,
}

/// A call to the lease script.
#[derive(Debug, Clone, Copy)]
struct Request {
    want: i64,
    back: i64,
    back_window: i64,
    all_or_nothing: bool,
}

impl Request {
    const HEARTBEAT: Request = Request {
        want: 0,
        back: 0,
        back_window: 0,
        all_or_nothing: false,
    };
}

#[derive(Debug)]
struct Breaker {
    failures: u32,
    /// When the current run of failures began.
    failing_since: Option<Instant>,
    open: bool,
    next_probe: Instant,
}

#[derive(Debug, Default)]
struct Counters {
    calls: AtomicU64,
    failures: AtomicU64,
    granted: AtomicU64,
    stranded: AtomicU64,
    given_back: AtomicU64,
    degraded: AtomicU64,
    resumed: AtomicU64,
}

pub(crate) struct Inner {
    config: RedisClusterConfig,
    scripts: Scripts,
    flows: Mutex<Vec<Arc<Flow>>>,
    leaving: Mutex<Vec<Arc<Flow>>>,
    conn: Mutex<Option<Conn>>,
    breaker: Mutex<Breaker>,
    status: watch::Sender<ClusterStatus>,
    counters: Counters,
    stopped: AtomicBool,
    /// The engine's listeners, once an engine is built with this backend.
    events: OnceLock<ClusterEvents>,
}

/// The Redis cluster backend. Install it with
/// [`SentinelBuilder::cluster_backend`](sentinel_core::SentinelBuilder::cluster_backend);
/// clones share one backend. One backend serves one engine: each registration replaces the
/// flows it knows (one rule per `flowId`).
#[derive(Clone)]
pub struct RedisClusterBackend {
    inner: Arc<Inner>,
}

impl fmt::Debug for RedisClusterBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisClusterBackend")
            .field("target", &self.inner.config.target)
            .field("replica", &self.inner.config.replica_id)
            .field("status", &*self.inner.status.borrow())
            .finish_non_exhaustive()
    }
}

impl RedisClusterBackend {
    /// Starts the backend's background tasks on the current tokio runtime. It connects in
    /// the background: [`status`](Self::status) is `Connecting` until the first call
    /// succeeds.
    ///
    /// # Errors
    ///
    /// [`ClusterError::NoRuntime`] outside a tokio runtime, [`ClusterError::Config`] for a
    /// setting out of range.
    pub fn start(config: RedisClusterConfig) -> Result<Self, ClusterError> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| ClusterError::NoRuntime)?;
        check_config(&config)?;
        let (status, _) = watch::channel(ClusterStatus::Connecting);
        let inner = Arc::new(Inner {
            config,
            scripts: Scripts::new(),
            flows: Mutex::new(Vec::new()),
            leaving: Mutex::new(Vec::new()),
            conn: Mutex::new(None),
            breaker: Mutex::new(Breaker {
                failures: 0,
                failing_since: None,
                open: false,
                next_probe: Instant::now(),
            }),
            status,
            counters: Counters::default(),
            stopped: AtomicBool::new(false),
            events: OnceLock::new(),
        });
        handle.spawn(network_task(Arc::downgrade(&inner)));
        handle.spawn(expiry_task(Arc::downgrade(&inner)));
        Ok(Self { inner })
    }

    /// Whether cluster checks are live, or degraded to local checks (and why).
    pub fn status(&self) -> ClusterStatus {
        self.inner.status.borrow().clone()
    }

    /// Every status change, as it happens.
    pub fn subscribe(&self) -> watch::Receiver<ClusterStatus> {
        self.inner.status.subscribe()
    }

    /// Counters since start.
    pub fn stats(&self) -> ClusterStats {
        let c = &self.inner.counters;
        ClusterStats {
            redis_calls: c.calls.load(Ordering::Relaxed),
            failed_calls: c.failures.load(Ordering::Relaxed),
            granted: c.granted.load(Ordering::Relaxed),
            stranded: c.stranded.load(Ordering::Relaxed),
            given_back: c.given_back.load(Ordering::Relaxed),
            degraded: c.degraded.load(Ordering::Relaxed),
            resumed: c.resumed.load(Ordering::Relaxed),
        }
    }

    /// The slot of a registered flow (the rules must be loaded), for exact mode.
    pub fn slot(&self, flow_id: i64) -> Option<Arc<ClusterSlot>> {
        lock(&self.inner.flows)
            .iter()
            .find(|f| f.slot.spec().flow_id == flow_id)
            .map(|f| f.slot.clone())
    }

    /// Exact mode: asks Redis for `n` tokens of `slot`'s limit in one script call (under the
    /// call budget; concurrent calls are pipelined on the one connection). On
    /// [`Pass`](ClusterDecision::Pass) the tokens are put in the slot's lease, so the
    /// `enter()` that follows passes the cluster rule; a caller that does not enter leaves
    /// them to be given back when the flow goes idle. [`Degraded`](ClusterDecision::Degraded)
    /// while Redis is unreachable (the engine's fallback then applies in `enter()`).
    pub async fn acquire_exact(&self, slot: &ClusterSlot, n: u32) -> ClusterDecision {
        let inner = &self.inner;
        let Some(flow) = lock(&inner.flows)
            .iter()
            .find(|f| std::ptr::eq(Arc::as_ptr(&f.slot), slot))
            .cloned()
        else {
            return ClusterDecision::Block;
        };
        if lock(&inner.breaker).open {
            return ClusterDecision::Degraded;
        }
        let request = Request {
            want: i64::from(n),
            back: 0,
            back_window: 0,
            all_or_nothing: true,
        };
        // The call runs on its own task: when it overruns the budget the caller gets
        // `Degraded` at once, and a grant that arrives later still goes into the lease (the
        // next `enter()` spends it) instead of being lost.
        let task_inner = self.inner.clone();
        let mut call = tokio::spawn(async move {
            let sent = Instant::now();
            let reply = task_inner.call(&flow, request, None).await;
            if let Ok(reply) = reply {
                task_inner.apply(&flow, reply, sent, request);
            }
            reply
        });
        match tokio::time::timeout(inner.config.call_timeout, &mut call).await {
            Ok(Ok(Ok(reply))) => {
                inner.succeeded();
                if reply.granted > 0 {
                    ClusterDecision::Pass
                } else {
                    ClusterDecision::Block
                }
            }
            Ok(Ok(Err(e))) => {
                inner.failed(&e);
                ClusterDecision::Degraded
            }
            Ok(Err(join)) => {
                inner.failed(&RedisError::from((
                    redis::ErrorKind::Io,
                    "exact call task failed",
                    join.to_string(),
                )));
                ClusterDecision::Degraded
            }
            Err(_) => {
                inner.failed(&over_budget());
                ClusterDecision::Degraded
            }
        }
    }

    /// Gives back every remainder, leaves the membership (within the call budget) and
    /// stops the background tasks. Cluster rules then fall back as when degraded.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        inner.stopped.store(true, Ordering::Relaxed);
        let flows: Vec<Arc<Flow>> = lock(&inner.flows).clone();
        for flow in flows {
            flow.slot.set_degraded(true);
            inner.leave(&flow).await;
        }
        inner.set_status(ClusterStatus::Stopped);
    }
}

fn over_budget() -> RedisError {
    RedisError::from((redis::ErrorKind::Io, "call over its time budget"))
}

fn check_config(config: &RedisClusterConfig) -> Result<(), ClusterError> {
    let positive = [
        ("call_timeout", config.call_timeout),
        ("connect_timeout", config.connect_timeout),
        ("heartbeat_ttl", config.heartbeat_ttl),
        ("lease_horizon", config.lease_horizon),
        ("tick", config.tick),
        ("probe_interval", config.probe_interval),
    ];
    for (field, value) in positive {
        if value.is_zero() {
            return Err(ClusterError::Config {
                field,
                message: "must be > 0".into(),
            });
        }
    }
    if !(config.max_lease_fraction > 0.0 && config.max_lease_fraction <= 1.0) {
        return Err(ClusterError::Config {
            field: "max_lease_fraction",
            message: format!("must be in (0, 1], got {}", config.max_lease_fraction),
        });
    }
    if config.failures_to_open == 0 {
        return Err(ClusterError::Config {
            field: "failures_to_open",
            message: "must be > 0".into(),
        });
    }
    if config.replica_id.is_empty() {
        return Err(ClusterError::Config {
            field: "replica_id",
            message: "must not be empty".into(),
        });
    }
    Ok(())
}

impl ClusterBackend for RedisClusterBackend {
    fn attach(&self, events: ClusterEvents) {
        let _ = self.inner.events.set(events);
    }

    fn register(&self, specs: &[ClusterRuleSpec]) -> Vec<Arc<ClusterSlot>> {
        let inner = &self.inner;
        let mut flows = lock(&inner.flows);
        let degraded = lock(&inner.breaker).open;
        let mut next: Vec<Arc<Flow>> = Vec::with_capacity(specs.len());
        for spec in specs {
            let kept = flows
                .iter()
                .chain(next.iter())
                .find(|f| f.slot.spec() == spec)
                .cloned();
            let flow = kept.unwrap_or_else(|| {
                let (window_key, members_key) = keys(&inner.config.prefix, spec.flow_id);
                let slot = ClusterSlot::new(spec.clone());
                slot.set_degraded(degraded);
                Arc::new(Flow {
                    slot: Arc::new(slot),
                    window_key,
                    members_key,
                    exact: inner.config.exact_flows.contains(&spec.flow_id),
                    in_flight: AtomicBool::new(false),
                    state: Mutex::new(LeaseState {
                        window: -1,
                        deadline: None,
                        exhausted: false,
                        last_left: 0,
                        rate: 0.0,
                        used_rate: 0.0,
                        last_sample: Instant::now(),
                        last_activity: None,
                        last_call: None,
                    }),
                })
            });
            if !next.iter().any(|f| Arc::ptr_eq(f, &flow)) {
                next.push(flow.clone());
            }
        }
        let retired: Vec<Arc<Flow>> = flows
            .iter()
            .filter(|f| !next.iter().any(|n| Arc::ptr_eq(f, n)))
            .cloned()
            .collect();
        lock(&inner.leaving).extend(retired);
        let slots = specs
            .iter()
            .filter_map(|spec| next.iter().find(|f| f.slot.spec() == spec))
            .map(|f| f.slot.clone())
            .collect();
        *flows = next;
        slots
    }

    fn check_spec(&self, spec: &ClusterRuleSpec) -> Result<(), (&'static str, String)> {
        let (lo, hi) = WINDOW_RANGE_MS;
        if !(lo..=hi).contains(&spec.window_ms) {
            return Err((
                "clusterConfig.windowIntervalMs",
                format!(
                    "the Redis cluster backend serves windows of {lo} to {hi} ms, got {}",
                    spec.window_ms
                ),
            ));
        }
        Ok(())
    }
}

impl Inner {
    fn set_status(&self, status: ClusterStatus) {
        self.status.send_if_modified(|s| {
            if *s == status {
                false
            } else {
                *s = status;
                true
            }
        });
    }

    async fn conn(&self) -> Result<Conn, RedisError> {
        if let Some(c) = lock(&self.conn).clone() {
            return Ok(c);
        }
        let c = connect(&self.config.target, self.config.connect_timeout).await?;
        *lock(&self.conn) = Some(c.clone());
        Ok(c)
    }

    /// One lease-script call, under the call budget (`budget` overrides it; `None`: the
    /// caller bounds it).
    async fn call(
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
        ];
        self.counters.calls.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("sentinel_cluster_redis_calls_total").increment(1);
        let keys = [flow.window_key.as_str(), flow.members_key.as_str()];
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
        let reply = LeaseReply::from_values(&values).ok_or_else(|| {
            RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "the lease script answered an unexpected shape",
            ))
        })?;
        record_reply(spec.flow_id, &reply);
        Ok(reply)
    }

    fn succeeded(&self) {
        let mut b = lock(&self.breaker);
        b.failures = 0;
        b.failing_since = None;
        let was_open = std::mem::replace(&mut b.open, false);
        drop(b);
        if was_open {
            for f in lock(&self.flows).iter() {
                f.slot.set_degraded(false);
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

    fn failed(&self, error: &RedisError) {
        self.counters.failures.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("sentinel_cluster_redis_failures_total").increment(1);
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
            for f in lock(&self.flows).iter() {
                f.slot.set_degraded(true);
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
    fn apply(&self, flow: &Flow, reply: LeaseReply, sent: Instant, request: Request) {
        let mut st = lock(&flow.state);
        let now = Instant::now();
        st.last_call = Some(now);
        flow.slot
            .set_live_replicas(u32::try_from(reply.live).unwrap_or(u32::MAX));
        flow.slot.set_window_left(reply.left);
        if reply.window != st.window {
            // Tokens of an earlier window are no longer good.
            let old = flow.slot.drain();
            self.strand(old);
            st.last_left = 0;
            st.window = reply.window;
            st.exhausted = false;
        }
        // Redis measured the time left after we sent: the window cannot end before this.
        let left_ms = u64::try_from(reply.ms_left).unwrap_or(0).saturating_sub(1);
        let deadline = sent + Duration::from_millis(left_ms);
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
                flow.slot.add_tokens(reply.granted);
                st.last_left += reply.granted;
            }
        }
        if request.want > 0 && !request.all_or_nothing && (reply.granted == 0 || reply.left <= 0) {
            st.exhausted = true;
        }
    }

    fn strand(&self, tokens: i64) {
        if tokens > 0 {
            self.counters
                .stranded
                .fetch_add(u64::try_from(tokens).unwrap_or(0), Ordering::Relaxed);
        }
    }

    /// Drops the lease of a window that ended. Returns when the next one ends.
    fn expire(&self, flow: &Flow, now: Instant) -> Option<Instant> {
        let mut st = lock(&flow.state);
        match st.deadline {
            Some(d) if now >= d => {
                let old = flow.slot.drain();
                self.strand(old);
                st.last_left = 0;
                st.deadline = None;
                st.exhausted = false;
                None
            }
            other => other,
        }
    }

    /// What this flow needs from Redis now, if anything.
    fn plan(&self, flow: &Flow, now: Instant) -> Option<Request> {
        self.expire(flow, now);
        let cfg = &self.config;
        let mut st = lock(&flow.state);
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
        st.used_rate += alpha * (consumed as f64 / dt - st.used_rate);
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
            return Some(Request {
                want: 0,
                back,
                back_window: st.window,
                all_or_nothing: false,
            });
        }
        if active && !flow.exact && !st.exhausted {
            let live = f64::from(slot.live_replicas());
            let spec = slot.spec();
            let limit = spec.window_limit(slot.live_replicas()) as f64;
            // A replica taking k times its fair share may hold a lease k times larger: the
            // leases of all replicas together stay within 2 x max_lease_fraction of the
            // limit (the fair part and the used part), whatever the skew.
            let fair_per_s = limit / (f64::from(spec.window_ms) / 1000.0) / live;
            let weight = (st.used_rate / fair_per_s.max(1e-9)).clamp(1.0, live);
            let cap = (limit * cfg.max_lease_fraction * weight / live)
                .floor()
                .max(1.0);
            // Up fast (the instant rate), down smoothly.
            let want = (st.rate.max(instant) * horizon).ceil().clamp(1.0, cap) as i64;
            if tokens <= want / 2 {
                return Some(Request {
                    want,
                    back: 0,
                    back_window: 0,
                    all_or_nothing: false,
                });
            }
        }
        heartbeat_due.then_some(Request::HEARTBEAT)
    }

    /// Leaves a flow's membership and gives back its remainder.
    async fn leave(&self, flow: &Flow) {
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
        let keys = [flow.window_key.as_str(), flow.members_key.as_str()];
        let run = conn.run(&self.scripts.leave, &keys, &args);
        if let Ok(Ok(_)) = tokio::time::timeout(self.config.call_timeout, run).await {
            self.counters
                .given_back
                .fetch_add(u64::try_from(back).unwrap_or(0), Ordering::Relaxed);
        }
    }

    /// One pass of the network task.
    async fn tick(self: &Arc<Self>) {
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
            // The probe: a heartbeat of the first flow, or a connect.
            let probe = match flows.first() {
                Some(flow) => {
                    let sent = Instant::now();
                    self.call(flow, Request::HEARTBEAT, Some(self.config.call_timeout))
                        .await
                        .map(|r| self.apply(flow, r, sent, Request::HEARTBEAT))
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
        // After a failure, a tick without a call sends a heartbeat (wanting no token), so
        // that a failure that persists opens the breaker within `open_after`.
        if failing && !called {
            let flow = &flows[0];
            let sent = Instant::now();
            match self
                .call(flow, Request::HEARTBEAT, Some(self.config.call_timeout))
                .await
            {
                Ok(reply) => {
                    self.succeeded();
                    self.apply(flow, reply, sent, Request::HEARTBEAT);
                }
                Err(e) => self.failed(&e),
            }
        }
    }

    /// A lease call on its own task, awaited for the call budget. Over the budget it counts
    /// as a failure, and its reply, if one comes, still goes into the lease (a grant is
    /// never lost to a slow reply); until then no other lease call of the flow goes out.
    async fn lease_call(
        self: &Arc<Self>,
        flow: &Arc<Flow>,
        request: Request,
    ) -> Result<(), RedisError> {
        flow.in_flight.store(true, Ordering::Release);
        let inner = self.clone();
        let task_flow = flow.clone();
        let mut call = tokio::spawn(async move {
            let sent = Instant::now();
            let result = inner.call(&task_flow, request, Some(LATE_REPLY_WAIT)).await;
            match &result {
                Ok(reply) => inner.apply(&task_flow, *reply, sent, request),
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

async fn network_task(weak: Weak<Inner>) {
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

async fn expiry_task(weak: Weak<Inner>) {
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
