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
use crate::error::ClusterError;
use crate::scripts::{keys, LeaseReply, Scripts};
use crate::status::{ClusterStats, ClusterStatus};

mod fallback;
mod lease;

use lease::{expiry_task, network_task};

/// How long a lease call over its budget may still answer into the lease; past it the
/// call is abandoned (a silently dead connection cannot hold a flow's lease calls forever).
const LATE_REPLY_WAIT: Duration = Duration::from_secs(1);

/// The shortest and longest window the backend serves, in ms.
pub(crate) const WINDOW_RANGE_MS: (u32, u32) = (100, 60_000);

/// The time the slots compare their leases' ends with: tokio's clock (the one the backend
/// measures its windows with, paused in tests), in milliseconds since the backend started.
#[derive(Debug, Clone, Copy)]
struct LeaseClock {
    origin: Instant,
}

impl LeaseClock {
    /// `at` in this clock's milliseconds, rounded down (never after `at`).
    fn ms_of(self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_millis()).unwrap_or(u64::MAX)
    }
}

impl sentinel_core::Clock for LeaseClock {
    #[inline]
    fn now_ms(&self) -> u64 {
        self.ms_of(Instant::now())
    }

    fn now_nanos(&self) -> u64 {
        let elapsed = Instant::now().saturating_duration_since(self.origin);
        u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
    }
}

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
    last_sample: Instant,
    last_activity: Option<Instant>,
    last_call: Option<Instant>,
    /// Redis granted nothing while the window had tokens left (reserved for the replicas
    /// that need less than a fair share): ask again at this time, not every tick.
    retry_at: Option<Instant>,
    /// Tokens Redis granted into the lease for `window` (net of what was given back).
    redis_added: i64,
    /// Tokens the local fallback put into the lease for `window`.
    local_added: i64,
    /// What Redis said `window` had left for the whole cluster, at the last reply in it.
    window_left: Option<i64>,
    /// The last window Redis reported and when it ends by this replica's clock (kept after
    /// the lease is dropped: the fallback extrapolates Redis's windows from it).
    known_window: Option<(i64, Instant)>,
    /// How much later than `known_window`'s end the window may really end (the reply's
    /// round trip): the fallback starts a window's share only once it has surely begun.
    known_end_slack: Duration,
    /// Set while the flow is checked locally (Redis unreachable, `fallbackToLocalWhenFail`).
    fallback: Option<Fallback>,
    /// This replica's reservation, from the last reply (`None` before one): what the local
    /// fallback may admit in a window, held for it by Redis against the other replicas.
    reserve: Option<i64>,
}

/// The local fallback of one flow: the lease holds this replica's share of each window, less
/// what it already admitted in the window.
#[derive(Debug, Clone, Copy)]
struct Fallback {
    /// `window` follows Redis's windows (extrapolated from the last reply); `false` when this
    /// replica never heard from Redis: local windows of the same length.
    aligned: bool,
    /// When Redis answered again: the flow goes back to leases at the first window that
    /// begins `resume_after` later, and until then charges what it admits locally.
    resumed_at: Option<Instant>,
    /// What the fallback admitted in `window` and Redis already knows.
    charged: i64,
    /// The live replicas when Redis was last reachable: right after an outage Redis's
    /// membership has expired, and counts only the replicas that heartbeated since.
    live: u32,
    /// The reservation Redis holds for this replica (its last reply's): the fallback's
    /// share of a window is at most this. `None`: Redis never answered.
    reserve: Option<i64>,
    /// The live replicas Redis counted at its last reply in the fallback (0 before one):
    /// after an outage, leases resume once it counts `live` again.
    seen: u32,
    /// The share of `window` goes into the lease at this time, when the window has surely
    /// begun (its estimated start plus the slack of the estimate); until then the lease is
    /// empty.
    share_at: Option<Instant>,
}

/// One registered flow.
#[derive(Debug)]
struct Flow {
    slot: Arc<ClusterSlot>,
    /// The window hash, the members sorted set and the demands hash.
    keys: [String; 3],
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
    /// Calls the local fallback admitted, charged to the window `charge_window` before
    /// anything is granted (`-1`: to the current window).
    charge: i64,
    charge_window: i64,
    /// The calls per second this replica offers on the flow (its demand).
    demand: f64,
    /// The reservation this replica holds (its last reply's, or its fallback's share):
    /// Redis never keeps less for it.
    held: i64,
}

