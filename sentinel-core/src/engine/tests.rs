//! Engine tests: reloads and their carry-over, strict and lenient loads, handles and the
//! resource registry, the engine's lifetime.

use std::sync::Arc;

use crate::flow::{ControlBehavior, FlowRule};
use crate::test_support::{burst, engine, run_load};
use crate::{FakeClock, RuleFamily, Sentinel};

#[test]
fn reload_of_an_unchanged_rule_keeps_warm_up_state() {
    let clock = FakeClock::at_ms(100_000);
    let s = engine(&clock);
    let warm = FlowRule::qps("w", 90.0).control_behavior(ControlBehavior::WarmUp);
    let other = FlowRule::qps("o", 30.0).control_behavior(ControlBehavior::WarmUp);
    s.flow_rules()
        .load_rules(vec![warm.clone(), other.clone()])
        .unwrap();
    let hot = run_load(&s, &clock, "w", 14, 200);
    assert_eq!(*hot.last().unwrap(), 90);
    // Reload the same rule (plus a changed other rule): still warm.
    s.flow_rules()
        .load_rules(vec![warm.clone(), FlowRule::qps("o", 31.0)])
        .unwrap();
    assert_eq!(run_load(&s, &clock, "w", 1, 200)[0], 90);
    // A changed rule starts a new controller: cold again.
    s.flow_rules()
        .load_rules(vec![warm.warm_up_period_sec(11), other])
        .unwrap();
    assert!(run_load(&s, &clock, "w", 1, 200)[0] <= 35);
}

#[test]
fn statistics_survive_reloads_and_empty_list_clears() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 5.0)])
        .unwrap();
    assert_eq!(burst(&s, "r", 3), 3);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 4.0)])
        .unwrap();
    // Three passes are still counted against the new limit.
    assert_eq!(burst(&s, "r", 3), 1);
    s.flow_rules().load_rules(vec![]).unwrap();
    assert!(s.flow_rules().rules().is_empty());
    assert_eq!(burst(&s, "r", 3), 3);
}

#[test]
fn strict_load_rejects_the_whole_list_and_keeps_the_old_rules() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 1.0)])
        .unwrap();
    let mut bad = FlowRule::qps("", 1.0);
    bad.count = -1.0;
    let err = s
        .flow_rules()
        .load_rules(vec![FlowRule::qps("ok", 1.0), bad.clone()])
        .unwrap_err();
    let issues = err.issues();
    assert_eq!(issues.len(), 2);
    assert_eq!((issues[0].index, issues[0].field.as_str()), (1, "resource"));
    assert_eq!(issues[1].field, "count");
    assert_eq!(s.flow_rules().rules(), vec![FlowRule::qps("r", 1.0)]);
    // Lenient mode skips and reports.
    let report = s
        .flow_rules()
        .load_rules_lenient(vec![FlowRule::qps("ok", 1.0), bad])
        .unwrap();
    assert_eq!(report.skipped.len(), 2);
    assert_eq!(s.flow_rules().rules(), vec![FlowRule::qps("ok", 1.0)]);
}

#[test]
fn duplicates_collapse() {
    let s = Sentinel::new();
    let report = s
        .flow_rules()
        .load_rules(vec![FlowRule::qps("r", 1.0), FlowRule::qps("r", 1.0)])
        .unwrap();
    assert_eq!(report.applied, vec![(RuleFamily::Flow, 1)]);
}

