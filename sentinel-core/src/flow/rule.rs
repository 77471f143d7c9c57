//! The flow rule, its Java JSON wire form and its validity checks.

use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

use crate::codes::int_code_enum;
use crate::rules::{Issues, RuleFamily, RuleIssue};
use crate::wire::{self, Bool, Float, Int};

/// `limitApp` value that matches every origin.
pub const LIMIT_APP_DEFAULT: &str = "default";
/// `limitApp` value that matches origins no other rule of the resource names.
pub const LIMIT_APP_OTHER: &str = "other";
/// The context of a call entered without one (Sentinel's `Constants.CONTEXT_DEFAULT_NAME`):
/// a chain rule whose `refResource` names it limits those calls.
pub const CONTEXT_DEFAULT_NAME: &str = "sentinel_default_context";

int_code_enum! {
    /// What a flow rule counts (`grade`).
    pub enum FlowGrade {
        /// Concurrent calls (`FLOW_GRADE_THREAD`).
        Thread = 0,
        /// Passed calls per second (`FLOW_GRADE_QPS`), the default.
        Qps = 1,
    }
}

int_code_enum! {
    /// Which statistics a flow rule reads (`strategy`).
    pub enum FlowStrategy {
        /// The resource's own statistics, the default.
        Direct = 0,
        /// The statistics of `refResource` (limit this resource when that one is busy).
        Relate = 1,
        /// Only calls that entered through the context named `refResource`
        /// ([`CONTEXT_DEFAULT_NAME`] for calls entered without a context).
        Chain = 2,
    }
}

int_code_enum! {
    /// How a QPS flow rule shapes traffic (`controlBehavior`).
    pub enum ControlBehavior {
        /// Reject past the threshold, the default.
        Reject = 0,
        /// Warm up (cold start): start at `count / 3` and rise to `count` over
        /// `warmUpPeriodSec` of sustained load.
        WarmUp = 1,
        /// Rate limiter (leaky bucket): space calls `1/count` s apart, queueing up to
        /// `maxQueueingTimeMs`.
        RateLimiter = 2,
        /// Warm-up, with the rate limiter's spacing.
        WarmUpRateLimiter = 3,
    }
}

/// Sentinel's cluster flow settings. With a cluster backend installed they are enforced
/// across replicas (see [`cluster`](crate::cluster)); without one, cluster rules are checked
/// locally or pass (see [`FlowRule::checked_locally`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ClusterFlowConfig {
    /// Global rule id; must be positive for a cluster rule.
    pub flow_id: Option<i64>,
    /// 0 average-local, 1 global.
    pub threshold_type: i32,
    /// Fall back to local checking when the token server fails (default true).
    pub fallback_to_local_when_fail: bool,
    /// Cluster strategy; only 0 is valid.
    pub strategy: i32,
    /// Sample count (default 10).
    pub sample_count: i32,
    /// Window length in ms (default 1000).
    pub window_interval_ms: i32,
}

impl Default for ClusterFlowConfig {
    fn default() -> Self {
        Self {
            flow_id: None,
            threshold_type: 0,
            fallback_to_local_when_fail: true,
            strategy: 0,
            sample_count: 10,
            window_interval_ms: 1000,
        }
    }
}

/// A flow rule, with Sentinel 1.8's fields, JSON names and defaults.
///
/// ```
/// use sentinel_core::flow::{ControlBehavior, FlowRule};
///
/// let rule = FlowRule::qps("GET:/order", 100.0).control_behavior(ControlBehavior::WarmUp);
/// assert_eq!(rule.warm_up_period_sec, 10);
/// let json = serde_json::to_string(&rule).unwrap();
/// assert!(json.contains(r#""controlBehavior":1"#));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct FlowRule {
    /// The guarded resource.
    pub resource: String,
    /// Which origins the rule applies to: `default` (all), `other`, or an origin name.
    ///
    /// `other` applies to a caller whose origin no rule of the resource names (Sentinel's
    /// `isOtherOrigin`, cluster rules' `limitApp` included): the origin `default` is an other
    /// caller unless a rule of the resource has `limitApp: "default"`. One deliberate
    /// difference: the origin `other` is always an other caller, where Sentinel compares it
    /// with the `other` rule's own `limitApp` and lets it escape every `other` rule (origins
    /// come from headers any client sets).
    pub limit_app: String,
    /// QPS or concurrency.
    pub grade: FlowGrade,
    /// The threshold. May be 0 (block everything).
    pub count: f64,
    /// Direct, relate or chain.
    pub strategy: FlowStrategy,
    /// The related resource (relate) or entrance context (chain).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ref_resource: Option<String>,
    /// Reject, warm-up, rate limiter, or warm-up + rate limiter.
    pub control_behavior: ControlBehavior,
    /// Warm-up period in seconds (default 10).
    pub warm_up_period_sec: u32,
    /// Longest a call may queue in the rate limiter, in ms (default 500).
    pub max_queueing_time_ms: u32,
    /// Sentinel's cluster mode: the limit is shared by every replica when a cluster backend
    /// is installed ([`cluster`](crate::cluster)); without one the rule is checked locally,
    /// as Sentinel does when `fallbackToLocalWhenFail` is set.
    pub cluster_mode: bool,
    /// Cluster settings, kept for round-trips.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_config: Option<ClusterFlowConfig>,
    /// `resource` is a regular expression (Sentinel's `regex`): the rule applies to every
    /// resource whose whole name it matches, each with a limit and state of its own.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub regex: bool,
}

