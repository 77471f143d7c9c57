//! The `Sentinel` handle and its builder: the engine's resources, rule tables and clock.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use arc_swap::ArcSwap;

use super::limits::Limits;
use super::resources::{NodeRef, Registry, ResourceNode};
use super::shared::{NodeCaps, Shared};
use super::snapshot::Owned;
use super::snapshot::RuleSnapshot;
use super::views::seconds_of;
use crate::block::BlockReasons;
use crate::circuit_breaker::{BreakerState, DegradeRule};
use crate::clock::{Clock, EngineClock, SystemClock};
use crate::cluster::ClusterBackend;
use crate::events::{EventBus, EventListener};
use crate::rules::Validation;
use crate::stat::{NodeStats, SecondStats, StatNode};
use crate::system::SystemStatus;

pub(crate) struct Inner {
    pub(crate) shared: Arc<Shared>,
    pub(crate) registry: Registry,
    pub(crate) validation: Validation,
    /// Serialises rule writers; readers never take it.
    pub(crate) writer: Mutex<()>,
    /// The running data sources, by name (each names one part of the rule union), with the
    /// families each has applied.
    pub(crate) source_names: Mutex<BTreeMap<String, Owned>>,
    /// The backend that decides `clusterMode` flow rules, if any.
    pub(crate) cluster: Option<Arc<dyn ClusterBackend>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Compiled rules can hold resource nodes (a relate rule's node), and nodes hold the
        // shared state that holds the rules: break that cycle when the last handle goes.
        self.shared.rules.store(Arc::new(RuleSnapshot::default()));
        self.shared.rules_version.store(0, Ordering::Release);
    }
}

/// A Sentinel engine: resources, their statistics, the rule tables and the clock.
///
/// Cheap to clone: clones share everything. Build isolated instances for tests with
/// [`Sentinel::builder`], or use the process-wide [`Sentinel::global`].
///
/// ```
/// use sentinel_core::{flow::FlowRule, Sentinel};
///
/// let sentinel = Sentinel::new();
/// sentinel.flow_rules().load_rules(vec![FlowRule::qps("GET:/order", 2.0)]).unwrap();
/// let a = sentinel.entry("GET:/order").enter();
/// let b = sentinel.entry("GET:/order").enter();
/// let c = sentinel.entry("GET:/order").enter();
/// assert!(a.is_ok() && b.is_ok());
/// assert!(c.is_err());
/// ```
#[derive(Clone)]
pub struct Sentinel {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for Sentinel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sentinel")
            .field("resources", &self.inner.registry.len())
            .field("version", &self.inner.shared.rules.load().version)
            .finish_non_exhaustive()
    }
}

impl Default for Sentinel {
    fn default() -> Self {
        Self::new()
    }
}

/// Builds a [`Sentinel`].
#[derive(Debug, Default)]
pub struct SentinelBuilder {
    system_status: Option<Arc<dyn SystemStatus>>,
    clock: Option<Arc<dyn Clock>>,
    limits: Limits,
    validation: Validation,
    param_values_in_errors: bool,
    cluster: Option<Arc<dyn ClusterBackend>>,
}

impl SentinelBuilder {
    /// Decides `clusterMode` flow rules with `backend` (see [`cluster`](crate::cluster)):
    /// one limit shared by every replica. Without a backend such rules are checked locally
    /// or pass, as [`FlowRule::checked_locally`](crate::flow::FlowRule::checked_locally)
    /// says.
    pub fn cluster_backend(mut self, backend: Arc<dyn ClusterBackend>) -> Self {
        self.cluster = Some(backend);
        self
    }

    /// Puts the hot value into param-flow [`BlockError`](crate::BlockError)s (off by
    /// default: a value may be personal data, such as a user id).
    pub fn param_values_in_errors(mut self, on: bool) -> Self {
        self.param_values_in_errors = on;
        self
    }

    /// Uses this clock (a [`FakeClock`](crate::FakeClock) in tests).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Reads load and CPU usage from `status` instead of sampling `/proc`.
    pub fn system_status(mut self, status: impl SystemStatus) -> Self {
        self.system_status = Some(Arc::new(status));
        self
    }

    /// Sets the statistics caps.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets how `load_rules` treats invalid rules (strict by default).
    pub fn validation(mut self, validation: Validation) -> Self {
        self.validation = validation;
        self
    }

