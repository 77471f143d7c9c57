//! Shadow rules: a new limit tried on live traffic without enforcing it.
//!
//! A shadow rule is any rule of any family (flow with every controller, param-flow, circuit
//! breakers, system, authority) loaded into a separate table beside the enforced rules. The
//! engine publishes both in one rule snapshot, so a reload swaps them together. A shadow rule
//! is compiled by the same code as an enforced one, with its **own** state (its warm-up and
//! rate-limiter controller, its param-value counters, its breaker), and it reads the **same**
//! resource statistics the enforced rules read. It never blocks: where an enforced copy would
//! have blocked, it counts a would-block.
//!
//! # Which calls a shadow rule sees
//!
//! The shadow table runs on every call **the enforced rules admitted**, after all of them
//! (authority, system, param-flow, flow, breakers, in Sentinel's slot order) and before the
//! call is counted as a pass; inside the shadow table the same slot order holds, and the
//! first shadow rule that would block counts the call (the later ones are skipped, as they
//! would be if the shadow rules were enforced). A call an enforced rule blocked never reaches
//! the shadow table: once promoted, the shadow rule sits in the same chain behind the rules
//! that blocked it, so it would not have seen that call either. The would-block count is
//! thus "the calls that pass today and the promoted rule would block", and a shadow
//! rate limiter's or breaker's state moves only on calls it would have had to decide.
//!
//! Shadow and enforced rules do not consume each other's tokens: a shadow rule takes no
//! place in the statistics (a would-block is not a block; the call is counted once, as the
//! pass it is), a shadow concurrency rule gives its place back at once, and a shadow rule
//! never borrows from a coming bucket (`prioritized`). A shadow QPS rule of 10 beside an
//! enforced one of 100 lets 100 calls a second through and counts 90 would-blocks.
//!
//! What a shadow rule cannot know: the statistics it reads include the calls it would have
//! blocked. Within one statistics window that changes nothing for a QPS limit (past the
//! limit, every further call is a would-block either way); across windows a rule that reads
//! the previous window (warm-up) or a window that straddles a burst can report more than an
//! enforced copy would have blocked, never fewer calls in the window where the limit is
//! first crossed. See `docs/shadow.md`.
//!
//! # What a shadow rule cannot be
//!
//! A regex resource, a `clusterMode` rule (it would take a cluster's tokens) or a thread-grade
//! param rule (its places are held by the call). These get a typed issue like any invalid
//! rule.
//!
//! # Wire shape
//!
//! Shadow rules live where Sentinel (Java) never looks: the `shadow` section of the combined
//! document, `{"flow": [...], "shadow": {"flow": [...], "degrade": [...]}}`. A Java service
//! ignores unknown keys, so a `shadow: true` flag inside a rule of a list that Java also
//! reads would be enforced there; Sentinel's per-family lists therefore never carry shadow
//! rules. A source that serves only shadow rules can use its own key holding a combined
//! document with just the `shadow` section.
//!
//! # Reading what they would do
//!
//! [`Sentinel::shadow_stats`] and [`Sentinel::shadow_stats_of`] give each shadow rule's
//! would-blocks (this second, the second before, the running total) and a shadow breaker's
//! state and would-be transitions. [`SentinelEvent::ShadowBlocked`] comes at most once per
//! rule per second, [`SentinelEvent::ShadowBreakerStateChanged`] at each would-be transition,
//! and with the `metrics` feature `sentinel_shadow_block_total` counts would-blocks with the
//! labels of `sentinel_block_total`.
//!
//! # Promote and demote
//!
//! [`RuleSet::promote`] moves shadow rules into the enforced set, [`RuleSet::demote`] the
//! other way; [`move_stored_rules`] does either on a store's combined document with
//! compare-and-set, and `sentinel-rules promote` and `demote` call it.
//!
//! [`SentinelEvent::ShadowBlocked`]: crate::SentinelEvent::ShadowBlocked
//! [`SentinelEvent::ShadowBreakerStateChanged`]: crate::SentinelEvent::ShadowBreakerStateChanged

mod check;
mod promote;
mod store;

#[cfg(test)]
mod agreement_tests;
#[cfg(test)]
mod store_tests;
#[cfg(test)]
mod tests;

use crate::engine::ShadowSnapshot;
pub(crate) use check::{check, complete, exit, ShadowCall, SHADOW_BREAKERS, SHADOW_STATE};
pub use promote::{RuleSelector, ShadowMoveError};
pub use store::{move_stored_rules, ShadowMove, ShadowMoved, ShadowStoreError};

use crate::circuit_breaker::BreakerState;
use crate::engine::{Incoming, Sentinel, API_SOURCE};
use crate::rule_set::RuleSet;
use crate::rules::{LoadReport, RuleError, RuleFamily};

