//! The common call's fast path: what the rule table says of a call with no rule, or with one
//! plain QPS rule and nothing else, cached in the resource node for one table version so
//! that such a call reads no rule table at all.

use std::sync::atomic::Ordering;

use crate::engine::{ResourceNode, ResourceRules, RuleSnapshot};
use crate::flow::FlowRule;
use crate::rule_ref::RuleRef;

/// What the rule table says of an outbound call before its statistics are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fast {
    /// No rule applies: it passes.
    Pass,
    /// One plain QPS rule, and nothing else, applies: the call passes while the passes of
    /// the current second plus its batch stay within this limit ([`limit_of`] the rule's
    /// count).
    Qps(u64),
    /// Anything else: the full checks.
    Full,
}

/// [`ResourceNode::fast`]: the table version's low 32 bits in the high half of the word, the
/// verdict in the low half: these two values, or a QPS limit.
const PASS: u64 = u32::MAX as u64;
const FULL: u64 = PASS - 1;
/// The largest QPS limit the cache holds. A rule of a larger count is cached with this
/// limit, and a call past it takes the full checks, which read the exact count.
pub(super) const LIMIT_CAP: u64 = FULL - 1;
/// The verdict of a node that has not cached one: take the full checks (whatever the
/// version, so the tag never matters).
pub(crate) const UNCACHED: u64 = (PASS << 32) | FULL;

/// A QPS count as a limit on whole passes: with whole passes, `passes + batch <= count`
/// holds exactly when `passes + batch <= floor(count)`. Capped at [`LIMIT_CAP`]; `None` for
/// a count below zero (or NaN), which the full checks handle.
pub(super) fn limit_of(count: f64) -> Option<u64> {
    // `as` saturates: a count past u64::MAX is capped like any count past the cap.
    (count >= 0.0).then(|| (count.floor() as u64).min(LIMIT_CAP))
}

impl Fast {
    /// The verdict `snapshot` gives an outbound call of a resource whose rules in it are
    /// `rules`.
    fn of(snapshot: &RuleSnapshot, rules: Option<&ResourceRules>) -> Self {
        if snapshot.shadow.is_some() {
            return Fast::Full;
        }
        match rules {
            None => Fast::Pass,
            Some(r) if r.authority.is_none() && r.param.is_none() && r.breakers.is_none() => {
                r.plain_qps.and_then(limit_of).map_or(Fast::Full, Fast::Qps)
            }
            Some(_) => Fast::Full,
        }
    }

    /// The verdict `node` cached for the rule table of `version` (the engine's
    /// `rules_version`, read with acquire: a reload publishes its table, then its version,
    /// so a call that sees the new version finds the new table), if it did.
    #[inline(always)]
    pub(super) fn cached(node: &ResourceNode, version: u64) -> Option<Self> {
        let word = node.fast.load(Ordering::Relaxed);
        ((word >> 32) as u32 == version as u32).then_some(match word & PASS {
            PASS => Fast::Pass,
            FULL => Fast::Full,
            limit => Fast::Qps(limit),
        })
    }

    /// The verdict `snapshot` gives an outbound call of `node`, cached in the node. Racing
    /// calls may cache an older table's verdict over a newer one: the next call then finds
    /// the version tag stale and caches again.
    pub(super) fn refresh(snapshot: &RuleSnapshot, node: &ResourceNode) -> Self {
        let fast = Fast::of(snapshot, node.rules_in(snapshot));
        let verdict = match fast {
            Fast::Pass => PASS,
            Fast::Full => FULL,
            Fast::Qps(limit) => limit,
        };
        node.fast.store(
            (u64::from(snapshot.version as u32) << 32) | verdict,
            Ordering::Relaxed,
        );
        fast
    }
}

