//! sentinel-golang's rule JSON (flow, circuit breaker, system, hotspot), mapped onto Sentinel's rules.
//!
//! Keys match case-insensitively, as Go's `encoding/json` matches them: rule objects have
//! their keys lower-cased before decoding, and messages name fields in Go's camelCase.

//!
//! Each family's Go wire shape, and how a Go rule maps onto Sentinel's, is in the family's
//! folder beside its Java one (`flow/golang.rs`, `circuit_breaker/golang.rs`,
//! `param_flow/golang.rs`, `system/golang.rs`; isolation rules are flow rules); this module
//! declares the converters and reads the list.

use super::{converter_with_mode, Converted, Converter};
#[cfg(doc)]
use crate::circuit_breaker::DegradeRule;
use crate::circuit_breaker::{into_go_breaker_rule, GoBreakerRuleWire};
use crate::family::Family;
#[cfg(doc)]
use crate::flow::FlowRule;
use crate::flow::{into_go_flow_rule, into_go_isolation_rule, GoFlowRuleWire, GoIsolationRuleWire};
#[cfg(doc)]
use crate::param_flow::ParamFlowRule;
use crate::param_flow::{into_go_hotspot_rule, GoHotspotRuleWire};
use crate::rule_set::RuleSet;
use crate::rules::{RuleFamily, Validation};
#[cfg(doc)]
use crate::system::SystemRule;
use crate::system::{into_go_system_rule, GoSystemRuleWire};

use crate::wire::{self, Format, WireShape};

mod case;
#[cfg(test)]
mod tests;

use case::last_of_case_duplicates;

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
