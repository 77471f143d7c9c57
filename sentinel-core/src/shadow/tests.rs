//! Shadow rules on the fake clock: for each family, a shadow rule counts exactly the calls an
//! enforced copy blocks over a scripted schedule while every call passes, and once promoted
//! it blocks exactly those.

use std::sync::{Arc, Mutex};

use crate::authority::AuthorityRule;
use crate::circuit_breaker::{BreakerState, DegradeRule};
use crate::flow::{ControlBehavior, FlowRule, CONTEXT_DEFAULT_NAME};
use crate::param_flow::{ParamFlowRule, ParamValue};
use crate::system::SystemRule;
use crate::test_support::engine;
use crate::{Admission, Clock, FakeClock, RuleFamily, RuleSet, Sentinel, SentinelEvent};

use super::{RuleSelector, ShadowMoveError};

/// One scripted call: after `gap_ms`, from `origin`, with argument `arg`, lasting `rt_ms`,
/// failing when `error`.
#[derive(Clone, Copy)]
struct Call {
    gap_ms: u64,
    origin: &'static str,
    arg: i128,
    rt_ms: u64,
    error: bool,
}

const CALL: Call = Call {
    gap_ms: 0,
    origin: "",
    arg: 0,
    rt_ms: 0,
    error: false,
};

/// `n` calls `gap_ms` apart.
fn every(n: usize, gap_ms: u64) -> Vec<Call> {
    vec![Call { gap_ms, ..CALL }; n]
}

const START_MS: u64 = 100_000;

/// Runs `calls` on `r`: for each, whether it was blocked and whether a shadow rule counted it.
fn run(s: &Sentinel, clock: &FakeClock, calls: &[Call], inbound: bool) -> (Vec<bool>, Vec<bool>) {
    let (mut blocked, mut shadowed) = (Vec::new(), Vec::new());
    // The schedule is absolute: a queued call waits virtually (the fake clock jumps to its
    // slot), and the next call still comes when the schedule says, as on a real service.
    let mut t = clock.now_ms();
    for call in calls {
        t += call.gap_ms;
        clock.set_ms(t);
        let before = shadow_total(s);
        let args = [ParamValue::Int(call.arg)];
        let mut builder = s.entry("r").origin(call.origin).args(&args);
        if inbound {
            builder = builder.inbound();
        }
        let admitted = builder.try_enter();
        shadowed.push(shadow_total(s) > before);
        blocked.push(admitted.is_err());
        let mut entry = match admitted {
            Ok(Admission::Now(entry)) => entry,
            Ok(Admission::Queued(queued)) => queued.start(),
            Err(_) => continue,
        };
        t += call.rt_ms;
        clock.set_ms(t);
        if call.error {
            entry.set_error();
        }
        drop(entry);
    }
    (blocked, shadowed)
}

fn shadow_total(s: &Sentinel) -> u64 {
    s.shadow_stats().iter().map(|r| r.total).sum()
}

/// The heart of every family's test: `rules` as shadow rules report exactly what they block
/// when enforced on another engine, every call passing; promoted, they block exactly that.
fn shadow_matches_enforced(rules: RuleSet, calls: &[Call], inbound: bool) -> Vec<bool> {
    let clock = FakeClock::at_ms(START_MS);
    let enforced = engine(&clock);
    enforced.load_rule_set(rules.clone()).unwrap();
    let (expected, none) = run(&enforced, &clock, calls, inbound);
    assert!(
        none.iter().all(|s| !s),
        "no shadow rule on the enforced engine"
    );
    assert!(
        expected.iter().any(|b| *b),
        "the schedule must block some calls"
    );
    assert!(
        expected.iter().any(|b| !b),
        "the schedule must pass some calls"
    );

    let clock = FakeClock::at_ms(START_MS);
    let shadowed = engine(&clock);
    shadowed.load_shadow_rules(rules.clone()).unwrap();
    let (blocked, would) = run(&shadowed, &clock, calls, inbound);
    assert!(blocked.iter().all(|b| !b), "a shadow rule never blocks");
    assert_eq!(
        would, expected,
        "would-blocks equal an enforced copy's blocks"
    );

    // Promote every shadow rule of each family, on the engine that ran them.
    let mut set = RuleSet::new();
    set.shadow = Some(Box::new(shadowed.shadow_rules()));
    for family in rules.families() {
        set.promote(&RuleSelector::new(family)).unwrap();
    }
    shadowed.load_rule_set(set).unwrap();
    assert!(shadowed.shadow_stats().is_empty());
    // Later, with every window and controller at rest, at the same place in the windows.
    clock.set_ms(START_MS + (clock.now_ms() / 600_000 + 1) * 600_000);
    let (promoted, _) = run(&shadowed, &clock, calls, inbound);
    assert_eq!(
        promoted, would,
        "the promoted rules block exactly the would-blocks"
    );
    would
}