#[test]
fn repeated_rules_of_one_source_collapse_whatever_their_kind() {
    // One source's part is compiled without the union's set: the flow compile finds a
    // repeated rule as it groups rules by resource, then deduplicates and compiles again.
    let s = Sentinel::new();
    let pattern = FlowRule::qps("^GET:/.*", 5.0).regex(true);
    let mut unchecked = FlowRule::qps("c", 5.0);
    unchecked.cluster_mode = true;
    unchecked.cluster_config = Some(crate::flow::ClusterFlowConfig {
        flow_id: Some(7),
        fallback_to_local_when_fail: false,
        ..Default::default()
    });
    let all = vec![
        FlowRule::qps("r", 1.0),
        FlowRule::qps("r", 2.0),
        pattern.clone(),
        unchecked.clone(),
    ];
    // Each kind repeated on its own: a checked rule (found in its resource's entry), a
    // regex rule, a rule this engine does not check.
    for repeated in [0, 2, 3] {
        let mut rules = all.clone();
        rules.push(all[repeated].clone());
        let report = s.flow_rules().load_rules(rules).unwrap();
        assert_eq!(report.applied, vec![(RuleFamily::Flow, 4)], "{repeated}");
        assert_eq!(s.flow_rules().rules(), all, "{repeated}");
    }
    // Without repeats, the same rules load as they are.
    let report = s
        .flow_rules()
        .load_rules(vec![FlowRule::qps("r", 1.0), FlowRule::qps("r", 2.0)])
        .unwrap();
    assert_eq!(report.applied, vec![(RuleFamily::Flow, 2)]);
    let (pass, block) = (0..3).fold((0, 0), |(p, b), _| match s.entry("r").enter() {
        Ok(_) => (p + 1, b),
        Err(_) => (p, b + 1),
    });
    assert_eq!((pass, block), (1, 2), "both rules of r are checked");
}

#[test]
fn a_handle_follows_every_reload() {
    // A node caches where its rules sit in the table; each reload must invalidate that.
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    let handle = s.resource("r");
    let passes = |n: usize| (0..n).filter(|_| handle.entry().enter().is_ok()).count();
    assert_eq!(passes(3), 3, "no rules yet");
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 4.0)])
        .unwrap();
    assert_eq!(passes(3), 1, "3 earlier passes count");
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("other", 1.0), FlowRule::qps("x", 1.0)])
        .unwrap();
    assert_eq!(passes(3), 3, "r lost its rule");
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("x", 1.0), FlowRule::qps("r", 8.0)])
        .unwrap();
    assert_eq!(passes(3), 1, "7 earlier passes; r is back at another index");
    s.flow_rules().load_rules(Vec::new()).unwrap();
    assert_eq!(passes(2), 2);
}

#[test]
fn handle_and_name_share_statistics() {
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 4.0)])
        .unwrap();
    let handle = s.resource("r");
    assert_eq!((0..3).filter(|_| handle.entry().enter().is_ok()).count(), 3);
    assert_eq!(burst(&s, "r", 3), 1);
}

#[test]
fn resource_cap_passes_extra_resources_without_statistics() {
    let s = Sentinel::builder()
        .limits(crate::Limits::default().max_resources(2))
        .build();
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("c", 0.0)])
        .unwrap();
    // The rule's own resource is not registered until used; fill the cap first.
    assert!(s.entry("a").enter().is_ok());
    assert!(s.entry("b").enter().is_ok());
    let entry = s
        .entry("c")
        .enter()
        .expect("past the cap: passes unchecked");
    assert_eq!(entry.resource(), None);
    assert_eq!(s.resources(), vec!["a".to_owned(), "b".to_owned()]);
}

