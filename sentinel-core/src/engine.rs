//! The `Sentinel` handle: resource registry, rule tables and clock.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use arc_swap::ArcSwap;

use crate::authority::AuthorityRule;
use crate::circuit_breaker::{BreakerState, CircuitBreaker, DegradeRule, DegradeTable};
use crate::clock::{Clock, EngineClock, SystemClock};
use crate::entry::{EntryBuilder, ResourceHandle};
use crate::events::{EventBus, EventListener, SentinelEvent};
use crate::flow::{FlowRule, FlowTable, ResourceFlowRules};
use crate::hash::{FastMap, FastSet};
use crate::rules::{LoadReport, RuleError, RuleFamily, RuleIssue, Validation};
use crate::stat::{Limits, NodeStats, Registry, ResourceNode, StatNode};
use crate::system::{ProcSystemStatus, SystemRule, SystemStatus, SystemTable};

/// The source name of rules loaded through the managers' `load_rules`.
pub const API_SOURCE: &str = "api";

/// Typed rules of one payload, per family. `None` means the payload does not carry that
/// family (it is left alone); `Some(vec![])` clears what this source contributed.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct RuleSet {
    /// Flow rules.
    pub flow: Option<Vec<FlowRule>>,
    /// Circuit-breaker (degrade) rules.
    pub degrade: Option<Vec<DegradeRule>>,
    /// System rules.
    pub system: Option<Vec<SystemRule>>,
    /// Authority rules.
    pub authority: Option<Vec<AuthorityRule>>,
}

impl RuleSet {
    /// An empty set that carries no family.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the flow rules.
    pub fn with_flow(mut self, rules: Vec<FlowRule>) -> Self {
        self.flow = Some(rules);
        self
    }

    /// Sets the degrade rules.
    pub fn with_degrade(mut self, rules: Vec<DegradeRule>) -> Self {
        self.degrade = Some(rules);
        self
    }

    /// Sets the system rules.
    pub fn with_system(mut self, rules: Vec<SystemRule>) -> Self {
        self.system = Some(rules);
        self
    }

    /// Sets the authority rules.
    pub fn with_authority(mut self, rules: Vec<AuthorityRule>) -> Self {
        self.authority = Some(rules);
        self
    }

    /// The families this set carries.
    pub fn families(&self) -> Vec<RuleFamily> {
        let mut families = Vec::new();
        if self.flow.is_some() {
            families.push(RuleFamily::Flow);
        }
        if self.degrade.is_some() {
            families.push(RuleFamily::Degrade);
        }
        if self.system.is_some() {
            families.push(RuleFamily::System);
        }
        if self.authority.is_some() {
            families.push(RuleFamily::Authority);
        }
        families
    }

    /// Number of rules carried, over all families.
    pub fn len(&self) -> usize {
        self.flow.as_ref().map_or(0, Vec::len)
            + self.degrade.as_ref().map_or(0, Vec::len)
            + self.system.as_ref().map_or(0, Vec::len)
            + self.authority.as_ref().map_or(0, Vec::len)
    }

    /// True when the set carries no rule.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A set that clears `families`.
    pub fn cleared(families: &[RuleFamily]) -> Self {
        let mut set = Self::default();
        for family in families {
            match family {
                RuleFamily::Flow => set.flow = Some(Vec::new()),
                RuleFamily::Degrade => set.degrade = Some(Vec::new()),
                RuleFamily::System => set.system = Some(Vec::new()),
                RuleFamily::Authority => set.authority = Some(Vec::new()),
            }
        }
        set
    }

    /// Checks every rule of every family as loading would (including one authority rule
    /// per resource), returning every problem. Empty means the set would load strictly.
    pub fn validate(&self) -> Vec<RuleIssue> {
        fn each<T>(
            rules: &Option<Vec<T>>,
            validate: impl Fn(&T, usize) -> Vec<RuleIssue>,
        ) -> Vec<RuleIssue> {
            rules
                .iter()
                .flatten()
                .enumerate()
                .flat_map(|(i, r)| validate(r, i))
                .collect()
        }
        let mut issues = each(&self.flow, FlowRule::validate);
        issues.extend(each(&self.degrade, DegradeRule::validate));
        issues.extend(each(&self.system, SystemRule::validate));
        issues.extend(each(&self.authority, AuthorityRule::validate));
        if let Some(authority) = &self.authority {
            let rules = authority.iter().cloned().map(Arc::new).enumerate();
            one_authority_rule_per_resource(rules, &mut issues);
        }
        issues
    }

