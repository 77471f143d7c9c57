//! Regular-expression resources: rules whose `resource` is a pattern (Sentinel's
//! `regex: true`), matched against whole resource names.
//!
//! As in Sentinel's `RuleManager`, regex rules are kept apart from the others. A resource
//! learns its regex rules when its rule slot is resolved for a table version (the first call
//! after a reload, never per call): every pattern that matches its whole name gives it the
//! rule as its own, with a limit and state of its own (each matched resource counts its own
//! calls, as Sentinel builds a rule per resource). The resolved slot (its exact rules and
//! the matched ones) is kept in the table version, so later calls read it as they read any
//! other slot. A reload that keeps a regex rule keeps each matched resource's state (its
//! controller, breaker, per-value table), kept per resource name between versions.
//!
//! Resolving takes two short locks (the version's list of resolved names, then the
//! engine's per-name state), once per resource and table version.

use std::sync::{Arc, Mutex, MutexGuard};

use super::resources::ResourceNode;
use super::shared::{MatchedState, MatchedTables};
use super::snapshot::{ResourceRules, RuleSnapshot};
use crate::authority::AuthorityRule;
use crate::circuit_breaker::{CircuitBreaker, DegradeRule, DegradeTable};
use crate::flow::{FlowRef, FlowRule, FlowTable, ResourceFlowRules};
use crate::param_flow::{ParamFlowRule, ParamFlowTable, ResourceParamRules};
use crate::pattern::PatternRule;

macro_rules! pattern_rule {
    ($($rule:ty),*) => {$(
        impl PatternRule for $rule {
            fn resource(&self) -> &str {
                &self.resource
            }
            fn is_regex(&self) -> bool {
                self.regex
            }
            fn retarget(&self, name: &str) -> Self {
                let mut rule = self.clone();
                rule.resource = name.to_owned();
                rule.regex = false;
                rule
            }
        }
    )*};
}

pattern_rule!(FlowRule, DegradeRule, AuthorityRule, ParamFlowRule);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded maps stay consistent whatever panicked while one was held.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl RuleSnapshot {
    /// The slot of `node` if a regex rule matches its name: an index past the exact slots
    /// (see [`RuleSnapshot::slot`]). `None` when no pattern matches.
    pub(crate) fn resolve_regex(&self, node: &ResourceNode) -> Option<usize> {
        let resolved = self.regex.as_deref()?;
        let name = &*node.name;
        let tables = &self.tables;
        let flow = tables.flow.patterns.matching(name);
        let degrade = tables.degrade.patterns.matching(name);
        let param_flow = tables.param_flow.patterns.matching(name);
        let authority = tables.authority.patterns.matching(name).into_iter().next();
        if flow.is_empty() && degrade.is_empty() && param_flow.is_empty() && authority.is_none() {
            return None;
        }
        let mut names = lock(&resolved.names);
        if let Some(&index) = names.get(name) {
            return Some(self.resources.len() + index);
        }
        let matched = {
            let mut state = lock(&node.shared.regex_state);
            let previous = state.get(name).cloned().unwrap_or_default();
            let matched = Arc::new(MatchedTables {
                // Validation refuses relate regex rules: no related node to find; and
                // cluster regex rules: no cluster backend.
                flow: FlowTable::compile(flow, &previous.flow, &|_| None, None),
                degrade: DegradeTable::compile(degrade, &previous.degrade),
                param_flow: ParamFlowTable::compile(param_flow, &previous.param_flow),
            });
            state.insert(node.name.clone(), matched.clone());
            matched
        };
        let exact = self.index.get(name).and_then(|i| self.resources.get(i));
        let slot = merge(exact, &matched, authority, name);
        let index = resolved.slots.push(slot);
        names.insert(node.name.clone(), index);
        Some(self.resources.len() + index)
    }

    /// Calls `f` on each breaker of a regex rule for a resource this version resolved.
    pub(crate) fn each_matched_breaker(
        &self,
        state: &MatchedState,
        mut f: impl FnMut(&CircuitBreaker),
    ) {
        let Some(resolved) = self.regex.as_deref() else {
            return;
        };
        let names = lock(&resolved.names);
        let state = lock(state);
        for name in names.keys() {
            if let Some(matched) = state.get(name) {
                matched.degrade.breakers().for_each(|b| f(b));
            }
        }
    }

    /// The slot at `index`: an exact resource's, or past them a regex-matched one's.
    #[inline]
    pub(crate) fn slot(&self, index: usize) -> Option<&ResourceRules> {
        match self.resources.get(index) {
            Some(slot) => Some(slot),
            None => self.resolved(index),
        }
    }

    #[cold]
    fn resolved(&self, index: usize) -> Option<&ResourceRules> {
        let past = index.checked_sub(self.resources.len())?;
        self.regex.as_deref()?.get(past)
    }
}

