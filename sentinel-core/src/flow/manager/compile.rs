//! Compiling a flow table: each resource's rules grouped, in check order, with the state
//! (controllers, cluster slots) of equal rules kept from the previous table.

use std::sync::Arc;

use super::{CompiledFlowRule, FlowTable, LimitApp, Links, ResourceFlowRules, Rules};
use crate::cluster::ClusterBackend;
use crate::flow::cluster::register_rules;
use crate::flow::controller::Controller;
use crate::flow::rule::{
    ControlBehavior, FlowGrade, FlowRule, FlowStrategy, CONTEXT_DEFAULT_NAME, LIMIT_APP_DEFAULT,
    LIMIT_APP_OTHER,
};
use crate::hash::{FastMap, FastSet};
use crate::pattern::Patterns;
use crate::rule_ref::RuleRef;
use crate::stat::OwnsStat;

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
    /// controller and so its warm-up and queueing state. With a cluster `backend`, the
    /// `clusterMode` rules get their slots from it (an unchanged rule keeps its slot).
    pub(crate) fn compile(
        rules: Vec<RuleRef<FlowRule>>,
        previous: &FlowTable,
        node_for: &dyn Fn(&str) -> Option<Arc<dyn OwnsStat>>,
        backend: Option<&Arc<dyn ClusterBackend>>,
    ) -> Self {
        Self::build(Arc::new(rules), previous, node_for, backend, false).unwrap_or_default()
    }

    /// [`compile`](Self::compile) for rules that may repeat one (without a cluster
    /// backend): `None` if one does.
    pub(crate) fn compile_unless_repeated(
        rules: Arc<Vec<RuleRef<FlowRule>>>,
        previous: &FlowTable,
        node_for: &dyn Fn(&str) -> Option<Arc<dyn OwnsStat>>,
    ) -> Option<Self> {
        Self::build(rules, previous, node_for, None, true)
    }

    /// The compile; with `find_repeats`, `None` as soon as a rule equals an earlier one (of
    /// its resource: equal rules name the same resource).
    fn build(
        rules: Arc<Vec<RuleRef<FlowRule>>>,
        previous: &FlowTable,
        node_for: &dyn Fn(&str) -> Option<Arc<dyn OwnsStat>>,
        backend: Option<&Arc<dyn ClusterBackend>>,
        find_repeats: bool,
    ) -> Option<Self> {
        // Each resource's entry is built in place.
        let mut by_resource: FastMap<Arc<str>, usize> =
            FastMap::with_capacity_and_hasher(rules.len(), Default::default());
        let mut resources: Vec<ResourceFlowRules> = Vec::with_capacity(rules.len());
        // Resources with more than one rule: put in check order at the end.
        let mut several: Vec<&str> = Vec::new();
        let mut cluster_checks = match backend {
            Some(backend) => register_rules(backend, &rules),
            None => Vec::new(),
        }
        .into_iter();
        // The limitApps of rules this engine does not check still name their origins (for
        // `other`, as Sentinel's `isOtherOrigin` reads every rule of the resource).
        let mut unchecked_apps: FastMap<&str, Vec<RuleRef<FlowRule>>> = FastMap::default();
        // Regex rules, to find a repeated one (they have no entry to look in).
        let mut patterns_seen: FastSet<&FlowRule> = FastSet::default();
        for rule in rules.iter() {
            let cluster = cluster_checks.next().flatten();
            if rule.regex {
                if find_repeats && !patterns_seen.insert(rule) {
                    return None;
                }
                continue;
            }
            if cluster.is_none() && !rule.checked_locally() {
                let apps = unchecked_apps.entry(rule.resource.as_str()).or_default();
                if find_repeats && apps.iter().any(|r| r == rule) {
                    return None;
                }
                apps.push(rule.clone());
                continue;
            }
            let name = rule.resource.as_str();
            let keeps_state = Controller::keeps_state(rule);
            // One lookup in each table per rule. This table keys the name by the previous
            // table's `Arc<str>` for it (shared with the resource's node), else by a new one
            // (made again, and dropped, for each later rule of a new resource: rare).
            let before = previous.get_key_value(name);
            let key = before.map_or_else(|| Arc::from(name), |(key, _)| key.clone());
            let next = resources.len();
            let at = *by_resource.entry(key).or_insert(next);
            let controller = keeps_state.then(|| {
                before
                    .and_then(|(_, rules)| rules.controller_of(rule))
                    .unwrap_or_else(|| Arc::new(Controller::for_rule(rule)))
            });
            let ref_node = match (rule.strategy, &rule.ref_resource) {
                (FlowStrategy::Relate, Some(r)) => node_for(r),
                _ => None,
            };
            // A cluster rule (checked locally) takes the controller's path, the same decision
            // by another route: the fast path's tests compare the two.
            let app = LimitApp::of(rule);
            let plain = rule.grade == FlowGrade::Qps
                && rule.control_behavior == ControlBehavior::Reject
                && rule.strategy == FlowStrategy::Direct
                && app == LimitApp::Default
                && !rule.cluster_mode;
            let compiled = CompiledFlowRule {
                plain_qps: plain.then_some(rule.count),
                app,
                rule: rule.clone(),
                controller,
                links: (ref_node.is_some() || cluster.is_some())
                    .then(|| Box::new(Links { ref_node, cluster })),
            };
            match resources.get_mut(at) {
                Some(entry) => {
                    if find_repeats && entry.rules.iter().any(|c| c.rule == *rule) {
                        return None;
                    }
                    if entry.rules.len() == 1 {
                        several.push(name);
                    }
                    entry.rules.push(compiled);
                }
                None => {
                    let list: Rules = smallvec::smallvec![compiled];
                    resources.push(ResourceFlowRules::new(list, &[]));
                }
            }
        }
        // Several rules go in check order; unchecked rules' `limitApp`s name origins too
        // (each entry rebuilt once).
        let several = several
            .into_iter()
            .filter(|name| !unchecked_apps.contains_key(name));
        for name in several.chain(unchecked_apps.keys().copied()) {
            if let Some(entry) = by_resource.get(name).and_then(|&at| resources.get_mut(at)) {
                let unchecked = unchecked_apps.get(name).map_or(&[][..], Vec::as_slice);
                *entry = ResourceFlowRules::new(std::mem::take(&mut entry.rules), unchecked);
            }
        }
        Some(Self {
            patterns: Patterns::of(rules.iter().filter(|r| r.checked_locally())),
            rules,
            by_resource: Arc::new(by_resource),
            resources: Arc::new(resources),
        })
    }
}

