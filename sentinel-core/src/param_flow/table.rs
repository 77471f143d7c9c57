//! The compiled param-flow table and the param-flow check.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::rule::{ParamControlBehavior, ParamFlowGrade, ParamFlowRule};
use super::slot::{release, reserve, space_out, take_tokens, MAX_TOKENS};
use super::value::ParamValue;
use super::values::{Place, Reuse, ValueTable};
use crate::clock::Clock;
use crate::hash::FastMap;
use crate::pattern::Patterns;

/// The arguments of one call.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CallArgs<'a> {
    pub(crate) args: &'a [ParamValue<'a>],
    pub(crate) attachments: &'a [(&'a str, ParamValue<'a>)],
}

impl<'a> CallArgs<'a> {
    pub(crate) fn is_empty(&self) -> bool {
        self.args.is_empty() && self.attachments.is_empty()
    }

    /// The argument a rule selects, if the call has it. A negative index counts from the
    /// end (Sentinel's `applyRealParamIdx`, resolved per call instead of once per rule).
    fn select(&self, select: &Select) -> Option<ParamValue<'a>> {
        match select {
            Select::Index(i) => {
                let len = self.args.len();
                let at = if *i < 0 {
                    len.checked_sub(i.unsigned_abs() as usize)?
                } else {
                    *i as usize
                };
                self.args.get(at).copied()
            }
            Select::Key(key) => self
                .attachments
                .iter()
                .find(|(k, _)| *k == &**key)
                .map(|(_, v)| *v),
        }
    }
}

/// A place a thread-grade rule holds for a call: given back when dropped (the entry exits,
/// or a later check blocks the call).
#[derive(Debug)]
pub(crate) struct Hold {
    values: Arc<ValueTable>,
    slot: usize,
}

impl Drop for Hold {
    fn drop(&mut self) {
        release(self.values.state(self.slot));
    }
}

/// The places a call holds, usually none.
#[derive(Debug, Default)]
pub(crate) enum Holds {
    #[default]
    None,
    One(Hold),
    Many(Vec<Hold>),
}

impl Holds {
    fn push(&mut self, hold: Hold) {
        *self = match std::mem::take(self) {
            Holds::None => Holds::One(hold),
            Holds::One(first) => Holds::Many(vec![first, hold]),
            Holds::Many(mut all) => {
                all.push(hold);
                Holds::Many(all)
            }
        };
    }
}

#[derive(Debug, Clone)]
enum Select {
    Index(i32),
    Key(Box<str>),
}

#[derive(Debug, Clone, Copy)]
enum Check {
    /// Token bucket: `burst` on top of the value's count, per `duration_ms`.
    Tokens { burst: u64, duration_ms: u64 },
    /// Uniform spacing over `duration_ns`, queueing less than `max_queue_ns`.
    Spacing { duration_ns: u64, max_queue_ns: u64 },
    /// Calls in flight.
    Thread,
}

const NANOS_PER_MS: u64 = 1_000_000;

impl Select {
    fn of(rule: &ParamFlowRule) -> Self {
        match (&rule.param_key, rule.param_idx) {
            (Some(key), _) => Select::Key(key.as_str().into()),
            (None, index) => Select::Index(index.unwrap_or(0)),
        }
    }
}

impl Check {
    fn of(rule: &ParamFlowRule) -> Self {
        let duration_ms = u64::from(rule.duration_in_sec.max(1)) * 1000;
        match (rule.grade, rule.control_behavior) {
            (ParamFlowGrade::Thread, _) => Check::Thread,
            (ParamFlowGrade::Qps, ParamControlBehavior::RateLimiter) => Check::Spacing {
                duration_ns: duration_ms * NANOS_PER_MS,
                max_queue_ns: u64::from(rule.max_queueing_time_ms) * NANOS_PER_MS,
            },
            // Sentinel's param checker runs the token bucket for every behaviour but the
            // rate limiter (warm-up included).
            (ParamFlowGrade::Qps, _) => Check::Tokens {
                burst: u64::from(rule.burst_count),
                duration_ms,
            },
        }
    }

    /// After how long unused a value's state is that of a fresh value, for the smallest
    /// positive count among the rule's and its items' (the slowest to refill).
    fn reuse(self, smallest_count: u64) -> Reuse {
        let count = smallest_count.max(1);
        match self {
            Check::Thread => Reuse::WhenIdle,
            // A whole duration refills `count` tokens; the burst takes more durations.
            Check::Tokens { burst, duration_ms } => Reuse::IdleFor(
                duration_ms.saturating_mul(1 + burst.div_ceil(count.min(MAX_TOKENS))),
            ),
            // The last call's time is at most the queue ahead of its use; one spacing on.
            Check::Spacing {
                duration_ns,
                max_queue_ns,
            } => Reuse::IdleFor((max_queue_ns + duration_ns / count).div_ceil(NANOS_PER_MS)),
        }
    }
}