/// A resource's exact rules and its regex-matched ones, in one slot. An exact authority
/// rule wins over a matched one (a resource has one).
fn merge(
    exact: Option<&ResourceRules>,
    matched: &MatchedTables,
    authority: Option<Arc<AuthorityRule>>,
    name: &str,
) -> ResourceRules {
    let mut slot = exact.cloned().unwrap_or_default();
    if let Some(rules) = matched.flow.get(name) {
        let flow = ResourceFlowRules::merged(slot.flow.as_deref(), rules);
        slot.plain_qps = flow.only_plain_qps();
        slot.flow = Some(FlowRef::new(flow));
    }
    if let Some(breakers) = matched.degrade.by_resource.get(name) {
        let mut all: Vec<_> = slot.breakers.as_deref().unwrap_or_default().to_vec();
        all.extend(breakers.iter().cloned());
        slot.breakers = Some(all.into());
    }
    if let Some(rules) = matched.param_flow.by_resource.get(name) {
        slot.param = Some(Arc::new(ResourceParamRules::merged(
            slot.param.as_deref(),
            rules,
        )));
    }
    if slot.authority.is_none() {
        slot.authority = authority;
    }
    slot
}

#[cfg(test)]
mod tests {
    use crate::authority::AuthorityRule;
    use crate::circuit_breaker::{BreakerState, DegradeRule};
    use crate::datasource::{Converter, FlowJson};
    use crate::flow::{ControlBehavior, FlowRule};
    use crate::param_flow::{ParamFlowRule, ParamValue};
    use crate::test_support::{burst, engine};
    use crate::{FakeClock, RuleError};

    #[test]
    fn each_matched_resource_gets_its_own_limit_and_names_match_whole() {
        let clock = FakeClock::at_ms(10_000);
        let s = engine(&clock);
        s.flow_rules()
            .load_rules(vec![FlowRule::qps("GET:/order/.*", 2.0).regex(true)])
            .unwrap();
        assert_eq!(burst(&s, "GET:/order/1", 5), 2);
        assert_eq!(burst(&s, "GET:/order/2", 5), 2, "a limit of its own");
        assert_eq!(burst(&s, "GET:/orders", 5), 5, "not matched");
        s.flow_rules()
            .load_rules(vec![FlowRule::qps("order", 0.0).regex(true)])
            .unwrap();
        assert_eq!(
            burst(&s, "GET:/order/3", 5),
            5,
            "a pattern matches whole names"
        );
        assert_eq!(burst(&s, "order", 1), 0);
    }

    #[test]
    fn exact_and_matched_rules_of_one_resource_both_apply() {
        let clock = FakeClock::at_ms(10_000);
        let s = engine(&clock);
        s.flow_rules()
            .load_rules(vec![
                FlowRule::qps("db.users", 5.0),
                FlowRule::qps("db\\..*", 3.0).regex(true),
            ])
            .unwrap();
        assert_eq!(burst(&s, "db.users", 10), 3);
        assert_eq!(burst(&s, "db.orders", 10), 3);
        clock.advance_ms(1_000);
        s.authority_rules()
            .load_rules(vec![
                AuthorityRule::black_list("db\\..*", "crawler").regex(true)
            ])
            .unwrap();
        assert!(s.entry("db.users").origin("crawler").enter().is_err());
        assert!(s.entry("db.users").origin("web").enter().is_ok());
    }