    /// The set as Sentinel JSON: one family's list when it carries exactly one family (what
    /// [`FlowJson`](crate::datasource::FlowJson) and its siblings read), the combined document
    /// otherwise (what [`CombinedJson`](crate::datasource::CombinedJson) reads).
    pub fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut doc = self.to_document()?;
        if doc.len() == 1 {
            if let Some((_, list)) = doc.pop_first() {
                return serde_json::to_vec(&list);
            }
        }
        serde_json::to_vec(&doc)
    }

    /// The set as a combined document, `{"flow": [...], "degrade": [...], ...}`, whatever
    /// the number of families.
    pub fn to_combined_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec_pretty(&self.to_document()?)
    }

    fn to_document(&self) -> Result<BTreeMap<&'static str, serde_json::Value>, serde_json::Error> {
        let mut doc = BTreeMap::new();
        if let Some(rules) = &self.flow {
            doc.insert(RuleFamily::Flow.as_str(), serde_json::to_value(rules)?);
        }
        if let Some(rules) = &self.degrade {
            doc.insert(RuleFamily::Degrade.as_str(), serde_json::to_value(rules)?);
        }
        if let Some(rules) = &self.system {
            doc.insert(RuleFamily::System.as_str(), serde_json::to_value(rules)?);
        }
        if let Some(rules) = &self.authority {
            doc.insert(RuleFamily::Authority.as_str(), serde_json::to_value(rules)?);
        }
        Ok(doc)
    }

    /// Appends another set's rules, family by family (used to union a prefix of keys).
    pub fn merge(&mut self, other: RuleSet) {
        fn join<T>(into: &mut Option<Vec<T>>, from: Option<Vec<T>>) {
            if let Some(mut from) = from {
                into.get_or_insert_with(Vec::new).append(&mut from);
            }
        }
        join(&mut self.flow, other.flow);
        join(&mut self.degrade, other.degrade);
        join(&mut self.system, other.system);
        join(&mut self.authority, other.authority);
    }
}

/// One source's contribution, per family, validated.
#[derive(Debug, Clone, Default)]
pub(crate) struct SourceRules {
    flow: Option<Arc<Vec<Arc<FlowRule>>>>,
    degrade: Option<Arc<Vec<Arc<DegradeRule>>>>,
    system: Option<Arc<Vec<Arc<SystemRule>>>>,
    authority: Option<Arc<Vec<Arc<AuthorityRule>>>>,
}

impl SourceRules {
    fn is_empty(&self) -> bool {
        self.flow.is_none()
            && self.degrade.is_none()
            && self.system.is_none()
            && self.authority.is_none()
    }
}

/// Every rule of one resource, compiled, for the hot path's single lookup.
#[derive(Debug, Default, Clone)]
pub(crate) struct ResourceRules {
    pub(crate) authority: Option<Arc<AuthorityRule>>,
    pub(crate) flow: Option<Arc<ResourceFlowRules>>,
    /// `flow`'s count when its only rule is a plain QPS reject rule.
    pub(crate) plain_qps: Option<f64>,
    pub(crate) breakers: Option<Arc<[Arc<CircuitBreaker>]>>,
}

/// The engine-wide rule snapshot: one `ArcSwap` load gives every family, consistently.
#[derive(Debug, Default)]
pub(crate) struct RuleSnapshot {
    pub(crate) version: u64,
    sources: BTreeMap<Arc<str>, SourceRules>,
    pub(crate) flow: Arc<FlowTable>,
    pub(crate) degrade: Arc<DegradeTable>,
    pub(crate) system: Arc<SystemTable>,
    pub(crate) authority: Arc<Vec<Arc<AuthorityRule>>>,
    /// Where each resource's rules sit in `resources`.
    index: FastMap<Arc<str>, u32>,
    resources: Vec<ResourceRules>,
}

/// A node's cached slot: the table version in the high bits, the index in the low ones.
const SLOT_INDEX_BITS: u32 = 24;
const SLOT_INDEX_MASK: u64 = (1 << SLOT_INDEX_BITS) - 1;
/// The index of "no rules"; larger tables are not cached.
const NO_RULES: u64 = SLOT_INDEX_MASK;

