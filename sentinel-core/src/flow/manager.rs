//! The compiled flow table and the flow check.

use std::sync::Arc;
use std::time::Duration;

use super::controller::{Controller, Decision};
use super::rule::{
    ControlBehavior, FlowGrade, FlowRule, FlowStrategy, LIMIT_APP_DEFAULT, LIMIT_APP_OTHER,
};
use crate::clock::Clock;
use crate::hash::FastMap;
use crate::stat::{OwnsStat, StatNode};

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

/// One compiled rule: the rule, its controller, and the related resource's node.
#[derive(Debug)]
pub(crate) struct CompiledFlowRule {
    pub(crate) rule: Arc<FlowRule>,
    controller: Arc<Controller>,
    ref_node: Option<Arc<dyn OwnsStat>>,
    app: LimitApp,
    /// `Some(count)` for the most common rule: QPS, reject, `default` limitApp, direct. Its
    /// check is inlined into the loop; every other rule is checked out of line.
    plain_qps: Option<f64>,
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
    plain_qps.is_some_and(|count| !prioritized && stat.pass_qps(now_ms) + f64::from(batch) <= count)
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
#[derive(Debug, Default)]
pub(crate) struct ResourceFlowRules {
    rules: Vec<CompiledFlowRule>,
    /// Origins named by a specific `limitApp`, for `other`.
    specific_origins: Vec<Box<str>>,
}

/// Every active flow rule, compiled.
#[derive(Debug, Default)]
pub(crate) struct FlowTable {
    pub(crate) rules: Vec<Arc<FlowRule>>,
    pub(crate) by_resource: FastMap<Arc<str>, Arc<ResourceFlowRules>>,
    controllers: FastMap<Arc<FlowRule>, Arc<Controller>>,
}

fn order(rule: &FlowRule) -> u8 {
    // Sentinel's FlowRuleComparator: non-cluster first, then specific origins, `other`,
    // and `default` last.
    let app = match rule.limit_app.as_str() {
        LIMIT_APP_DEFAULT => 2,
        LIMIT_APP_OTHER => 1,
        _ => 0,
    };
    u8::from(rule.cluster_mode) * 3 + app
}

impl FlowTable {
    /// Compiles deduplicated, validated rules. A rule equal to one in `previous` keeps its
    /// controller and so its warm-up and queueing state.
    pub(crate) fn compile(
        rules: Vec<Arc<FlowRule>>,
        previous: &FlowTable,
        node_for: &dyn Fn(&str) -> Option<Arc<dyn OwnsStat>>,
    ) -> Self {
        let mut controllers = FastMap::with_capacity_and_hasher(rules.len(), Default::default());
        let mut grouped: FastMap<Arc<str>, Vec<CompiledFlowRule>> = FastMap::default();
        for rule in &rules {
            if !rule.checked_locally() {
                continue;
            }
            let controller = previous
                .controllers
                .get(rule)
                .cloned()
                .unwrap_or_else(|| Arc::new(Controller::for_rule(rule)));
            controllers.insert(rule.clone(), controller.clone());
            let ref_node = match (rule.strategy, &rule.ref_resource) {
                (FlowStrategy::Relate, Some(r)) => node_for(r),
                _ => None,
            };
            let key: Arc<str> = Arc::from(rule.resource.as_str());
            let plain = rule.grade == FlowGrade::Qps
                && rule.control_behavior == ControlBehavior::Reject
                && rule.strategy == FlowStrategy::Direct
                && LimitApp::of(rule) == LimitApp::Default;
            grouped.entry(key).or_default().push(CompiledFlowRule {
                plain_qps: plain.then_some(rule.count),
                app: LimitApp::of(rule),
                rule: rule.clone(),
                controller,
                ref_node,
            });
        }
        let by_resource = grouped
            .into_iter()
            .map(|(resource, mut list)| {
                list.sort_by_key(|c| order(&c.rule));
                let mut specific_origins: Vec<Box<str>> = list
                    .iter()
                    .map(|c| c.rule.limit_app.as_str())
                    .filter(|app| *app != LIMIT_APP_DEFAULT && *app != LIMIT_APP_OTHER)
                    .map(Box::from)
                    .collect();
                specific_origins.sort();
                specific_origins.dedup();
                (
                    resource,
                    Arc::new(ResourceFlowRules {
                        rules: list,
                        specific_origins,
                    }),
                )
            })
            .collect();
        Self {
            rules,
            by_resource,
            controllers,
        }
    }
}

impl ResourceFlowRules {
    /// Checks every rule; `Err` names the first rule that blocks, `Ok` the total queueing (in
    /// nanoseconds) and whether the pass was borrowed from a future bucket.
    #[inline(always)]
    pub(crate) fn check(&self, cx: &CheckContext<'_>) -> Result<(u64, bool), &Arc<FlowRule>> {
        let mut wait_ns: u64 = 0;
        let mut borrowed = false;
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
            match self.check_one(compiled, cx) {
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
                Decision::Block => return Err(&compiled.rule),
            }
        }
        Ok((wait_ns, borrowed))
    }

    /// One rule: its node, then its controller.
    #[inline(never)]
    fn check_one(&self, compiled: &CompiledFlowRule, cx: &CheckContext<'_>) -> Decision {
        let Some(node) = self.select_node(compiled, cx) else {
            return Decision::Pass;
        };
        compiled
            .controller
            .check(node, cx.batch, cx.now_ms, cx.clock, cx.prioritized)
    }

    /// The count of the resource's only rule, when that rule is a plain QPS reject rule
    /// (`default` limitApp, direct): the hot path can test it without this table.
    pub(crate) fn only_plain_qps(&self) -> Option<f64> {
        match self.rules.as_slice() {
            [only] => only.plain_qps,
            _ => None,
        }
    }

    /// Sentinel's `FlowRuleChecker.selectNodeByRequesterAndStrategy`.
    #[inline]
    fn select_node<'a>(
        &'a self,
        c: &'a CompiledFlowRule,
        cx: &'a CheckContext<'_>,
    ) -> Option<&'a StatNode> {
        let rule = &c.rule;
        if c.app != LimitApp::Default {
            let origin = cx.origin.filter(|o| !o.is_empty())?;
            if origin == LIMIT_APP_DEFAULT || origin == LIMIT_APP_OTHER {
                return None;
            }
            let selected = match c.app {
                LimitApp::Specific => rule.limit_app == origin,
                _ => !self.specific_origins.iter().any(|o| &**o == origin),
            };
            if !selected {
                return None;
            }
        }
        match rule.strategy {
            // A selected origin is counted on its own node (origins past the cap share one).
            FlowStrategy::Direct if c.app == LimitApp::Default => Some(cx.stat),
            FlowStrategy::Direct => cx.origin_node,
            FlowStrategy::Relate => c.ref_node.as_deref().map(OwnsStat::stat),
            FlowStrategy::Chain => {
                if cx.context.is_some() && cx.context == rule.ref_resource.as_deref() {
                    cx.context_node
                } else {
                    None
                }
            }
        }
    }
}

/// A wait in nanoseconds (saturating).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
