//! The flow family's side of cluster flow control: a rule's [`ClusterRuleSpec`], the
//! builders of a cluster rule, the slots a compiled rule holds and the checks a cluster rule
//! must pass while a backend is installed ([`cluster`](crate::cluster) holds the backend's
//! side: the trait, the slots, the decisions).

use std::sync::Arc;

use super::{ClusterFlowConfig, ControlBehavior, FlowGrade, FlowRule, FlowStrategy};
use crate::cluster::{ClusterBackend, ClusterRuleSpec, ClusterSlot};
use crate::rule_ref::RuleRef;
use crate::rules::{Issues, RuleFamily, RuleIssue};

impl ClusterRuleSpec {
    /// The spec of a `clusterMode` rule; `None` for a local rule or one without a
    /// `clusterConfig` (validation refuses those).
    pub fn of(rule: &FlowRule) -> Option<Self> {
        if !rule.cluster_mode {
            return None;
        }
        let config = rule.cluster_config.as_ref()?;
        Some(Self {
            flow_id: config.flow_id?,
            resource: rule.resource.clone(),
            count: rule.count,
            global: config.threshold_type == 1,
            window_ms: u32::try_from(config.window_interval_ms).unwrap_or(0),
            fallback_to_local_when_fail: config.fallback_to_local_when_fail,
        })
    }
}

impl ClusterFlowConfig {
    /// A cluster config for `flow_id` with Sentinel's defaults: per-instance threshold
    /// (`thresholdType` 0), local fallback on, a 1 s window of 10 samples.
    ///
    /// **Per instance**: the rule's `count` is then multiplied by the live replicas, so N
    /// replicas admit N x `count`. For one limit shared by the whole cluster use
    /// [`shared_limit`](Self::shared_limit) (or add `.global(true)`); say which you mean
    /// with [`per_instance_limit`](Self::per_instance_limit) otherwise.
    pub fn new(flow_id: i64) -> Self {
        Self {
            flow_id: Some(flow_id),
            ..Self::default()
        }
    }

    /// One limit for the whole cluster (`thresholdType` 1): the rule's `count` is what all
    /// replicas together admit. Otherwise as [`new`](Self::new).
    ///
    /// ```
    /// use sentinel_core::flow::{ClusterFlowConfig, FlowRule};
    /// let rule = FlowRule::qps("GET:/order", 1000.0).cluster(ClusterFlowConfig::shared_limit(7));
    /// assert_eq!(rule.cluster_config.as_ref().map(|c| c.threshold_type), Some(1));
    /// ```
    pub fn shared_limit(flow_id: i64) -> Self {
        Self::new(flow_id).global(true)
    }

    /// A limit per replica (`thresholdType` 0): the cluster admits `count` x live replicas.
    /// The same as [`new`](Self::new), named for what it does.
    pub fn per_instance_limit(flow_id: i64) -> Self {
        Self::new(flow_id).global(false)
    }

    /// `thresholdType`: 1 (`true`) for a global limit, 0 for a per-instance one.
    pub fn global(mut self, global: bool) -> Self {
        self.threshold_type = i32::from(global);
        self
    }

    /// Sets `fallbackToLocalWhenFail`.
    pub fn fallback_to_local_when_fail(mut self, on: bool) -> Self {
        self.fallback_to_local_when_fail = on;
        self
    }

    /// Sets `windowIntervalMs`.
    pub fn window_interval_ms(mut self, ms: i32) -> Self {
        self.window_interval_ms = ms;
        self
    }
}

impl FlowRule {
    /// Makes this a cluster rule (`clusterMode: true`) with `config`.
    ///
    /// ```
    /// use sentinel_core::flow::{ClusterFlowConfig, FlowRule};
    ///
    /// let rule = FlowRule::qps("GET:/order", 1000.0).cluster(ClusterFlowConfig::new(7).global(true));
    /// assert!(rule.cluster_mode);
    /// assert_eq!(rule.cluster_config.unwrap().threshold_type, 1);
    /// ```
    pub fn cluster(mut self, config: ClusterFlowConfig) -> Self {
        self.cluster_mode = true;
        self.cluster_config = Some(config);
        self
    }
}

/// The cluster checks of one compiled flow rule: the backend and the rule's slot.
#[derive(Debug, Clone)]
pub(crate) struct ClusterCheck {
    pub(crate) backend: Arc<dyn ClusterBackend>,
    pub(crate) slot: Arc<ClusterSlot>,
}

/// Registers the cluster rules of `rules` with `backend`: the slot of each rule, by position
/// (`None` for a local rule).
pub(crate) fn register_rules(
    backend: &Arc<dyn ClusterBackend>,
    rules: &[RuleRef<FlowRule>],
) -> Vec<Option<ClusterCheck>> {
    let specs: Vec<(usize, ClusterRuleSpec)> = rules
        .iter()
        .enumerate()
        .filter_map(|(i, r)| ClusterRuleSpec::of(r).map(|s| (i, s)))
        .collect();
    let only: Vec<ClusterRuleSpec> = specs.iter().map(|(_, s)| s.clone()).collect();
    let slots = backend.register(&only);
    let mut out: Vec<Option<ClusterCheck>> = vec![None; rules.len()];
    for ((i, _), slot) in specs.into_iter().zip(slots) {
        out[i] = Some(ClusterCheck {
            backend: backend.clone(),
            slot,
        });
    }
    out
}

/// The checks a cluster rule must pass while a backend is installed, beyond the rule's own
/// validation: what the backend can decide (QPS, reject, direct) and what it can serve.
pub(crate) fn check_rules(backend: &dyn ClusterBackend, rules: &[FlowRule]) -> Vec<RuleIssue> {
    let mut found = Vec::new();
    for (index, rule) in rules.iter().enumerate().filter(|(_, r)| r.cluster_mode) {
        let mut issues = Issues::new(RuleFamily::Flow, index, Some(&rule.resource));
        if rule.grade != FlowGrade::Qps {
            issues.add(
                "grade",
                "a cluster rule must be a QPS rule (grade 1); concurrency cluster rules are not supported",
            );
        }
        if rule.control_behavior != ControlBehavior::Reject {
            issues.add(
                "controlBehavior",
                format!(
                    "a cluster rule must reject (0); behaviour {} is not supported in cluster mode",
                    rule.control_behavior.code()
                ),
            );
        }
        if rule.strategy != FlowStrategy::Direct {
            issues.add(
                "strategy",
                "a cluster rule must use the direct strategy (0)",
            );
        }
        if let Some(spec) = ClusterRuleSpec::of(rule) {
            if let Err((field, message)) = backend.check_spec(&spec) {
                issues.add(field, message);
            }
        }
        found.extend(issues.into_vec());
    }
    found
}
