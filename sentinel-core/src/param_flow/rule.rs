//! The param-flow rule and its validity checks (its Sentinel (Java) JSON wire form is in
//! `wire.rs`).

use std::hash::{Hash, Hasher};

use serde::Serialize;

use super::value::OwnedValue;
use crate::codes::int_code_enum;
use crate::flow::LIMIT_APP_DEFAULT;
use crate::rules::{Issues, RuleFamily, RuleIssue};
use crate::wire;

int_code_enum! {
    /// What a param-flow rule counts per value (`grade`).
    pub enum ParamFlowGrade {
        /// Calls in flight with the value (`FLOW_GRADE_THREAD`).
        Thread = 0,
        /// Calls per `durationInSec` with the value (`FLOW_GRADE_QPS`), the default.
        Qps = 1,
    }
}

int_code_enum! {
    /// How a QPS param-flow rule shapes each value's traffic (`controlBehavior`).
    pub enum ParamControlBehavior {
        /// A token bucket per value: `count` tokens per `durationInSec`, plus `burstCount`;
        /// a call without a token is rejected. The default.
        Reject = 0,
        /// Sentinel's warm-up code (`CONTROL_BEHAVIOR_WARM_UP`). Sentinel's param checker
        /// has no warm-up: it runs the token bucket, and so does this engine.
        WarmUp = 1,
        /// Uniform spacing per value: one call every `durationInSec / count`, queueing up to
        /// `maxQueueingTimeMs`. Unlike Sentinel, which spaces calls in whole milliseconds
        /// (600/s per value admits 500, and a count above `2000 x durationInSec` has no
        /// limit at all), the spacing is exact to the nanosecond.
        RateLimiter = 2,
        /// Sentinel's warm-up + rate-limiter code: the token bucket here too, as in
        /// Sentinel's param checker.
        WarmUpRateLimiter = 3,
    }
}

/// Sentinel's largest default per-rule value capacity (`TOTAL_MAX_CAPACITY`).
const TOTAL_MAX_CAPACITY: u64 = 200_000;
/// Values tracked per second of `durationInSec` by default (`BASE_PARAM_MAX_CAPACITY`).
const BASE_CAPACITY: u64 = 4_000;
/// Values tracked by a thread-grade rule by default (`THREAD_COUNT_MAX_CAPACITY`).
const THREAD_CAPACITY: u64 = 4_000;
/// The largest `paramsMaxCapacity` accepted: 1 000 000 values take 24 MB.
pub(crate) const MAX_CAPACITY: u32 = 1_000_000;

/// A specific value with its own threshold (`ParamFlowItem`): `object` is the value as text,
/// `classType` its Java type.
///
/// `classType` `int`, `long`, `short`, `byte` (or their `java.lang` boxes) read `object` as
/// an integer of that width (as Java's `Integer.parseInt`... do: no spaces), `double` and
/// `float` as a number (a `float` in 32 bits, so that it matches an `f32` argument),
/// `boolean` as a boolean; anything else (blank, `String`, `char`) as a string. A boolean is
/// read as Java's `Boolean.parseBoolean` reads it: `true` in any case is true, any other
/// text false (sentinel-golang's `1` and `t` come through its converter as `true`). When two
/// items name one value, the last one counts, as in Sentinel and sentinel-golang.
///
/// An item whose `object` its `classType` cannot read, or whose count is negative, is an
/// issue of its rule: strict loading refuses the rule; lenient loading skips the item, as
/// Sentinel does, and keeps the rule, with a warning naming the rule's index and the item's
/// field.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ParamFlowItem {
    /// The value, as text.
    pub object: String,
    /// Its threshold, in place of the rule's `count`.
    pub count: i64,
    /// The Java type `object` is parsed as.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_type: Option<String>,
}

impl ParamFlowItem {
    /// A `long` item: the integer `value` has its own `count`.
    pub fn long(value: i64, count: i64) -> Self {
        Self::new(value.to_string(), "long", count)
    }

