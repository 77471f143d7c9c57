//! Cluster flow control: one limit shared by every replica of a service.
//!
//! A flow rule with `clusterMode: true` is decided by a [`ClusterBackend`] once one is
//! installed with [`SentinelBuilder::cluster_backend`](crate::SentinelBuilder::cluster_backend).
//! Without a backend nothing changes: such a rule is checked locally when
//! `fallbackToLocalWhenFail` is set and passes otherwise
//! ([`FlowRule::checked_locally`](crate::flow::FlowRule::checked_locally)).
//!
//! The engine hands the backend the cluster rules when it compiles them (off the hot path,
//! [`ClusterBackend::register`]) and gets back one [`ClusterSlot`] per rule: the compiled,
//! per-rule state the hot path reads. An admission is then [`ClusterBackend::try_acquire`] on
//! that slot, with no lock, no allocation, no await and no network call; the default
//! implementation takes `n` tokens from the slot's lease with one compare-and-swap.
//!
//! When the backend answers [`ClusterDecision::Degraded`] (its store is unreachable and the
//! lease is spent), a rule with `fallbackToLocalWhenFail` is checked locally against
//! [`ClusterSlot::local_fallback_count`]: `count / live replicas (last known)` for a global
//! threshold (`thresholdType` 1), `count` for a per-instance one (`thresholdType` 0), so that
//! the cluster as a whole stays near the limit. A rule without it passes, as in Sentinel.
//!
//! Only QPS rules with the reject behaviour and the direct strategy can be cluster rules
//! while a backend is installed: anything else is refused when the rules are applied, with
//! the rule's index and field (never a silent N x). Param-flow and thread-grade cluster rules
//! are out of scope.

use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::clock::{Clock, SystemClock};

/// What a cluster rule asks of the backend, taken from the rule and its `clusterConfig`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ClusterRuleSpec {
    /// `clusterConfig.flowId`: the global identity of the limit.
    pub flow_id: i64,
    /// The rule's resource (for reports only).
    pub resource: String,
    /// The rule's `count`, per second.
    pub count: f64,
    /// `thresholdType` 1: `count` is the limit of the whole cluster. Otherwise (0) it is per
    /// instance, and the cluster's limit is `count x live replicas`.
    pub global: bool,
    /// `clusterConfig.windowIntervalMs`: the window the limit is counted over.
    pub window_ms: u32,
    /// `clusterConfig.fallbackToLocalWhenFail`.
    pub fallback_to_local_when_fail: bool,
}

impl ClusterRuleSpec {
    /// The number of tokens one window holds for the whole cluster, given the live replicas
    /// (`thresholdType` 0 multiplies by them).
    pub fn window_limit(&self, live_replicas: u32) -> u64 {
        let per_window = self.count * f64::from(self.window_ms) / 1000.0;
        let total = if self.global {
            per_window
        } else {
            per_window * f64::from(live_replicas.max(1))
        };
        // Saturating float-to-int: a huge count is as good as no limit.
        total.floor().max(0.0) as u64
    }
}

/// What the backend decided for one admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClusterDecision {
    /// The tokens were granted.
    Pass,
    /// The cluster's limit is reached.
    Block,
    /// The backend cannot decide (its store is unreachable): the engine falls back.
    Degraded,
}

/// The compiled state of one cluster rule, shared by the engine (hot path) and the backend
/// (background work). Every field is an atomic: the hot path only reads and swaps them.
///
/// A lease belongs to one window of the store: [`add_lease`](Self::add_lease) records when
/// that window ends (by the slot's clock), and [`try_lease`](Self::try_lease) never spends a
/// token at or after that end, even when the backend's expiry has not dropped the lease yet
/// (a starved process): the store counted those tokens in their window, and its next window
/// grants the full limit again.
#[derive(Debug)]
pub struct ClusterSlot {
    spec: ClusterRuleSpec,
    /// Tokens of the current lease left to this replica.
    tokens: AtomicI64,
    /// When the window of the lease ends, in the slot clock's milliseconds
    /// ([`NO_END`](Self::NO_END): tokens added without an end).
    lease_end_ms: AtomicU64,
    /// The time the hot path compares `lease_end_ms` with.
    clock: Arc<dyn Clock>,
    /// Tokens asked for and refused (the lease was empty): the demand the backend cannot
    /// see in the lease.
    misses: AtomicU64,
    /// The backend cannot reach its store.
    degraded: AtomicBool,
    /// Live replicas, last known (at least 1).
    live: AtomicU32,
    /// Tokens the store's current window had left at the backend's last call;
    /// `UNKNOWN_LEFT` before one.
    window_left: AtomicI64,
}

