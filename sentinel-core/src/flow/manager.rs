//! The compiled flow table and the flow check.

use std::sync::Arc;
use std::time::Duration;

use smallvec::SmallVec;

use super::cluster::ClusterCheck;
use super::concurrency::{
    check_concurrency, release_reserved, RESERVED_ON_CONTEXT, RESERVED_ON_ORIGIN,
    RESERVED_ON_RESOURCE,
};
use super::controller::{Controller, Decision, Reject};
use super::rule::{
    FlowGrade, FlowRule, FlowStrategy, CONTEXT_DEFAULT_NAME, LIMIT_APP_DEFAULT, LIMIT_APP_OTHER,
};
use crate::clock::Clock;
use crate::cluster::ClusterDecision;
use crate::hash::FastMap;
use crate::pattern::Patterns;
use crate::rule_ref::RuleRef;
use crate::stat::{OwnsStat, StatNode};

mod compile;

/// What the flow check reads of one call.
pub(crate) struct CheckContext<'a> {
    pub(crate) now_ms: u64,
    pub(crate) clock: &'a dyn Clock,
    /// The resource's own statistics.
    pub(crate) stat: &'a StatNode,
    pub(crate) origin: Option<&'a str>,
    pub(crate) origin_node: Option<&'a StatNode>,
    pub(crate) context: Option<&'a str>,
    pub(crate) context_node: Option<&'a StatNode>,
    pub(crate) batch: u32,
    pub(crate) prioritized: bool,
}

/// What the flow rules decided for a call that passes.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FlowPass {
    /// How long it queues, in nanoseconds.
    pub(crate) wait_ns: u64,
    /// It passed on a slot borrowed from a coming bucket.
    pub(crate) borrowed: bool,
    /// The nodes it reserved a place on (`RESERVED_ON_*` bits), to give back on exit.
    pub(crate) reserved: u8,
}

/// One compiled rule: the rule, its controller, and the related resource's node.
#[derive(Debug, Clone)]
pub(crate) struct CompiledFlowRule {
    pub(crate) rule: RuleRef<FlowRule>,
    /// The controller of a rule that keeps state (warm-up, rate limiter), shared with the
    /// table this one replaces when the rule is unchanged. `None` for the reject
    /// controller, which keeps none: it is made from the rule where it is needed.
    controller: Option<Arc<Controller>>,
    /// What few rules have, boxed so that the others stay small (a table keeps every
    /// resource's rules, and a reload writes them all).
    links: Option<Box<Links>>,
    app: LimitApp,
    /// `Some(count)` for the most common rule: QPS, reject, `default` limitApp, direct. Its
    /// check is inlined into the loop; every other rule is checked out of line.
    plain_qps: Option<f64>,
}

/// A compiled rule's links to other parts of the engine, which few rules have.
#[derive(Debug, Clone)]
struct Links {
    /// A relate rule's related resource.
    ref_node: Option<Arc<dyn OwnsStat>>,
    /// A `clusterMode` rule with a cluster backend installed: the backend decides.
    cluster: Option<ClusterCheck>,
}

impl CompiledFlowRule {
    /// The related resource's node, of a relate rule.
    fn ref_node(&self) -> Option<&Arc<dyn OwnsStat>> {
        self.links.as_ref()?.ref_node.as_ref()
    }

    /// The cluster backend's check, of a `clusterMode` rule the backend decides.
    fn cluster(&self) -> Option<&ClusterCheck> {
        self.links.as_ref()?.cluster.as_ref()
    }
}

/// The reject controller's pass test for a plain QPS rule (`plain_qps`, see
/// [`CompiledFlowRule`]): `true` when the call passes it. A prioritized call, or one over the
/// count, is left to the controller (it may borrow a future slot, or block).
#[inline(always)]
pub(crate) fn plain_qps_passes(
    plain_qps: Option<f64>,
    stat: &StatNode,
    now_ms: u64,
    batch: u32,
    prioritized: bool,
) -> bool {
    match plain_qps {
        Some(count) => !prioritized && stat.pass_qps(now_ms) + f64::from(batch) <= count,
        None => false,
    }
}

