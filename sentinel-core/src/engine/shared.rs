//! The state an engine shares with its resource nodes and entries, and the hot path's
//! access to the current rule table.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock};

use arc_swap::ArcSwap;

use super::snapshot::RuleSnapshot;
use crate::circuit_breaker::DegradeTable;
use crate::clock::EngineClock;
use crate::events::EventBus;
use crate::flow::FlowTable;
use crate::hash::FastMap;
use crate::param_flow::ParamFlowTable;
use crate::stat::StatNode;
use crate::system::{ProcSystemStatus, SystemStatus};

/// State shared by the engine, its resource nodes and its entries.
pub(crate) struct Shared {
    pub(crate) clock: EngineClock,
    pub(crate) rules: ArcSwap<RuleSnapshot>,
    /// The version of `rules`, stored after each new table: what a node's cached fast-path
    /// verdict is checked against.
    pub(crate) rules_version: AtomicU64,
    pub(crate) inbound: StatNode,
    /// The inbound statistics as the shadow system rules, enforced, would have left them.
    pub(crate) shadow_inbound: StatNode,
    pub(crate) events: EventBus,
    pub(crate) system_status: OnceLock<Arc<dyn SystemStatus>>,
    /// Param-flow block errors carry the hot value.
    pub(crate) param_values_in_errors: bool,
    /// Regex rules' compiled state per matched resource, kept between table versions.
    pub(crate) regex_state: MatchedState,
    /// Sentinel's global switch (`Constants.ON`): when off, every call passes unchecked and
    /// uncounted.
    pub(crate) enabled: AtomicBool,
    /// How many origins and contexts each resource tracks.
    pub(crate) node_caps: NodeCaps,
}

/// How many origins and contexts one resource tracks (from the engine's `Limits`); held
/// here, once, not by each node.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeCaps {
    pub(crate) origins: usize,
    pub(crate) contexts: usize,
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
    /// replaced when the thread next reads a table after a newer one is published. The thread
    /// keeps that table (not the statistics) alive until then, until it enters another engine,
    /// or until it exits: calls on the fast path (`entry::fast`) read no table, so a thread
    /// whose calls all take it keeps the table it read last (one table per thread at most).
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

/// One resource's compiled regex rules, kept between table versions for their state.
#[derive(Debug, Default)]
pub(crate) struct MatchedTables {
    pub(crate) flow: FlowTable,
    pub(crate) degrade: DegradeTable,
    pub(crate) param_flow: ParamFlowTable,
}

/// The per-name state of regex rules, engine-wide.
pub(crate) type MatchedState = Mutex<FastMap<Arc<str>, Arc<MatchedTables>>>;

impl crate::cluster::ClusterSink for Shared {
    fn degraded(&self, backend: &str, reason: &str) {
        self.events
            .emit(crate::events::SentinelEvent::ClusterDegraded {
                backend: backend.to_owned(),
                reason: reason.to_owned(),
            });
    }

    fn resumed(&self, backend: &str) {
        self.events
            .emit(crate::events::SentinelEvent::ClusterResumed {
                backend: backend.to_owned(),
            });
    }
}
