//! sentinel-golang's rule JSON (flow, circuit breaker, system, hotspot), mapped onto Sentinel's rules.
//!
//! Keys match case-insensitively, as Go's `encoding/json` matches them: rule objects have
//! their keys lower-cased before decoding, and messages name fields in Go's camelCase.

use serde::Deserialize;

use super::{converter_with_mode, Converted, Converter};
use crate::circuit_breaker::{DegradeGrade, DegradeRule};
use crate::family::Family;
use crate::flow::{ControlBehavior, FlowGrade, FlowRule, FlowStrategy, LIMIT_APP_DEFAULT};
use crate::param_flow::{ParamControlBehavior, ParamFlowGrade, ParamFlowItem, ParamFlowRule};
use crate::rule_set::RuleSet;
use crate::rules::{Issues, RuleFamily, RuleIssue, Validation};
use crate::system::SystemRule;
use serde_json::Value;

use crate::wire::{self, Bool, Float, Format, Int, WireShape};

/// Declares a sentinel-golang JSON converter for one rule family.
macro_rules! go_converter {
    (
        $(#[$meta:meta])* $name:ident, $family:expr, $wire_format:expr, $format:literal,
        $wire:ty, $into:path
    ) => {
        converter_with_mode!($(#[$meta])* $name, |self, source, validation| {
            let document = wire::parse_document(source, $format)?;
            let items = last_of_case_duplicates(source, wire::rule_list(document, $family, $format)?);
            let shape = WireShape {
                family: $family,
                format: $wire_format,
                validation,
                keys: self.keys,
            };
            let parsed = wire::parse_family::<$wire, _>(items, &shape, $into, Family::validate)
                .map_err(wire::invalid)?;
            let rules = parsed.rules.into_iter().map(|(_, rule)| rule).collect();
            Ok(Converted::validated(RuleSet::of(rules), parsed.skipped, parsed.warnings))
        });
    };
}

go_converter!(
    /// sentinel-golang's flow-rule JSON, mapped onto Sentinel's [`FlowRule`].
    ///
    /// Keys match case-insensitively, as Go's `encoding/json` matches them. The mapping:
    ///
    /// | Go | Sentinel |
    /// |---|---|
    /// | `threshold` (per `statIntervalInMs`, which must be 0 or 1000) | `count` (QPS) |
    /// | `tokenCalculateStrategy` 0 direct, 1 warm-up | `controlBehavior` reject / warm-up |
    /// | `controlBehavior` 1 throttling | rate limiter (warm-up + rate limiter with warm-up) |
    /// | `relationStrategy` 0 current, 1 associated + `refResource` | `strategy` direct / relate |
    /// | `warmUpPeriodSec`, `maxQueueingTimeMs` | same names |
    ///
    /// Decisions, where the two engines differ:
    /// - Go's throttling with `maxQueueingTimeMs: 0` admits a call only at its exact slot.
    ///   Sentinel's rate limiter needs a positive queueing time, so 0 becomes 1 ms, the closest
    ///   behaviour it has (a call waits at most 1 ms).
    /// - `tokenCalculateStrategy: 2` (MemoryAdaptive) has no Sentinel equivalent: an issue.
    /// - A `statIntervalInMs` other than 0 or 1000 would change what `threshold` means: an issue.
    /// - `warmUpColdFactor` must be absent, 0 or 3 (Sentinel's fixed cold factor): otherwise an
    ///   issue.
    /// - `refResource` is kept only with the associated strategy, where it means something.
    GoFlowJson,
    RuleFamily::Flow,
    Format::GoFlow,
    "sentinel-golang flow-rule JSON",
    GoFlowRuleWire,
    into_go_flow_rule
);

go_converter!(
    /// sentinel-golang's circuit-breaker JSON, mapped onto Sentinel's [`DegradeRule`].
    ///
    /// | Go | Sentinel |
    /// |---|---|
    /// | `strategy` 0 slow request ratio, 1 error ratio, 2 error count | `grade` 0, 1, 2 |
    /// | `maxAllowedRtMs` (slow ratio) | `count` |
    /// | `threshold` | `slowRatioThreshold` (slow ratio) or `count` |
    /// | `retryTimeoutMs` | `timeWindow`, in seconds |
    /// | `minRequestAmount`, `statIntervalMs` | same names |
    ///
    /// Decisions, where the two engines differ:
    /// - Sentinel's `timeWindow` counts whole seconds, so `retryTimeoutMs` is rounded up to
    ///   the next second (10 ms becomes 1 s).
    /// - Go allows `minRequestAmount: 0` (no minimum); Sentinel needs at least 1, which means
    ///   the same.
    /// - `statSlidingWindowBucketCount` is ignored: as in Sentinel, the breaker's window is one
    ///   bucket of `statIntervalMs`.
    /// - `probeNum` is ignored: HALF_OPEN always admits exactly one probe.
    GoCircuitBreakerJson,
    RuleFamily::Degrade,
    Format::GoBreaker,
    "sentinel-golang circuit-breaker JSON",
    GoBreakerRuleWire,
    into_go_breaker_rule
);

go_converter!(
    /// sentinel-golang's system-rule JSON (one rule per metric), mapped onto Sentinel's
    /// [`SystemRule`] (one threshold per rule; rules merge by minimum).
    ///
    /// | Go `metricType` | Sentinel field |
    /// |---|---|
    /// | 0 Load | `highestSystemLoad` |
    /// | 1 AvgRT | `avgRt` |
    /// | 2 Concurrency | `maxThread` |
    /// | 3 InboundQPS | `qps` |
    /// | 4 CpuUsage | `highestCpuUsage` |
    ///
    /// `triggerCount` is the threshold. `strategy` (`-1` NoAdaptive, `1` BBR) is not needed:
    /// as in Sentinel (Java), a load threshold always applies the BBR check.
    GoSystemJson,
    RuleFamily::System,
    Format::GoSystem,
    "sentinel-golang system-rule JSON",
    GoSystemRuleWire,
    into_go_system_rule
);

go_converter!(
    /// sentinel-golang's hotspot-rule JSON (its default converter's `HotspotRule`), mapped
    /// onto Sentinel's [`ParamFlowRule`].
    ///
    /// | Go | Sentinel |
    /// |---|---|
    /// | `metricType` 0 Concurrency (the default), 1 QPS | `grade` 0 thread, 1 QPS |
    /// | `controlBehavior` 0 Reject, 1 Throttling | `controlBehavior` 0, 2 (rate limiter) |
    /// | `paramIndex` | `paramIdx` |
    /// | `paramKey` (an attachment name; wins over `paramIndex`) | `paramKey` |
    /// | `threshold` | `count` |
    /// | `specificItems` `[{valKind, valStr, threshold}]`, `valKind` 0 Int, 1 String, 2 Bool, 3 Float64 | `paramFlowItemList` `[{classType, object, count}]` |
    /// | `maxQueueingTimeMs`, `burstCount`, `durationInSec`, `paramsMaxCapacity` (0: the default) | same names |
    ///
    /// As in sentinel-golang, a QPS rule needs `durationInSec > 0`, a `paramIndex` other
    /// than 0 beside a `paramKey` is an issue, and Float64 item values are rounded to 5
    /// decimals. Unlike it, an invalid item is an issue of its rule (Go drops the item), and
    /// a rule must name its argument with `paramIndex` or `paramKey` (Go reads a missing
    /// `paramIndex` as 0, and so would read an isolation rule as a hotspot rule).
    ///
    /// ```
    /// use sentinel_core::datasource::{Converter, GoHotspotJson};
    ///
    /// let payload = br#"[{"resource": "abc", "metricType": 1, "paramIndex": 1,
    ///     "threshold": 50, "durationInSec": 1}]"#;
    /// let set = GoHotspotJson::new().convert(&payload[..]).unwrap();
    /// assert_eq!(set.param_flow.unwrap()[0].param_idx, Some(1));
    /// ```
    GoHotspotJson,
    RuleFamily::ParamFlow,
    Format::GoHotspot,
    "sentinel-golang hotspot-rule JSON",
    GoHotspotRuleWire,
    into_go_hotspot_rule
);

go_converter!(
    /// sentinel-golang's isolation-rule JSON: a concurrency limit per resource, mapped onto
    /// Sentinel's thread-count [`FlowRule`] (`FlowRule::thread`), which blocks a call when
    /// the calls in flight plus this one would exceed the limit, as Go's isolation check does.
    ///
    /// | Go | Sentinel |
    /// |---|---|
    /// | `resource` | `resource` |
    /// | `metricType` 0 Concurrency (the only one) | `grade` 0 (threads) |
    /// | `threshold` | `count` |
    ///
    /// ```
    /// use sentinel_core::datasource::{Converter, GoIsolationJson};
    /// use sentinel_core::flow::FlowRule;
    ///
    /// let payload = br#"[{"Resource": "abc", "MetricType": 0, "Threshold": 100}]"#;
    /// let set = GoIsolationJson::new().convert(&payload[..]).unwrap();
    /// assert_eq!(set.flow.unwrap(), vec![FlowRule::thread("abc", 100.0)]);
    /// ```
    GoIsolationJson,
    RuleFamily::Flow,
    Format::GoIsolation,
    "sentinel-golang isolation-rule JSON",
    GoIsolationRuleWire,
    into_go_isolation_rule
);

wire::wire_struct! {
    /// sentinel-golang's isolation rule on the wire (keys in any letter case). `threshold`
    /// decides what it does.
    struct GoIsolationRuleWire (Insensitive) {
        resource: String = "resource",
        metric_type: Int = "metricType",
        threshold: Int = "threshold" required,
    }
}

/// Maps a Go isolation rule onto a Sentinel thread-count flow rule.
fn into_go_isolation_rule(wire: GoIsolationRuleWire, index: usize) -> (FlowRule, Vec<RuleIssue>) {
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

/// Go's `encoding/json` matches keys in any letter case, and of two keys that differ only
/// in case the last one in the document wins. A `serde_json::Value` keeps its keys sorted,
/// so a rule object with such keys is read again from the bytes, in document order, and
/// only the last of each is kept.
fn last_of_case_duplicates(source: &[u8], mut items: Vec<Value>) -> Vec<Value> {
    let has_duplicates = |item: &Value| {
        item.as_object().is_some_and(|map| {
            let mut lower: Vec<String> = map.keys().map(|k| k.to_ascii_lowercase()).collect();
            lower.sort_unstable();
            lower.windows(2).any(|w| w[0] == w[1])
        })
    };
    if !items.iter().any(has_duplicates) {
        return items;
    }
    let source = source.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(source);
    let Ok(ordered) = serde_json::from_slice::<OneOrMany>(source) else {
        return items;
    };
    let ordered = match ordered {
        OneOrMany::Many(list) => list,
        OneOrMany::One(one) => vec![one],
    };
    for (item, pairs) in items.iter_mut().zip(ordered) {
        let (Some(map), Some(pairs)) = (item.as_object_mut(), pairs.0) else {
            continue;
        };
        if !has_duplicates(&Value::Object(map.clone())) {
            continue;
        }
        let mut kept: Vec<(String, Value)> = Vec::new();
        for (key, value) in pairs {
            kept.retain(|(k, _)| !k.eq_ignore_ascii_case(&key));
            kept.push((key, value));
        }
        *map = kept.into_iter().collect();
    }
    items
}

/// A rule list read with each object's keys in document order.
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    Many(Vec<Ordered>),
    One(Ordered),
}

/// An object's entries in document order (`None` for any other value).
struct Ordered(Option<Vec<(String, Value)>>);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Ordered, A::Error> {
                let mut pairs = Vec::new();
                while let Some(entry) = map.next_entry::<String, Value>()? {
                    pairs.push(entry);
                }
                Ok(Ordered(Some(pairs)))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Ordered, A::Error> {
                while seq.next_element::<wire::Checked>()?.is_some() {}
                Ok(Ordered(None))
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Ordered, E> {
                Ok(Ordered(None))
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Ordered, E> {
                Ok(Ordered(None))
            }
            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Ordered, E> {
                Ok(Ordered(None))
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Ordered, E> {
                Ok(Ordered(None))
            }
            fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Ordered, E> {
                Ok(Ordered(None))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Ordered, E> {
                Ok(Ordered(None))
            }
        }
        d.deserialize_any(V)
    }
}

wire::wire_struct! {
    /// sentinel-golang's flow rule on the wire (keys in any letter case). `threshold`
    /// decides what it does.
    struct GoFlowRuleWire (Insensitive) {
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
fn into_go_flow_rule(wire: GoFlowRuleWire, index: usize) -> (FlowRule, Vec<RuleIssue>) {
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
    /// sentinel-golang's circuit-breaker rule on the wire (keys in any letter case).
    /// `strategy` and `threshold` decide what it does.
    struct GoBreakerRuleWire (Insensitive) {
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
fn into_go_breaker_rule(wire: GoBreakerRuleWire, index: usize) -> (DegradeRule, Vec<RuleIssue>) {
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

wire::wire_struct! {
    /// sentinel-golang's hotspot rule on the wire (keys in any letter case). `threshold`
    /// decides what it does.
    struct GoHotspotRuleWire (Insensitive) {
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
    struct GoSpecificItemWire (Insensitive) {
        val_kind: Int = "valKind",
        val_str: String = "valStr",
        threshold: Int = "threshold",
    }
}

/// Maps a Go hotspot rule onto a Sentinel param-flow rule.
fn into_go_hotspot_rule(wire: GoHotspotRuleWire, index: usize) -> (ParamFlowRule, Vec<RuleIssue>) {
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
            2 => ("boolean", text),
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

wire::wire_struct! {
    /// sentinel-golang's system rule on the wire (keys in any letter case). `metricType`
    /// and `triggerCount` decide what it does.
    struct GoSystemRuleWire (Insensitive) {
        metric_type: Int = "metricType" required,
        trigger_count: Float = "triggerCount" required,
        strategy: Int = "strategy",
    }
}

/// Maps a Go system rule onto a Sentinel system rule with one threshold.
fn into_go_system_rule(wire: GoSystemRuleWire, index: usize) -> (SystemRule, Vec<RuleIssue>) {
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

/// The schemas of sentinel-golang's JSON formats, by file name.
#[cfg(feature = "schema")]
pub(crate) fn go_schemas() -> Vec<(&'static str, Value)> {
    use crate::datasource::schema::{any_case, document, rule_object};
    let mut all = vec![
        (
            "go-flow",
            "sentinel-golang flow rules",
            rule_object::<GoFlowRuleWire>(),
        ),
        (
            "go-circuit-breaker",
            "sentinel-golang circuit-breaker rules",
            rule_object::<GoBreakerRuleWire>(),
        ),
        (
            "go-hotspot",
            "sentinel-golang hotspot rules",
            rule_object::<GoHotspotRuleWire>(),
        ),
        (
            "go-system",
            "sentinel-golang system rules",
            rule_object::<GoSystemRuleWire>(),
        ),
        (
            "go-isolation",
            "sentinel-golang isolation rules",
            rule_object::<GoIsolationRuleWire>(),
        ),
    ];
    all.iter_mut().for_each(|(_, _, rule)| any_case(rule));
    all.into_iter()
        .map(|(name, title, rule)| (name, document(title, rule)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(set: RuleSet) -> Vec<FlowRule> {
        set.flow.unwrap_or_default()
    }

    #[test]
    fn go_mapping() {
        let c = GoFlowJson::new();
        let rules = c
            .convert(
                br#"[{"Resource":"a","THRESHOLD":10,"tokenCalculateStrategy":1,"warmUpPeriodSec":5},
                    {"resource":"b","threshold":2,"controlBehavior":1,"maxQueueingTimeMs":0},
                    {"resource":"c","threshold":3,"relationStrategy":1,"refResource":"d",
                     "controlBehavior":1,"tokenCalculateStrategy":1,"warmUpPeriodSec":3,
                     "maxQueueingTimeMs":20,"statIntervalInMs":1000,"warmUpColdFactor":3}]"#,
            )
            .map(flow)
            .unwrap_or_default();
        assert_eq!(
            rules,
            vec![
                FlowRule::qps("a", 10.0)
                    .control_behavior(ControlBehavior::WarmUp)
                    .warm_up_period_sec(5),
                FlowRule::qps("b", 2.0)
                    .control_behavior(ControlBehavior::RateLimiter)
                    .max_queueing_time_ms(1),
                FlowRule::qps("c", 3.0)
                    .relate("d")
                    .control_behavior(ControlBehavior::WarmUpRateLimiter)
                    .warm_up_period_sec(3)
                    .max_queueing_time_ms(20),
            ]
        );
        for (payload, field) in [
            (
                &br#"{"resource":"a","tokenCalculateStrategy":2}"#[..],
                "tokenCalculateStrategy",
            ),
            (
                br#"{"resource":"a","statIntervalInMs":500}"#,
                "statIntervalInMs",
            ),
            (
                br#"{"resource":"a","relationStrategy":2}"#,
                "relationStrategy",
            ),
            (br#"{"resource":"a","relationStrategy":1}"#, "refResource"),
            (
                br#"{"resource":"a","tokenCalculateStrategy":1}"#,
                "warmUpPeriodSec",
            ),
            (
                br#"{"resource":"a","warmUpColdFactor":1}"#,
                "warmUpColdFactor",
            ),
            (
                br#"{"resource":"a","maxQueueingTimeMs":-1}"#,
                "maxQueueingTimeMs",
            ),
            (br#"{"resource":"a","threshold":"lots"}"#, "threshold"),
            (br#"{"threshold":1}"#, "resource"),
        ] {
            let err = c.convert(payload).err();
            let fields: Vec<String> = err
                .as_ref()
                .map(|e| e.issues().iter().map(|i| i.field.clone()).collect())
                .unwrap_or_default();
            assert!(fields.iter().any(|f| f == field), "{field}: {err:?}");
        }
    }

    #[test]
    fn go_circuit_breaker_mapping() {
        let set = GoCircuitBreakerJson::new()
            .convert(
                br#"[{"resource":"a","strategy":0,"retryTimeoutMs":1500,"minRequestAmount":0,
                      "statIntervalMs":1000,"maxAllowedRtMs":100,"threshold":0.1,"probeNum":3},
                     {"Resource":"b","Strategy":2,"RetryTimeoutMs":10,"StatIntervalMs":500,"Threshold":3}]"#,
            )
            .unwrap_or_default();
        assert_eq!(
            set.degrade.unwrap_or_default(),
            vec![
                DegradeRule::slow_ratio("a", 100.0, 0.1, 2).min_request_amount(1),
                DegradeRule::error_count("b", 3.0, 1)
                    .min_request_amount(1)
                    .stat_interval_ms(500),
            ]
        );
        for (payload, field) in [
            (&br#"{"resource":"a","strategy":1,"statIntervalMs":1000}"#[..], "retryTimeoutMs"),
            (br#"{"resource":"a","strategy":5,"retryTimeoutMs":1,"statIntervalMs":1}"#, "strategy"),
            (br#"{"resource":"a","strategy":1,"retryTimeoutMs":1,"statIntervalMs":1,"threshold":2}"#, "count"),
            (br#"{"resource":"a","retryTimeoutMs":1,"statIntervalMs":1,"threshold":2}"#, "slowRatioThreshold"),
        ] {
            let err = GoCircuitBreakerJson::new().convert(payload).err();
            let fields: Vec<String> =
                err.as_ref().map(|e| e.issues().iter().map(|i| i.field.clone()).collect()).unwrap_or_default();
            assert!(fields.iter().any(|f| f == field), "{field}: {err:?}");
        }
    }

    #[test]
    fn go_system_mapping() {
        let set = GoSystemJson::new()
            .convert(
                br#"[{"metricType":0,"triggerCount":4.5,"strategy":1},{"metricType":1,"triggerCount":80},
                     {"metricType":2,"triggerCount":100},{"metricType":3,"triggerCount":2000},
                     {"MetricType":4,"TriggerCount":0.8}]"#,
            )
            .unwrap_or_default();
        assert_eq!(
            set.system.unwrap_or_default(),
            vec![
                SystemRule::new().highest_system_load(4.5),
                SystemRule::new().avg_rt(80),
                SystemRule::new().max_thread(100),
                SystemRule::new().qps(2000.0),
                SystemRule::new().highest_cpu_usage(0.8),
            ]
        );
        for (payload, field) in [
            (&br#"{"metricType":9,"triggerCount":1}"#[..], "metricType"),
            (br#"{"metricType":4,"triggerCount":80}"#, "triggerCount"),
            (br#"{"metricType":3,"triggerCount":-1}"#, "triggerCount"),
        ] {
            let err = GoSystemJson::new().convert(payload).err();
            let fields: Vec<String> = err
                .as_ref()
                .map(|e| e.issues().iter().map(|i| i.field.clone()).collect())
                .unwrap_or_default();
            assert!(fields.iter().any(|f| f == field), "{field}: {err:?}");
        }
    }

    #[test]
    fn of_two_keys_differing_in_case_the_last_wins_as_in_go() {
        for (payload, count) in [
            (
                &br#"[{"resource":"a","threshold":1,"Threshold":2}]"#[..],
                2.0,
            ),
            (br#"[{"resource":"a","Threshold":2,"threshold":1}]"#, 1.0),
            (
                br#"{"resource":"a","THRESHOLD":3,"threshold":1,"Threshold":4}"#,
                4.0,
            ),
        ] {
            let rules = GoFlowJson::new()
                .convert(payload)
                .map(flow)
                .unwrap_or_default();
            assert_eq!(rules, vec![FlowRule::qps("a", count)], "{payload:?}");
        }
    }

    #[test]
    fn go_keys_are_quoted_as_written() {
        let err = GoHotspotJson::new()
            .convert(
                br#"[{"resource":"a","paramindex":0,"threshold":1,"burstcount":"x",
                      "specificitems":[{"valkind":9,"ValStr":"1","threshold":1}]}]"#,
            )
            .err();
        let fields: Vec<String> = err
            .as_ref()
            .map(|e| e.issues().iter().map(|i| i.field.clone()).collect())
            .unwrap_or_default();
        assert!(fields.contains(&"burstcount".to_owned()), "{fields:?}");
        assert!(
            fields.contains(&"specificitems[0].valkind".to_owned()),
            "{fields:?}"
        );
        let err = GoFlowJson::new()
            .convert(br#"[{"resource":"a","thresold":1}]"#)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains(r#"unknown field "thresold" (did you mean "threshold"?)"#),
            "{err}"
        );
    }
}