#[test]
fn idle_resources_without_rules_are_freed_only_when_asked_and_idle() {
    use std::time::Duration;
    let clock = FakeClock::new();
    let off = engine(&clock);
    drop(off.entry("x").enter());
    clock.advance_ms(3_600_000);
    assert_eq!(
        off.free_idle_resources(),
        0,
        "off by default, as Sentinel never frees"
    );

    let s = Sentinel::builder()
        .clock(clock.clone())
        .limits(crate::Limits::default().free_idle_after(Duration::from_secs(60)))
        .build();
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("ruled", 10.0)])
        .unwrap();
    for name in ["idle", "ruled", "held", "busy"] {
        drop(s.entry(name).enter());
    }
    let handle = s.resource("held");
    let in_flight = s.entry("busy").enter();
    clock.advance_ms(59_000);
    assert_eq!(s.free_idle_resources(), 0, "not idle for a minute yet");
    clock.advance_ms(2_000);
    assert_eq!(
        s.free_idle_resources(),
        1,
        "only \"idle\": the others have rules or holders"
    );
    assert!(s.resource_stats("idle").is_none());
    assert!(s.resource_stats("ruled").is_some() && s.resource_stats("held").is_some());
    drop((handle, in_flight));
    // The rule removed, "ruled" is free to go too, and so are the released ones once idle
    // (the in-flight call's exit was a write).
    s.flow_rules().load_rules(vec![]).unwrap();
    assert_eq!(s.free_idle_resources(), 2, "\"ruled\" and \"held\"");
    clock.advance_ms(61_000);
    assert_eq!(s.free_idle_resources(), 1, "\"busy\"");
    assert!(s.resources().is_empty());
    // Entered again, a resource starts afresh.
    drop(s.entry("idle").enter());
    assert_eq!(s.resource_stats("idle").map(|n| n.pass_qps), Some(1.0));
}

#[test]
fn the_name_cache_answers_for_its_own_engine_and_the_registrys_current_node() {
    let (a, b) = (Sentinel::new(), Sentinel::new());
    let first = a.node("r").expect("tracked");
    let other = b.node("r").expect("tracked");
    assert!(!Arc::ptr_eq(&first, &other), "each engine its own node");
    assert!(Arc::ptr_eq(&a.node("r").expect("tracked"), &first));
    assert!(Arc::ptr_eq(&b.node("r").expect("tracked"), &other));

    let clock = FakeClock::at_ms(100_000);
    let s = Sentinel::builder()
        .clock(clock.clone())
        .limits(crate::Limits::default().free_idle_after(std::time::Duration::from_secs(1)))
        .build();
    drop(s.entry("idle").enter());
    let before = Arc::downgrade(&s.node("idle").expect("tracked"));
    clock.advance_ms(2_000);
    assert_eq!(s.free_idle_resources(), 1);
    let again = s.node("idle").expect("tracked again");
    assert!(before.upgrade().is_none(), "the freed node is gone");
    assert!(Arc::ptr_eq(&again, &s.node("idle").expect("tracked")));
    assert_eq!(s.resources().len(), 1, "the registry holds the new node");
}

#[test]
fn the_resource_cap_holds_across_the_registry_shards() {
    let s = Sentinel::builder()
        .limits(crate::Limits::default().max_resources(1_000))
        .build();
    let tracked = (0..5_000)
        .filter(|i| {
            s.entry(&format!("GET:/item/{i}"))
                .enter()
                .is_ok_and(|e| e.resource().is_some())
        })
        .count();
    assert_eq!(tracked, 1_000);
    assert_eq!(s.resources().len(), 1_000);
    assert!(s.resource_stats("GET:/item/999").is_some());
    assert!(s.resource_stats("GET:/item/1000").is_none());
}

#[test]
fn the_cap_frees_idle_resources_to_make_room() {
    use std::time::Duration;
    let clock = FakeClock::new();
    let s = Sentinel::builder()
        .clock(clock.clone())
        .limits(
            crate::Limits::default()
                .max_resources(2)
                .free_idle_after(Duration::from_secs(10)),
        )
        .build();
    drop(s.entry("a").enter());
    drop(s.entry("b").enter());
    assert_eq!(
        s.entry("c")
            .enter()
            .ok()
            .and_then(|e| e.resource().map(str::to_owned)),
        None
    );
    clock.advance_ms(11_000);
    let entry = s.entry("c").enter().expect("passes");
    assert_eq!(entry.resource(), Some("c"), "the idle ones made room");
}

#[test]
fn shared_engine_clones_share_rules() {
    let s = Sentinel::new();
    let clone = s.clone();
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 1.0)])
        .unwrap();
    assert_eq!(clone.flow_rules().rules().len(), 1);
}

