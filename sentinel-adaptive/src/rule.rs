//! The `adaptive` rule: which algorithm, its bounds, the latency statistic, the window and
//! the minimum-RTT probe, in Sentinel-style JSON (camelCase keys, unknown keys ignored,
//! explicit `null` meaning the default).

use serde::{Deserialize, Serialize};

/// The limit algorithm of an [`AdaptiveRule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Algorithm {
    /// Envoy's adaptive-concurrency gradient: `limit * (minRtt * (1 + rttTolerance) / rtt)`,
    /// clamped to `[0.5, 2]`, plus `sqrt(limit)` of headroom only while no queue is seen;
    /// the minimum RTT comes from periodic probes.
    #[default]
    Gradient,
    /// Netflix's Vegas: estimates the dependency's queue as `limit * (1 - minRtt / rtt)` and
    /// keeps it between `3 log10(limit)` and `6 log10(limit)`.
    Vegas,
    /// Additive increase (one per window) while the sampled latency stays under the threshold
    /// and nothing is dropped; multiplicative decrease (`backoffRatio`) otherwise.
    Aimd,
}

impl Algorithm {
    /// The name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Gradient => "gradient",
            Algorithm::Vegas => "vegas",
            Algorithm::Aimd => "aimd",
        }
    }
}

/// One adaptive concurrency rule: a limit on the calls of `resource` in flight, recomputed
/// once per `windowMs` from the latencies the calls' exits record.
///
/// ```
/// use sentinel_adaptive::{AdaptiveRule, Algorithm};
///
/// let rule: AdaptiveRule = serde_json::from_str(
///     r#"{"resource": "GET:/orders", "algorithm": "vegas", "maxLimit": 200, "gmtCreate": 1}"#,
/// ).unwrap();
/// assert_eq!(rule.algorithm, Algorithm::Vegas);
/// assert_eq!(rule.initial_limit, 20);
/// rule.validate().unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "AdaptiveRuleWire")]
pub struct AdaptiveRule {
    /// The guarded resource's name. Required.
    pub resource: String,
    /// `gradient` (default), `vegas` or `aimd`.
    pub algorithm: Algorithm,
    /// The lowest limit the algorithm may set (default 3, at least 1).
    pub min_limit: u32,
    /// The highest limit the algorithm may set (default 1 000).
    pub max_limit: u32,
    /// The limit before anything is learned (default 20).
    pub initial_limit: u32,
    /// The latency statistic: this percentile of the window's latencies (default 50,
    /// strictly between 0 and 100).
    pub percentile: f64,
    /// The update window in milliseconds: the limit is recomputed once per window
    /// (default 100; from 10 to 60 000). Make it several times the dependency's latency.
    pub window_ms: u64,
    /// The mean interval between minimum-RTT probes in milliseconds (default 30 000). It
    /// must leave a probe (two windows at half the limit) under 1 % of the time:
    /// `probeIntervalMs * (1 - probeJitter) >= 100 * windowMs`.
    pub probe_interval_ms: u64,
    /// The probe interval's jitter, a fraction of it (default 0.2, from 0 to 0.5). Each
    /// replica draws its own probe times from its seed, so replicas do not probe together.
    pub probe_jitter: f64,
    /// How much the sampled latency may exceed the minimum before it counts as queueing
    /// (default 0.1, from 0 to 1): the gradient's buffer and AIMD's threshold.
    pub rtt_tolerance: f64,
    /// How far one window moves the limit towards the gradient's target (default 0.2,
    /// in `(0, 1]`; gradient only: Vegas and AIMD step whole).
    pub smoothing: f64,
    /// AIMD's multiplicative decrease (default 0.9, in `[0.5, 1)`).
    pub backoff_ratio: f64,
    /// AIMD only: a fixed latency threshold in milliseconds; when absent the threshold is
    /// `minRtt * (1 + rttTolerance)`.
    pub latency_threshold_ms: Option<u64>,
}

impl Default for AdaptiveRule {
    fn default() -> Self {
        AdaptiveRule {
            resource: String::new(),
            algorithm: Algorithm::Gradient,
            min_limit: 3,
            max_limit: 1_000,
            initial_limit: 20,
            percentile: 50.0,
            window_ms: 100,
            probe_interval_ms: 30_000,
            probe_jitter: 0.2,
            rtt_tolerance: 0.1,
            smoothing: 0.2,
            backoff_ratio: 0.9,
            latency_threshold_ms: None,
        }
    }
}

/// The largest `maxLimit` accepted.
pub const MAX_LIMIT: u32 = 1_000_000;

/// Why an [`AdaptiveRule`] is invalid. Each problem names the rule's field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AdaptiveRuleError {
    /// `resource` is empty or blank.
    #[error("`resource` is empty")]
    EmptyResource,
    /// A field's value is outside what it accepts.
    #[error("`{field}` is {value}; expected {expected}")]
    OutOfRange {
        /// The JSON key.
        field: &'static str,
        /// The value given, as text.
        value: String,
        /// What is accepted.
        expected: String,
    },
}