fn flow(rule: FlowRule) -> RuleSet {
    RuleSet::new().with_flow(vec![rule])
}

#[test]
fn shadow_flow_reject_reports_what_it_would_block() {
    // Bursts of 25 in separate windows, one at 500 ms steps.
    let mut calls = every(25, 10);
    calls.extend(every(25, 0).into_iter().enumerate().map(|(i, c)| Call {
        gap_ms: if i == 0 { 3_000 } else { 20 },
        ..c
    }));
    let would = shadow_matches_enforced(flow(FlowRule::qps("r", 10.0)), &calls, false);
    assert_eq!(would.iter().filter(|w| **w).count(), 30);
}

#[test]
fn shadow_chain_rule_on_the_default_context_reports_what_it_would_block() {
    // The calls enter without a context: they are in the default one.
    let rule = FlowRule::qps("r", 10.0).chain(CONTEXT_DEFAULT_NAME);
    let would = shadow_matches_enforced(flow(rule), &every(25, 10), false);
    assert_eq!(would.iter().filter(|w| **w).count(), 15);
}

#[test]
fn shadow_flow_warm_up_reports_what_it_would_block() {
    let rule = FlowRule::qps("r", 30.0)
        .control_behavior(ControlBehavior::WarmUp)
        .warm_up_period_sec(10);
    // A cold start: 40 calls in one second, far above count / coldFactor.
    shadow_matches_enforced(flow(rule), &every(40, 20), false);
}

#[test]
fn shadow_flow_rate_limiter_reports_what_it_would_block() {
    let rule = FlowRule::qps("r", 10.0)
        .control_behavior(ControlBehavior::RateLimiter)
        .max_queueing_time_ms(250);
    // Every 20 ms against a 100 ms spacing: the queue fills, then calls are refused.
    shadow_matches_enforced(flow(rule), &every(30, 20), false);
}

#[test]
fn shadow_flow_warm_up_rate_limiter_reports_what_it_would_block() {
    let rule = FlowRule::qps("r", 20.0)
        .control_behavior(ControlBehavior::WarmUpRateLimiter)
        .warm_up_period_sec(10)
        .max_queueing_time_ms(300);
    shadow_matches_enforced(flow(rule), &every(30, 10), false);
}

#[test]
fn shadow_param_flow_reports_what_it_would_block() {
    let rule = ParamFlowRule::qps("r", 0, 3.0);
    let calls: Vec<Call> = (0..24)
        .map(|i| Call {
            gap_ms: 10,
            arg: i128::from(i % 3 == 0),
            ..CALL
        })
        .collect();
    shadow_matches_enforced(RuleSet::new().with_param_flow(vec![rule]), &calls, false);
}

#[test]
fn shadow_system_reports_what_it_would_block() {
    let rule = SystemRule::new().qps(5.0);
    shadow_matches_enforced(RuleSet::new().with_system(vec![rule]), &every(12, 50), true);
}

#[test]
fn shadow_authority_reports_what_it_would_block() {
    let calls: Vec<Call> = ["a", "b", "a", "c", "b", "a"]
        .iter()
        .map(|origin| Call { origin, ..CALL })
        .collect();
    let rule = AuthorityRule::white_list("r", "a");
    let would = shadow_matches_enforced(RuleSet::new().with_authority(vec![rule]), &calls, false);
    assert_eq!(would, [false, true, false, true, true, false]);
}

