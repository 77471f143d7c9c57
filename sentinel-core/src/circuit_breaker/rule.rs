//! The degrade (circuit-breaker) rule, its Java JSON wire form and validity checks.

use std::hash::{Hash, Hasher};

use serde::Serialize;

use crate::codes::int_code_enum;
use crate::flow::LIMIT_APP_DEFAULT;
use crate::rules::{Issues, RuleFamily, RuleIssue};
use crate::wire::{self, Float, Int};

int_code_enum! {
    /// What trips a circuit breaker (`grade`).
    pub enum DegradeGrade {
        /// Slow-call ratio: `count` is the max RT in ms, `slowRatioThreshold` the ratio.
        SlowRequestRatio = 0,
        /// Error ratio: `count` is the ratio, in [0, 1].
        ErrorRatio = 1,
        /// Error count: `count` is the number of errors in the stat interval.
        ErrorCount = 2,
    }
}

/// A circuit-breaker rule, with Sentinel 1.8's fields, JSON names and defaults.
///
/// ```
/// use sentinel_core::circuit_breaker::DegradeRule;
///
/// // Open for 10 s when over half the calls in a second take more than 200 ms.
/// let rule = DegradeRule::slow_ratio("db.query", 200.0, 0.5, 10);
/// assert_eq!(rule.min_request_amount, 5);
/// assert_eq!(rule.stat_interval_ms, 1000);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DegradeRule {
    /// The guarded resource.
    pub resource: String,
    /// Kept for round-trips; circuit breakers apply to every origin, as in Sentinel.
    pub limit_app: String,
    /// Slow-call ratio, error ratio or error count.
    pub grade: DegradeGrade,
    /// Max RT in ms (slow ratio), the ratio (error ratio) or the count (error count).
    pub count: f64,
    /// How long the breaker stays open, in seconds. Must be > 0.
    pub time_window: u32,
    /// Fewest calls in a stat interval before the breaker may trip (default 5).
    pub min_request_amount: u32,
    /// Slow-call ratio threshold in [0, 1] (default 1.0).
    pub slow_ratio_threshold: f64,
    /// Length of the statistic window in ms (default 1000).
    pub stat_interval_ms: u32,
    /// `resource` is a regular expression (Sentinel's `regex`): the rule applies to every
    /// resource whose whole name it matches, each with a limit and state of its own.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub regex: bool,
}

impl Eq for DegradeRule {}

impl Hash for DegradeRule {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.resource.hash(state);
        self.limit_app.hash(state);
        self.grade.hash(state);
        wire::hash_f64(self.count, state);
        self.time_window.hash(state);
        self.min_request_amount.hash(state);
        wire::hash_f64(self.slow_ratio_threshold, state);
        self.stat_interval_ms.hash(state);
        self.regex.hash(state);
    }
}

impl DegradeRule {
    fn new(resource: impl Into<String>, grade: DegradeGrade, count: f64, time_window: u32) -> Self {
        Self {
            resource: resource.into(),
            limit_app: LIMIT_APP_DEFAULT.to_owned(),
            grade,
            count,
            time_window,
            min_request_amount: 5,
            slow_ratio_threshold: 1.0,
            stat_interval_ms: 1000,
            regex: false,
        }
    }

    /// Slow-call ratio: trips when more than `ratio` of the calls take longer than
    /// `max_rt_ms`; stays open `time_window` seconds.
    pub fn slow_ratio(
        resource: impl Into<String>,
        max_rt_ms: f64,
        ratio: f64,
        time_window: u32,
    ) -> Self {
        Self {
            slow_ratio_threshold: ratio,
            ..Self::new(
                resource,
                DegradeGrade::SlowRequestRatio,
                max_rt_ms,
                time_window,
            )
        }
    }

    /// Error ratio: trips when more than `ratio` of the calls fail.
    pub fn error_ratio(resource: impl Into<String>, ratio: f64, time_window: u32) -> Self {
        Self::new(resource, DegradeGrade::ErrorRatio, ratio, time_window)
    }

    /// Error count: trips when more than `count` calls fail within the stat interval.
    pub fn error_count(resource: impl Into<String>, count: f64, time_window: u32) -> Self {
        Self::new(resource, DegradeGrade::ErrorCount, count, time_window)
    }