    /// Builds the engine.
    pub fn build(self) -> Sentinel {
        let clock = self.clock.map_or_else(
            || EngineClock::System(SystemClock::new()),
            EngineClock::Injected,
        );
        let system_status = OnceLock::new();
        if let Some(status) = self.system_status {
            let _ = system_status.set(status);
        }
        let shared = Arc::new(Shared {
            clock,
            rules: ArcSwap::from_pointee(RuleSnapshot::default()),
            rules_version: AtomicU64::new(0),
            inbound: StatNode::new(),
            shadow_inbound: StatNode::new(),
            events: EventBus::default(),
            system_status,
            param_values_in_errors: self.param_values_in_errors,
            regex_state: Default::default(),
            enabled: AtomicBool::new(true),
            node_caps: NodeCaps {
                origins: self.limits.max_origins_per_resource,
                contexts: self.limits.max_contexts_per_resource,
            },
        });
        if let Some(backend) = &self.cluster {
            let weak: Weak<Shared> = Arc::downgrade(&shared);
            let sink: Weak<dyn crate::cluster::ClusterSink> = weak;
            backend.attach(crate::cluster::ClusterEvents::new(sink));
        }
        #[cfg(feature = "metrics")]
        shared
            .events
            .add(Arc::new(crate::telemetry::MetricsListener));
        Sentinel {
            inner: Arc::new(Inner {
                shared,
                registry: Registry::new(self.limits),
                validation: self.validation,
                writer: Mutex::new(()),
                source_names: Mutex::new(BTreeMap::new()),
                cluster: self.cluster,
            }),
        }
    }
}

impl Sentinel {
    /// The heap bytes the active param-flow rules keep per-value state in: 24 bytes per
    /// value a rule can track, allocated when the rule is compiled (see
    /// [`param_flow`](crate::param_flow#memory)). It does not grow with the values seen.
    pub fn param_flow_memory_bytes(&self) -> usize {
        self.inner
            .shared
            .rules
            .load()
            .tables
            .param_flow
            .value_bytes()
    }
}

/// A handle that does not keep the engine alive: for listeners and background tasks that
/// must not leak it. Obtained from [`Sentinel::downgrade`].
#[derive(Clone)]
pub struct WeakSentinel {
    inner: Weak<Inner>,
}

impl fmt::Debug for WeakSentinel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeakSentinel").finish_non_exhaustive()
    }
}

impl WeakSentinel {
    /// The engine, if it is still alive.
    pub fn upgrade(&self) -> Option<Sentinel> {
        self.inner.upgrade().map(|inner| Sentinel { inner })
    }
}

/// Every active rule, of every family, read from one rule table. Obtained from
/// [`Sentinel::active_rules`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ActiveRules {
    /// The rule-table version these rules belong to.
    pub version: u64,
    /// Flow rules ([`FlowRule`](crate::flow::FlowRule)).
    pub flow: Vec<crate::flow::FlowRule>,
    /// Circuit-breaker (degrade) rules ([`DegradeRule`]).
    pub degrade: Vec<DegradeRule>,
    /// System adaptive protection rules ([`SystemRule`](crate::system::SystemRule)).
    pub system: Vec<crate::system::SystemRule>,
    /// Authority (origin white/black list) rules
    /// ([`AuthorityRule`](crate::authority::AuthorityRule)).
    pub authority: Vec<crate::authority::AuthorityRule>,
    /// Hot-parameter (param-flow) rules ([`ParamFlowRule`](crate::param_flow::ParamFlowRule)).
    pub param_flow: Vec<crate::param_flow::ParamFlowRule>,
}

/// [`ActiveRules::of`], from the family list: a family the list names and the struct lacks,
/// or the reverse, does not compile.
macro_rules! active_rules {
    ($($variant:ident, $field:ident, $rule:ty;)*) => {
        impl ActiveRules {
            fn of(snapshot: &RuleSnapshot) -> Self {
                Self {
                    version: snapshot.version,
                    $($field: <$rule as crate::family::Family>::active(&snapshot.tables.$field)
                        .iter()
                        .map(|r| <$rule>::clone(r))
                        .collect(),)*
                }
            }
        }
    };
}

for_each_family!(active_rules);

static GLOBAL: OnceLock<Sentinel> = OnceLock::new();

impl Sentinel {
    /// An engine with the system clock and default limits.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A builder for an engine.
    pub fn builder() -> SentinelBuilder {
        SentinelBuilder::default()
    }