impl Eq for FlowRule {}

impl Hash for FlowRule {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // The small fields packed into two words: a reload hashes every rule, and each
        // write costs about what a word does.
        self.resource.hash(state);
        self.limit_app.hash(state);
        wire::hash_f64(self.count, state);
        self.ref_resource.hash(state);
        let code = |c: i32| u64::from(c as u8);
        state.write_u64(
            code(self.grade.code())
                | code(self.strategy.code()) << 8
                | code(self.control_behavior.code()) << 16
                | u64::from(self.cluster_mode) << 24
                | u64::from(self.regex) << 25,
        );
        state.write_u64(
            u64::from(self.warm_up_period_sec) | u64::from(self.max_queueing_time_ms) << 32,
        );
    }
}

impl FlowRule {
    /// A QPS rule rejecting past `count` calls per second, for every origin.
    pub fn qps(resource: impl Into<String>, count: f64) -> Self {
        Self {
            resource: resource.into(),
            limit_app: LIMIT_APP_DEFAULT.to_owned(),
            grade: FlowGrade::Qps,
            count,
            strategy: FlowStrategy::Direct,
            ref_resource: None,
            control_behavior: ControlBehavior::Reject,
            warm_up_period_sec: 10,
            max_queueing_time_ms: 500,
            cluster_mode: false,
            cluster_config: None,
            regex: false,
        }
    }

    /// A concurrency rule: at most `count` calls in flight.
    pub fn thread(resource: impl Into<String>, count: f64) -> Self {
        Self {
            grade: FlowGrade::Thread,
            ..Self::qps(resource, count)
        }
    }

    /// Sets `limitApp`.
    pub fn limit_app(mut self, limit_app: impl Into<String>) -> Self {
        self.limit_app = limit_app.into();
        self
    }

    /// Sets `controlBehavior`.
    pub fn control_behavior(mut self, behavior: ControlBehavior) -> Self {
        self.control_behavior = behavior;
        self
    }

    /// Sets `warmUpPeriodSec`.
    pub fn warm_up_period_sec(mut self, secs: u32) -> Self {
        self.warm_up_period_sec = secs;
        self
    }

    /// Sets `maxQueueingTimeMs`.
    pub fn max_queueing_time_ms(mut self, ms: u32) -> Self {
        self.max_queueing_time_ms = ms;
        self
    }

    /// Relate strategy: limit this resource by the statistics of `resource`.
    pub fn relate(mut self, resource: impl Into<String>) -> Self {
        self.strategy = FlowStrategy::Relate;
        self.ref_resource = Some(resource.into());
        self
    }

    /// Chain strategy: count only calls entering through context `context`
    /// ([`CONTEXT_DEFAULT_NAME`]: calls entered without a context).
    pub fn chain(mut self, context: impl Into<String>) -> Self {
        self.strategy = FlowStrategy::Chain;
        self.ref_resource = Some(context.into());
        self
    }

    /// Sets `regex`: `resource` is a regular expression matched against whole names.
    pub fn regex(mut self, on: bool) -> Self {
        self.regex = on;
        self
    }

    /// Sets `clusterMode`.
    pub fn cluster_mode(mut self, on: bool) -> Self {
        self.cluster_mode = on;
        self
    }

    /// Whether this engine checks the rule without a cluster backend. A `clusterMode` rule
    /// needs one ([`cluster`](crate::cluster)); without it, as Sentinel does when no token
    /// service is reachable, it is
    /// checked locally when `fallbackToLocalWhenFail` is set (the default) and lets every
    /// call pass otherwise. It still loads and is listed among the active rules.
    pub fn checked_locally(&self) -> bool {
        !self.cluster_mode
            || self
                .cluster_config
                .as_ref()
                .is_none_or(|c| c.fallback_to_local_when_fail)
    }