/// Which callers a rule's `limitApp` selects, decided once at compile time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LimitApp {
    /// `default`: every caller, counted on the resource.
    Default,
    /// `other`: callers no specific rule of the resource names.
    Other,
    /// One named origin.
    Specific,
}

impl LimitApp {
    fn of(rule: &FlowRule) -> Self {
        match rule.limit_app.as_str() {
            LIMIT_APP_DEFAULT => LimitApp::Default,
            LIMIT_APP_OTHER => LimitApp::Other,
            _ => LimitApp::Specific,
        }
    }
}

/// The flow rules of one resource, in check order.
#[derive(Debug, Default, Clone)]
pub(crate) struct ResourceFlowRules {
    /// Inline when there is one (most resources): one allocation less per resource.
    rules: Rules,
    /// Origins named by a specific `limitApp`, for `other`.
    specific_origins: Box<[Box<str>]>,
    /// A rule of the resource has `limitApp: "default"` (which names the origin `default`,
    /// for `other`).
    has_default: bool,
    /// A chain rule of the resource names the default context: a call entered without a
    /// context is counted on that context's node (see [`CONTEXT_DEFAULT_NAME`]).
    on_default_context: bool,
}

/// A resource's compiled rules.
type Rules = SmallVec<[CompiledFlowRule; 1]>;

/// Every active flow rule, compiled.
#[derive(Debug, Default)]
pub(crate) struct FlowTable {
    /// Shared with the source's part when one source brings every flow rule.
    pub(crate) rules: Arc<Vec<RuleRef<FlowRule>>>,
    /// Each resource's index in `resources`; shared with the rule snapshot, whose first
    /// slots are the table's resources in the same order.
    by_resource: Arc<FastMap<Arc<str>, usize>>,
    /// Every resource's compiled rules, in one allocation (not one per resource), shared
    /// with the rule snapshot's slots.
    resources: Arc<Vec<ResourceFlowRules>>,
    /// The regex rules, matched per resource (see `engine::regex`).
    pub(crate) patterns: Patterns<FlowRule>,
}

impl FlowTable {
    /// The cluster slot of every cluster rule of the table, in no particular order.
    pub(crate) fn cluster_slots(&self) -> Vec<Arc<crate::cluster::ClusterSlot>> {
        self.resources
            .iter()
            .flat_map(|resource| resource.rules.iter())
            .filter_map(|rule| rule.cluster().map(|c| c.slot.clone()))
            .collect()
    }

    /// How many resources have rules.
    pub(crate) fn len(&self) -> usize {
        self.by_resource.len()
    }

    /// The rules of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&ResourceFlowRules> {
        self.get_key_value(name).map(|(_, rules)| rules)
    }

    /// The rules of `name`, with the table's key for it.
    pub(crate) fn get_key_value(&self, name: &str) -> Option<(&Arc<str>, &ResourceFlowRules)> {
        let (key, &at) = self.by_resource.get_key_value(name)?;
        Some((key, self.resources.get(at)?))
    }

    /// Every resource's rules.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &ResourceFlowRules)> {
        self.by_resource
            .iter()
            .filter_map(|(name, &at)| Some((name, self.resources.get(at)?)))
    }

    /// Every resource's rules, as the rule snapshot's slots hold them, in the order of the
    /// indexes [`index`](Self::index) gives.
    pub(crate) fn refs(&self) -> impl Iterator<Item = FlowRef> + '_ {
        RuleRef::each_of(&self.resources)
    }

    /// Each resource's index in [`refs`](Self::refs).
    pub(crate) fn index(&self) -> Arc<FastMap<Arc<str>, usize>> {
        self.by_resource.clone()
    }
}

/// One resource's compiled flow rules, where a table keeps them: the table's list of every
/// resource's rules and an index in it (a reference count, no allocation per resource); a
/// resource whose exact and regex-matched rules are merged has a list of its own.
pub(crate) type FlowRef = RuleRef<ResourceFlowRules>;