    /// A `String` item: `value` has its own `count`. An HTTP value (a header, a query
    /// parameter) is a string: it matches a string item, never a `long` one, unless it is
    /// read as a number (`sentinel_tower::ParamSource::as_int`).
    pub fn string(value: impl Into<String>, count: i64) -> Self {
        Self::new(value, "String", count)
    }

    /// A `double` item: the number `value` has its own `count`.
    pub fn double(value: f64, count: i64) -> Self {
        Self::new(value.to_string(), "double", count)
    }

    /// A `boolean` item: `value` has its own `count`.
    pub fn boolean(value: bool, count: i64) -> Self {
        Self::new(value.to_string(), "boolean", count)
    }

    /// An item from Java's names: `object` parsed as `class_type` (see the type's docs).
    pub fn new(object: impl Into<String>, class_type: &str, count: i64) -> Self {
        Self {
            object: object.into(),
            count,
            class_type: Some(class_type.to_owned()),
        }
    }

    /// The value `object` stands for.
    pub(crate) fn value(&self) -> Result<OwnedValue, String> {
        let text = self.object.as_str();
        let class = self.class_type.as_deref().unwrap_or("").trim();
        let class = class.strip_prefix("java.lang.").unwrap_or(class);
        let not_int = || format!("{text:?} is not an integer ({class})");
        let int = |parsed: Result<i128, _>| parsed.map(OwnedValue::Int).map_err(|_| not_int());
        match class {
            "int" | "Integer" => int(text.parse::<i32>().map(i128::from)),
            "long" | "Long" => int(text.parse::<i64>().map(i128::from)),
            "short" | "Short" => int(text.parse::<i16>().map(i128::from)),
            "byte" | "Byte" => int(text.parse::<i8>().map(i128::from)),
            "double" | "Double" => text
                .trim()
                .parse::<f64>()
                .map(OwnedValue::Float)
                .map_err(|_| format!("{text:?} is not a number ({class})")),
            // Parsed in its own width: a `float` item 0.1 matches the `f32` argument 0.1
            // (widened, 0.100000001490116...), as Java's `Float.equals` does.
            "float" | "Float" => text
                .trim()
                .parse::<f32>()
                .map(|v| OwnedValue::Float(f64::from(v)))
                .map_err(|_| format!("{text:?} is not a number ({class})")),
            "boolean" | "Boolean" => Ok(OwnedValue::Bool(text.eq_ignore_ascii_case("true"))),
            _ => Ok(OwnedValue::Str(text.to_owned())),
        }
    }
}

/// Sentinel's cluster settings of a param-flow rule. Kept so that payloads round-trip: there
/// is no token server here, and a `clusterMode` rule is checked locally.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ParamFlowClusterConfig {
    /// Global rule id; must be positive for a cluster rule.
    pub flow_id: Option<i64>,
    /// 0 average-local, 1 global.
    pub threshold_type: i32,
    /// Sentinel's default for param rules is `false`.
    pub fallback_to_local_when_fail: bool,
    /// Sample count (default 10).
    pub sample_count: i32,
    /// Window length in ms (default 1000).
    pub window_interval_ms: i32,
}

impl Default for ParamFlowClusterConfig {
    fn default() -> Self {
        Self {
            flow_id: None,
            threshold_type: 0,
            fallback_to_local_when_fail: false,
            sample_count: 10,
            window_interval_ms: 1000,
        }
    }
}