    /// Checks the rule as Sentinel's `FlowRuleUtil.isValidRule` does, returning every problem.
    /// A `regex` rule's resource must be a pattern the `regex` crate reads (Java-only syntax
    /// such as look-around is refused), and, as in Sentinel, not a cluster rule and with
    /// `controlBehavior` 0; unlike Sentinel, not a relate rule either (the related resource
    /// would have to be resolved for each matched name).
    pub fn validate(&self, index: usize) -> Vec<RuleIssue> {
        let mut issues = Issues::new(RuleFamily::Flow, index, Some(&self.resource));
        if self.regex {
            crate::pattern::check_pattern(&mut issues, &self.resource);
            if self.cluster_mode {
                issues.add("clusterMode", "a regex rule cannot be a cluster rule");
            }
            if self.control_behavior != ControlBehavior::Reject {
                issues.add("controlBehavior", "a regex rule must use 0 (reject)");
            }
            if self.strategy == FlowStrategy::Relate {
                issues.add("strategy", "a regex rule cannot be a relate rule");
            }
        }
        let mut issue = |field: &str, message: String| issues.add(field, message);
        if crate::rules::blank(&self.resource) {
            issue("resource", "must not be blank".into());
        }
        if !(self.count >= 0.0 && self.count.is_finite()) {
            issue(
                "count",
                format!("must be a finite number >= 0, got {}", self.count),
            );
        }
        if crate::rules::blank(&self.limit_app) {
            issue("limitApp", "must not be blank".into());
        }
        if self.grade == FlowGrade::Qps {
            let needs_ref = matches!(self.strategy, FlowStrategy::Relate | FlowStrategy::Chain);
            if needs_ref && self.ref_resource.as_deref().is_none_or(crate::rules::blank) {
                issue(
                    "refResource",
                    format!("required by strategy {}", self.strategy.code()),
                );
            }
            let warm = matches!(
                self.control_behavior,
                ControlBehavior::WarmUp | ControlBehavior::WarmUpRateLimiter
            );
            let queue = matches!(
                self.control_behavior,
                ControlBehavior::RateLimiter | ControlBehavior::WarmUpRateLimiter
            );
            if warm && self.warm_up_period_sec == 0 {
                issue("warmUpPeriodSec", "must be > 0 for warm-up".into());
            } else if warm
                && self.count > 0.0
                && self.count * f64::from(self.warm_up_period_sec) < 2.0
            {
                // Sentinel accepts it, and its warm-up bucket then has no room between the
                // warning line and the top: the slope is infinite and every call blocks
                // forever. Refused here instead.
                issue(
                    "warmUpPeriodSec",
                    format!(
                        "count x warmUpPeriodSec must be at least 2 for warm-up, got {} x {}",
                        self.count, self.warm_up_period_sec
                    ),
                );
            }
            if queue && self.max_queueing_time_ms == 0 {
                issue(
                    "maxQueueingTimeMs",
                    "must be > 0 for the rate limiter".into(),
                );
            }
        } else if matches!(self.strategy, FlowStrategy::Relate | FlowStrategy::Chain)
            && self.ref_resource.as_deref().is_none_or(crate::rules::blank)
        {
            issue(
                "refResource",
                format!("required by strategy {}", self.strategy.code()),
            );
        }
        if self.cluster_mode {
            match &self.cluster_config {
                None => issue("clusterConfig", "required when clusterMode is true".into()),
                Some(c) => {
                    if c.flow_id.is_none_or(|id| id <= 0) {
                        issue("clusterConfig.flowId", "must be > 0 in cluster mode".into());
                    }
                    if !(0..=1).contains(&c.threshold_type) {
                        issue(
                            "clusterConfig.thresholdType",
                            format!(
                                "must be 0 (average per instance) or 1 (global), got {}",
                                c.threshold_type
                            ),
                        );
                    }
                    if c.sample_count <= 0 {
                        issue("clusterConfig.sampleCount", "must be > 0".into());
                    }
                    if c.window_interval_ms <= 0
                        || (c.sample_count > 0 && c.window_interval_ms % c.sample_count != 0)
                    {
                        issue(
                            "clusterConfig.windowIntervalMs",
                            "must be > 0 and a multiple of sampleCount".into(),
                        );
                    }
                    if c.strategy != 0 {
                        issue(
                            "clusterConfig.strategy",
                            "only 0 (normal) is supported".into(),
                        );
                    }
                }
            }
        }
        issues.into_vec()
    }
}