impl RuleSnapshot {
    /// The rules of `node`'s resource.
    ///
    /// The node caches where its rules sit in the table it saw last, tagged with that table's
    /// version, so the hot path skips hashing the name until the next reload. A stale or
    /// racing cache entry only costs a lookup: the tag is checked on every read.
    #[inline(always)]
    pub(crate) fn rules_of(&self, node: &ResourceNode) -> Option<&ResourceRules> {
        let slot = node.rule_slot.load(Ordering::Relaxed);
        if slot & !SLOT_INDEX_MASK == self.version << SLOT_INDEX_BITS {
            let index = slot & SLOT_INDEX_MASK;
            if index == NO_RULES {
                return None;
            }
            return self.resources.get(index as usize);
        }
        self.look_up(node)
    }

    /// `rules_of` past a reload: looks the name up and caches the slot in the node.
    #[cold]
    #[inline(never)]
    fn look_up(&self, node: &ResourceNode) -> Option<&ResourceRules> {
        let tag = self.version << SLOT_INDEX_BITS;
        let index = self.index.get(&*node.name).copied();
        match index {
            None => node.rule_slot.store(tag | NO_RULES, Ordering::Relaxed),
            // An index too large to cache is looked up every time.
            Some(i) if u64::from(i) < NO_RULES => {
                node.rule_slot.store(tag | u64::from(i), Ordering::Relaxed)
            }
            Some(_) => {}
        }
        index.and_then(|i| self.resources.get(i as usize))
    }
}

/// State shared by the engine, its resource nodes and its entries.
pub(crate) struct Shared {
    pub(crate) clock: EngineClock,
    pub(crate) rules: ArcSwap<RuleSnapshot>,
    pub(crate) inbound: StatNode,
    pub(crate) events: EventBus,
    system_status: OnceLock<Arc<dyn SystemStatus>>,
}

impl Shared {
    /// The system status source, started on first use unless one was injected.
    pub(crate) fn system_status(&self) -> Arc<dyn SystemStatus> {
        self.system_status
            .get_or_init(|| Arc::new(ProcSystemStatus::start()))
            .clone()
    }
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("clock", &self.clock)
            .field("version", &self.rules.load().version)
            .finish_non_exhaustive()
    }
}

/// Lets a thread-local `arc_swap::Cache` hold an engine's rule table.
struct RulesOf(Arc<Shared>);

impl std::ops::Deref for RulesOf {
    type Target = ArcSwap<RuleSnapshot>;

    fn deref(&self) -> &ArcSwap<RuleSnapshot> {
        &self.0.rules
    }
}

