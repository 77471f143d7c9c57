//! sentinel-golang's hotspot rule on the wire, and how it maps onto a [`ParamFlowRule`].
//! The converter (`GoHotspotJson`) is in `datasource::converter`.

use super::{ParamControlBehavior, ParamFlowGrade, ParamFlowItem, ParamFlowRule};
use crate::rules::{Issues, RuleFamily, RuleIssue};
use crate::wire::{self, Float, Int};

wire::wire_struct! {
    /// sentinel-golang's hotspot rule on the wire (keys in any letter case). `threshold`
    /// decides what it does.
    pub(crate) struct GoHotspotRuleWire (Insensitive) {
        resource: String = "resource",
        metric_type: Int = "metricType",
        control_behavior: Int = "controlBehavior",
        param_index: Int = "paramIndex",
        param_key: String = "paramKey",
        threshold: Float = "threshold" required,
        max_queueing_time_ms: Int = "maxQueueingTimeMs",
        burst_count: Int = "burstCount",
        duration_in_sec: Int = "durationInSec",
        params_max_capacity: Int = "paramsMaxCapacity",
        specific_items: Vec<GoSpecificItemWire> = "specificItems",
    }
}

wire::wire_struct! {
    /// One of `specificItems`, as Go's `SpecificItem` JSON spells it.
    pub(crate) struct GoSpecificItemWire (Insensitive) {
        val_kind: Int = "valKind",
        val_str: String = "valStr",
        threshold: Int = "threshold",
    }
}

/// Maps a Go hotspot rule onto a Sentinel param-flow rule.
pub(crate) fn into_go_hotspot_rule(
    wire: GoHotspotRuleWire,
    index: usize,
) -> (ParamFlowRule, Vec<RuleIssue>) {
    let resource = wire.resource.unwrap_or_default();
    let mut issues = Issues::new(RuleFamily::ParamFlow, index, Some(&resource));
    let grade = match wire::int(wire.metric_type).unwrap_or(0) {
        0 => ParamFlowGrade::Thread,
        1 => ParamFlowGrade::Qps,
        other => {
            issues.add(
                "metricType",
                format!("unknown value {other}; expected 0 (Concurrency) or 1 (QPS)"),
            );
            ParamFlowGrade::Qps
        }
    };
    let behavior = match wire::int(wire.control_behavior).unwrap_or(0) {
        0 => ParamControlBehavior::Reject,
        1 => ParamControlBehavior::RateLimiter,
        other => {
            issues.add(
                "controlBehavior",
                format!("unknown value {other}; expected 0 (Reject) or 1 (Throttling)"),
            );
            ParamControlBehavior::Reject
        }
    };
    let param_key = wire.param_key.filter(|k| !k.is_empty());
    let param_index = wire::int(wire.param_index);
    if param_index.is_none() && param_key.is_none() {
        // Go reads a missing paramIndex as 0; without it (or a paramKey) the rule names no
        // argument, and the payload looks like an isolation rule (same other keys).
        issues.add(
            "paramIndex",
            "is required (or a paramKey): without it, this looks like a sentinel-golang \
             isolation rule, not a hotspot rule",
        );
    }
    let param_index = param_index.unwrap_or(0);
    if param_key.is_some() && param_index > 0 {
        issues.add(
            "paramIndex",
            "must be 0 or absent with a paramKey (the key selects the argument)",
        );
    }
    let param_idx = match i32::try_from(param_index) {
        Ok(i) => Some(i),
        Err(_) => {
            issues.add("paramIndex", format!("out of range: {param_index}"));
            None
        }
    };
    let max_queueing_time_ms =
        issues.u32("maxQueueingTimeMs", wire::int(wire.max_queueing_time_ms), 0);
    let burst_count = issues.u32("burstCount", wire::int(wire.burst_count), 0);
    let duration = issues.u32("durationInSec", wire::int(wire.duration_in_sec), 0);
    let capacity = issues.u32("paramsMaxCapacity", wire::int(wire.params_max_capacity), 0);
    let mut items = Vec::new();
    for (i, item) in wire
        .specific_items
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let field = |name: &str| format!("specificItems[{i}].{name}");
        let text = item.val_str.unwrap_or_default();
        let (class, object) = match wire::int(item.val_kind).unwrap_or(-1) {
            0 => ("long", text),
            1 => ("String", text),
            // Go's strconv.ParseBool, written as Java reads it.
            2 => match text.as_str() {
                "1" | "t" | "T" | "TRUE" | "true" | "True" => ("boolean", "true".to_owned()),
                "0" | "f" | "F" | "FALSE" | "false" | "False" => ("boolean", "false".to_owned()),
                _ => {
                    issues.add(
                        &field("valStr"),
                        format!("{text:?} is not a boolean (1, t, T, TRUE, true, True, or 0, f, F, FALSE, false, False)"),
                    );
                    continue;
                }
            },
            3 => match text.trim().parse::<f64>() {
                Ok(v) => ("double", ((v * 1e5).round() / 1e5).to_string()),
                Err(_) => {
                    issues.add(&field("valStr"), format!("{text:?} is not a number"));
                    continue;
                }
            },
            other => {
                issues.add(
                    &field("valKind"),
                    format!("unknown value {other}; expected 0 (Int), 1 (String), 2 (Bool) or 3 (Float64)"),
                );
                continue;
            }
        };
        let Some(count) = wire::int(item.threshold) else {
            issues.add(&field("threshold"), "is required");
            continue;
        };
        let item = ParamFlowItem::new(object, class, count);
        match item.value() {
            Ok(_) => items.push(item),
            Err(message) => issues.add(&field("valStr"), message),
        }
    }
    let mut rule = ParamFlowRule::qps(resource.clone(), param_idx.unwrap_or(0), 0.0);
    rule.grade = grade;
    rule.count = wire::float(wire.threshold).unwrap_or(0.0);
    if let Some(key) = param_key {
        rule = rule.param_key(key);
    }
    rule.control_behavior = behavior;
    rule.max_queueing_time_ms = max_queueing_time_ms;
    rule.burst_count = burst_count;
    // Go needs a duration for QPS only; validation reports a QPS rule's 0.
    rule.duration_in_sec = match grade {
        ParamFlowGrade::Thread => duration.max(1),
        ParamFlowGrade::Qps => duration,
    };
    rule.params_max_capacity = (capacity > 0).then_some(capacity);
    rule.param_flow_item_list = items;
    issues.finish(rule)
}
