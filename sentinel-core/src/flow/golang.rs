//! sentinel-golang's flow and isolation rules on the wire, and how each maps onto a
//! [`FlowRule`] (an isolation rule is a concurrency limit: a thread-grade flow rule). The
//! converters (`GoFlowJson`, `GoIsolationJson`) are in `datasource::converter`.

use super::{ControlBehavior, FlowGrade, FlowRule, FlowStrategy, LIMIT_APP_DEFAULT};
use crate::rules::{Issues, RuleFamily, RuleIssue};
use crate::wire::{self, Bool, Float, Int};

wire::wire_struct! {
    /// sentinel-golang's flow rule on the wire (keys in any letter case). `threshold`
    /// decides what it does.
    pub(crate) struct GoFlowRuleWire (Insensitive) {
        resource: String = "resource",
        token_calculate_strategy: Int = "tokenCalculateStrategy",
        control_behavior: Int = "controlBehavior",
        threshold: Float = "threshold" required,
        relation_strategy: Int = "relationStrategy",
        ref_resource: String = "refResource",
        max_queueing_time_ms: Int = "maxQueueingTimeMs",
        warm_up_period_sec: Int = "warmUpPeriodSec",
        warm_up_cold_factor: Int = "warmUpColdFactor",
        stat_interval_in_ms: Int = "statIntervalInMs",
        regex: Bool = "regex",
    }
}

/// Maps a Go flow rule onto Sentinel's; issues are what Sentinel cannot express.
pub(crate) fn into_go_flow_rule(wire: GoFlowRuleWire, index: usize) -> (FlowRule, Vec<RuleIssue>) {
    let resource = wire.resource.unwrap_or_default();
    let mut issues = Issues::new(RuleFamily::Flow, index, Some(&resource));
    let mut issue = |field: &str, message: String| issues.add(field, message);

    let warm_up = match wire::int(wire.token_calculate_strategy).unwrap_or(0) {
        0 => false,
        1 => true,
        2 => {
            issue(
                "tokenCalculateStrategy",
                "2 (MemoryAdaptive) is not supported; use 0 (Direct) or 1 (WarmUp)".into(),
            );
            false
        }
        other => {
            issue(
                "tokenCalculateStrategy",
                format!("unknown value {other}; expected 0 (Direct) or 1 (WarmUp)"),
            );
            false
        }
    };
    let throttling = match wire::int(wire.control_behavior).unwrap_or(0) {
        0 => false,
        1 => true,
        other => {
            issue(
                "controlBehavior",
                format!("unknown value {other}; expected 0 (Reject) or 1 (Throttling)"),
            );
            false
        }
    };
    let strategy = match wire::int(wire.relation_strategy).unwrap_or(0) {
        0 => FlowStrategy::Direct,
        1 => FlowStrategy::Relate,
        other => {
            issue(
                "relationStrategy",
                format!(
                    "unknown value {other}; expected 0 (CurrentResource) or 1 (AssociatedResource)"
                ),
            );
            FlowStrategy::Direct
        }
    };
    match wire::int(wire.stat_interval_in_ms) {
        None | Some(0) | Some(1000) => {}
        Some(other) => issue(
            "statIntervalInMs",
            format!("only 0 or 1000 (a per-second threshold) is supported, got {other}"),
        ),
    }
    match wire::int(wire.warm_up_cold_factor) {
        None | Some(0) | Some(3) => {}
        Some(1) => issue("warmUpColdFactor", "must not be 1".into()),
        Some(other) => issue(
            "warmUpColdFactor",
            format!("only the default cold factor 3 is supported, got {other}"),
        ),
    }
    issues.no_regex(wire::boolean(wire.regex));
    let warm_up_period_sec = issues.u32("warmUpPeriodSec", wire::int(wire.warm_up_period_sec), 0);
    let max_queueing_time_ms =
        issues.u32("maxQueueingTimeMs", wire::int(wire.max_queueing_time_ms), 0);
    let control_behavior = match (warm_up, throttling) {
        (false, false) => ControlBehavior::Reject,
        (true, false) => ControlBehavior::WarmUp,
        (false, true) => ControlBehavior::RateLimiter,
        (true, true) => ControlBehavior::WarmUpRateLimiter,
    };
    let defaults = FlowRule::qps("", 0.0);
    let rule = FlowRule {
        resource: resource.clone(),
        limit_app: LIMIT_APP_DEFAULT.to_owned(),
        grade: FlowGrade::Qps,
        count: wire::float(wire.threshold).unwrap_or(0.0),
        strategy,
        ref_resource: match strategy {
            FlowStrategy::Relate => wire.ref_resource.filter(|r| !r.is_empty()),
            _ => None,
        },
        control_behavior,
        warm_up_period_sec: if warm_up {
            warm_up_period_sec
        } else {
            defaults.warm_up_period_sec
        },
        max_queueing_time_ms: if throttling {
            max_queueing_time_ms.max(1)
        } else {
            defaults.max_queueing_time_ms
        },
        cluster_mode: false,
        regex: false,
        cluster_config: None,
    };
    issues.finish(rule)
}

wire::wire_struct! {
    /// sentinel-golang's isolation rule on the wire (keys in any letter case). `threshold`
    /// decides what it does.
    pub(crate) struct GoIsolationRuleWire (Insensitive) {
        resource: String = "resource",
        metric_type: Int = "metricType",
        threshold: Int = "threshold" required,
    }
}

/// Maps a Go isolation rule onto a Sentinel thread-count flow rule.
pub(crate) fn into_go_isolation_rule(
    wire: GoIsolationRuleWire,
    index: usize,
) -> (FlowRule, Vec<RuleIssue>) {
    let resource = wire.resource.unwrap_or_default();
    let mut issues = Issues::new(RuleFamily::Flow, index, Some(&resource));
    match wire::int(wire.metric_type).unwrap_or(0) {
        0 => {}
        other => issues.add(
            "metricType",
            format!("unknown value {other}; expected 0 (Concurrency)"),
        ),
    }
    let threshold = issues.u32("threshold", wire::int(wire.threshold), 0);
    let rule = FlowRule::thread(resource.clone(), f64::from(threshold));
    issues.finish(rule)
}