/// The per-value table a rule needs.
fn value_table(rule: &ParamFlowRule) -> ValueTable {
    let smallest = rule
        .param_flow_item_list
        .iter()
        .map(|item| u64::try_from(item.count).unwrap_or(0))
        .chain([rule.count as u64])
        .filter(|&c| c > 0)
        .min()
        .unwrap_or(1);
    let duration_ms = u64::from(rule.duration_in_sec.max(1)) * 1000;
    ValueTable::new(
        rule.capacity(),
        Check::of(rule).reuse(smallest),
        duration_ms.min(60_000),
    )
}

/// One compiled rule.
#[derive(Debug, Clone)]
pub(crate) struct CompiledParamRule {
    pub(crate) rule: Arc<ParamFlowRule>,
    select: Select,
    check: Check,
    /// The rule's count per value, as an integer (Sentinel truncates it too).
    count: u64,
    /// Exception items: fingerprint and count, sorted by fingerprint.
    items: Box<[(u64, u64)]>,
    values: Arc<ValueTable>,
}

/// A call a param-flow rule blocked: the rule and the hot value.
#[derive(Debug)]
pub(crate) struct ParamBlock<'r, 'a> {
    pub(crate) rule: &'r Arc<ParamFlowRule>,
    pub(crate) value: ParamValue<'a>,
}

impl CompiledParamRule {
    fn compile(rule: &Arc<ParamFlowRule>, values: Arc<ValueTable>) -> Self {
        // Two items for one value: the last one counts, as in Sentinel and sentinel-golang.
        let mut items: FastMap<u64, u64> = FastMap::default();
        for item in &rule.param_flow_item_list {
            let (Ok(value), Ok(count)) = (item.value(), u64::try_from(item.count)) else {
                continue;
            };
            items.insert(value.as_value().fingerprint(), count);
        }
        let mut items: Vec<(u64, u64)> = items.into_iter().collect();
        items.sort_unstable();
        Self {
            // A count past `u64` saturates (`as` does); one past the bucket's size acts as it.
            count: rule.count as u64,
            rule: rule.clone(),
            select: Select::of(rule),
            check: Check::of(rule),
            items: items.into_boxed_slice(),
            values,
        }
    }

    /// The count of a value: its item's, or the rule's.
    #[inline]
    fn count_of(&self, fingerprint: u64) -> u64 {
        if self.items.is_empty() {
            return self.count;
        }
        match self.items.binary_search_by_key(&fingerprint, |(fp, _)| *fp) {
            Ok(i) => self.items[i].1,
            Err(_) => self.count,
        }
    }

    /// Checks one call: `Some(wait_ns)` when it passes.
    #[inline]
    fn check(
        &self,
        value: ParamValue<'_>,
        now: &Now<'_>,
        batch: u32,
        holds: &mut Holds,
    ) -> Option<u64> {
        let fingerprint = value.fingerprint();
        let count = self.count_of(fingerprint);
        let acquire = u64::from(batch);
        let place = self.values.slot(fingerprint, now.ms);
        // A value the table does not track is checked as a first call (see `values`).
        let fresh = AtomicU64::new(0);
        let state = match place {
            Place::Slot(slot) => self.values.state(slot),
            Place::Untracked => &fresh,
        };
        match self.check {
            Check::Tokens { burst, duration_ms } => {
                let tokens = count.min(MAX_TOKENS);
                let max = tokens.saturating_add(burst).min(MAX_TOKENS);
                take_tokens(state, now.ms, tokens, max, duration_ms, acquire).then_some(0)
            }
            Check::Spacing {
                duration_ns,
                max_queue_ns,
            } => {
                if count == 0 {
                    return None;
                }
                // Sentinel: round(1000 * acquire * durationInSec / count) ms; here in
                // nanoseconds, in integers that cannot overflow.
                let cost = (u128::from(acquire) * u128::from(duration_ns) + u128::from(count / 2))
                    / u128::from(count);
                space_out(
                    state,
                    now.nanos(),
                    u64::try_from(cost).unwrap_or(u64::MAX),
                    max_queue_ns,
                )
            }
            Check::Thread => {
                // A full table of values in flight blocks a new one (see `values`).
                let Place::Slot(slot) = place else {
                    return None;
                };
                // Sentinel counts one thread per call and leaves the batch out of the
                // comparison (`++threadCount <= threshold`).
                if !reserve(state, count, 1) {
                    return None;
                }
                holds.push(Hold {
                    values: self.values.clone(),
                    slot,
                });
                Some(0)
            }
        }
    }
}

/// The time of one check: milliseconds, and nanoseconds read only if a rule needs them.
#[derive(Debug)]
pub(crate) struct Now<'c> {
    ms: u64,
    clock: &'c dyn Clock,
}

impl<'c> Now<'c> {
    pub(crate) fn new(ms: u64, clock: &'c dyn Clock) -> Self {
        Self { ms, clock }
    }

    fn nanos(&self) -> u64 {
        self.clock.now_nanos()
    }
}