#[test]
fn dropping_the_engine_frees_it_even_with_a_relate_rule() {
    let s = Sentinel::new();
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("write", 3.0).relate("read")])
        .unwrap();
    // (No entry on this thread: its rule-table cache would keep the state alive by design.)
    let shared = Arc::downgrade(&s.inner.shared);
    drop(s);
    assert!(
        shared.upgrade().is_none(),
        "a reference cycle kept the engine alive"
    );
}

#[test]
fn origins_past_the_cap_are_limited_together_by_an_other_rule() {
    let clock = FakeClock::at_ms(10_000);
    let s = Sentinel::builder()
        .clock(clock.clone())
        .limits(crate::Limits::default().max_origins_per_resource(2))
        .build();
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("r", 1.0).limit_app("other")])
        .unwrap();
    let names: Vec<String> = (0..50).map(|i| format!("origin-{i}")).collect();
    let passed = names
        .iter()
        .filter(|origin| s.entry("r").origin(origin).enter().is_ok())
        .count();
    // Two origins have their own node (one pass each); the 48 past the cap share one.
    assert_eq!(passed, 3);
}

#[test]
fn a_relate_rule_for_an_origin_past_the_cap_still_applies() {
    let clock = FakeClock::at_ms(10_000);
    let s = Sentinel::builder()
        .clock(clock.clone())
        .limits(crate::Limits::default().max_origins_per_resource(1))
        .build();
    s.flow_rules()
        .load_rules(vec![FlowRule::qps("write", 1.0)
            .relate("read")
            .limit_app("app")])
        .unwrap();
    assert!(
        s.entry("write").origin("first").enter().is_ok(),
        "fills the cap"
    );
    assert_eq!(burst(&s, "read", 2), 2);
    // `app` is past the origin cap; the rule limits it by the related resource's traffic.
    assert!(s.entry("write").origin("app").enter().is_err());
    assert!(s.entry("write").origin("other-app").enter().is_ok());
}

#[test]
fn contexts_past_the_cap_are_counted_on_the_resource_only() {
    let sentinel = Sentinel::builder()
        .limits(crate::Limits::default().max_contexts_per_resource(1))
        .build();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("r", 1.0).chain("second")])
        .expect("valid");
    assert!(
        sentinel.entry("r").context("first").enter().is_ok(),
        "fills the cap"
    );
    // `second` is past the cap: it has no node, so its chain rule cannot count it (as the
    // `Limits` docs say); the call is still counted on the resource.
    assert!(sentinel.entry("r").context("second").enter().is_ok());
    assert!(sentinel.entry("r").context("second").enter().is_ok());
    assert_eq!(sentinel.resource_stats("r").map(|s| s.pass_qps), Some(3.0));
}

#[test]
fn an_entry_by_name_borrows_its_node_unless_idle_nodes_may_be_freed() {
    let kept = Sentinel::new();
    let entry = kept.entry("r").enter().expect("no rule");
    let again = kept.entry("r").enter().expect("no rule");
    let node = kept.inner.registry.get("r").expect("tracked");
    assert_eq!(
        Arc::strong_count(&node),
        3,
        "the map, the kept list and `node`: the entries hold no reference"
    );
    assert_eq!(node.stat.concurrency(), 2);
    drop((entry, again));
    assert_eq!(node.stat.concurrency(), 0);
    let owned = kept.entry("r").enter().expect("no rule").into_owned();
    assert_eq!(Arc::strong_count(&node), 4, "an owned entry holds one");
    drop(owned);

    let freeing = Sentinel::builder()
        .limits(crate::Limits::default().free_idle_after(std::time::Duration::from_secs(60)))
        .build();
    let entry = freeing.entry("r").enter().expect("no rule");
    let node = freeing.inner.registry.get("r").expect("tracked");
    assert_eq!(
        Arc::strong_count(&node),
        3,
        "the map, the entry and `node`: a freeing registry's entries hold theirs"
    );
    drop(entry);
    assert_eq!(Arc::strong_count(&node), 2);
}