wire::wire_struct! {
    /// The JSON wire shape: every field optional, `null` meaning the default; other keys
    /// are collected (see `wire::keys`). `count` decides what the rule does.
    pub(crate) struct FlowRuleWire (Exact) {
        resource: String = "resource",
        limit_app: String = "limitApp",
        grade: Int = "grade",
        count: Float = "count" required,
        strategy: Int = "strategy",
        ref_resource: String = "refResource",
        control_behavior: Int = "controlBehavior",
        warm_up_period_sec: Int = "warmUpPeriodSec",
        max_queueing_time_ms: Int = "maxQueueingTimeMs",
        cluster_mode: Bool = "clusterMode",
        cluster_config: ClusterFlowConfigWire = "clusterConfig",
        regex: Bool = "regex",
    }
}

wire::wire_struct! {
    /// A flow rule's `clusterConfig`: every key of Sentinel 1.8's `ClusterFlowConfig`. The
    /// last four (the token client's timeouts and refusal strategy, which the dashboard
    /// writes) are read and dropped: the engine does not model them (its cluster backend
    /// has no token server).
    struct ClusterFlowConfigWire (Exact) {
        flow_id: Int = "flowId",
        threshold_type: Int = "thresholdType",
        fallback_to_local_when_fail: Bool = "fallbackToLocalWhenFail",
        strategy: Int = "strategy",
        sample_count: Int = "sampleCount",
        window_interval_ms: Int = "windowIntervalMs",
        _resource_timeout: Int = "resourceTimeout",
        _resource_timeout_strategy: Int = "resourceTimeoutStrategy",
        _acquire_refuse_strategy: Int = "acquireRefuseStrategy",
        _client_offline_time: Int = "clientOfflineTime",
    }
}

impl FlowRuleWire {
    /// Builds the typed rule with Sentinel's defaults. Reports what the wire gets wrong
    /// (unknown codes, out-of-range integers, `regex`); the rule's own checks are
    /// [`FlowRule::validate`]'s.
    pub(crate) fn decode(self, index: usize) -> (FlowRule, Vec<RuleIssue>) {
        let resource = self.resource.unwrap_or_default();
        let mut issues = Issues::new(RuleFamily::Flow, index, Some(&resource));
        let regex = wire::boolean(self.regex).unwrap_or(false);
        let grade = issues.code("grade", wire::int(self.grade), FlowGrade::Qps);
        let strategy = issues.code("strategy", wire::int(self.strategy), FlowStrategy::Direct);
        let behavior = issues.code(
            "controlBehavior",
            wire::int(self.control_behavior),
            ControlBehavior::Reject,
        );
        let warm_up_period_sec =
            issues.u32("warmUpPeriodSec", wire::int(self.warm_up_period_sec), 10);
        let max_queueing_time_ms = issues.u32(
            "maxQueueingTimeMs",
            wire::int(self.max_queueing_time_ms),
            500,
        );
        let limit_app = match self.limit_app {
            Some(app) if !app.trim().is_empty() => app,
            _ => LIMIT_APP_DEFAULT.to_owned(),
        };
        let cluster_config = self.cluster_config.map(|c| {
            let d = ClusterFlowConfig::default();
            ClusterFlowConfig {
                flow_id: wire::int(c.flow_id),
                threshold_type: wire::int(c.threshold_type).map_or(d.threshold_type, |v| {
                    // Out of range is an unknown type (validation names it), never truncated.
                    i32::try_from(v).unwrap_or(i32::MAX)
                }),
                fallback_to_local_when_fail: wire::boolean(c.fallback_to_local_when_fail)
                    .unwrap_or(d.fallback_to_local_when_fail),
                strategy: wire::int(c.strategy).map_or(d.strategy, |v| v as i32),
                sample_count: wire::int(c.sample_count).map_or(d.sample_count, |v| v as i32),
                window_interval_ms: wire::int(c.window_interval_ms)
                    .map_or(d.window_interval_ms, |v| v as i32),
            }
        });
        // The issues borrow the name: taken first, so that the rule can have it, uncopied.
        let found = issues.into_vec();
        let rule = FlowRule {
            resource,
            limit_app,
            grade,
            count: wire::float(self.count).unwrap_or(0.0),
            strategy,
            ref_resource: self.ref_resource.filter(|r| !r.is_empty()),
            control_behavior: behavior,
            warm_up_period_sec,
            max_queueing_time_ms,
            cluster_mode: wire::boolean(self.cluster_mode).unwrap_or(false),
            cluster_config,
            regex,
        };
        (rule, found)
    }
}

impl<'de> Deserialize<'de> for FlowRule {
    /// Reads Sentinel JSON with its defaults; an invalid rule is a deserialisation error.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (rule, mut issues) = FlowRuleWire::deserialize(d)?.decode(0);
        issues.extend(rule.validate(0));
        if issues.is_empty() {
            return Ok(rule);
        }
        Err({
            serde::de::Error::custom(
                issues
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        })
    }
}