/// A hot-parameter rule (Sentinel's `ParamFlowRule`, sentinel-golang's hotspot rule): a limit
/// per value of one argument of the calls to a resource.
///
/// `paramIdx` selects the argument by position (negative counts from the end); `paramKey`
/// (sentinel-golang) selects a named attachment instead. A call without that argument is not
/// checked by the rule. `limitApp` is kept for round-trips; as in Sentinel, it does not
/// select callers.
///
/// ```
/// use sentinel_core::param_flow::{ParamFlowItem, ParamFlowRule};
///
/// // 5 calls a second per user id (argument 0); user 42 gets 100.
/// let rule = ParamFlowRule::qps("GET:/order", 0, 5.0)
///     .item(ParamFlowItem::new("42", "long", 100));
/// assert!(rule.validate(0).is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ParamFlowRule {
    /// The guarded resource.
    pub resource: String,
    /// Kept for round-trips; not used to select callers (as in Sentinel).
    pub limit_app: String,
    /// QPS or concurrency, per value.
    pub grade: ParamFlowGrade,
    /// The argument's position; negative counts from the end. Required unless `paramKey`.
    ///
    /// A negative index is resolved for each call (-1 is the last argument of that call).
    /// Sentinel differs, by accident: `ParamFlowSlot.applyRealParamIdx` rewrites the shared
    /// rule in place on its first checked call (to `length + paramIdx`, or to `-paramIdx` when
    /// that call has too few arguments), so in Java -1 then means "the last argument of the
    /// first call's arity" for every later call.
    pub param_idx: Option<i32>,
    /// The name of the attachment to limit by (sentinel-golang's `paramKey`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub param_key: Option<String>,
    /// The threshold per value: calls per `durationInSec` (QPS), or calls in flight.
    pub count: f64,
    /// Token bucket or uniform spacing (QPS only).
    pub control_behavior: ParamControlBehavior,
    /// Longest a call may queue in the rate limiter, in ms (default 0: no queueing).
    pub max_queueing_time_ms: u32,
    /// Extra tokens a value may use at once, above `count` (token bucket only).
    pub burst_count: u32,
    /// The window `count` is per, in seconds (default 1).
    pub duration_in_sec: u32,
    /// Values with their own threshold.
    pub param_flow_item_list: Vec<ParamFlowItem>,
    /// How many values are tracked at most (sentinel-golang's `paramsMaxCapacity`). `None`:
    /// Sentinel's default, `4000 x durationInSec` up to 200 000 (4 000 for thread grade).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub params_max_capacity: Option<u32>,
    /// Sentinel's cluster mode. There is no token server for param rules here: as Sentinel
    /// does without a token service, a QPS rule is checked locally only when its
    /// `fallbackToLocalWhenFail` is set (false by default for param rules) and lets every
    /// call pass otherwise; a thread-grade rule is always checked locally. See
    /// [`ParamFlowRule::checked_locally`].
    pub cluster_mode: bool,
    /// Cluster settings, kept for round-trips.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_config: Option<ParamFlowClusterConfig>,
    /// `resource` is a regular expression (Sentinel's `regex`): the rule applies to every
    /// resource whose whole name it matches, each with a limit and state of its own.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub regex: bool,
}

impl Eq for ParamFlowRule {}

impl Hash for ParamFlowRule {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.resource.hash(state);
        self.limit_app.hash(state);
        self.grade.hash(state);
        self.param_idx.hash(state);
        self.param_key.hash(state);
        wire::hash_f64(self.count, state);
        self.control_behavior.hash(state);
        self.max_queueing_time_ms.hash(state);
        self.burst_count.hash(state);
        self.duration_in_sec.hash(state);
        self.param_flow_item_list.hash(state);
        self.params_max_capacity.hash(state);
        self.cluster_mode.hash(state);
        self.cluster_config.hash(state);
        self.regex.hash(state);
    }
}

/// The field of item `i` of a rule's `paramFlowItemList`, followed by `.` and the item's own
/// field.
fn item_field(i: usize) -> String {
    format!("paramFlowItemList[{i}]")
}

/// The item of the list a field of `paramFlowItemList` names, if it does.
fn item_of_field(field: &str) -> Option<usize> {
    let rest = field.strip_prefix("paramFlowItemList[")?;
    rest[..rest.find(']')?].parse().ok()
}