impl AdaptiveRuleError {
    /// The JSON key at fault.
    pub fn field(&self) -> &'static str {
        match self {
            AdaptiveRuleError::EmptyResource => "resource",
            AdaptiveRuleError::OutOfRange { field, .. } => field,
        }
    }
}

fn out_of_range(
    field: &'static str,
    value: impl ToString,
    expected: impl Into<String>,
) -> AdaptiveRuleError {
    AdaptiveRuleError::OutOfRange {
        field,
        value: value.to_string(),
        expected: expected.into(),
    }
}

/// `lo <= x <= hi`, false for NaN.
fn within(x: f64, lo: f64, hi: f64) -> bool {
    x >= lo && x <= hi
}

impl AdaptiveRule {
    /// A rule for `resource` with every default.
    pub fn new(resource: impl Into<String>) -> Self {
        AdaptiveRule {
            resource: resource.into(),
            ..AdaptiveRule::default()
        }
    }

    /// The first problem of [`problems`](Self::problems), if any.
    pub fn validate(&self) -> Result<(), AdaptiveRuleError> {
        match self.problems().into_iter().next() {
            Some(problem) => Err(problem),
            None => Ok(()),
        }
    }

    /// Every problem of the rule, in field order; empty when the rule is valid.
    pub fn problems(&self) -> Vec<AdaptiveRuleError> {
        let mut out = Vec::new();
        if self.resource.trim().is_empty() {
            out.push(AdaptiveRuleError::EmptyResource);
        }
        if self.min_limit == 0 {
            out.push(out_of_range("minLimit", self.min_limit, "at least 1"));
        }
        if self.max_limit < self.min_limit || self.max_limit > MAX_LIMIT {
            out.push(out_of_range(
                "maxLimit",
                self.max_limit,
                format!("from minLimit ({}) to {MAX_LIMIT}", self.min_limit),
            ));
        }
        let bounds_ok = self.min_limit >= 1 && self.max_limit >= self.min_limit;
        if bounds_ok && (self.initial_limit < self.min_limit || self.initial_limit > self.max_limit)
        {
            out.push(out_of_range(
                "initialLimit",
                self.initial_limit,
                format!(
                    "from minLimit ({}) to maxLimit ({})",
                    self.min_limit, self.max_limit
                ),
            ));
        }
        if !(self.percentile > 0.0 && self.percentile < 100.0) {
            out.push(out_of_range(
                "percentile",
                self.percentile,
                "strictly between 0 and 100",
            ));
        }
        if !(10..=60_000).contains(&self.window_ms) {
            out.push(out_of_range("windowMs", self.window_ms, "from 10 to 60000"));
        }
        let jitter_ok = within(self.probe_jitter, 0.0, 0.5);
        if !jitter_ok {
            out.push(out_of_range(
                "probeJitter",
                self.probe_jitter,
                "from 0 to 0.5",
            ));
        }
        let shortest = self.probe_interval_ms as f64 * (1.0 - self.probe_jitter);
        if jitter_ok && shortest < 100.0 * self.window_ms as f64 {
            out.push(out_of_range(
                "probeIntervalMs",
                self.probe_interval_ms,
                format!(
                    "at least 100 windows after jitter ({} ms), so that a probe stays under 1 % of the time",
                    (100.0 * self.window_ms as f64 / (1.0 - self.probe_jitter)).ceil()
                ),
            ));
        }
        if !within(self.rtt_tolerance, 0.0, 1.0) {
            out.push(out_of_range(
                "rttTolerance",
                self.rtt_tolerance,
                "from 0 to 1",
            ));
        }
        if !(self.smoothing > 0.0 && self.smoothing <= 1.0) {
            out.push(out_of_range("smoothing", self.smoothing, "in (0, 1]"));
        }
        if !(self.backoff_ratio >= 0.5 && self.backoff_ratio < 1.0) {
            out.push(out_of_range(
                "backoffRatio",
                self.backoff_ratio,
                "in [0.5, 1)",
            ));
        }
        if self.latency_threshold_ms == Some(0) {
            out.push(out_of_range(
                "latencyThresholdMs",
                0,
                "at least 1, or absent",
            ));
        }
        out
    }
}

/// The JSON shape: every key optional, explicit `null` meaning the default (as in
/// Sentinel's JSON), unknown keys ignored.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AdaptiveRuleWire {
    resource: Option<String>,
    algorithm: Option<Algorithm>,
    min_limit: Option<u32>,
    max_limit: Option<u32>,
    initial_limit: Option<u32>,
    percentile: Option<f64>,
    window_ms: Option<u64>,
    probe_interval_ms: Option<u64>,
    probe_jitter: Option<f64>,
    rtt_tolerance: Option<f64>,
    smoothing: Option<f64>,
    backoff_ratio: Option<f64>,
    latency_threshold_ms: Option<u64>,
}