thread_local! {
    /// The rule table of the engine this thread entered last. A cache hit costs one atomic
    /// load (no read-modify-write), where `ArcSwap::load` costs a few; the cached table is
    /// replaced as soon as a newer one is published. The thread keeps that engine's rule
    /// state (not its statistics) alive until it enters another engine or exits.
    static RULES: std::cell::RefCell<Option<arc_swap::Cache<RulesOf, Arc<RuleSnapshot>>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f` on the current rule table of `shared`'s engine.
#[inline(always)]
pub(crate) fn with_rules<R>(shared: &Arc<Shared>, mut f: impl FnMut(&RuleSnapshot) -> R) -> R {
    let cached = RULES.try_with(|cell| {
        // A listener that enters from inside a check finds the cache borrowed: it falls back.
        let mut slot = cell.try_borrow_mut().ok()?;
        let hit = slot
            .as_ref()
            .is_some_and(|c| std::ptr::eq(c.arc_swap(), &shared.rules));
        if !hit {
            *slot = Some(arc_swap::Cache::new(RulesOf(shared.clone())));
        }
        let snapshot = slot.as_mut()?.load();
        Some(f(snapshot))
    });
    match cached {
        Ok(Some(result)) => result,
        _ => f(&shared.rules.load()),
    }
}

/// What a check needs to know about the call.
#[derive(Debug)]
pub(crate) struct CheckContext<'a> {
    pub(crate) now_ms: u64,
    pub(crate) clock: &'a dyn Clock,
    pub(crate) node: &'a ResourceNode,
    pub(crate) origin: Option<&'a str>,
    pub(crate) origin_node: Option<&'a StatNode>,
    pub(crate) context: Option<&'a str>,
    pub(crate) context_node: Option<&'a StatNode>,
    pub(crate) batch: u32,
    pub(crate) prioritized: bool,
}

pub(crate) struct Inner {
    pub(crate) shared: Arc<Shared>,
    pub(crate) registry: Registry,
    validation: Validation,
    /// Serialises rule writers; readers never take it.
    writer: Mutex<()>,
    /// Names of the running data sources: each names one part of the rule union.
    source_names: Mutex<BTreeSet<String>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Compiled rules can hold resource nodes (a relate rule's node), and nodes hold the
        // shared state that holds the rules: break that cycle when the last handle goes.
        self.shared.rules.store(Arc::new(RuleSnapshot::default()));
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
}

impl SentinelBuilder {
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
        Sentinel {
            inner: Arc::new(Inner {
                shared: Arc::new(Shared {
                    clock,
                    rules: ArcSwap::from_pointee(RuleSnapshot::default()),
                    inbound: StatNode::new(),
                    events: EventBus::default(),
                    system_status,
                }),
                registry: Registry::new(self.limits),
                validation: self.validation,
                writer: Mutex::new(()),
                source_names: Mutex::new(BTreeSet::new()),
            }),
        }
    }
}

/// A data source's hold on its name (see `Sentinel::claim_source_name`).
#[derive(Debug)]
pub(crate) struct SourceNameClaim {
    sentinel: WeakSentinel,
    name: String,
}

impl Drop for SourceNameClaim {
    fn drop(&mut self) {
        if let Some(sentinel) = self.sentinel.upgrade() {
            sentinel
                .inner
                .source_names
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&self.name);
        }
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
    /// Active flow rules.
    pub flow: Vec<FlowRule>,
    /// Active circuit-breaker rules.
    pub degrade: Vec<DegradeRule>,
    /// Active system rules.
    pub system: Vec<SystemRule>,
    /// Active authority rules.
    pub authority: Vec<AuthorityRule>,
}

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

    /// Starts guarding a call to `resource`.
    pub fn entry<'a>(&'a self, resource: &'a str) -> EntryBuilder<'a> {
        EntryBuilder::new(self, resource)
    }

    /// Resolves a resource once, so a hot loop skips the name lookup.
    pub fn resource(&self, resource: &str) -> ResourceHandle {
        ResourceHandle::new(self.clone(), self.node(resource))
    }

    /// The clock this engine reads.
    pub fn clock(&self) -> &dyn Clock {
        self.inner.shared.clock.as_dyn()
    }

    /// Registers an event listener. Listeners live as long as the engine.
    pub fn add_listener(&self, listener: impl EventListener) {
        self.inner.shared.events.add(Arc::new(listener));
    }

    /// The flow rule manager.
    pub fn flow_rules(&self) -> RuleManager<'_, FlowRule> {
        RuleManager::new(self)
    }

    /// The circuit-breaker (degrade) rule manager.
    pub fn degrade_rules(&self) -> RuleManager<'_, DegradeRule> {
        RuleManager::new(self)
    }

    /// The system rule manager.
    pub fn system_rules(&self) -> RuleManager<'_, SystemRule> {
        RuleManager::new(self)
    }

    /// The authority rule manager.
    pub fn authority_rules(&self) -> RuleManager<'_, AuthorityRule> {
        RuleManager::new(self)
    }

    /// Every circuit breaker with its rule and current state.
    pub fn circuit_breakers(&self) -> Vec<(DegradeRule, BreakerState)> {
        let snapshot = self.inner.shared.rules.load();
        snapshot
            .degrade
            .breakers()
            .map(|b| (DegradeRule::clone(&b.rule), b.state()))
            .collect()
    }

    /// Current statistics of a resource, if it has been entered.
    pub fn resource_stats(&self, resource: &str) -> Option<NodeStats> {
        let now = self.inner.shared.clock.now_ms();
        self.inner
            .registry
            .get(resource)
            .map(|n| n.stat.snapshot(now))
    }

    /// Current statistics of a resource for one origin.
    pub fn origin_stats(&self, resource: &str, origin: &str) -> Option<NodeStats> {
        let now = self.inner.shared.clock.now_ms();
        let node = self.inner.registry.get(resource)?;
        node.origins.get(origin).map(|n| n.snapshot(now))
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

    /// Reserves `name` for one running data source: `None` while another source holds it.
    /// The name is free again when the claim is dropped.
    pub(crate) fn claim_source_name(&self, name: &str) -> Option<SourceNameClaim> {
        let mut names = self
            .inner
            .source_names
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        names.insert(name.to_owned()).then(|| SourceNameClaim {
            sentinel: self.downgrade(),
            name: name.to_owned(),
        })
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
        let snapshot = self.inner.shared.rules.load();
        fn copy<T: Clone>(rules: &[Arc<T>]) -> Vec<T> {
            rules.iter().map(|r| T::clone(r)).collect()
        }
        ActiveRules {
            version: snapshot.version,
            flow: copy(&snapshot.flow.rules),
            degrade: copy(&snapshot.degrade.rules),
            system: copy(&snapshot.system.rules),
            authority: copy(&snapshot.authority),
        }
    }

    /// The rule-table version; it rises with every applied update.
    pub fn rules_version(&self) -> u64 {
        self.inner.shared.rules.load().version
    }

    pub(crate) fn node(&self, resource: &str) -> Option<Arc<ResourceNode>> {
        self.inner
            .registry
            .get_or_create(resource, &self.inner.shared)
    }

    /// Validates `set`, then replaces what `source` contributes to each family it carries,
    /// compiles the union of all sources, and publishes every family in one store.
    ///
    /// Two sources feeding one family are unioned: each source owns its part, and an update
    /// from one replaces only that part. Rules equal to active ones (ignoring `id` and unknown
    /// fields) keep their compiled state. Duplicates collapse.
    pub fn apply_rules(
        &self,
        source: &str,
        set: RuleSet,
        validation: Validation,
    ) -> Result<LoadReport, RuleError> {
        let result = self.apply_inner(source, set, validation);
        if let Err(error) = &result {
            self.reject_rules(source, error);
        }
        result
    }

    /// Reports a payload from `source` that was not applied (a validation failure here, or a
    /// conversion failure in a data source).
    pub(crate) fn reject_rules(&self, source: &str, error: &RuleError) {
        self.inner.shared.events.emit(SentinelEvent::RulesRejected {
            source: source.to_owned(),
            error: error.clone(),
        });
    }

    fn apply_inner(
        &self,
        source: &str,
        set: RuleSet,
        validation: Validation,
    ) -> Result<LoadReport, RuleError> {
        let mut issues = Vec::new();
        let flow = set
            .flow
            .map(|r| keep_valid(r, FlowRule::validate, &mut issues));
        let degrade = set
            .degrade
            .map(|r| keep_valid(r, DegradeRule::validate, &mut issues));
        let system = set
            .system
            .map(|r| keep_valid(r, SystemRule::validate, &mut issues));
        let authority = set.authority.map(|rules| {
            // Valid rules with their places in the payload, then one per resource.
            let valid: Vec<(usize, Arc<AuthorityRule>)> = rules
                .into_iter()
                .enumerate()
                .filter_map(|(index, rule)| {
                    let found = rule.validate(index);
                    let valid = found.is_empty();
                    issues.extend(found);
                    valid.then(|| (index, Arc::new(rule)))
                })
                .collect();
            one_authority_rule_per_resource(valid, &mut issues)
        });
        if validation == Validation::Strict && !issues.is_empty() {
            return Err(RuleError::Invalid {
                payload: source.to_owned(),
                issues,
            });
        }

        let _writer = self.inner.writer.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.inner.shared.rules.load_full();
        let mut sources = current.sources.clone();
        let key: Arc<str> = Arc::from(source);
        let mut mine = sources.get(&key).cloned().unwrap_or_default();
        let mut changed = Vec::new();
        fn replace<T>(
            slot: &mut Option<Arc<Vec<Arc<T>>>>,
            new: Option<Vec<Arc<T>>>,
            family: RuleFamily,
            changed: &mut Vec<RuleFamily>,
        ) {
            if let Some(rules) = new {
                *slot = (!rules.is_empty()).then(|| Arc::new(rules));
                changed.push(family);
            }
        }
        replace(&mut mine.flow, flow, RuleFamily::Flow, &mut changed);
        replace(
            &mut mine.degrade,
            degrade,
            RuleFamily::Degrade,
            &mut changed,
        );
        replace(&mut mine.system, system, RuleFamily::System, &mut changed);
        replace(
            &mut mine.authority,
            authority,
            RuleFamily::Authority,
            &mut changed,
        );
        if mine.is_empty() {
            sources.remove(&key);
        } else {
            sources.insert(key, mine);
        }

        let flow_table = if changed.contains(&RuleFamily::Flow) {
            let union = union_of(sources.values().filter_map(|s| s.flow.as_deref()));
            Arc::new(FlowTable::compile(union, &current.flow, &|name| {
                self.node(name)
            }))
        } else {
            current.flow.clone()
        };
        let degrade_table = if changed.contains(&RuleFamily::Degrade) {
            let union = union_of(sources.values().filter_map(|s| s.degrade.as_deref()));
            Arc::new(DegradeTable::compile(union, &current.degrade))
        } else {
            current.degrade.clone()
        };
        let system_table = if changed.contains(&RuleFamily::System) {
            let union = union_of(sources.values().filter_map(|s| s.system.as_deref()));
            Arc::new(SystemTable::compile(union))
        } else {
            current.system.clone()
        };
        let authority_table = if changed.contains(&RuleFamily::Authority) {
            let union = union_of(sources.values().filter_map(|s| s.authority.as_deref()));
            let mut ignored = Vec::new();
            let table =
                one_authority_rule_per_resource(union.into_iter().enumerate(), &mut ignored);
            for issue in ignored {
                tracing::warn!(%issue, "two sources bring an authority rule for one resource; keeping the first");
            }
            Arc::new(table)
        } else {
            current.authority.clone()
        };

        // Every resource's rules, in one slot each; `index` maps names to slots.
        let mut index: FastMap<Arc<str>, u32> = FastMap::default();
        let mut resources: Vec<ResourceRules> = Vec::new();
        let expected = flow_table.by_resource.len() + degrade_table.by_resource.len();
        index.reserve(expected);
        resources.reserve(expected);
        for (name, rules) in &flow_table.by_resource {
            let slot = slot_of(&mut index, &mut resources, name);
            slot.plain_qps = rules.only_plain_qps();
            slot.flow = Some(rules.clone());
        }
        for (name, breakers) in &degrade_table.by_resource {
            slot_of(&mut index, &mut resources, name).breakers = Some(breakers.clone());
        }
        for rule in authority_table.iter() {
            let name: Arc<str> = Arc::from(rule.resource.as_str());
            slot_of(&mut index, &mut resources, &name).authority = Some(rule.clone());
        }

        let next = RuleSnapshot {
            version: current.version + 1,
            sources,
            flow: flow_table,
            degrade: degrade_table,
            system: system_table,
            authority: authority_table,
            index,
            resources,
        };
        let counts: Vec<(RuleFamily, usize)> = changed
            .iter()
            .map(|family| (*family, next.count(*family)))
            .collect();
        let version = next.version;
        self.inner.shared.rules.store(Arc::new(next));
        drop(_writer);

        self.inner.shared.events.emit(SentinelEvent::RulesApplied {
            source: source.to_owned(),
            families: counts.clone(),
            version,
        });
        Ok(LoadReport {
            applied: counts,
            skipped: issues,
            version,
        })
    }
}

/// The rules slot of resource `name`, added on first use.
fn slot_of<'a>(
    index: &mut FastMap<Arc<str>, u32>,
    resources: &'a mut Vec<ResourceRules>,
    name: &Arc<str>,
) -> &'a mut ResourceRules {
    let next = resources.len();
    let i = *index
        .entry(name.clone())
        .or_insert(u32::try_from(next).unwrap_or(u32::MAX)) as usize;
    if i >= next {
        // A new name: its slot is the one pushed now.
        resources.push(ResourceRules::default());
        return &mut resources[next];
    }
    &mut resources[i]
}

/// Keeps the first authority rule of each resource; later ones become issues, named by the
/// index paired with each rule (its place in the payload).
fn one_authority_rule_per_resource(
    rules: impl IntoIterator<Item = (usize, Arc<AuthorityRule>)>,
    issues: &mut Vec<RuleIssue>,
) -> Vec<Arc<AuthorityRule>> {
    let mut seen = FastSet::default();
    let mut kept = Vec::new();
    for (index, rule) in rules {
        if seen.insert(rule.resource.clone()) {
            kept.push(rule);
        } else {
            issues.push(RuleIssue::new(
                RuleFamily::Authority,
                index,
                Some(&rule.resource),
                "resource",
                "a resource may have only one authority rule",
            ));
        }
    }
    kept
}

impl RuleSnapshot {
    fn count(&self, family: RuleFamily) -> usize {
        match family {
            RuleFamily::Flow => self.flow.rules.len(),
            RuleFamily::Degrade => self.degrade.rules.len(),
            RuleFamily::System => self.system.rules.len(),
            RuleFamily::Authority => self.authority.len(),
        }
    }
}

/// Validates each rule, keeping the valid ones and collecting the issues.
fn keep_valid<T>(
    rules: Vec<T>,
    validate: impl Fn(&T, usize) -> Vec<RuleIssue>,
    issues: &mut Vec<RuleIssue>,
) -> Vec<Arc<T>> {
    let mut kept = Vec::with_capacity(rules.len());
    for (index, rule) in rules.into_iter().enumerate() {
        let found = validate(&rule, index);
        if found.is_empty() {
            kept.push(Arc::new(rule));
        } else {
            issues.extend(found);
        }
    }
    kept
}

/// The union of several sources' rules, in source order, without duplicates.
fn union_of<'a, T: Eq + std::hash::Hash + 'a>(
    parts: impl Iterator<Item = &'a Vec<Arc<T>>>,
) -> Vec<Arc<T>> {
    let mut seen: FastSet<&T> = FastSet::default();
    let mut out = Vec::new();
    for part in parts {
        for rule in part {
            if seen.insert(rule) {
                out.push(rule.clone());
            }
        }
    }
    out
}

mod sealed {
    use super::{RuleSet, Sentinel};

    pub trait Sealed: Sized {
        fn into_set(rules: Vec<Self>) -> RuleSet;
        fn active(sentinel: &Sentinel) -> Vec<Self>;
    }
}

/// A rule type with a manager: [`FlowRule`], [`DegradeRule`], [`SystemRule`] and
/// [`AuthorityRule`].
pub trait FamilyRule: sealed::Sealed + Clone + Sized {
    /// The family.
    const FAMILY: RuleFamily;
}

macro_rules! family_rule {
    ($ty:ty, $family:expr, $with:ident, |$snap:ident| $active:expr) => {
        impl sealed::Sealed for $ty {
            fn into_set(rules: Vec<Self>) -> RuleSet {
                RuleSet::new().$with(rules)
            }
            fn active(sentinel: &Sentinel) -> Vec<Self> {
                let $snap = sentinel.inner.shared.rules.load();
                $active.iter().map(|r| <$ty>::clone(r)).collect()
            }
        }
        impl FamilyRule for $ty {
            const FAMILY: RuleFamily = $family;
        }
    };
}

family_rule!(FlowRule, RuleFamily::Flow, with_flow, |s| s.flow.rules);
family_rule!(DegradeRule, RuleFamily::Degrade, with_degrade, |s| s
    .degrade
    .rules);
family_rule!(SystemRule, RuleFamily::System, with_system, |s| s
    .system
    .rules);
family_rule!(AuthorityRule, RuleFamily::Authority, with_authority, |s| s
    .authority);

/// Loads and reads the rules of one family. Obtained from [`Sentinel::flow_rules`],
/// [`Sentinel::degrade_rules`], [`Sentinel::system_rules`] or [`Sentinel::authority_rules`].
///
/// Rules loaded here form the `api` source. Data sources add their own sources; the active
/// rules of a family are the union of all sources.
pub struct RuleManager<'a, R> {
    sentinel: &'a Sentinel,
    _family: std::marker::PhantomData<fn() -> R>,
}

impl<R> fmt::Debug for RuleManager<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleManager").finish_non_exhaustive()
    }
}

impl<'a, R: FamilyRule> RuleManager<'a, R> {
    fn new(sentinel: &'a Sentinel) -> Self {
        Self {
            sentinel,
            _family: std::marker::PhantomData,
        }
    }

    /// Validates, compiles and publishes `rules` as the API source's rules of this family,
    /// replacing what it loaded before. An empty list clears them. Strict unless the engine
    /// was built lenient: one invalid rule rejects the list and the active rules stay.
    pub fn load_rules(&self, rules: Vec<R>) -> Result<LoadReport, RuleError> {
        self.sentinel.apply_rules(
            API_SOURCE,
            R::into_set(rules),
            self.sentinel.inner.validation,
        )
    }

    /// Like [`load_rules`](Self::load_rules), but skips invalid rules and reports them.
    pub fn load_rules_lenient(&self, rules: Vec<R>) -> Result<LoadReport, RuleError> {
        self.sentinel
            .apply_rules(API_SOURCE, R::into_set(rules), Validation::Lenient)
    }

    /// Every active rule of this family, from all sources.
    pub fn rules(&self) -> Vec<R> {
        R::active(self.sentinel)
    }
}
