//! The shadow rule table: every source's shadow rules, compiled with the same family code
//! as the enforced ones (their own controllers and breakers), indexed per resource, with one
//! would-block counter per rule.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::shadow_counter::ShadowCounter;
use super::{
    compile_tables, replace_parts, ResourceNode, ResourceRules, RuleSnapshot, SourceRules, Tables,
};
use crate::block::{reason_of, BlockError};
use crate::family::CompileEnv;
use crate::hash::FastMap;
use crate::rule_ref::RuleRef;
use crate::rule_set::RuleSet;
use crate::rules::RuleFamily;
use crate::system::SystemMetric;

/// A node's cached slot: the shadow table version in the high bits, the index in the low.
const INDEX_BITS: u32 = 24;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
/// The index of "no shadow rules".
const NONE: u64 = INDEX_MASK;

/// Every system metric, in the order of [`ShadowSnapshot::system`].
const METRICS: [SystemMetric; 5] = [
    SystemMetric::Qps,
    SystemMetric::Concurrency,
    SystemMetric::AvgRt,
    SystemMetric::Load,
    SystemMetric::CpuUsage,
];

/// The published shadow rules, beside the enforced ones in the engine's rule snapshot (and
/// swapped with it in the same store).
#[derive(Debug, Default)]
pub(crate) struct ShadowSnapshot {
    /// The rule-table version this shadow table was built at (never 0).
    pub(crate) version: u64,
    /// Each source's shadow part.
    pub(crate) sources: BTreeMap<Arc<str>, SourceRules>,
    pub(crate) tables: Tables,
    index: super::snapshot::SlotIndex,
    resources: Vec<ResourceRules>,
    /// Each rule's counter, by the address of the rule in the compiled tables.
    by_rule: FastMap<usize, Arc<ShadowCounter>>,
    /// The system counters, per entry of [`METRICS`] (when a shadow system rule sets it).
    system: [Option<Arc<ShadowCounter>>; 5],
    /// Every counter, in family and rule order.
    pub(crate) counters: Vec<Arc<ShadowCounter>>,
}

impl ShadowSnapshot {
    /// The shadow rules of `node`'s resource, cached in the node per table version.
    #[inline(always)]
    pub(crate) fn slot_of(&self, node: &ResourceNode) -> Option<&ResourceRules> {
        let cached = node.shadow_slot.load(Ordering::Relaxed);
        if cached >> INDEX_BITS == self.version {
            let index = cached & INDEX_MASK;
            if index == NONE {
                return None;
            }
            return self.resources.get(index as usize);
        }
        self.look_up(node)
    }

    #[cold]
    #[inline(never)]
    fn look_up(&self, node: &ResourceNode) -> Option<&ResourceRules> {
        let tag = self.version << INDEX_BITS;
        let index = self.index.get(&node.name);
        match index {
            Some(i) if (i as u64) < NONE => {
                node.shadow_slot.store(tag | i as u64, Ordering::Relaxed)
            }
            Some(_) => {}
            None => node.shadow_slot.store(tag | NONE, Ordering::Relaxed),
        }
        index.and_then(|i| self.resources.get(i))
    }

    /// The counter of the rule at `address` (`Arc::as_ptr` of a compiled rule, or
    /// `RuleRef::address` of a flow rule).
    #[inline]
    pub(crate) fn counter(&self, address: usize) -> Option<&ShadowCounter> {
        self.by_rule.get(&address).map(|c| &**c)
    }

    /// The counter of a shadow system threshold on `metric`.
    #[inline]
    pub(crate) fn system_counter(&self, metric: SystemMetric) -> Option<&ShadowCounter> {
        let i = METRICS.iter().position(|m| *m == metric)?;
        self.system[i].as_deref()
    }

    /// How many shadow rules of `family` are active, over every source.
    pub(crate) fn count(&self, family: RuleFamily) -> usize {
        self.tables.count(family)
    }

    /// How many shadow rules `source` supplies.
    pub(crate) fn of_source(&self, source: &str) -> usize {
        self.sources.get(source).map_or(0, source_len)
    }
}

/// The number of rules in one source's part.
pub(crate) fn source_len(part: &SourceRules) -> usize {
    [
        part.flow.as_ref().map_or(0, |v| v.len()),
        part.degrade.as_ref().map_or(0, |v| v.len()),
        part.system.as_ref().map_or(0, |v| v.len()),
        part.authority.as_ref().map_or(0, |v| v.len()),
        part.param_flow.as_ref().map_or(0, |v| v.len()),
    ]
    .iter()
    .sum()
}