impl ParamFlowRule {
    /// Lenient loading: drops the exception items Sentinel skips (one whose `object` its
    /// `classType` cannot read, a negative count) and keeps the rule, as Sentinel's
    /// `ParamFlowRuleUtil` does; takes out of `found` the issues of items decoding already
    /// left out (an absent or mistyped `object` or `count`), which Sentinel skips too.
    /// Returns a warning per item dropped, naming the rule's index and the item's field (its
    /// position in the payload).
    pub(crate) fn skip_unusable_items(
        &mut self,
        index: usize,
        found: &mut Vec<RuleIssue>,
    ) -> Vec<RuleIssue> {
        let skipped = |mut issue: RuleIssue| {
            issue.message = format!("{}: the item is skipped, as Sentinel does", issue.message);
            issue
        };
        let mut warnings = Vec::new();
        let mut left_out = Vec::new();
        found.retain(|issue| match item_of_field(&issue.field) {
            Some(i) => {
                left_out.push(i);
                warnings.push(skipped(issue.clone()));
                false
            }
            None => true,
        });
        left_out.sort_unstable();
        left_out.dedup();
        // The payload positions of the items decoding kept.
        let mut positions = (0..).filter(|i| left_out.binary_search(i).is_err());
        let mut issues = Issues::new(RuleFamily::ParamFlow, index, Some(&self.resource));
        self.param_flow_item_list.retain(|item| {
            let at = positions.next().unwrap_or_default();
            let value = item.value();
            if let Err(message) = &value {
                issues.add(&format!("{}.object", item_field(at)), message.clone());
            } else if item.count < 0 {
                issues.add(
                    &format!("{}.count", item_field(at)),
                    format!("must be >= 0, got {}", item.count),
                );
            }
            value.is_ok() && item.count >= 0
        });
        warnings.extend(issues.into_vec().into_iter().map(skipped));
        warnings
    }

    /// At most `count` calls per second for each value of argument `param_idx`.
    pub fn qps(resource: impl Into<String>, param_idx: i32, count: f64) -> Self {
        Self {
            resource: resource.into(),
            limit_app: LIMIT_APP_DEFAULT.to_owned(),
            grade: ParamFlowGrade::Qps,
            param_idx: Some(param_idx),
            param_key: None,
            count,
            control_behavior: ParamControlBehavior::Reject,
            max_queueing_time_ms: 0,
            burst_count: 0,
            duration_in_sec: 1,
            param_flow_item_list: Vec::new(),
            params_max_capacity: None,
            cluster_mode: false,
            cluster_config: None,
            regex: false,
        }
    }

    /// At most `count` calls in flight for each value of argument `param_idx`.
    pub fn thread(resource: impl Into<String>, param_idx: i32, count: f64) -> Self {
        Self {
            grade: ParamFlowGrade::Thread,
            ..Self::qps(resource, param_idx, count)
        }
    }

    /// Selects the attachment named `key` instead of a positional argument.
    pub fn param_key(mut self, key: impl Into<String>) -> Self {
        self.param_key = Some(key.into());
        self.param_idx = None;
        self
    }

    /// Sets `durationInSec`.
    pub fn duration_in_sec(mut self, secs: u32) -> Self {
        self.duration_in_sec = secs;
        self
    }

    /// Sets `burstCount`.
    pub fn burst_count(mut self, burst: u32) -> Self {
        self.burst_count = burst;
        self
    }

    /// Uniform spacing per value, queueing up to `max_queueing_time_ms`.
    pub fn rate_limiter(mut self, max_queueing_time_ms: u32) -> Self {
        self.control_behavior = ParamControlBehavior::RateLimiter;
        self.max_queueing_time_ms = max_queueing_time_ms;
        self
    }

    /// Adds an exception item.
    pub fn item(mut self, item: ParamFlowItem) -> Self {
        self.param_flow_item_list.push(item);
        self
    }

    /// Sets `regex`: `resource` is a regular expression matched against whole names.
    pub fn regex(mut self, on: bool) -> Self {
        self.regex = on;
        self
    }

