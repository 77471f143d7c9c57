//! sentinel-golang's system rule on the wire (one metric per rule), and how it maps onto a
//! [`SystemRule`]. The converter (`GoSystemJson`) is in `datasource::converter`.

use super::SystemRule;
use crate::rules::{Issues, RuleFamily, RuleIssue};
use crate::wire::{self, Float, Int};

wire::wire_struct! {
    /// sentinel-golang's system rule on the wire (keys in any letter case). `metricType`
    /// and `triggerCount` decide what it does.
    pub(crate) struct GoSystemRuleWire (Insensitive) {
        metric_type: Int = "metricType" required,
        trigger_count: Float = "triggerCount" required,
        strategy: Int = "strategy",
    }
}

/// Maps a Go system rule onto a Sentinel system rule with one threshold.
pub(crate) fn into_go_system_rule(
    wire: GoSystemRuleWire,
    index: usize,
) -> (SystemRule, Vec<RuleIssue>) {
    // `strategy` is read (so a wrong type is reported) but not needed: see GoSystemJson.
    let _ = wire::int(wire.strategy);
    let trigger = wire::float(wire.trigger_count).unwrap_or(0.0);
    let mut issues = Issues::new(RuleFamily::System, index, None);
    if trigger < 0.0 {
        issues.add("triggerCount", format!("must be >= 0, got {trigger}"));
    }
    let rule = SystemRule::new();
    let rule = match wire::int(wire.metric_type).unwrap_or(0) {
        0 => rule.highest_system_load(trigger),
        1 => rule.avg_rt(trigger.round() as i64),
        2 => rule.max_thread(trigger.round() as i64),
        3 => rule.qps(trigger),
        4 => {
            if trigger > 1.0 {
                issues.add(
                    "triggerCount",
                    format!("a CPU usage must be in [0, 1], got {trigger}"),
                );
            }
            rule.highest_cpu_usage(trigger.min(1.0))
        }
        other => {
            issues.add(
                "metricType",
                format!("unknown value {other}; expected 0 (Load), 1 (AvgRT), 2 (Concurrency), 3 (InboundQPS) or 4 (CpuUsage)"),
            );
            rule
        }
    };
    issues.finish(rule)
}