/// What a payload does to the shadow table: `None` when it carries no shadow section (the
/// table stays), else the next table (`None` when no source has a shadow rule left).
pub(crate) fn next(
    current: Option<&Arc<ShadowSnapshot>>,
    source: &Arc<str>,
    set: Option<Box<RuleSet>>,
    version: u64,
    env: &CompileEnv<'_>,
) -> Option<Option<Arc<ShadowSnapshot>>> {
    let set = set?;
    let mut sources = current.map(|c| c.sources.clone()).unwrap_or_default();
    let mut mine = sources.get(source).cloned().unwrap_or_default();
    let changed = replace_parts(&mut mine, *set);
    if mine.is_empty() {
        sources.remove(source);
    } else {
        sources.insert(source.clone(), mine);
    }
    if sources.is_empty() {
        return Some(None);
    }
    let empty = Tables::default();
    let previous = current.map_or(&empty, |c| &c.tables);
    let tables = compile_tables(&changed, &sources, previous, env);
    // The enforced snapshot's indexing, reused: shadow rules have no regex resources.
    let mut indexed = RuleSnapshot {
        tables,
        ..RuleSnapshot::default()
    };
    indexed.index_resources();
    let mut next = ShadowSnapshot {
        version: version.max(1),
        sources,
        tables: indexed.tables,
        index: indexed.index,
        resources: indexed.resources,
        ..ShadowSnapshot::default()
    };
    next.count_rules(current.map(|c| &**c));
    Some(Some(Arc::new(next)))
}

impl ShadowSnapshot {
    /// Makes a counter for every rule; an equal rule of `previous` hands its counts on.
    fn count_rules(&mut self, previous: Option<&ShadowSnapshot>) {
        let mut carried: FastMap<String, &Arc<ShadowCounter>> = FastMap::default();
        for counter in previous.map_or(&[][..], |p| &p.counters[..]) {
            carried.insert(key_of(counter), counter);
        }
        let add = |address: usize, counter: ShadowCounter, this: &mut Self| {
            if let Some(old) = carried.get(&key_of(&counter)) {
                counter.carry(old);
            }
            let counter = Arc::new(counter);
            if address != 0 {
                this.by_rule.insert(address, counter.clone());
            }
            this.counters.push(counter);
        };
        let tables = &self.tables;
        let mut found = Vec::new();
        for (name, rules) in tables.flow.iter() {
            for rule in rules.rule_refs() {
                let labels = reason_of(&BlockError::Flow {
                    resource: name.clone(),
                    rule: rule.clone(),
                });
                let counter =
                    ShadowCounter::new(RuleFamily::Flow, Some(name.clone()), json(&**rule), labels);
                found.push((RuleRef::address(rule), counter));
            }
        }
        for (name, rules) in &tables.param_flow.by_resource {
            for rule in rules.rule_arcs() {
                let labels = reason_of(&BlockError::ParamFlow {
                    resource: name.clone(),
                    rule: rule.clone(),
                    value: None,
                });
                let counter = ShadowCounter::new(
                    RuleFamily::ParamFlow,
                    Some(name.clone()),
                    json(&**rule),
                    labels,
                );
                found.push((Arc::as_ptr(rule) as usize, counter));
            }
        }
        for (name, breakers) in &tables.degrade.by_resource {
            for breaker in breakers.iter() {
                let labels = reason_of(&BlockError::CircuitBreaker {
                    resource: name.clone(),
                    rule: breaker.rule.clone(),
                    retry_in: None,
                });
                let mut counter = ShadowCounter::new(
                    RuleFamily::Degrade,
                    Some(name.clone()),
                    json(&*breaker.rule),
                    labels,
                );
                counter.breaker = Some(breaker.clone());
                found.push((Arc::as_ptr(&breaker.rule) as usize, counter));
            }
        }
        for rule in &tables.authority.rules {
            let name: Arc<str> = Arc::from(rule.resource.as_str());
            let labels = reason_of(&BlockError::Authority {
                resource: name.clone(),
                rule: rule.clone(),
                origin: String::new(),
            });
            let counter =
                ShadowCounter::new(RuleFamily::Authority, Some(name), json(&**rule), labels);
            found.push((Arc::as_ptr(rule) as usize, counter));
        }
        let mut system = Vec::new();
        if let Some(thresholds) = &tables.system.thresholds {
            let list: Vec<&crate::system::SystemRule> =
                tables.system.rules.iter().map(|r| &**r).collect();
            let rules = json(&list);
            for (i, metric) in METRICS.iter().enumerate() {
                if thresholds.sets(*metric) {
                    let labels = reason_of(&BlockError::System {
                        resource: Arc::from(""),
                        metric: *metric,
                        threshold: 0.0,
                        value: 0.0,
                    });
                    let counter =
                        ShadowCounter::new(RuleFamily::System, None, rules.clone(), labels);
                    system.push((i, counter));
                }
            }
        }
        for (address, counter) in found {
            add(address, counter, self);
        }
        for (i, counter) in system {
            add(0, counter, self);
            self.system[i] = self.counters.last().cloned();
        }
    }
}

/// What identifies a counter across reloads.
fn key_of(counter: &ShadowCounter) -> String {
    format!(
        "{}|{}|{}|{}",
        counter.family,
        counter.resource.as_deref().unwrap_or(""),
        counter.kind,
        counter.rule
    )
}

/// A rule as JSON (rules always serialize; an empty object if one ever did not).
fn json<T: serde::Serialize + ?Sized>(rule: &T) -> Arc<str> {
    Arc::from(serde_json::to_string(rule).unwrap_or_else(|_| "{}".to_owned()))
}