    /// Sets `paramsMaxCapacity`.
    pub fn params_max_capacity(mut self, capacity: u32) -> Self {
        self.params_max_capacity = Some(capacity);
        self
    }

    /// Whether this engine checks the rule: always, unless it is a `clusterMode` QPS rule
    /// without `fallbackToLocalWhenFail` (Sentinel's `passClusterCheck` with no token
    /// service). It still loads and is listed among the active rules.
    pub fn checked_locally(&self) -> bool {
        !self.cluster_mode
            || self.grade == ParamFlowGrade::Thread
            || self
                .cluster_config
                .as_ref()
                .is_some_and(|c| c.fallback_to_local_when_fail)
    }

    /// How many values the rule tracks.
    pub(crate) fn capacity(&self) -> usize {
        let default = match self.grade {
            ParamFlowGrade::Thread => THREAD_CAPACITY,
            ParamFlowGrade::Qps => {
                (BASE_CAPACITY * u64::from(self.duration_in_sec.max(1))).min(TOTAL_MAX_CAPACITY)
            }
        };
        let capacity = self.params_max_capacity.map_or(default, u64::from);
        usize::try_from(capacity.min(u64::from(MAX_CAPACITY))).unwrap_or(1)
    }

    /// Checks the rule as Sentinel's `ParamFlowRuleUtil.isValidRule` does (and
    /// sentinel-golang's, for `paramKey`), returning every problem. Unlike Sentinel, which
    /// drops an invalid exception item and keeps the rule, an invalid item is a problem of
    /// the rule.
    pub fn validate(&self, index: usize) -> Vec<RuleIssue> {
        let mut issues = Issues::new(RuleFamily::ParamFlow, index, Some(&self.resource));
        if self.regex {
            crate::pattern::check_pattern(&mut issues, &self.resource);
        }
        if crate::rules::blank(&self.resource) {
            issues.add("resource", "must not be blank");
        }
        if !(self.count >= 0.0 && self.count.is_finite()) {
            issues.add(
                "count",
                format!("must be a finite number >= 0, got {}", self.count),
            );
        }
        match (&self.param_idx, &self.param_key) {
            (None, None) => issues.add("paramIdx", "is required (or a paramKey)"),
            (Some(_), Some(_)) => issues.add(
                "paramKey",
                "selects the argument by name: paramIdx must be absent with it",
            ),
            (None, Some(key)) if key.is_empty() => issues.add("paramKey", "must not be empty"),
            _ => {}
        }
        if self.duration_in_sec == 0 {
            issues.add("durationInSec", "must be > 0");
        }
        if let Some(capacity) = self.params_max_capacity {
            if capacity == 0 || capacity > MAX_CAPACITY {
                issues.add(
                    "paramsMaxCapacity",
                    format!("must be between 1 and {MAX_CAPACITY}, got {capacity}"),
                );
            }
        }
        for (i, item) in self.param_flow_item_list.iter().enumerate() {
            if let Err(message) = item.value() {
                issues.add(&format!("paramFlowItemList[{i}].object"), message);
            }
            if item.count < 0 {
                issues.add(
                    &format!("paramFlowItemList[{i}].count"),
                    format!("must be >= 0, got {}", item.count),
                );
            }
        }
        if self.cluster_mode {
            match &self.cluster_config {
                None => issues.add("clusterConfig", "required when clusterMode is true"),
                Some(c) => {
                    if c.flow_id.is_none_or(|id| id <= 0) {
                        issues.add("clusterConfig.flowId", "must be > 0 in cluster mode");
                    }
                    if c.sample_count <= 0
                        || c.window_interval_ms <= 0
                        || c.window_interval_ms % c.sample_count != 0
                    {
                        issues.add(
                            "clusterConfig.windowIntervalMs",
                            "must be > 0 and a multiple of sampleCount (> 0)",
                        );
                    }
                }
            }
        }
        issues.into_vec()
    }
}
