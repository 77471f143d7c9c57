//! Hot-parameter (param-flow) rules: a limit per value of one argument of a call, such as
//! "5 requests a second per user id", with exceptions for specific values.
//!
//! Semantics follow Sentinel 1.8's `ParamFlowChecker` (and sentinel-golang's hotspot rules,
//! which port it):
//! - QPS grade, reject ([`ParamControlBehavior::Reject`]): a token bucket per value with
//!   `count` tokens per `durationInSec` and room for `burstCount` more. As in Sentinel, the
//!   bucket refills (in proportion to the time passed) once a whole duration has passed since
//!   its last refill.
//! - QPS grade, rate limiter: the value's calls are spaced `durationInSec / count` apart, and
//!   a call queues if its slot is less than `maxQueueingTimeMs` away.
//! - Thread grade: at most `count` calls in flight per value. The limit is exact, as the flow
//!   rules' concurrency limit is: a call reserves its place before it passes.
//! - `paramFlowItemList` gives specific values their own count.
//! - A call without the selected argument is not checked by the rule.
//! - A `clusterMode` QPS rule passes unless `fallbackToLocalWhenFail` is set (then it is
//!   checked locally), as Sentinel does without a token service; a thread-grade one is
//!   checked locally. See [`ParamFlowRule::checked_locally`].
//!
//! # Per-value state
//!
//! Each rule keeps its values' state in a table fixed when the rule loads: 1.5 slots per
//! value of its capacity (Sentinel's `4000 x durationInSec`, at most 200 000, or
//! `paramsMaxCapacity`), in buckets of eight where a value may take either of two, and a
//! count-min sketch of how often each value was seen: about 40 bytes per value, nothing
//! allocated per call.
//! - Values up to the capacity all find a slot and stay limited.
//! - Two callers racing on the first call of a new value find one slot: exactly one takes
//!   its first token (or its one place, at thread grade). Inserting a value is serialized per
//!   bucket by a flag held for a few dozen instructions; a lookup never waits.
//! - A slot whose state is that of a fresh value (a refilled bucket, a spacing past, no call
//!   in flight) is reused first. When more values are live than the table holds, the live
//!   value seen least often is replaced (the TinyLFU idea; Sentinel replaces the least
//!   recently used). A flood of one-time values so replaces its own kind: measured, a value
//!   calling 10 times a second at a limit of 5 among 100 000 one-time values a second gets
//!   exactly 5 a second. The bound that remains: a value new to such a flood may be replaced
//!   between its first calls, each then a fresh first call, until it has been seen more often
//!   than the flood's values (up to 7 of 10 in its first second, measured).
//! - Thread grade: a slot with calls in flight is never replaced. When every slot a new value
//!   may take has calls in flight, the new value is blocked: no value passes unchecked.
//!
//! Rules run after the system rules and before the flow rules, Sentinel's slot order.
//!
//! # Arguments
//!
//! An entry carries positional arguments ([`EntryBuilder::args`](crate::EntryBuilder::args))
//! and named attachments ([`EntryBuilder::attachments`](crate::EntryBuilder::attachments)),
//! as [`ParamValue`]s: integers, floats, booleans, strings, bytes, or any type implementing
//! [`ParamArg`].
//!
//! ```
//! use sentinel_core::param_flow::{ParamFlowRule, ParamValue};
//! use sentinel_core::Sentinel;
//!
//! let sentinel = Sentinel::new();
//! sentinel
//!     .param_flow_rules()
//!     .load_rules(vec![ParamFlowRule::qps("GET:/order", 0, 1.0)])
//!     .expect("valid rule");
//! let alice = [ParamValue::from("alice")];
//! let bob = [ParamValue::from("bob")];
//! let first = sentinel.entry("GET:/order").args(&alice).enter();
//! assert!(first.is_ok());
//! assert!(sentinel.entry("GET:/order").args(&alice).enter().is_err(), "alice is hot");
//! assert!(sentinel.entry("GET:/order").args(&bob).enter().is_ok(), "bob is not");
//! ```
//!
//! # Memory
//!
//! Each rule keeps the state of at most a fixed number of values: Sentinel's
//! `4000 x durationInSec` (at most 200 000; 4 000 for thread grade), or `paramsMaxCapacity`.
//! A value costs 24 bytes, allocated once when the rule is compiled: a rule with the default
//! capacity takes 96 KiB, whatever the number of distinct values its calls bring. The table
//! tracks a value by a keyed 64-bit hash of it; it is set-associative (buckets of 8 values),
//! and a new value evicts, within its bucket, a value seen only once before one that keeps
//! coming back, the least recently used first in each group. A flood of distinct values thus
//! neither grows memory nor evicts the hot values; an evicted value starts again with a full
//! bucket. A reload that keeps a rule keeps its table.
//!
//! # Block errors
//!
//! [`BlockError::ParamFlow`](crate::BlockError::ParamFlow) names the rule. The value itself
//! may be personal data (a user id): it is left out unless the engine was built with
//! [`SentinelBuilder::param_values_in_errors`](crate::SentinelBuilder::param_values_in_errors).

mod golang;
mod rule;
mod sketch;
mod slot;
mod table;
mod value;
mod values;
mod wire;

pub(crate) use golang::{into_go_hotspot_rule, GoHotspotRuleWire};
pub use rule::{
    ParamControlBehavior, ParamFlowClusterConfig, ParamFlowGrade, ParamFlowItem, ParamFlowRule,
};
pub(crate) use table::{CallArgs, Holds, Now, ParamFlowTable, ResourceParamRules};
pub use value::{ParamArg, ParamValue};
pub(crate) use wire::ParamFlowRuleWire;

#[cfg(test)]
mod table_tests;
#[cfg(test)]
mod tests;