/// What one shadow rule would have done, from [`Sentinel::shadow_stats`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ShadowRuleStats {
    /// The rule's family.
    pub family: RuleFamily,
    /// The rule's resource; `None` for system rules (they apply to every inbound resource).
    pub resource: Option<String>,
    /// The rule as a JSON object (for system rules, the list of shadow system rules, whose
    /// thresholds combine).
    pub rule: String,
    /// What would have blocked, as `sentinel_block_total`'s `kind` label spells it (`qps`,
    /// `concurrency`, `slow_ratio`, `rt`, `white`...).
    pub kind: &'static str,
    /// Would-blocks in the current second (engine clock).
    pub blocked_this_second: u64,
    /// Would-blocks in the second before.
    pub blocked_last_second: u64,
    /// Would-blocks since the rule was loaded as a shadow rule (kept across reloads that
    /// keep the rule).
    pub total: u64,
    /// A shadow breaker's state.
    pub breaker_state: Option<BreakerState>,
    /// A shadow breaker's would-be transitions, to OPEN, to HALF_OPEN and to CLOSED.
    pub transitions: [u64; 3],
}

impl Sentinel {
    /// Validates, compiles and publishes `rules` as the `api` source's shadow rules of each
    /// family `rules` carries (its own `shadow` must be `None`), replacing what that source
    /// loaded as shadow rules of those families before; the enforced rules are untouched.
    /// Strict unless the engine was built lenient.
    pub fn load_shadow_rules(&self, rules: RuleSet) -> Result<LoadReport, RuleError> {
        let mut set = RuleSet::new();
        set.shadow = Some(Box::new(rules));
        self.load_rule_set(set)
    }

    /// Validates, compiles and publishes a whole set (enforced families and its shadow
    /// section) as the `api` source's rules of the families it carries, in one swap.
    pub fn load_rule_set(&self, rules: RuleSet) -> Result<LoadReport, RuleError> {
        let incoming = Incoming::unchecked(rules, self.inner.validation);
        self.apply(API_SOURCE, API_SOURCE, incoming)
    }

    /// Every shadow rule's would-blocks and breaker state (see [`crate::shadow`]), in family
    /// and rule order. Empty when no shadow rule is loaded.
    pub fn shadow_stats(&self) -> Vec<ShadowRuleStats> {
        self.shadow_stats_where(|_| true)
    }

    /// [`shadow_stats`](Self::shadow_stats) of the rules of one resource.
    pub fn shadow_stats_of(&self, resource: &str) -> Vec<ShadowRuleStats> {
        self.shadow_stats_where(|r| r == Some(resource))
    }

    fn shadow_stats_where(&self, keep: impl Fn(Option<&str>) -> bool) -> Vec<ShadowRuleStats> {
        let Some(shadow) = self.shadow_snapshot() else {
            return Vec::new();
        };
        let now = self.clock().now_ms();
        shadow
            .counters
            .iter()
            .filter(|c| keep(c.resource.as_deref()))
            .map(|c| {
                let (this, last) = c.per_second(now);
                ShadowRuleStats {
                    family: c.family,
                    resource: c.resource.as_deref().map(str::to_owned),
                    rule: c.rule.to_string(),
                    kind: c.kind,
                    blocked_this_second: this,
                    blocked_last_second: last,
                    total: c.total(),
                    breaker_state: c.breaker.as_ref().map(|b| b.state()),
                    transitions: c.transitions(),
                }
            })
            .collect()
    }

    /// The active shadow rules, over every source (what the shadow table was compiled from).
    pub fn shadow_rules(&self) -> RuleSet {
        let Some(shadow) = self.shadow_snapshot() else {
            return RuleSet::new();
        };
        let t = &shadow.tables;
        fn list<H: std::ops::Deref>(rules: &[H]) -> Option<Vec<H::Target>>
        where
            H::Target: Clone,
        {
            (!rules.is_empty()).then(|| crate::family::copies(rules))
        }
        let mut set = RuleSet::new();
        set.flow = list(&t.flow.rules);
        set.degrade = list(&t.degrade.rules);
        set.system = list(&t.system.rules);
        set.authority = list(&t.authority.rules);
        set.param_flow = list(&t.param_flow.rules);
        set
    }

    /// How many shadow rules of `family` are active, over every source.
    pub fn shadow_rule_count(&self, family: RuleFamily) -> usize {
        self.shadow_snapshot().map_or(0, |s| s.count(family))
    }

    /// How many shadow rules the source named `source` supplies (`api` for
    /// [`RuleManager::load_rules`](crate::RuleManager::load_rules) and its siblings).
    pub fn shadow_rules_of_source(&self, source: &str) -> usize {
        self.shadow_snapshot().map_or(0, |s| s.of_source(source))
    }

    fn shadow_snapshot(&self) -> Option<std::sync::Arc<ShadowSnapshot>> {
        self.inner.shared.rules.load().shadow.clone()
    }
}