/// Slow or failed calls that trip a breaker, its open time, a probe, and more traffic.
fn breaker_calls(slow: bool) -> Vec<Call> {
    let bad = Call {
        gap_ms: 10,
        rt_ms: if slow { 200 } else { 1 },
        error: !slow,
        ..CALL
    };
    let good = Call {
        gap_ms: 10,
        rt_ms: 1,
        ..CALL
    };
    let mut calls = vec![good; 3];
    calls.extend(vec![bad; 6]);
    calls.extend(vec![good; 5]);
    // Past the 1 s recovery: a bad probe reopens, later a good probe closes.
    calls.push(Call {
        gap_ms: 1_500,
        ..bad
    });
    calls.extend(vec![good; 3]);
    calls.push(Call {
        gap_ms: 1_500,
        ..good
    });
    calls.extend(vec![good; 3]);
    calls
}

/// The breaker transitions `rules` go through on `calls`, enforced and in shadow.
fn breaker_transitions(rule: DegradeRule, calls: &[Call]) {
    let rules = RuleSet::new().with_degrade(vec![rule]);
    let record = |s: &Sentinel| {
        let seen: Arc<Mutex<Vec<(bool, BreakerState, BreakerState)>>> = Arc::default();
        let into = seen.clone();
        s.add_listener(move |event: &SentinelEvent| {
            let entry = match event {
                SentinelEvent::BreakerStateChanged { from, to, .. } => (false, *from, *to),
                SentinelEvent::ShadowBreakerStateChanged { from, to, .. } => (true, *from, *to),
                _ => return,
            };
            if let Ok(mut seen) = into.lock() {
                seen.push(entry);
            }
        });
        seen
    };
    let clock = FakeClock::at_ms(START_MS);
    let enforced = engine(&clock);
    let real = record(&enforced);
    enforced.load_rule_set(rules.clone()).unwrap();
    run(&enforced, &clock, calls, false);

    let clock = FakeClock::at_ms(START_MS);
    let shadowed = engine(&clock);
    let shadow = record(&shadowed);
    shadowed.load_shadow_rules(rules.clone()).unwrap();
    run(&shadowed, &clock, calls, false);

    let real: Vec<_> = real
        .lock()
        .unwrap()
        .iter()
        .map(|(s, f, t)| (!s, *f, *t))
        .collect();
    let shadow = shadow.lock().unwrap().clone();
    assert!(real.len() >= 4, "the schedule moves the breaker: {real:?}");
    assert_eq!(
        shadow, real,
        "a shadow breaker's would-be transitions are a real one's"
    );
    let stats = &shadowed.shadow_stats()[0];
    let opened = real.iter().filter(|t| t.2 == BreakerState::Open).count() as u64;
    assert_eq!(stats.transitions[0], opened);
    assert!(stats.breaker_state.is_some());

    shadow_matches_enforced(rules, calls, false);
}

#[test]
fn shadow_breaker_slow_ratio_moves_like_a_real_one() {
    let rule = DegradeRule::slow_ratio("r", 100.0, 0.5, 1).min_request_amount(5);
    breaker_transitions(rule, &breaker_calls(true));
}

#[test]
fn shadow_breaker_error_ratio_moves_like_a_real_one() {
    let rule = DegradeRule::error_ratio("r", 0.5, 1).min_request_amount(5);
    breaker_transitions(rule, &breaker_calls(false));
}

#[test]
fn shadow_breaker_error_count_moves_like_a_real_one() {
    let rule = DegradeRule::error_count("r", 3.0, 1).min_request_amount(1);
    breaker_transitions(rule, &breaker_calls(false));
}

