//! What the engine shows besides enforcing: a node's ended seconds (`seconds_of`, which
//! `Sentinel::resource_seconds` and the series read), and the read-only views the dashboard
//! transport (`sentinel-transport`) and the console (`sentinel-console`) read besides the
//! resources: the inbound node's seconds, system readings, each source's rules, cluster
//! slots.

use std::ops::Deref;
use std::sync::Arc;

use super::Sentinel;
use crate::stat::{SecondStats, StatNode};

/// The ended, non-empty seconds of `stat` starting in `[from_ms, to_ms)`, within the minute
/// the windows keep.
pub(crate) fn seconds_of(stat: &StatNode, now: u64, from_ms: u64, to_ms: u64) -> Vec<SecondStats> {
    let this_second = now - now % 1000;
    let oldest = this_second.saturating_sub(59_000);
    let first = from_ms.max(oldest).div_ceil(1000) * 1000;
    let end = to_ms.min(this_second);
    (first..end)
        .step_by(1000)
        .map(|second| stat.second_counts(second))
        .filter(|s| !s.is_empty())
        .collect()
}

/// Read-only views for the dashboard transport (`sentinel-transport`) and the console
/// (`sentinel-console`): what they read besides the resources.
impl Sentinel {
    /// The ended, non-empty seconds of the global inbound node (every inbound call; Java's
    /// `__total_inbound_traffic__`) starting in `[from_ms, to_ms)`, as
    /// [`resource_seconds`](Self::resource_seconds) gives a resource's.
    pub fn inbound_seconds(&self, from_ms: u64, to_ms: u64) -> Vec<SecondStats> {
        let now = self.inner.shared.clock.now_ms();
        seconds_of(&self.inner.shared.inbound, now, from_ms, to_ms)
    }

    /// The system load average and CPU usage (0.0 to 1.0) that system rules read now. The
    /// first call starts sampling `/proc` unless a status source was injected.
    pub fn system_load_and_cpu(&self) -> (f64, f64) {
        let status = self.inner.shared.system_status();
        (status.load_average(), status.cpu_usage())
    }

    /// The rules each rule source contributes to the union in force, by source name (a data
    /// source's name, or `api` for [`load_rules`](crate::RuleManager::load_rules) calls),
    /// sorted by name. A family a source does not carry is `None` in its set. Read from one
    /// rule table, so every source's part is from the same version.
    pub fn rules_by_source(&self) -> Vec<(String, crate::rule_set::RuleSet)> {
        fn list<H: Deref>(part: &Option<Arc<Vec<H>>>) -> Option<Vec<H::Target>>
        where
            H::Target: Clone,
        {
            part.as_deref().map(|rules| crate::family::copies(rules))
        }
        let of = |part: &super::SourceRules| crate::rule_set::RuleSet {
            flow: list(&part.flow),
            degrade: list(&part.degrade),
            system: list(&part.system),
            authority: list(&part.authority),
            param_flow: list(&part.param_flow),
            shadow: None,
        };
        let snapshot = self.inner.shared.rules.load();
        let mut sets: std::collections::BTreeMap<String, crate::rule_set::RuleSet> = snapshot
            .sources
            .iter()
            .map(|(name, part)| (name.to_string(), of(part)))
            .collect();
        // A source's shadow rules, in its set's shadow section.
        for (name, part) in snapshot.shadow.iter().flat_map(|s| s.sources.iter()) {
            sets.entry(name.to_string()).or_default().shadow = Some(Box::new(of(part)));
        }
        sets.into_iter().collect()
    }

    /// The system load average and CPU usage (in [0, 1]) that system rules check, once the
    /// engine has started reading them (the first system rule starts the sampler, or a
    /// status given to [`SentinelBuilder::system_status`](super::SentinelBuilder::system_status)); `None` before.
    pub fn system_readings(&self) -> Option<(f64, f64)> {
        self.inner
            .shared
            .system_status
            .get()
            .map(|status| (status.load_average(), status.cpu_usage()))
    }

    /// Whether a cluster backend decides `clusterMode` flow rules
    /// ([`SentinelBuilder::cluster_backend`](super::SentinelBuilder::cluster_backend)).
    pub fn has_cluster_backend(&self) -> bool {
        self.inner.cluster.is_some()
    }

    /// The BBR capacity estimate system protection compares calls in flight with under high
    /// load (`maxSuccessQps x minRt / 1000` of all inbound calls, with Sentinel's floors).
    pub fn system_capacity(&self) -> f64 {
        let now = self.inner.shared.clock.now_ms();
        crate::system::bbr_capacity(&self.inner.shared.inbound, now)
    }

    /// The slot of every cluster rule in force (its spec, lease, live replicas and what the
    /// store's window had left), when a cluster backend is installed; sorted by `flowId`.
    pub fn cluster_slots(&self) -> Vec<Arc<crate::cluster::ClusterSlot>> {
        let snapshot = self.inner.shared.rules.load();
        let mut slots = snapshot.tables.flow.cluster_slots();
        slots.sort_by_key(|s| s.spec().flow_id);
        slots
    }
}