impl ResourceFlowRules {
    /// The rules, in check order.
    pub(crate) fn rule_refs(&self) -> impl Iterator<Item = &RuleRef<FlowRule>> {
        self.rules.iter().map(|c| &c.rule)
    }

    /// A chain rule of the resource names [`CONTEXT_DEFAULT_NAME`], the context of calls
    /// entered without one.
    #[inline]
    pub(crate) fn on_default_context(&self) -> bool {
        self.on_default_context
    }

    /// A resource's exact rules and the regex rules that match it, together.
    pub(crate) fn merged(exact: Option<&ResourceFlowRules>, matched: &ResourceFlowRules) -> Self {
        let mut list: Rules = exact.map(|e| e.rules.clone()).unwrap_or_default();
        list.extend(matched.rules.iter().cloned());
        let mut merged = Self::new(list, &[]);
        let mut origins = Vec::from(std::mem::take(&mut merged.specific_origins));
        for part in exact.into_iter().chain([matched]) {
            origins.extend(part.specific_origins.iter().cloned());
            merged.has_default |= part.has_default;
            merged.on_default_context |= part.on_default_context;
        }
        origins.sort();
        origins.dedup();
        merged.specific_origins = origins.into_boxed_slice();
        merged
    }

    /// Checks every rule; `Err` names the first rule that blocks (and gives back what the
    /// call reserved), `Ok` says how the call passes.
    #[inline(always)]
    pub(crate) fn check(&self, cx: &CheckContext<'_>) -> Result<FlowPass, &RuleRef<FlowRule>> {
        let mut wait_ns: u64 = 0;
        let mut borrowed = false;
        let mut reserved = 0u8;
        for compiled in &self.rules {
            // A plain rule's pass test, inline; the rest (a block, a borrow) goes the general
            // way below.
            if plain_qps_passes(
                compiled.plain_qps,
                cx.stat,
                cx.now_ms,
                cx.batch,
                cx.prioritized,
            ) {
                continue;
            }
            match self.check_one(compiled, cx, &mut reserved) {
                Decision::Pass => {}
                // Sentinel sleeps in each shaping rule in turn, and each later rule measures
                // its wait from when the earlier one woke: together about the longest wait.
                Decision::Wait(d) => wait_ns = wait_ns.max(nanos(d)),
                Decision::Borrowed(d) => {
                    // As Sentinel's PriorityWaitException: the call has its slot; the
                    // remaining rules are not checked.
                    wait_ns = wait_ns.max(nanos(d));
                    borrowed = true;
                    break;
                }
                Decision::Block => {
                    release(cx, reserved);
                    return Err(&compiled.rule);
                }
            }
        }
        Ok(FlowPass {
            wait_ns,
            borrowed,
            reserved,
        })
    }

    /// One rule: its node, then its controller.
    #[inline(never)]
    fn check_one(
        &self,
        compiled: &CompiledFlowRule,
        cx: &CheckContext<'_>,
        reserved: &mut u8,
    ) -> Decision {
        if let Some(cluster) = compiled.cluster() {
            return self.check_cluster(compiled, cluster, cx);
        }
        let Some((node, bit)) = self.select_node(compiled, cx) else {
            return Decision::Pass;
        };
        if compiled.rule.grade == FlowGrade::Thread {
            return check_concurrency(node, bit, compiled.rule.count, cx.batch, reserved);
        }
        match &compiled.controller {
            Some(controller) => {
                controller.check(node, cx.batch, cx.now_ms, cx.clock, cx.prioritized)
            }
            None => Reject::new(compiled.rule.count, compiled.rule.grade).check(
                node,
                cx.batch,
                cx.now_ms,
                cx.prioritized,
            ),
        }
    }

