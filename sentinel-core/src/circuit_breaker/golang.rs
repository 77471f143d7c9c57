//! sentinel-golang's circuit-breaker rule on the wire, and how it maps onto a
//! [`DegradeRule`]. The converter (`GoCircuitBreakerJson`) is in `datasource::converter`.

use super::{DegradeGrade, DegradeRule};
use crate::flow::LIMIT_APP_DEFAULT;
use crate::rules::{Issues, RuleFamily, RuleIssue};
use crate::wire::{self, Float, Int};

wire::wire_struct! {
    /// sentinel-golang's circuit-breaker rule on the wire (keys in any letter case).
    /// `strategy` and `threshold` decide what it does.
    pub(crate) struct GoBreakerRuleWire (Insensitive) {
        resource: String = "resource",
        strategy: Int = "strategy" required,
        retry_timeout_ms: Int = "retryTimeoutMs",
        min_request_amount: Int = "minRequestAmount",
        stat_interval_ms: Int = "statIntervalMs",
        stat_sliding_window_bucket_count: Int = "statSlidingWindowBucketCount",
        max_allowed_rt_ms: Float = "maxAllowedRtMs",
        threshold: Float = "threshold" required,
        probe_num: Int = "probeNum",
    }
}

/// Maps a Go circuit-breaker rule onto Sentinel's; issues are what Sentinel cannot express.
pub(crate) fn into_go_breaker_rule(
    wire: GoBreakerRuleWire,
    index: usize,
) -> (DegradeRule, Vec<RuleIssue>) {
    // Read (so a wrong type is reported) but not needed: see GoCircuitBreakerJson.
    let _ = (wire.stat_sliding_window_bucket_count, wire.probe_num);
    let resource = wire.resource.unwrap_or_default();
    let mut issues = Issues::new(RuleFamily::Degrade, index, Some(&resource));
    let grade = match wire::int(wire.strategy).unwrap_or(0) {
        0 => DegradeGrade::SlowRequestRatio,
        1 => DegradeGrade::ErrorRatio,
        2 => DegradeGrade::ErrorCount,
        other => {
            issues.add(
                "strategy",
                format!("unknown value {other}; expected 0 (SlowRequestRatio), 1 (ErrorRatio) or 2 (ErrorCount)"),
            );
            DegradeGrade::ErrorCount
        }
    };
    let retry_ms = issues.u32("retryTimeoutMs", wire::int(wire.retry_timeout_ms), 0);
    if retry_ms == 0 {
        // Reported in Go's terms here, so validation never sees a `timeWindow` of 0.
        issues.add("retryTimeoutMs", "must be > 0");
    }
    let min_request_amount = issues
        .u32("minRequestAmount", wire::int(wire.min_request_amount), 0)
        .max(1);
    let stat_interval_ms = issues.u32("statIntervalMs", wire::int(wire.stat_interval_ms), 0);
    let threshold = wire::float(wire.threshold).unwrap_or(0.0);
    let (count, slow_ratio_threshold) = match grade {
        DegradeGrade::SlowRequestRatio => (
            wire::float(wire.max_allowed_rt_ms).unwrap_or(0.0),
            threshold,
        ),
        DegradeGrade::ErrorRatio | DegradeGrade::ErrorCount => (threshold, 1.0),
    };
    let mut rule = match grade {
        DegradeGrade::SlowRequestRatio => {
            DegradeRule::slow_ratio(resource.clone(), count, slow_ratio_threshold, 1)
        }
        DegradeGrade::ErrorRatio => DegradeRule::error_ratio(resource.clone(), count, 1),
        DegradeGrade::ErrorCount => DegradeRule::error_count(resource.clone(), count, 1),
    }
    .min_request_amount(min_request_amount)
    .stat_interval_ms(stat_interval_ms);
    rule.time_window = retry_ms.div_ceil(1000);
    rule.limit_app = LIMIT_APP_DEFAULT.to_owned();
    issues.finish(rule)
}