#[test]
fn dropping_the_engine_frees_the_nodes_it_lent_by_name() {
    let s = Sentinel::new();
    let other = s.clone();
    // Joined (not scoped), so the thread's own caches are gone with it.
    std::thread::spawn(move || {
        for _ in 0..3 {
            drop(other.entry("r").enter());
            drop(other.entry("w").enter());
        }
    })
    .join()
    .expect("the entering thread panicked");
    let node = Arc::downgrade(&s.inner.registry.get("r").expect("tracked"));
    let shared = Arc::downgrade(&s.inner.shared);
    drop(s);
    assert!(
        node.upgrade().is_none(),
        "the kept node outlived its engine"
    );
    assert!(
        shared.upgrade().is_none(),
        "a kept node kept the engine alive"
    );
}

#[test]
fn the_snapshot_finds_flow_resources_in_the_flow_table_s_own_map() {
    use crate::authority::AuthorityRule;
    use crate::circuit_breaker::DegradeRule;
    use crate::param_flow::ParamFlowRule;
    let clock = FakeClock::at_ms(10_000);
    let s = engine(&clock);
    let flow = vec![FlowRule::qps("a", 1.0), FlowRule::qps("b", 2.0)];
    s.flow_rules().load_rules(flow).unwrap();
    s.degrade_rules()
        .load_rules(vec![
            DegradeRule::error_count("b", 5.0, 10),
            DegradeRule::error_count("c", 5.0, 10),
        ])
        .unwrap();
    s.param_flow_rules()
        .load_rules(vec![ParamFlowRule::qps("d", 0, 3.0)])
        .unwrap();
    s.authority_rules()
        .load_rules(vec![AuthorityRule::white_list("a", "app")])
        .unwrap();
    let snapshot = s.inner.shared.rules.load_full();
    assert!(snapshot.index.shares_flow_map_of(&snapshot.tables.flow));
    let slot = |name: &str| {
        let at = snapshot.index.get(name).expect("a slot");
        (at, snapshot.slot(at).expect("the slot"))
    };
    // The flow resources take the first slots; a resource keeps one slot for every family.
    let (a, b) = (slot("a"), slot("b"));
    assert!(a.0 < 2 && b.0 < 2 && a.0 != b.0);
    assert!(a.1.flow.is_some() && a.1.authority.is_some() && a.1.breakers.is_none());
    assert!(b.1.flow.is_some() && b.1.breakers.is_some());
    // The names only other families have come after them.
    let (c, d) = (slot("c"), slot("d"));
    assert!(c.0 >= 2 && d.0 >= 2 && c.0 != d.0);
    assert!(c.1.breakers.is_some() && c.1.flow.is_none());
    assert!(d.1.param.is_some() && d.1.flow.is_none());
    assert!(snapshot.index.contains_key("d") && !snapshot.index.contains_key("e"));
    assert_eq!(snapshot.index.key("c").map(|k| &**k), Some("c"));
}

#[test]
fn a_refused_command_reaches_the_listeners() {
    use std::sync::Mutex;
    let clock = FakeClock::at_ms(100_000);
    let s = engine(&clock);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    s.add_listener(move |event: &crate::SentinelEvent| {
        if let crate::SentinelEvent::CommandRefused {
            component,
            command,
            reason,
            message,
        } = event
        {
            if let Ok(mut seen) = sink.lock() {
                seen.push(format!("{component} {command} {reason} {message}"));
            }
        }
    });
    s.report_command_refused("transport", "setRules", "read_only", "read-only transport");
    let seen = seen.lock().map(|v| v.clone()).unwrap_or_default();
    assert_eq!(
        seen,
        vec!["transport setRules read_only read-only transport"]
    );
}