#[test]
fn shadow_ten_beside_enforced_hundred_passes_hundred_reports_ninety() {
    let clock = FakeClock::at_ms(START_MS);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 100.0)])
        .unwrap();
    s.load_shadow_rules(flow(FlowRule::qps("r", 10.0))).unwrap();
    let passed = (0..150).filter(|_| s.entry("r").enter().is_ok()).count();
    assert_eq!(passed, 100);
    let stats = s.shadow_stats_of("r");
    assert_eq!(stats.len(), 1);
    assert_eq!(
        stats[0].total, 90,
        "the calls the enforced rule blocked are not counted"
    );
    assert_eq!(stats[0].blocked_this_second, 90);
    assert_eq!(stats[0].kind, "qps");
    assert_eq!(s.resource_stats("r").map(|n| n.pass_qps), Some(100.0));
    clock.advance_ms(1_000);
    let stats = &s.shadow_stats_of("r")[0];
    assert_eq!(
        (stats.blocked_this_second, stats.blocked_last_second),
        (0, 90)
    );
}

#[test]
fn shadow_blocked_events_come_once_per_rule_per_second() {
    let clock = FakeClock::at_ms(START_MS);
    let s = engine(&clock);
    let seen: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let into = seen.clone();
    s.add_listener(move |event: &SentinelEvent| {
        if let SentinelEvent::ShadowBlocked {
            previous_second,
            total,
            ..
        } = event
        {
            into.lock().unwrap().push((*previous_second, *total));
        }
    });
    s.load_shadow_rules(flow(FlowRule::qps("r", 2.0))).unwrap();
    for _ in 0..3 {
        for _ in 0..10 {
            drop(s.entry("r").enter());
        }
        clock.advance_ms(1_000);
    }
    // 8 would-blocks a second; one event a second, the first before any count.
    assert_eq!(*seen.lock().unwrap(), [(0, 0), (8, 8), (8, 16)]);
}

#[test]
fn counts_survive_a_reload_that_keeps_the_rule() {
    let clock = FakeClock::at_ms(START_MS);
    let s = engine(&clock);
    s.load_shadow_rules(flow(FlowRule::qps("r", 1.0))).unwrap();
    for _ in 0..4 {
        drop(s.entry("r").enter());
    }
    let both = vec![FlowRule::qps("r", 1.0), FlowRule::qps("other", 5.0)];
    let report = s.load_shadow_rules(RuleSet::new().with_flow(both)).unwrap();
    assert_eq!(report.shadow_applied, vec![(RuleFamily::Flow, 2)]);
    assert_eq!(report.shadow_rules, 2);
    assert_eq!(s.shadow_rule_count(RuleFamily::Flow), 2);
    assert_eq!(s.shadow_rules_of_source(crate::API_SOURCE), 2);
    assert_eq!(s.shadow_stats_of("r")[0].total, 3);
    // The enforced rules are untouched, and clearing the shadow family removes the table.
    assert!(s.flow_rules().rules().is_empty());
    s.load_shadow_rules(RuleSet::cleared(&[RuleFamily::Flow]))
        .unwrap();
    assert!(s.shadow_stats().is_empty());
    assert!(s.entry("r").enter().is_ok());
}

#[test]
fn combined_document_carries_a_shadow_section() {
    use crate::datasource::{CombinedJson, Converter};
    let doc = br#"{"flow":[{"resource":"r","count":100}],
                   "shadow":{"flow":[{"resource":"r","count":10}]}}"#;
    let set = CombinedJson::new().convert(doc).unwrap();
    assert_eq!(set.flow.as_ref().map(Vec::len), Some(1));
    let shadow = set.shadow.as_deref().unwrap();
    assert_eq!(shadow.flow.as_ref().unwrap()[0].count, 10.0);
    // And back: the shadow section round-trips.
    let again = CombinedJson::new()
        .convert(&set.to_combined_json().unwrap())
        .unwrap();
    assert_eq!(again, set);
    // One family's list never carries shadow rules: a `shadow` key in a rule is unknown.
    let java = crate::datasource::java_converter(RuleFamily::Flow)
        .convert(br#"[{"resource":"r","count":1,"shadow":true}]"#)
        .unwrap();
    assert!(java.shadow.is_none());
}

