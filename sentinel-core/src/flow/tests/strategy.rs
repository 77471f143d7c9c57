//! Strategies and origins: relate and chain with every grade and controller, `limitApp`
//! (default, a specific origin, other), and a cluster rule without its backend.

use super::*;

#[test]
fn relate_strategy_reads_the_related_resource() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("write", 3.0).relate("read")])
        .unwrap();
    // "write" is limited only by traffic on "read".
    assert_eq!(burst(&s, "write", 10), 10);
    assert_eq!(burst(&s, "read", 3), 3);
    assert!(s.entry("write").enter().is_err());
    assert!(
        s.entry("read").enter().is_ok(),
        "read itself is not limited"
    );
}

/// As in Sentinel, which has no node for a resource never entered: a relate rule passes
/// every call (whatever its count, batch or controller) until its related resource has been
/// entered once, even by a call that was blocked.
#[test]
fn a_relate_rule_passes_until_its_related_resource_is_entered() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![
            FlowRule::qps("write", 0.0).relate("read"),
            FlowRule::qps("sync", 1.0).relate("upload"),
            FlowRule::qps("read", 0.0),
        ])
        .unwrap();
    assert_eq!(burst(&s, "write", 3), 3, "read was never entered");
    assert!(
        s.entry("sync").batch(3).enter().is_ok(),
        "upload was never entered"
    );
    assert!(
        s.entry("read").enter().is_err(),
        "read's own rule blocks it"
    );
    assert_eq!(
        burst(&s, "write", 3),
        0,
        "read was entered: a count of 0 blocks"
    );
    drop(s.resource("upload"));
    assert!(
        s.entry("sync").batch(3).enter().is_ok(),
        "a handle does not enter the resource"
    );
    drop(s.entry("upload").enter());
    assert!(
        s.entry("sync").batch(3).enter().is_err(),
        "a batch over the count"
    );
}

#[test]
fn chain_strategy_counts_only_its_entrance() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("query", 2.0).chain("entrance-a")])
        .unwrap();
    let via_a = (0..5)
        .filter(|_| s.entry("query").context("entrance-a").enter().is_ok())
        .count();
    let via_b = (0..5)
        .filter(|_| s.entry("query").context("entrance-b").enter().is_ok())
        .count();
    let none = burst(&s, "query", 5);
    assert_eq!((via_a, via_b, none), (2, 5, 5));
}

#[test]
fn a_chain_rule_on_the_default_context_limits_calls_without_a_context() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![
            FlowRule::qps("query", 2.0).chain(CONTEXT_DEFAULT_NAME),
            FlowRule::thread("write", 1.0).chain(CONTEXT_DEFAULT_NAME),
        ])
        .unwrap();
    let none = burst(&s, "query", 5);
    let named = (0..5)
        .filter(|_| s.entry("query").context("entrance-a").enter().is_ok())
        .count();
    assert_eq!((none, named), (2, 5), "Sentinel's default context, by name");
    // A concurrency rule: the call in flight holds its place in the default context until
    // it exits.
    let writing = s.entry("write").enter().unwrap();
    assert!(s.entry("write").enter().is_err(), "one call in flight");
    assert!(s.entry("write").context("entrance-a").enter().is_ok());
    drop(writing);
    assert!(s.entry("write").enter().is_ok(), "its place is given back");
}

#[test]
fn limit_app_specific_and_other_match_the_right_origins() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![
            FlowRule::qps("r", 1.0).limit_app("app-a"),
            FlowRule::qps("r", 2.0).limit_app("other"),
        ])
        .unwrap();
    let count = |origin: &str| {
        (0..10)
            .filter(|_| s.entry("r").origin(origin).enter().is_ok())
            .count()
    };
    assert_eq!(count("app-a"), 1, "specific rule");
    assert_eq!(
        count("app-b"),
        2,
        "`other` applies to unnamed origins, per origin"
    );
    assert_eq!(count("app-c"), 2);
    assert_eq!(burst(&s, "r", 10), 10, "no origin: neither rule applies");
    assert_eq!(s.origin_stats("r", "app-a").unwrap().pass_qps, 1.0);
}

#[test]
fn the_origins_default_and_other_do_not_escape_an_other_rule() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    let count = |origin: &str| {
        (0..10)
            .filter(|_| s.entry("r").origin(origin).enter().is_ok())
            .count()
    };
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 1.0).limit_app("other")])
        .unwrap();
    assert_eq!(
        count("default"),
        1,
        "`default` is an other origin (Java: 1)"
    );
    assert_eq!(count("other"), 1, "and so is `other` (Java lets it escape)");
    // With a `default` rule, the origin `default` is named: not other, as in Java; the
    // default rule then limits every caller.
    clock.advance_ms(1_000);
    s.flow_rules()
        .load_rules(vec![
            FlowRule::qps("r", 1.0).limit_app("other"),
            FlowRule::qps("r", 4.0),
        ])
        .unwrap();
    assert_eq!(count("default"), 4);
    // A cluster rule's `limitApp` names its origin too, even when the rule passes every call
    // (no token server, no fallback), as Sentinel's isOtherOrigin reads every rule.
    clock.advance_ms(1_000);
    let mut cluster_default = FlowRule::qps("r", 0.0).cluster_mode(true);
    cluster_default.cluster_config = Some(crate::flow::ClusterFlowConfig {
        flow_id: Some(1),
        fallback_to_local_when_fail: false,
        ..Default::default()
    });
    s.flow_rules()
        .load_rules(vec![
            cluster_default,
            FlowRule::qps("r", 1.0).limit_app("other"),
        ])
        .unwrap();
    assert_eq!(count("default"), 10, "named by the cluster rule: not other");
    assert_eq!(count("web"), 1);
    // A specific rule never selects them.
    clock.advance_ms(1_000);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 1.0).limit_app("default,x")])
        .unwrap();
    assert_eq!(count("default"), 10);
}

