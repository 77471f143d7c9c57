//! The merged system thresholds and the system check.

use std::fmt;
use std::sync::Arc;

use super::rule::SystemRule;
use super::status::SystemStatus;
use crate::stat::StatNode;

/// Which system threshold blocked a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SystemMetric {
    /// Inbound QPS (`qps`).
    Qps,
    /// Inbound concurrency (`maxThread`).
    Concurrency,
    /// Average RT of inbound calls (`avgRt`).
    AvgRt,
    /// Load average, with the BBR check (`highestSystemLoad`).
    Load,
    /// CPU usage (`highestCpuUsage`).
    CpuUsage,
}

impl fmt::Display for SystemMetric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SystemMetric::Qps => "qps",
            SystemMetric::Concurrency => "maxThread",
            SystemMetric::AvgRt => "avgRt",
            SystemMetric::Load => "highestSystemLoad",
            SystemMetric::CpuUsage => "highestCpuUsage",
        })
    }
}

/// A system check that failed: the metric, its threshold and the value seen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SystemBlock {
    pub(crate) metric: SystemMetric,
    pub(crate) threshold: f64,
    pub(crate) value: f64,
}

/// Thresholds merged by minimum over every rule; `None` is off.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct Thresholds {
    load: Option<f64>,
    cpu: Option<f64>,
    qps: Option<f64>,
    avg_rt: Option<f64>,
    max_thread: Option<f64>,
}

impl Thresholds {
    /// Whether a threshold on `metric` is set.
    pub(crate) fn sets(&self, metric: SystemMetric) -> bool {
        match metric {
            SystemMetric::Qps => self.qps.is_some(),
            SystemMetric::Concurrency => self.max_thread.is_some(),
            SystemMetric::AvgRt => self.avg_rt.is_some(),
            SystemMetric::Load => self.load.is_some(),
            SystemMetric::CpuUsage => self.cpu.is_some(),
        }
    }

    pub(crate) fn needs_status(&self) -> bool {
        self.load.is_some() || self.cpu.is_some()
    }
}

/// The active system rules.
#[derive(Debug, Default)]
pub(crate) struct SystemTable {
    pub(crate) rules: Vec<Arc<SystemRule>>,
    /// `None` when no threshold is set: the check is off.
    pub(crate) thresholds: Option<Thresholds>,
}

fn merge(into: &mut Option<f64>, v: f64) {
    if v >= 0.0 {
        *into = Some(into.map_or(v, |cur| cur.min(v)));
    }
}

impl SystemTable {
    /// Merges rules by minimum. Unlike Sentinel, a last rule with every field off does not
    /// switch the whole check off: every set threshold counts.
    pub(crate) fn compile(rules: Vec<Arc<SystemRule>>) -> Self {
        let mut t = Thresholds::default();
        for rule in &rules {
            merge(&mut t.load, rule.highest_system_load);
            merge(&mut t.cpu, rule.highest_cpu_usage);
            merge(&mut t.qps, rule.qps);
            merge(&mut t.avg_rt, rule.avg_rt as f64);
            merge(&mut t.max_thread, rule.max_thread as f64);
        }
        let on = t != Thresholds::default();
        Self {
            rules,
            thresholds: on.then_some(t),
        }
    }
}

impl Thresholds {
    /// Sentinel's `SystemRuleManager.checkSystem`, for an inbound call. `Ok(true)`: the call
    /// reserved its place on the inbound node for `maxThread` (give it back with
    /// `StatNode::release` when the call exits).
    ///
    /// `maxThread` blocks, as in Sentinel, when the calls already inside are more than it
    /// (so up to `maxThread + 1` are inside), but exactly: racing calls each reserve their
    /// place with one atomic add before they compare, so they cannot all slip in together.
    /// A call takes one place whatever its batch, and the batch plays no part in the
    /// comparison, as Sentinel counts threads.
    pub(crate) fn check(
        &self,
        inbound: &StatNode,
        now: u64,
        batch: u32,
        status: impl Fn() -> Arc<dyn SystemStatus>,
    ) -> Result<bool, SystemBlock> {
        let block = |metric, threshold, value| {
            Err(SystemBlock {
                metric,
                threshold,
                value,
            })
        };
        if let Some(qps) = self.qps {
            let current = inbound.pass_qps(now);
            if current + f64::from(batch) > qps {
                return block(SystemMetric::Qps, qps, current);
            }
        }
        let concurrency = inbound.concurrency() as f64;
        let mut reserved = false;
        if let Some(max) = self.max_thread {
            let held = inbound.reserve(1);
            reserved = true;
            let before = held.saturating_sub(1) as f64;
            if concurrency > max || before > max {
                inbound.release(1);
                return block(SystemMetric::Concurrency, max, concurrency.max(before));
            }
        }
        let result = self.check_rest(inbound, now, concurrency, status);
        if result.is_err() && reserved {
            inbound.release(1);
        }
        result.map(|()| reserved)
    }

    /// The checks after `maxThread`: average RT, load with BBR, CPU usage.
    fn check_rest(
        &self,
        inbound: &StatNode,
        now: u64,
        concurrency: f64,
        status: impl Fn() -> Arc<dyn SystemStatus>,
    ) -> Result<(), SystemBlock> {
        let block = |metric, threshold, value| {
            Err(SystemBlock {
                metric,
                threshold,
                value,
            })
        };
        if let Some(max) = self.avg_rt {
            let rt = inbound.avg_rt(now);
            if rt > max {
                return block(SystemMetric::AvgRt, max, rt);
            }
        }
        if self.needs_status() {
            let status = status();
            if let Some(max) = self.load {
                let load = status.load_average();
                if load > max && !bbr_allows(inbound, now, concurrency) {
                    return block(SystemMetric::Load, max, load);
                }
            }
            if let Some(max) = self.cpu {
                let cpu = status.cpu_usage();
                if cpu > max {
                    return block(SystemMetric::CpuUsage, max, cpu);
                }
            }
        }
        Ok(())
    }
}

/// Sentinel's `statisticMaxRt`: the response time a window reports before any call
/// completed, and the largest it records.
const STATISTIC_MAX_RT_MS: u64 = 5_000;

/// The BBR check: under high load, admit while concurrency stays within the estimated
/// capacity `maxSuccessQps * minRt / 1000`.
///
/// As in Sentinel, neither input drops below what one call gives: `maxSuccessQps` counts at
/// least one success per bucket, and `minRt` is at least 1 ms and starts from
/// [`STATISTIC_MAX_RT_MS`] while nothing completed. So a service whose calls finish in under
/// a millisecond, or a quiet second, still has a capacity of about 10.
fn bbr_allows(inbound: &StatNode, now: u64, concurrency: f64) -> bool {
    let capacity = bbr_capacity(inbound, now);
    !(concurrency > 1.0 && concurrency > capacity)
}

/// The BBR capacity estimate of [`bbr_allows`]: the calls in flight the service is estimated
/// to sustain.
pub(crate) fn bbr_capacity(inbound: &StatNode, now: u64) -> f64 {
    let max_success_qps = inbound.max_success_qps(now).max(inbound.min_success_qps());
    let min_rt = inbound.min_rt(now).unwrap_or(STATISTIC_MAX_RT_MS).max(1);
    max_success_qps * min_rt as f64 / 1000.0
}