impl ClusterSlot {
    /// A slot for `spec` with an empty lease, not degraded, one live replica, on the
    /// [`SystemClock`].
    pub fn new(spec: ClusterRuleSpec) -> Self {
        Self::with_clock(spec, Arc::new(SystemClock::new()))
    }

    /// A slot whose lease ends ([`add_lease`](Self::add_lease)) are read on `clock`: the
    /// clock the backend measures its windows' ends with.
    pub fn with_clock(spec: ClusterRuleSpec, clock: Arc<dyn Clock>) -> Self {
        Self {
            spec,
            tokens: AtomicI64::new(0),
            lease_end_ms: AtomicU64::new(Self::NO_END),
            clock,
            misses: AtomicU64::new(0),
            degraded: AtomicBool::new(false),
            live: AtomicU32::new(1),
            window_left: AtomicI64::new(Self::UNKNOWN_LEFT),
        }
    }

    /// What [`window_left`](Self::window_left) holds before the backend reported.
    const UNKNOWN_LEFT: i64 = i64::MIN;

    /// Records what the store's current window had left for the whole cluster (the
    /// backend's report, for consoles).
    pub fn set_window_left(&self, left: i64) {
        self.window_left
            .store(left.max(Self::UNKNOWN_LEFT + 1), Ordering::Relaxed);
    }

    /// What the store's current window had left at the backend's last call, if it reported.
    pub fn window_left(&self) -> Option<i64> {
        let left = self.window_left.load(Ordering::Relaxed);
        (left != Self::UNKNOWN_LEFT).then_some(left)
    }

    /// The rule this slot serves.
    pub fn spec(&self) -> &ClusterRuleSpec {
        &self.spec
    }

    /// What [`lease_end_ms`](Self::lease_end_ms) holds for tokens added without an end.
    pub const NO_END: u64 = u64::MAX;

    /// Whether the current lease's window has not ended by the slot's clock.
    #[inline]
    fn within_lease_window(&self) -> bool {
        let end = self.lease_end_ms.load(Ordering::Acquire);
        end == Self::NO_END || self.clock.now_ms() < end
    }

    /// When the window of the current lease ends, in the slot clock's milliseconds
    /// ([`NO_END`](Self::NO_END) if its tokens were added without an end).
    pub fn lease_end_ms(&self) -> u64 {
        self.lease_end_ms.load(Ordering::Acquire)
    }

    /// Takes `n` tokens from the lease if it holds that many: one compare-and-swap, retried
    /// only when another thread took tokens in between. The lease never goes negative. It
    /// does not look at the lease's end ([`try_lease`](Self::try_lease) does).
    #[inline]
    pub fn take(&self, n: u32) -> bool {
        let n = i64::from(n);
        let mut left = self.tokens.load(Ordering::Relaxed);
        while left >= n {
            match self.tokens.compare_exchange_weak(
                left,
                left - n,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => left = now,
            }
        }
        false
    }

    /// The leased decision: [`Pass`](ClusterDecision::Pass) if the lease holds `n` tokens
    /// and its window has not ended, else [`Degraded`](ClusterDecision::Degraded) while
    /// degraded, else [`Block`](ClusterDecision::Block). Tokens granted before an outage are
    /// still spent within their window.
    ///
    /// The end is read after the tokens are taken: a token of a newer lease carries that
    /// lease's end with it (it is added after its end is stored), so the check is never
    /// against an older end, and a token found past its end is dropped (its window is over).
    #[inline]
    pub fn try_lease(&self, n: u32) -> ClusterDecision {
        if self.take(n) && self.within_lease_window() {
            ClusterDecision::Pass
        } else if self.degraded.load(Ordering::Relaxed) {
            ClusterDecision::Degraded
        } else {
            self.misses.fetch_add(u64::from(n), Ordering::Relaxed);
            ClusterDecision::Block
        }
    }

    /// The tokens refused since the last call (an empty lease), and resets the count.
    pub fn take_misses(&self) -> u64 {
        self.misses.swap(0, Ordering::Relaxed)
    }

    /// Adds `n` granted tokens to the lease, keeping its end.
    pub fn add_tokens(&self, n: i64) {
        self.tokens.fetch_add(n, Ordering::Release);
    }

    /// Adds `n` tokens granted for a window that ends at `ends_at_ms` (the slot clock's
    /// milliseconds, never after the window's real end): from then on none of the lease's
    /// tokens is spent. A backend drains the tokens of an earlier window before it adds a
    /// later window's lease.
    pub fn add_lease(&self, n: i64, ends_at_ms: u64) {
        self.lease_end_ms.store(ends_at_ms, Ordering::Release);
        self.tokens.fetch_add(n, Ordering::Release);
    }

    /// The slot's clock, for a backend that converts its windows' ends to it.
    pub fn clock(&self) -> &dyn Clock {
        &*self.clock
    }