    #[test]
    fn a_reload_that_keeps_a_regex_rule_keeps_each_resource_state() {
        let clock = FakeClock::at_ms(10_000);
        let s = engine(&clock);
        let breaker = DegradeRule::error_count("db\\..*", 0.0, 10)
            .min_request_amount(1)
            .regex(true);
        s.degrade_rules().load_rules(vec![breaker.clone()]).unwrap();
        let param = ParamFlowRule::qps("api:.*", 0, 1.0).regex(true);
        s.param_flow_rules()
            .load_rules(vec![param.clone()])
            .unwrap();
        let mut failed = s.entry("db.a").enter().unwrap();
        failed.set_error();
        drop(failed);
        assert!(s.entry("db.a").enter().is_err(), "db.a's breaker is open");
        assert!(s.entry("db.b").enter().is_ok(), "db.b has its own breaker");
        let user = [ParamValue::from("u")];
        assert!(s.entry("api:x").args(&user).enter().is_ok());
        assert!(s.entry("api:x").args(&user).enter().is_err());
        // Another family changes, then the same rules load again: the state stays.
        s.flow_rules()
            .load_rules(vec![FlowRule::qps("other", 1.0)])
            .unwrap();
        s.degrade_rules().load_rules(vec![breaker]).unwrap();
        s.param_flow_rules().load_rules(vec![param]).unwrap();
        assert!(
            s.entry("db.a").enter().is_err(),
            "still open after the reload"
        );
        assert!(
            s.entry("api:x").args(&user).enter().is_err(),
            "the value's bucket was kept"
        );
        drop(s.entry("db.b").enter());
        let states: Vec<_> = s
            .circuit_breakers()
            .into_iter()
            .map(|(rule, state)| (rule.resource, state))
            .collect();
        assert!(
            states.contains(&("db.a".to_owned(), BreakerState::Open)),
            "{states:?}"
        );
        assert!(
            states.contains(&("db.b".to_owned(), BreakerState::Closed)),
            "{states:?}"
        );
        // A changed rule starts afresh.
        s.degrade_rules()
            .load_rules(vec![DegradeRule::error_count("db\\..*", 0.0, 20)
                .min_request_amount(1)
                .regex(true)])
            .unwrap();
        assert!(s.entry("db.a").enter().is_ok());
    }

    #[test]
    fn patterns_the_regex_crate_cannot_read_and_java_only_combinations_are_refused() {
        let s = crate::Sentinel::new();
        let refused = |result: Result<_, RuleError>| match result {
            Err(RuleError::Invalid { issues, .. }) => {
                issues.iter().map(|i| i.field.clone()).collect::<Vec<_>>()
            }
            other => panic!("expected a refusal, got {other:?}"),
        };
        let look_around = FlowRule::qps("(?<=GET:)/order", 1.0).regex(true);
        assert_eq!(
            refused(s.flow_rules().load_rules(vec![look_around])),
            ["resource"]
        );
        let shaping = FlowRule::qps("GET:.*", 1.0)
            .regex(true)
            .control_behavior(ControlBehavior::WarmUp);
        assert_eq!(
            refused(s.flow_rules().load_rules(vec![shaping])),
            ["controlBehavior"]
        );
        let relate = FlowRule::qps("GET:.*", 1.0).regex(true).relate("db");
        assert_eq!(
            refused(s.flow_rules().load_rules(vec![relate])),
            ["strategy"]
        );
    }

    #[test]
    fn regex_rules_read_and_write_sentinel_json() {
        let set = FlowJson::new()
            .convert(br#"[{"resource":"GET:/.*","count":1,"regex":true}]"#)
            .expect("loads");
        let rules = set.flow.clone().unwrap_or_default();
        assert_eq!(rules, vec![FlowRule::qps("GET:/.*", 1.0).regex(true)]);
        let json = serde_json::to_string(&rules).unwrap_or_default();
        assert!(json.contains(r#""regex":true"#), "{json}");
        let plain = serde_json::to_string(&FlowRule::qps("a", 1.0)).unwrap_or_default();
        assert!(!plain.contains("regex"), "{plain}");
    }
}