impl Request {
    const HEARTBEAT: Request = Request {
        want: 0,
        back: 0,
        back_window: 0,
        all_or_nothing: false,
        charge: 0,
        charge_window: 0,
        demand: 0.0,
        held: 0,
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
    /// The background tasks run (they keep the local fallback's windows): false once
    /// stopped or once the runtime that ran them is gone.
    tasks_alive: AtomicBool,
    /// The engine's listeners, once an engine is built with this backend.
    events: OnceLock<ClusterEvents>,
    /// The slots' clock: a lease's tokens are not spent after its window's end.
    clock: LeaseClock,
}

impl Inner {
    /// A backend's state, its tasks not started.
    fn new(config: RedisClusterConfig) -> Self {
        let (status, _) = watch::channel(ClusterStatus::Connecting);
        Self {
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
            tasks_alive: AtomicBool::new(true),
            events: OnceLock::new(),
            clock: LeaseClock {
                origin: Instant::now(),
            },
        }
    }

    /// Puts `tokens` in `slot`'s lease for a window that ends at `end` (by this replica's
    /// clock, never after the window's real end): the slot spends none of them from then on,
    /// even if the expiry task runs late.
    fn add_lease(&self, slot: &ClusterSlot, tokens: i64, end: Instant) {
        slot.add_lease(tokens, self.clock.ms_of(end));
    }
}

/// The Redis cluster backend. Install it with
/// [`SentinelBuilder::cluster_backend`](sentinel_core::SentinelBuilder::cluster_backend);
/// clones share one backend. One backend serves one engine: each registration replaces the
/// flows it knows (one rule per `flowId`).
#[derive(Clone)]
pub struct RedisClusterBackend {
    inner: Arc<Inner>,
    /// The runtime the background tasks run on (exact mode's synchronous calls run there).
    runtime: tokio::runtime::Handle,
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
    /// Starts the backend's background tasks on the current tokio runtime (call it from
    /// async code, or inside [`Runtime::enter`](tokio::runtime::Runtime::enter)); from
    /// synchronous code with a runtime elsewhere, use [`start_on`](Self::start_on). It
    /// connects in the background: [`status`](Self::status) is `Connecting` until the first
    /// call succeeds. The runtime must outlive the backend: if it shuts down first, the
    /// status turns [`Degraded`](ClusterStatus::Degraded) and the rules fall back as when
    /// Redis is unreachable, instead of blocking on leases nobody fetches.
    ///
    /// # Errors
    ///
    /// [`ClusterError::NoRuntime`] outside a tokio runtime: nothing would fetch the leases.
    pub fn start(config: RedisClusterConfig) -> Result<Self, ClusterError> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| ClusterError::NoRuntime)?;
        Ok(Self::start_on(config, &handle))
    }

    /// Starts the backend's background tasks on the runtime of `handle` (a multi-threaded
    /// runtime, or one that a thread keeps driving: the leases are fetched there).
    pub fn start_on(config: RedisClusterConfig, handle: &tokio::runtime::Handle) -> Self {
        let inner = Arc::new(Inner::new(config));
        handle.spawn(network_task(Arc::downgrade(&inner)));
        handle.spawn(expiry_task(Arc::downgrade(&inner)));
        Self {
            inner,
            runtime: handle.clone(),
        }
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
        match self.flow_of(slot) {
            Some(flow) => self.exact(flow, n).await,
            None => ClusterDecision::Block,
        }
    }

    /// Exact mode from synchronous code: [`acquire_exact`](Self::acquire_exact) run on the
    /// backend's runtime, the calling thread blocked for at most twice `call_timeout`
    /// (10 ms by default; [`Degraded`](ClusterDecision::Degraded) past it, and a grant that
    /// arrives later goes into the lease). Then call `enter()`. Do not call it on a thread
    /// of a single-threaded runtime that runs the backend: the call could not run until the
    /// budget is spent (use `acquire_exact` in async code).
    pub fn acquire_exact_blocking(&self, slot: &ClusterSlot, n: u32) -> ClusterDecision {
        let Some(flow) = self.flow_of(slot) else {
            return ClusterDecision::Block;
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let this = self.clone();
        self.runtime.spawn(async move {
            let _ = tx.send(this.exact(flow, n).await);
        });
        rx.recv_timeout(self.inner.config.call_timeout.saturating_mul(2))
            .unwrap_or(ClusterDecision::Degraded)
    }

    fn flow_of(&self, slot: &ClusterSlot) -> Option<Arc<Flow>> {
        lock(&self.inner.flows)
            .iter()
            .find(|f| std::ptr::eq(Arc::as_ptr(&f.slot), slot))
            .cloned()
    }

    async fn exact(&self, flow: Arc<Flow>, n: u32) -> ClusterDecision {
        let inner = &self.inner;
        if lock(&inner.breaker).open {
            return ClusterDecision::Degraded;
        }
        let request = Request {
            want: i64::from(n),
            all_or_nothing: true,
            ..inner.heartbeat(&flow)
        };
        // The call runs on its own task: when it overruns the budget the caller gets
        // `Degraded` at once, and a grant that arrives later still goes into the lease (the
        // next `enter()` spends it) instead of being lost.
        let task_inner = self.inner.clone();
        let mut call = tokio::spawn(async move {
            let reply = task_inner.call(&flow, request, None).await;
            if let Ok(reply) = reply {
                task_inner.apply(&flow, reply, request);
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

    /// Gives back every remainder, leaves the membership (within `probe_interval`) and
    /// stops the background tasks. Cluster rules then fall back as when degraded.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        inner.stopped.store(true, Ordering::Relaxed);
        inner.tasks_alive.store(false, Ordering::Relaxed);
        let flows: Vec<Arc<Flow>> = lock(&inner.flows).clone();
        for flow in flows {
            flow.slot.set_degraded(true);
            inner.leave(&flow).await;
        }
        inner.set_status(ClusterStatus::Stopped);
    }
}

#[cfg(test)]
mod tests;

fn over_budget() -> RedisError {
    RedisError::from((redis::ErrorKind::Io, "call over its time budget"))
}

impl ClusterBackend for RedisClusterBackend {
    /// The lease, and while Redis is unreachable the backend's own local fallback for rules
    /// with `fallbackToLocalWhenFail` (its share of each window, in the lease): an empty
    /// lease then blocks. Rules without it pass ([`Degraded`](ClusterDecision::Degraded)),
    /// as in Sentinel; so do all once the background tasks are gone (after
    /// [`shutdown`](RedisClusterBackend::shutdown)), the engine's own fallback deciding.
    #[inline]
    fn try_acquire(&self, slot: &ClusterSlot, n: u32) -> ClusterDecision {
        match slot.try_lease(n) {
            ClusterDecision::Degraded
                if slot.spec().fallback_to_local_when_fail
                    && self.inner.tasks_alive.load(Ordering::Relaxed) =>
            {
                ClusterDecision::Block
            }
            decision => decision,
        }
    }

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
                let keys = keys(&inner.config.prefix, spec.flow_id);
                let slot = ClusterSlot::with_clock(spec.clone(), Arc::new(inner.clock));
                slot.set_degraded(degraded);
                let flow = Arc::new(Flow {
                    slot: Arc::new(slot),
                    keys,
                    exact: inner.config.exact_flows.contains(&spec.flow_id),
                    in_flight: AtomicBool::new(false),
                    state: Mutex::new(LeaseState {
                        window: -1,
                        deadline: None,
                        exhausted: false,
                        last_left: 0,
                        rate: 0.0,
                        last_sample: Instant::now(),
                        last_activity: None,
                        last_call: None,
                        retry_at: None,
                        redis_added: 0,
                        local_added: 0,
                        window_left: None,
                        known_window: None,
                        known_end_slack: Duration::ZERO,
                        fallback: None,
                        reserve: None,
                    }),
                });
                if degraded {
                    inner.enter_fallback(&flow, Instant::now());
                }
                flow
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