    /// A cluster rule: the calls its `limitApp` selects take tokens from the backend. When
    /// the backend is degraded, a rule with `fallbackToLocalWhenFail` checks the selected
    /// node against the slot's local share; one without it passes, as in Sentinel.
    #[inline]
    fn check_cluster(
        &self,
        compiled: &CompiledFlowRule,
        cluster: &ClusterCheck,
        cx: &CheckContext<'_>,
    ) -> Decision {
        let Some((node, _)) = self.select_node(compiled, cx) else {
            return Decision::Pass;
        };
        match cluster.backend.try_acquire(&cluster.slot, cx.batch) {
            ClusterDecision::Block => Decision::Block,
            ClusterDecision::Degraded if cluster.slot.spec().fallback_to_local_when_fail => {
                if node.pass_qps(cx.now_ms) + f64::from(cx.batch)
                    <= cluster.slot.local_fallback_count()
                {
                    Decision::Pass
                } else {
                    Decision::Block
                }
            }
            _ => Decision::Pass,
        }
    }

    /// The count of the resource's only rule, when that rule is a plain QPS reject rule
    /// (`default` limitApp, direct): the hot path can test it without this table.
    pub(crate) fn only_plain_qps(&self) -> Option<f64> {
        match self.rules.as_slice() {
            [only] => only.plain_qps,
            _ => None,
        }
    }

    /// The resource's only rule, when it is a plain QPS reject rule.
    pub(crate) fn only_rule(&self) -> Option<&RuleRef<FlowRule>> {
        match self.rules.as_slice() {
            [only] if only.plain_qps.is_some() => Some(&only.rule),
            _ => None,
        }
    }

    /// Sentinel's `FlowRuleChecker.selectNodeByRequesterAndStrategy`.
    ///
    /// An origin is an `other` caller when it is not empty and no rule of the resource names
    /// it (Sentinel's `FlowRuleManager.isOtherOrigin`): the origin `default` is one unless
    /// the resource has a `limitApp: "default"` rule. Unlike Sentinel, the origin `other` is
    /// one too: Sentinel compares it with the `other` rule's own `limitApp` and lets it
    /// escape every `other` rule, and origins usually come from a header any client sets.
    /// A specific `limitApp` never selects the origins `default` and `other` (Sentinel's
    /// `filterOrigin`).
    #[inline]
    fn select_node<'a>(
        &'a self,
        c: &'a CompiledFlowRule,
        cx: &'a CheckContext<'_>,
    ) -> Option<(&'a StatNode, u8)> {
        let rule = &c.rule;
        if c.app != LimitApp::Default {
            let origin = cx.origin.filter(|o| !o.is_empty())?;
            let selected = match c.app {
                LimitApp::Specific => {
                    rule.limit_app == origin
                        && origin != LIMIT_APP_DEFAULT
                        && origin != LIMIT_APP_OTHER
                }
                _ => {
                    let named = self.specific_origins.iter().any(|o| &**o == origin)
                        || (origin == LIMIT_APP_DEFAULT && self.has_default);
                    !named
                }
            };
            if !selected {
                return None;
            }
        }
        match rule.strategy {
            // A selected origin is counted on its own node (origins past the cap share one).
            FlowStrategy::Direct if c.app == LimitApp::Default => {
                Some((cx.stat, RESERVED_ON_RESOURCE))
            }
            FlowStrategy::Direct => cx.origin_node.map(|n| (n, RESERVED_ON_ORIGIN)),
            // This call does not enter the related resource: nothing to reserve there. A
            // related resource never entered has no node in Sentinel: the rule passes.
            FlowStrategy::Relate => c.ref_node().filter(|n| n.entered()).map(|n| (n.stat(), 0)),
            FlowStrategy::Chain => {
                // A call without a context is in the default one (it has that context's
                // node when a chain rule of the resource names it).
                if rule.ref_resource.as_deref() == Some(cx.context.unwrap_or(CONTEXT_DEFAULT_NAME))
                {
                    cx.context_node.map(|n| (n, RESERVED_ON_CONTEXT))
                } else {
                    None
                }
            }
        }
    }
}

/// [`release_reserved`] for a call the flow rules blocked.
fn release(cx: &CheckContext<'_>, reserved: u8) {
    if reserved != 0 {
        release_reserved(reserved, cx.stat, cx.origin_node, cx.context_node);
    }
}

/// A wait in nanoseconds (saturating).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