#[test]
fn limit_app_default_counts_all_origins_together() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 3.0)])
        .unwrap();
    assert!(s.entry("r").origin("a").enter().is_ok());
    assert!(s.entry("r").origin("b").enter().is_ok());
    assert!(s.entry("r").enter().is_ok());
    assert!(s.entry("r").origin("c").enter().is_err());
}

#[test]
fn a_cluster_rule_without_local_fallback_lets_calls_pass() {
    let s = Sentinel::new();
    let mut cluster = crate::flow::ClusterFlowConfig {
        flow_id: Some(1),
        fallback_to_local_when_fail: false,
        ..Default::default()
    };
    let mut rule = FlowRule::qps("r", 0.0).cluster_mode(true);
    rule.cluster_config = Some(cluster.clone());
    s.flow_rules().load_rules(vec![rule.clone()]).unwrap();
    assert!(
        s.entry("r").enter().is_ok(),
        "no token server, no fallback: passes"
    );
    assert_eq!(
        s.flow_rules().rules(),
        vec![rule.clone()],
        "still an active rule"
    );
    cluster.fallback_to_local_when_fail = true;
    rule.cluster_config = Some(cluster);
    s.flow_rules().load_rules(vec![rule]).unwrap();
    assert!(s.entry("r").enter().is_err(), "checked locally");
}

#[test]
fn relate_and_chain_work_with_every_grade_and_controller() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![
            // `write` may run only while fewer than 1 `read` is in flight.
            FlowRule::thread("write", 1.0).relate("read"),
            // `report` through the `nightly` entrance is paced at 10/s.
            FlowRule::qps("report", 10.0)
                .chain("nightly")
                .control_behavior(ControlBehavior::RateLimiter)
                .max_queueing_time_ms(500),
            // `sync` for origin `app` is limited by `upload`'s QPS.
            FlowRule::qps("sync", 1.0).relate("upload").limit_app("app"),
        ])
        .unwrap();

    let reading = s.entry("read").enter().unwrap();
    assert!(s.entry("write").enter().is_err(), "a read is in flight");
    drop(reading);
    assert!(s.entry("write").enter().is_ok());

    drop(s.entry("report").context("nightly").enter().unwrap());
    let before = clock.now_ms();
    drop(s.entry("report").context("nightly").enter().unwrap());
    assert_eq!(clock.now_ms() - before, 100, "paced through its entrance");
    let before = clock.now_ms();
    drop(s.entry("report").context("adhoc").enter().unwrap());
    assert_eq!(clock.now_ms(), before, "another entrance is not paced");

    assert_eq!(burst(&s, "upload", 2), 2);
    assert!(
        s.entry("sync").origin("app").enter().is_err(),
        "upload is busy"
    );
    assert!(
        s.entry("sync").origin("other").enter().is_ok(),
        "the rule is for app only"
    );
}

/// A table keeps a compiled rule per rule and a slot per resource, and a reload writes them
/// all: what few rules have (a related node, a cluster check) is boxed out of them. (The
/// rule itself is a `RuleRef`, a list and an index: 16 bytes, 8 more than an `Arc`, for no
/// allocation per rule.)
#[test]
fn compiled_rules_keep_their_rare_links_out_of_line() {
    use crate::flow::manager::{CompiledFlowRule, ResourceFlowRules};
    assert_eq!(
        std::mem::size_of::<crate::RuleRef<crate::flow::FlowRule>>(),
        16
    );
    assert!(std::mem::size_of::<CompiledFlowRule>() <= 56);
    assert!(std::mem::size_of::<ResourceFlowRules>() <= 88);
}

/// A reload keeps its flow rules in the list it was given, not one allocation per rule: the
/// rules that block name rules of that one list, and the next load's rules are a new list.
#[test]
fn the_flow_rules_of_one_load_share_its_list() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    let blocking_rule = |s: &Sentinel, name: &str| match s.entry(name).enter() {
        Err(BlockError::Flow { rule, .. }) => rule,
        other => panic!("{name}: expected a flow block, got {other:?}"),
    };
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("a", 0.0), FlowRule::qps("b", 0.0)])
        .unwrap();
    let (a, b) = (blocking_rule(&s, "a"), blocking_rule(&s, "b"));
    assert_eq!((a.resource.as_str(), b.resource.as_str()), ("a", "b"));
    assert!(a.shares_list_with(&b));
    assert!(!crate::RuleRef::ptr_eq(&a, &b));
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("a", 0.0)])
        .unwrap();
    let again = blocking_rule(&s, "a");
    assert_eq!(again, a, "an equal rule");
    assert!(!again.shares_list_with(&a), "of the new load's list");
}