impl From<AdaptiveRuleWire> for AdaptiveRule {
    fn from(w: AdaptiveRuleWire) -> Self {
        let d = AdaptiveRule::default();
        AdaptiveRule {
            resource: w.resource.unwrap_or(d.resource),
            algorithm: w.algorithm.unwrap_or(d.algorithm),
            min_limit: w.min_limit.unwrap_or(d.min_limit),
            max_limit: w.max_limit.unwrap_or(d.max_limit),
            initial_limit: w.initial_limit.unwrap_or(d.initial_limit),
            percentile: w.percentile.unwrap_or(d.percentile),
            window_ms: w.window_ms.unwrap_or(d.window_ms),
            probe_interval_ms: w.probe_interval_ms.unwrap_or(d.probe_interval_ms),
            probe_jitter: w.probe_jitter.unwrap_or(d.probe_jitter),
            rtt_tolerance: w.rtt_tolerance.unwrap_or(d.rtt_tolerance),
            smoothing: w.smoothing.unwrap_or(d.smoothing),
            backoff_ratio: w.backoff_ratio.unwrap_or(d.backoff_ratio),
            latency_threshold_ms: w.latency_threshold_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> AdaptiveRule {
        match serde_json::from_str(json) {
            Ok(rule) => rule,
            Err(e) => panic!("{json}: {e}"),
        }
    }

    #[test]
    fn json_is_camel_case_with_defaults_and_ignores_unknown_keys() {
        let rule = parse(
            r#"{"resource":"r","algorithm":"aimd","minLimit":2,"maxLimit":50,"initialLimit":4,
                "percentile":90,"windowMs":200,"probeIntervalMs":60000,"probeJitter":0.1,
                "rttTolerance":0.3,"smoothing":0.5,"backoffRatio":0.8,"latencyThresholdMs":40,
                "id":7,"app":"x","gmtModified":null}"#,
        );
        assert_eq!(rule.algorithm, Algorithm::Aimd);
        assert_eq!(
            (rule.min_limit, rule.max_limit, rule.initial_limit),
            (2, 50, 4)
        );
        assert_eq!(rule.percentile, 90.0);
        assert_eq!(rule.window_ms, 200);
        assert_eq!(rule.latency_threshold_ms, Some(40));
        assert_eq!(rule.problems(), vec![]);
        let back: AdaptiveRule = parse(&serde_json::to_string(&rule).unwrap_or_default());
        assert_eq!(back, rule);
    }

    #[test]
    fn explicit_null_means_the_default() {
        let rule = parse(r#"{"resource":"r","algorithm":null,"maxLimit":null,"percentile":null}"#);
        assert_eq!(rule, AdaptiveRule::new("r"));
    }

    #[test]
    fn an_unknown_algorithm_is_a_parse_error() {
        assert!(
            serde_json::from_str::<AdaptiveRule>(r#"{"resource":"r","algorithm":"bbr"}"#).is_err()
        );
    }

    #[test]
    fn every_invalid_field_is_named() {
        type Edit = fn(&mut AdaptiveRule);
        let cases: [(&str, Edit); 14] = [
            ("resource", |r| r.resource = " ".into()),
            ("minLimit", |r| (r.min_limit, r.initial_limit) = (0, 1)),
            ("maxLimit", |r| (r.max_limit, r.initial_limit) = (2, 2)),
            ("maxLimit", |r| r.max_limit = MAX_LIMIT + 1),
            ("initialLimit", |r| r.initial_limit = 2_000),
            ("percentile", |r| r.percentile = 100.0),
            ("percentile", |r| r.percentile = f64::NAN),
            ("windowMs", |r| r.window_ms = 5),
            ("probeJitter", |r| r.probe_jitter = 0.6),
            ("probeIntervalMs", |r| r.probe_interval_ms = 10_000),
            ("rttTolerance", |r| r.rtt_tolerance = -0.1),
            ("smoothing", |r| r.smoothing = 0.0),
            ("backoffRatio", |r| r.backoff_ratio = 1.0),
            ("latencyThresholdMs", |r| r.latency_threshold_ms = Some(0)),
        ];
        for (field, edit) in cases {
            let mut rule = AdaptiveRule::new("r");
            edit(&mut rule);
            let problems = rule.problems();
            assert_eq!(problems.len(), 1, "{field}: {problems:?}");
            assert_eq!(problems[0].field(), field, "{problems:?}");
            assert!(problems[0].to_string().contains(field), "{}", problems[0]);
            assert_eq!(rule.validate(), Err(problems[0].clone()));
        }
    }

    #[test]
    fn the_probe_interval_bound_follows_the_window_and_jitter() {
        let ok = AdaptiveRule {
            window_ms: 50,
            probe_interval_ms: 10_000,
            probe_jitter: 0.5,
            ..AdaptiveRule::new("r")
        };
        assert_eq!(ok.problems(), vec![]);
        let short = AdaptiveRule {
            probe_interval_ms: 9_999,
            ..ok
        };
        assert_eq!(short.problems()[0].field(), "probeIntervalMs");
    }
}