    /// Empties the lease and returns what it held (to give back, or because its window
    /// ended).
    pub fn drain(&self) -> i64 {
        self.tokens.swap(0, Ordering::Relaxed).max(0)
    }

    /// Tokens left in the lease.
    pub fn tokens(&self) -> i64 {
        self.tokens.load(Ordering::Relaxed)
    }

    /// Marks the slot degraded (the store is unreachable) or live again.
    pub fn set_degraded(&self, degraded: bool) {
        self.degraded.store(degraded, Ordering::Relaxed);
    }

    /// Whether the slot is degraded.
    pub fn is_degraded(&self) -> bool {
        self.degraded.load(Ordering::Relaxed)
    }

    /// Records the live replica count (0 counts as 1).
    pub fn set_live_replicas(&self, live: u32) {
        self.live.store(live.max(1), Ordering::Relaxed);
    }

    /// The live replica count, last known.
    pub fn live_replicas(&self) -> u32 {
        self.live.load(Ordering::Relaxed)
    }

    /// What a degraded rule with `fallbackToLocalWhenFail` enforces locally, per second:
    /// `count / live replicas` for a global threshold, `count` for a per-instance one.
    #[inline]
    pub fn local_fallback_count(&self) -> f64 {
        if self.spec.global {
            self.spec.count / f64::from(self.live_replicas())
        } else {
            self.spec.count
        }
    }
}

/// A store that admits tokens for a limit shared by several replicas.
///
/// [`try_acquire`](Self::try_acquire) runs on the hot path: it must not block, lock,
/// allocate or await. Everything else (leases, membership, reconnects) happens in the
/// backend's own background work.
pub trait ClusterBackend: Send + Sync + Debug + 'static {
    /// The slots for the cluster rules of a new rule table, one per spec, in order. Called
    /// on every apply that changes the flow rules, off the hot path. A spec equal to one
    /// registered before keeps its slot (its lease); a changed spec (another `flowId`,
    /// count or window) starts fresh. Slots of specs no longer registered may be released
    /// (their remainders given back).
    fn register(&self, specs: &[ClusterRuleSpec]) -> Vec<Arc<ClusterSlot>>;

    /// Admits `n` tokens of `slot`'s limit, or not. The default takes them from the slot's
    /// lease ([`ClusterSlot::try_lease`]).
    #[inline]
    fn try_acquire(&self, slot: &ClusterSlot, n: u32) -> ClusterDecision {
        slot.try_lease(n)
    }

    /// Whether this backend can serve `spec`; `Err((field, message))` names the field it
    /// cannot serve, in the payload's spelling (`clusterConfig.windowIntervalMs` for a window
    /// out of its range, for example).
    fn check_spec(&self, spec: &ClusterRuleSpec) -> Result<(), (&'static str, String)> {
        let _ = spec;
        Ok(())
    }

    /// Called once when an engine is built with this backend: `events` reports the backend's
    /// degradation and recovery as [`SentinelEvent`](crate::SentinelEvent)s to the engine's
    /// listeners. The default ignores it.
    fn attach(&self, events: ClusterEvents) {
        let _ = events;
    }
}

/// Where a [`ClusterBackend`] reports that it degraded to local checks, and that it resumed:
/// [`SentinelEvent::ClusterDegraded`](crate::SentinelEvent::ClusterDegraded) and
/// [`ClusterResumed`](crate::SentinelEvent::ClusterResumed) to the engine's listeners. It
/// does not keep the engine alive; once the engine is gone, reports go nowhere.
#[derive(Clone)]
pub struct ClusterEvents {
    shared: std::sync::Weak<dyn ClusterSink>,
}

/// What a [`ClusterEvents`] reports to: the engine's shared state, which turns each report
/// into an event for the engine's listeners.
pub(crate) trait ClusterSink: Send + Sync {
    /// `backend` degraded to local checks, because of `reason`.
    fn degraded(&self, backend: &str, reason: &str);
    /// `backend` decides again.
    fn resumed(&self, backend: &str);
}

impl ClusterEvents {
    pub(crate) fn new(shared: std::sync::Weak<dyn ClusterSink>) -> Self {
        Self { shared }
    }

    /// Cluster checks are degraded to local checks, because of `reason` (no secret in it).
    pub fn degraded(&self, backend: &str, reason: &str) {
        if let Some(shared) = self.shared.upgrade() {
            shared.degraded(backend, reason);
        }
    }

    /// Cluster checks are decided by the backend again.
    pub fn resumed(&self, backend: &str) {
        if let Some(shared) = self.shared.upgrade() {
            shared.resumed(backend);
        }
    }
}

impl Debug for ClusterEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterEvents")
            .field("engine_alive", &(self.shared.strong_count() > 0))
            .finish()
    }
}

#[cfg(test)]
mod tests;