#[test]
fn bad_shadow_rules_get_typed_issues_and_the_last_good_rules_stay() {
    use crate::datasource::{CombinedJson, Converter};
    let clock = FakeClock::at_ms(START_MS);
    let s = engine(&clock);
    s.load_shadow_rules(flow(FlowRule::qps("r", 10.0))).unwrap();
    let doc = br#"{"shadow":{"flow":[{"resource":"r","count":5},{"resource":"r","count":-1}]}}"#;
    let error = CombinedJson::new().convert(doc).unwrap_err();
    let issue = &error.issues()[0];
    assert!(issue.shadow);
    assert_eq!(
        (issue.family, issue.index, issue.field.as_str()),
        (RuleFamily::Flow, 1, "count")
    );
    assert!(
        issue.to_string().starts_with("shadow flow rule #1"),
        "{issue}"
    );
    // Through the API as well; what a shadow rule cannot be is refused the same way.
    let regex = flow(FlowRule::qps("r.*", 1.0).regex(true));
    let error = s.load_shadow_rules(regex).unwrap_err();
    assert_eq!(error.issues()[0].field, "regex");
    let cluster = flow(FlowRule::qps("r", 1.0).cluster_mode(true));
    assert_eq!(
        s.load_shadow_rules(cluster).unwrap_err().issues()[0].field,
        "clusterMode"
    );
    let thread = RuleSet::new().with_param_flow(vec![ParamFlowRule::thread("r", 0, 1.0)]);
    assert_eq!(
        s.load_shadow_rules(thread).unwrap_err().issues()[0].field,
        "grade"
    );
    let nested = br#"{"shadow":{"shadow":{}}}"#;
    assert!(matches!(
        CombinedJson::new().convert(nested),
        Err(crate::RuleError::Format { .. })
    ));
    assert_eq!(s.shadow_rules().flow.unwrap()[0].count, 10.0);
}

#[test]
fn promote_and_demote_move_rules_and_refuse_what_matches_nothing() {
    let mut set = RuleSet::new().with_flow(vec![FlowRule::qps("r", 100.0)]);
    set.shadow =
        Some(Box::new(RuleSet::new().with_flow(vec![
            FlowRule::qps("r", 10.0),
            FlowRule::qps("s", 1.0),
        ])));
    let before = set.clone();
    let missing = set.promote(&RuleSelector::new(RuleFamily::Flow).resource("t"));
    assert!(matches!(
        missing,
        Err(ShadowMoveError::NoMatch { available: 2, .. })
    ));
    assert_eq!(set, before, "a failed promote changes nothing");
    assert_eq!(
        set.promote_replacing(&RuleSelector::new(RuleFamily::Flow).resource("r")),
        Ok(1)
    );
    assert_eq!(set.flow.as_ref().unwrap(), &vec![FlowRule::qps("r", 10.0)]);
    assert_eq!(set.shadow.as_ref().unwrap().flow.as_ref().unwrap().len(), 1);
    assert_eq!(
        set.demote(&RuleSelector::new(RuleFamily::Flow).index(0)),
        Ok(1)
    );
    assert_eq!(set.flow.as_deref(), Some(&[][..]));
    assert_eq!(set.shadow.as_ref().unwrap().flow.as_ref().unwrap().len(), 2);
    let mut empty = RuleSet::new();
    assert!(empty
        .demote(&RuleSelector::new(RuleFamily::System))
        .is_err());
    assert_eq!(empty, RuleSet::new());
}

#[test]
fn rules_by_source_shows_each_source_shadow_rules() {
    let clock = FakeClock::at_ms(START_MS);
    let s = engine(&clock);
    s.load_shadow_rules(flow(FlowRule::qps("r", 10.0))).unwrap();
    let sources = s.rules_by_source();
    assert_eq!(sources.len(), 1);
    let shadow = sources[0].1.shadow.as_deref().unwrap();
    assert_eq!(shadow.flow.as_ref().unwrap().len(), 1);
    assert_eq!(clock.now_ms(), START_MS);
}
