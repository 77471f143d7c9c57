//! The system rule: global thresholds for inbound traffic.

use serde::Serialize;

use crate::rules::{Issues, RuleFamily, RuleIssue};
use crate::wire::{self, Float};

/// A system adaptive protection rule, with Sentinel 1.8's fields. Every threshold defaults to
/// -1 (off); any negative value is off.
///
/// ```
/// use sentinel_core::system::SystemRule;
///
/// let rule = SystemRule::new().qps(2_000.0).highest_cpu_usage(0.9);
/// assert_eq!(rule.avg_rt, -1);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SystemRule {
    /// Highest load1 before the BBR check applies.
    pub highest_system_load: f64,
    /// Highest CPU usage, in [0, 1].
    pub highest_cpu_usage: f64,
    /// Highest inbound QPS.
    pub qps: f64,
    /// Highest average RT of inbound calls, in ms.
    pub avg_rt: i64,
    /// Highest inbound concurrency.
    pub max_thread: i64,
}

impl Eq for SystemRule {}

impl std::hash::Hash for SystemRule {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        wire::hash_f64(self.highest_system_load, state);
        wire::hash_f64(self.highest_cpu_usage, state);
        wire::hash_f64(self.qps, state);
        self.avg_rt.hash(state);
        self.max_thread.hash(state);
    }
}

impl Default for SystemRule {
    fn default() -> Self {
        Self::new()
    }
}

impl SystemRule {
    /// A rule with every threshold off.
    pub fn new() -> Self {
        Self {
            highest_system_load: -1.0,
            highest_cpu_usage: -1.0,
            qps: -1.0,
            avg_rt: -1,
            max_thread: -1,
        }
    }

    /// Sets `highestSystemLoad`.
    pub fn highest_system_load(mut self, load: f64) -> Self {
        self.highest_system_load = load;
        self
    }

    /// Sets `highestCpuUsage`.
    pub fn highest_cpu_usage(mut self, usage: f64) -> Self {
        self.highest_cpu_usage = usage;
        self
    }

    /// Sets `qps`.
    pub fn qps(mut self, qps: f64) -> Self {
        self.qps = qps;
        self
    }

    /// Sets `avgRt`.
    pub fn avg_rt(mut self, ms: i64) -> Self {
        self.avg_rt = ms;
        self
    }

    /// Sets `maxThread`.
    pub fn max_thread(mut self, n: i64) -> Self {
        self.max_thread = n;
        self
    }

    /// Checks the rule. Sentinel ignores a `highestCpuUsage` outside [0, 1] with a warning;
    /// here it is an error (strict) or a skipped rule (lenient).
    pub fn validate(&self, index: usize) -> Vec<RuleIssue> {
        let mut issues = Issues::new(RuleFamily::System, index, None);
        let mut issue = |field: &str, message: String| issues.add(field, message);
        if self.highest_cpu_usage > 1.0 || self.highest_cpu_usage.is_nan() {
            issue(
                "highestCpuUsage",
                format!(
                    "must be in [0, 1] (or negative for off), got {}",
                    self.highest_cpu_usage
                ),
            );
        }
        for (field, v) in [
            ("highestSystemLoad", self.highest_system_load),
            ("qps", self.qps),
        ] {
            if !v.is_finite() {
                issue(field, format!("must be a finite number, got {v}"));
            }
        }
        issues.into_vec()
    }
}

wire::wire_struct! {
    /// The JSON wire shape (other keys are collected, see `wire::keys`).
    pub(crate) struct SystemRuleWire (Exact) {
        highest_system_load: Float = "highestSystemLoad",
        highest_cpu_usage: Float = "highestCpuUsage",
        qps: Float = "qps",
        avg_rt: Float = "avgRt",
        max_thread: Float = "maxThread",
    }
}

impl SystemRuleWire {
    /// Builds the typed rule (every threshold off unless set); the rule's checks are
    /// [`SystemRule::validate`]'s.
    pub(crate) fn decode(self, _index: usize) -> (SystemRule, Vec<RuleIssue>) {
        let rule = SystemRule {
            highest_system_load: wire::float(self.highest_system_load).unwrap_or(-1.0),
            highest_cpu_usage: wire::float(self.highest_cpu_usage).unwrap_or(-1.0),
            qps: wire::float(self.qps).unwrap_or(-1.0),
            avg_rt: wire::float(self.avg_rt).map_or(-1, |v| v as i64),
            max_thread: wire::float(self.max_thread).map_or(-1, |v| v as i64),
        };
        (rule, Vec::new())
    }
}