/// The plain QPS rule of `limit` the fast path found, if the table still holds such a rule
/// and nothing else for the resource (it may have changed since).
#[cold]
pub(super) fn plain_rule(
    snapshot: &RuleSnapshot,
    rules: Option<&ResourceRules>,
    limit: u64,
) -> Option<RuleRef<FlowRule>> {
    if Fast::of(snapshot, rules) != Fast::Qps(limit) {
        return None;
    }
    rules?.flow.as_ref()?.only_rule().cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authority::AuthorityRule;
    use crate::test_support::engine;
    use crate::FakeClock;

    #[test]
    fn a_limit_is_the_count_rounded_down_capped() {
        assert_eq!(limit_of(0.0), Some(0));
        assert_eq!(limit_of(0.5), Some(0));
        assert_eq!(limit_of(10.0), Some(10));
        assert_eq!(limit_of(10.9), Some(10));
        assert_eq!(limit_of(1e12), Some(LIMIT_CAP));
        assert_eq!(limit_of(f64::INFINITY), Some(LIMIT_CAP));
        assert_eq!(limit_of(-1.0), None);
        assert_eq!(limit_of(f64::NAN), None);
    }

    #[test]
    fn a_handle_sees_each_reload_at_its_next_call() {
        let clock = FakeClock::at_ms(10_000);
        let s = engine(&clock);
        let handle = s.resource("r");
        // Cached: no rule.
        drop(handle.entry().enter().unwrap());
        s.flow_rules()
            .load_rules(vec![FlowRule::qps("r", 1.0)])
            .unwrap();
        clock.advance_ms(1_000);
        drop(handle.entry().enter().unwrap());
        assert!(handle.entry().enter().is_err(), "the new QPS rule blocks");
        // Cached: a limit of 1. A rule that is not plain replaces it.
        s.authority_rules()
            .load_rules(vec![AuthorityRule::black_list("r", "bad")])
            .unwrap();
        s.flow_rules().load_rules(vec![]).unwrap();
        assert!(handle.entry().origin("bad").enter().is_err());
        drop(handle.entry().origin("good").enter().unwrap());
        s.authority_rules().load_rules(vec![]).unwrap();
        drop(handle.entry().origin("bad").enter().unwrap());
    }

    #[test]
    fn a_node_made_before_a_reload_and_untouched_since_sees_it() {
        let clock = FakeClock::at_ms(10_000);
        let s = engine(&clock);
        s.flow_rules()
            .load_rules(vec![FlowRule::qps("r", 0.0)])
            .unwrap();
        let handle = s.resource("r");
        assert!(handle.entry().enter().is_err());
        for _ in 0..3 {
            s.flow_rules()
                .load_rules(vec![FlowRule::qps("r", 0.0)])
                .unwrap();
        }
        s.flow_rules().load_rules(vec![]).unwrap();
        drop(handle.entry().enter().unwrap());
    }

    #[test]
    fn a_count_past_the_cached_cap_is_decided_exactly() {
        let clock = FakeClock::at_ms(10_000);
        let s = engine(&clock);
        // 5e9 is past the cap (2^32 - 3): a call past the cap takes the full checks.
        s.flow_rules()
            .load_rules(vec![FlowRule::qps("r", 5e9)])
            .unwrap();
        let handle = s.resource("r");
        // A round counts at most 2^32 - 2 passes per stripe: two rounds of the window.
        drop(handle.entry().batch(u32::MAX).enter().unwrap());
        clock.advance_ms(500);
        drop(handle.entry().batch(700_000_000).enter().unwrap());
        assert_eq!(s.resource_stats("r").unwrap().pass_qps, 4_994_967_294.0);
        assert!(handle.entry().batch(10_000_000).enter().is_err());
        drop(handle.entry().batch(5_000_000).enter().unwrap());
        // A fractional count: whole passes up to its floor.
        s.flow_rules()
            .load_rules(vec![FlowRule::qps("q", 2.9)])
            .unwrap();
        let q = s.resource("q");
        drop(q.entry().enter().unwrap());
        drop(q.entry().enter().unwrap());
        assert!(q.entry().enter().is_err());
    }
}