impl ResourceFlowRules {
    /// The controller compiled for a rule equal to `rule`, if it keeps state.
    fn controller_of(&self, rule: &FlowRule) -> Option<Arc<Controller>> {
        self.rules
            .iter()
            .find(|compiled| *compiled.rule == *rule)?
            .controller
            .clone()
    }

    /// One resource's compiled rules, put in check order; `unchecked` are its rules this
    /// engine does not check (cluster rules without a token service), whose `limitApp`s
    /// still name origins.
    pub(super) fn new(mut list: Rules, unchecked: &[RuleRef<FlowRule>]) -> Self {
        if let ([only], []) = (list.as_slice(), unchecked) {
            // Most resources: one rule, whose origin kind the compile already read.
            let specific_origins: Box<[Box<str>]> = match only.app {
                LimitApp::Specific => Box::new([Box::from(only.rule.limit_app.as_str())]),
                LimitApp::Default | LimitApp::Other => Box::default(),
            };
            let has_default = only.app == LimitApp::Default;
            let on_default_context = on_default_context(&only.rule);
            return Self {
                rules: list,
                specific_origins,
                has_default,
                on_default_context,
            };
        }
        list.sort_by_key(|c| order(&c.rule));
        let apps = || {
            list.iter()
                .map(|c| &*c.rule)
                .chain(unchecked.iter().map(|r| &**r))
                .map(|r| r.limit_app.as_str())
        };
        let mut specific_origins: Vec<Box<str>> = apps()
            .filter(|app| *app != LIMIT_APP_DEFAULT && *app != LIMIT_APP_OTHER)
            .map(Box::from)
            .collect();
        specific_origins.sort();
        specific_origins.dedup();
        let has_default = apps().any(|app| app == LIMIT_APP_DEFAULT);
        let on_default_context = list.iter().any(|c| on_default_context(&c.rule));
        Self {
            rules: list,
            specific_origins: specific_origins.into_boxed_slice(),
            has_default,
            on_default_context,
        }
    }
}

/// `rule` is a chain rule on the context of calls entered without one.
fn on_default_context(rule: &FlowRule) -> bool {
    rule.strategy == FlowStrategy::Chain
        && rule.ref_resource.as_deref() == Some(CONTEXT_DEFAULT_NAME)
}