    /// Sets `minRequestAmount`.
    pub fn min_request_amount(mut self, n: u32) -> Self {
        self.min_request_amount = n;
        self
    }

    /// Sets `statIntervalMs`.
    pub fn stat_interval_ms(mut self, ms: u32) -> Self {
        self.stat_interval_ms = ms;
        self
    }

    /// Sets `regex`: `resource` is a regular expression matched against whole names.
    pub fn regex(mut self, on: bool) -> Self {
        self.regex = on;
        self
    }

    /// Checks the rule as Sentinel's `DegradeRuleManager.isValidRule` does (a `regex` rule's
    /// resource must be a pattern the `regex` crate reads).
    pub fn validate(&self, index: usize) -> Vec<RuleIssue> {
        let mut issues = Issues::new(RuleFamily::Degrade, index, Some(&self.resource));
        if self.regex {
            crate::pattern::check_pattern(&mut issues, &self.resource);
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
        if self.time_window == 0 {
            issue(
                "timeWindow",
                "must be > 0 (seconds the breaker stays open)".into(),
            );
        }
        if self.min_request_amount == 0 {
            issue("minRequestAmount", "must be > 0".into());
        }
        if self.stat_interval_ms == 0 {
            issue("statIntervalMs", "must be > 0".into());
        }
        match self.grade {
            DegradeGrade::SlowRequestRatio => {
                if !(0.0..=1.0).contains(&self.slow_ratio_threshold) {
                    issue(
                        "slowRatioThreshold",
                        format!("must be in [0, 1], got {}", self.slow_ratio_threshold),
                    );
                }
            }
            DegradeGrade::ErrorRatio => {
                if self.count > 1.0 {
                    issue(
                        "count",
                        format!("an error ratio must be <= 1, got {}", self.count),
                    );
                }
            }
            DegradeGrade::ErrorCount => {}
        }
        issues.into_vec()
    }
}

wire::wire_struct! {
    /// The JSON wire shape (`null` = default; other keys are collected, see `wire::keys`).
    /// `grade` and `count` decide what the rule does.
    pub(crate) struct DegradeRuleWire (Exact) {
        resource: String = "resource",
        limit_app: String = "limitApp",
        grade: Int = "grade" required,
        count: Float = "count" required,
        time_window: Int = "timeWindow",
        min_request_amount: Int = "minRequestAmount",
        slow_ratio_threshold: Float = "slowRatioThreshold",
        stat_interval_ms: Int = "statIntervalMs",
        regex: crate::wire::Bool = "regex",
    }
}

impl DegradeRuleWire {
    /// Builds the typed rule with Sentinel's defaults, reporting what the wire gets wrong;
    /// the rule's own checks are [`DegradeRule::validate`]'s.
    pub(crate) fn decode(self, index: usize) -> (DegradeRule, Vec<RuleIssue>) {
        let resource = self.resource.unwrap_or_default();
        let mut issues = Issues::new(RuleFamily::Degrade, index, Some(&resource));
        let regex = wire::boolean(self.regex).unwrap_or(false);
        let grade = issues.code(
            "grade",
            wire::int(self.grade),
            DegradeGrade::SlowRequestRatio,
        );
        let time_window = issues.u32("timeWindow", wire::int(self.time_window), 0);
        let min_request_amount =
            issues.u32("minRequestAmount", wire::int(self.min_request_amount), 5);
        let stat_interval_ms = issues.u32("statIntervalMs", wire::int(self.stat_interval_ms), 1000);
        let rule = DegradeRule {
            limit_app: self
                .limit_app
                .filter(|a| !a.trim().is_empty())
                .unwrap_or_else(|| LIMIT_APP_DEFAULT.to_owned()),
            grade,
            count: wire::float(self.count).unwrap_or(0.0),
            time_window,
            min_request_amount,
            slow_ratio_threshold: wire::float(self.slow_ratio_threshold).unwrap_or(1.0),
            stat_interval_ms,
            resource: resource.clone(),
            regex,
        };
        issues.finish(rule)
    }
}