/// The param-flow rules of one resource.
#[derive(Debug, Default)]
pub(crate) struct ResourceParamRules {
    rules: Vec<CompiledParamRule>,
}

impl ResourceParamRules {
    /// The rules, in check order.
    pub(crate) fn rule_arcs(&self) -> impl Iterator<Item = &Arc<ParamFlowRule>> {
        self.rules.iter().map(|c| &c.rule)
    }

    /// A resource's exact rules and the regex rules that match it, together.
    pub(crate) fn merged(exact: Option<&ResourceParamRules>, matched: &ResourceParamRules) -> Self {
        let mut rules = exact.map(|e| e.rules.clone()).unwrap_or_default();
        rules.extend(matched.rules.iter().cloned());
        Self { rules }
    }
}

impl ResourceParamRules {
    /// Checks every rule whose argument the call has. `Ok` gives the longest wait (ns) of a
    /// rate-limiter rule; places thread-grade rules took go into `holds`.
    #[inline]
    pub(crate) fn check<'r, 'a>(
        &'r self,
        args: &CallArgs<'a>,
        now: &Now<'_>,
        batch: u32,
        holds: &mut Holds,
    ) -> Result<u64, ParamBlock<'r, 'a>> {
        let mut wait_ms = 0;
        for compiled in &self.rules {
            let Some(value) = args.select(&compiled.select) else {
                continue;
            };
            let checked = if let ParamValue::List(items) = value {
                match compiled.check_list(items, now, batch, holds) {
                    Ok(wait) => Some(wait),
                    Err(hot) => {
                        return Err(ParamBlock {
                            rule: &compiled.rule,
                            value: hot,
                        })
                    }
                }
            } else {
                compiled.check(value, now, batch, holds)
            };
            match checked {
                Some(wait) => wait_ms = wait_ms.max(wait),
                None => {
                    return Err(ParamBlock {
                        rule: &compiled.rule,
                        value,
                    })
                }
            }
        }
        Ok(wait_ms)
    }
}

impl CompiledParamRule {
    /// Checks each element of a list argument (and of a list in it), as Sentinel checks
    /// each element of a collection or array: the longest wait, or the first hot element.
    /// The elements before a hot one keep what they took, as in Sentinel; the places of
    /// thread-grade elements are in `holds`, given back with the blocked call's.
    #[cold]
    #[inline(never)]
    fn check_list<'a>(
        &self,
        items: &'a [ParamValue<'a>],
        now: &Now<'_>,
        batch: u32,
        holds: &mut Holds,
    ) -> Result<u64, ParamValue<'a>> {
        let mut wait_ms = 0;
        for &item in items {
            let wait = match item {
                ParamValue::List(inner) => self.check_list(inner, now, batch, holds)?,
                item => self.check(item, now, batch, holds).ok_or(item)?,
            };
            wait_ms = wait_ms.max(wait);
        }
        Ok(wait_ms)
    }
}

/// Every active param-flow rule, compiled.
#[derive(Debug, Default)]
pub(crate) struct ParamFlowTable {
    pub(crate) rules: Vec<Arc<ParamFlowRule>>,
    pub(crate) by_resource: FastMap<Arc<str>, Arc<ResourceParamRules>>,
    /// Each rule's per-value state, kept for an equal rule of the next table.
    values: FastMap<Arc<ParamFlowRule>, Arc<ValueTable>>,
    /// The regex rules, matched per resource (see `engine::regex`).
    pub(crate) patterns: Patterns<ParamFlowRule>,
}

impl ParamFlowTable {
    /// Compiles deduplicated, validated rules. A rule equal to one in `previous` keeps its
    /// per-value state (its buckets, spacing and calls in flight).
    pub(crate) fn compile(rules: Vec<Arc<ParamFlowRule>>, previous: &ParamFlowTable) -> Self {
        let mut values = FastMap::with_capacity_and_hasher(rules.len(), Default::default());
        let mut grouped: FastMap<Arc<str>, Vec<CompiledParamRule>> = FastMap::default();
        for rule in rules.iter().filter(|r| r.checked_locally() && !r.regex) {
            let table = previous
                .values
                .get(rule)
                .cloned()
                .unwrap_or_else(|| Arc::new(value_table(rule)));
            values.insert(rule.clone(), table.clone());
            grouped
                .entry(Arc::from(rule.resource.as_str()))
                .or_default()
                .push(CompiledParamRule::compile(rule, table));
        }
        let by_resource = grouped
            .into_iter()
            .map(|(resource, rules)| (resource, Arc::new(ResourceParamRules { rules })))
            .collect();
        Self {
            patterns: Patterns::of(rules.iter().filter(|r| r.checked_locally())),
            rules,
            by_resource,
            values,
        }
    }

    /// The heap bytes of every rule's per-value table.
    pub(crate) fn value_bytes(&self) -> usize {
        self.values.values().map(|t| t.bytes()).sum()
    }
}