    /// The process-wide engine, created on first use.
    pub fn global() -> &'static Sentinel {
        GLOBAL.get_or_init(Sentinel::new)
    }

    /// The clock this engine reads.
    pub fn clock(&self) -> &dyn Clock {
        self.inner.shared.clock.as_dyn()
    }

    /// Registers an event listener. Listeners live as long as the engine.
    pub fn add_listener(&self, listener: impl EventListener) {
        self.inner.shared.events.add(Arc::new(listener));
    }

    /// Reports that a command port refused a command: listeners receive
    /// [`SentinelEvent::CommandRefused`](crate::SentinelEvent::CommandRefused) and a `tracing`
    /// warning is logged. For components outside the engine (the transport, the console) so
    /// that refusals reach the same listeners as the engine's own events.
    pub fn report_command_refused(
        &self,
        component: &str,
        command: &str,
        reason: &str,
        message: &str,
    ) {
        self.inner
            .shared
            .events
            .emit(crate::events::SentinelEvent::CommandRefused {
                component: component.to_owned(),
                command: command.to_owned(),
                reason: reason.to_owned(),
                message: message.to_owned(),
            });
    }

    /// Every circuit breaker with its rule and current state. A regex rule's breakers are
    /// listed once per matched resource entered since the rules last changed, each with the
    /// rule as that resource's own (its `resource` the matched name).
    pub fn circuit_breakers(&self) -> Vec<(DegradeRule, BreakerState)> {
        let snapshot = self.inner.shared.rules.load();
        let mut breakers: Vec<_> = snapshot
            .tables
            .degrade
            .breakers()
            .map(|b| (DegradeRule::clone(&b.rule), b.state()))
            .collect();
        snapshot.each_matched_breaker(&self.inner.shared.regex_state, |b| {
            breakers.push((DegradeRule::clone(&b.rule), b.state()));
        });
        breakers
    }

    /// Current statistics of a resource, if it has been entered.
    pub fn resource_stats(&self, resource: &str) -> Option<NodeStats> {
        let now = self.inner.shared.clock.now_ms();
        self.inner
            .registry
            .get(resource)
            .map(|n| n.stat.snapshot(now))
    }

    /// The seconds of a resource that start in `[from_ms, to_ms)` and have ended, oldest
    /// first, as Sentinel's metric log writes them; seconds in which nothing happened are
    /// left out. The engine keeps the last minute of seconds, so a range asked twice gives
    /// the same seconds as long as it is within that minute (keep longer series with
    /// [`MetricSeries`](crate::series::MetricSeries)). Reading costs the hot path nothing:
    /// it sums the windows calls already write.
    ///
    /// ```
    /// use sentinel_core::{Clock, FakeClock, Sentinel};
    ///
    /// let clock = FakeClock::new();
    /// let sentinel = Sentinel::builder().clock(clock.clone()).build();
    /// let start = clock.now_ms() - clock.now_ms() % 1000;
    /// for _ in 0..3 {
    ///     drop(sentinel.entry("GET:/order").enter());
    /// }
    /// clock.advance_ms(1000);
    /// let seconds = sentinel.resource_seconds("GET:/order", start, start + 1000);
    /// assert_eq!(seconds.len(), 1);
    /// assert_eq!((seconds[0].pass, seconds[0].success), (3, 3));
    /// ```
    pub fn resource_seconds(&self, resource: &str, from_ms: u64, to_ms: u64) -> Vec<SecondStats> {
        let Some(node) = self.inner.registry.get(resource) else {
            return Vec::new();
        };
        let now = self.inner.shared.clock.now_ms();
        seconds_of(&node.stat, now, from_ms, to_ms)
    }

    /// Blocks of a resource by what blocked them, counted since it was first entered.
    pub fn block_reasons(&self, resource: &str) -> Option<BlockReasons> {
        self.inner.registry.get(resource).map(|n| n.blocks.read())
    }

    /// Turns every check on or off: Sentinel's global switch (`Constants.ON`, the
    /// dashboard's `setSwitch`). While off, every call passes without a check and is not
    /// counted, as in Sentinel; rules, statistics and breakers keep their state and apply
    /// again when it is turned back on. On by default.
    ///
    /// ```
    /// use sentinel_core::{flow::FlowRule, Sentinel};
    ///
    /// let sentinel = Sentinel::new();
    /// sentinel.flow_rules().load_rules(vec![FlowRule::qps("r", 0.0)]).unwrap();
    /// assert!(sentinel.entry("r").enter().is_err());
    /// sentinel.set_enabled(false);
    /// assert!(sentinel.entry("r").enter().is_ok());
    /// ```
    pub fn set_enabled(&self, on: bool) {
        self.inner.shared.enabled.store(on, Ordering::Release);
    }

    /// Whether checks are on (see [`set_enabled`](Self::set_enabled)).
    pub fn is_enabled(&self) -> bool {
        self.inner.shared.enabled.load(Ordering::Acquire)
    }

    /// Current statistics of a resource for one origin.
    pub fn origin_stats(&self, resource: &str, origin: &str) -> Option<NodeStats> {
        let now = self.inner.shared.clock.now_ms();
        let node = self.inner.registry.get(resource)?;
        node.origin(origin).map(|n| n.snapshot(now))
    }

    /// Statistics of the global inbound node (all inbound calls).
    pub fn inbound_stats(&self) -> NodeStats {
        self.inner
            .shared
            .inbound
            .snapshot(self.inner.shared.clock.now_ms())
    }

    /// Names of every resource with statistics, sorted.
    pub fn resources(&self) -> Vec<String> {
        self.inner
            .registry
            .all()
            .iter()
            .map(|n| n.name.to_string())
            .collect()
    }

    /// A handle that does not keep the engine alive.
    pub fn downgrade(&self) -> WeakSentinel {
        WeakSentinel {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// Every active rule with its table version, read consistently in one load: a combined
    /// update is either wholly in it or not at all.
    pub fn active_rules(&self) -> ActiveRules {
        ActiveRules::of(&self.inner.shared.rules.load())
    }

    /// The rule-table version; it rises with every applied update.
    pub fn rules_version(&self) -> u64 {
        self.inner.shared.rules.load().version
    }

    /// Frees the statistics of the resources that have no rules, that nothing holds (no
    /// [`ResourceHandle`](crate::ResourceHandle), no entry in flight, no rule that reads
    /// them) and that no call entered for [`Limits::free_idle_after`]; returns how many. Off
    /// (returns 0) unless that limit is set. A freed resource entered again starts with
    /// fresh statistics. Call it from a timer; the engine also calls it when the resource
    /// cap is reached.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sentinel_core::{FakeClock, Limits, Sentinel};
    ///
    /// let clock = FakeClock::new();
    /// let sentinel = Sentinel::builder()
    ///     .clock(clock.clone())
    ///     .limits(Limits::default().free_idle_after(Duration::from_secs(60)))
    ///     .build();
    /// drop(sentinel.entry("GET:/once").enter());
    /// clock.advance_ms(61_000);
    /// assert_eq!(sentinel.free_idle_resources(), 1);
    /// assert!(sentinel.resource_stats("GET:/once").is_none());
    /// ```
    pub fn free_idle_resources(&self) -> usize {
        let Some(idle) = self.inner.registry.free_idle_after() else {
            return 0;
        };
        let now = self.inner.shared.clock.now_ms();
        let snapshot = self.inner.shared.rules.load();
        let idle_ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
        self.inner
            .registry
            .free_idle(now, idle_ms, |name| snapshot.index.contains_key(name))
    }

    pub(crate) fn node(&self, resource: &str) -> Option<Arc<ResourceNode>> {
        self.found(resource).map(NodeRef::into_shared)
    }

    /// The node of `resource`, made if new, lent for as long as the engine is borrowed when
    /// the registry never frees nodes.
    #[inline]
    pub(crate) fn found<'a>(&'a self, resource: &str) -> Option<NodeRef<'a>> {
        let node = self.inner.registry.find(resource, &self.inner.shared);
        if node.is_none() && self.inner.registry.free_idle_after().is_some() {
            return self.node_after_sweep(resource).map(NodeRef::Owned);
        }
        node
    }

    /// Past the resource cap with idle freeing on: frees idle resources (at most once a
    /// second), then tries again.
    #[cold]
    #[inline(never)]
    fn node_after_sweep(&self, resource: &str) -> Option<Arc<ResourceNode>> {
        let now = self.inner.shared.clock.now_ms();
        if !self.inner.registry.sweep_due(now) || self.free_idle_resources() == 0 {
            return None;
        }
        self.inner
            .registry
            .get_or_create(resource, &self.inner.shared)
    }
}
