//! The engine's side of cluster flow control, on an in-memory backend that hands out
//! leases by hand.

use std::sync::{Arc, Mutex};

use super::*;
use crate::flow::{ClusterFlowConfig, FlowRule};
use crate::rules::RuleError;
use crate::{FakeClock, Sentinel};

/// A backend whose slots the test fills and degrades; it keeps a slot for an equal spec.
#[derive(Debug, Default)]
struct HandBackend {
    slots: Mutex<Vec<Arc<ClusterSlot>>>,
    registrations: Mutex<usize>,
}

impl HandBackend {
    fn slot(&self, flow_id: i64) -> Arc<ClusterSlot> {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots
            .iter()
            .find(|s| s.spec().flow_id == flow_id)
            .cloned()
            .unwrap_or_else(|| panic!("no slot for flow {flow_id}"))
    }
}

impl ClusterBackend for HandBackend {
    fn register(&self, specs: &[ClusterRuleSpec]) -> Vec<Arc<ClusterSlot>> {
        *self.registrations.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let out: Vec<Arc<ClusterSlot>> = specs
            .iter()
            .map(|spec| {
                slots
                    .iter()
                    .find(|s| s.spec() == spec)
                    .cloned()
                    .unwrap_or_else(|| Arc::new(ClusterSlot::new(spec.clone())))
            })
            .collect();
        *slots = out.clone();
        out
    }

    fn check_spec(&self, spec: &ClusterRuleSpec) -> Result<(), (&'static str, String)> {
        if spec.window_ms > 60_000 {
            return Err(("clusterConfig.windowIntervalMs", "at most 60000".into()));
        }
        Ok(())
    }
}

fn engine(backend: &Arc<HandBackend>) -> (Sentinel, FakeClock) {
    let clock = FakeClock::new();
    let sentinel = Sentinel::builder()
        .clock(clock.clone())
        .cluster_backend(backend.clone())
        .build();
    (sentinel, clock)
}

fn passes(sentinel: &Sentinel, n: usize) -> usize {
    (0..n)
        .filter(|_| sentinel.entry("r").enter().is_ok())
        .count()
}

#[test]
fn a_cluster_rule_admits_exactly_what_the_lease_holds() {
    let backend = Arc::new(HandBackend::default());
    let (sentinel, _) = engine(&backend);
    let rule = FlowRule::qps("r", 100.0).cluster(ClusterFlowConfig::new(1).global(true));
    sentinel.flow_rules().load_rules(vec![rule]).unwrap();
    assert_eq!(passes(&sentinel, 5), 0, "an empty lease blocks");
    backend.slot(1).add_tokens(3);
    assert_eq!(passes(&sentinel, 10), 3);
    assert_eq!(backend.slot(1).tokens(), 0);
}

#[test]
fn a_degraded_global_rule_falls_back_to_its_share_of_the_count() {
    let backend = Arc::new(HandBackend::default());
    let (sentinel, clock) = engine(&backend);
    let rule = FlowRule::qps("r", 40.0).cluster(ClusterFlowConfig::new(2).global(true));
    sentinel.flow_rules().load_rules(vec![rule]).unwrap();
    let slot = backend.slot(2);
    slot.set_live_replicas(4);
    slot.set_degraded(true);
    // 40 / 4 replicas = 10 per second on this one.
    assert_eq!(passes(&sentinel, 50), 10);
    clock.advance_ms(1_000);
    assert_eq!(passes(&sentinel, 50), 10);
    // A per-instance threshold keeps its whole count.
    let rule = FlowRule::qps("r", 7.0).cluster(ClusterFlowConfig::new(3));
    sentinel.flow_rules().load_rules(vec![rule]).unwrap();
    backend.slot(3).set_live_replicas(4);
    backend.slot(3).set_degraded(true);
    clock.advance_ms(1_000);
    assert_eq!(passes(&sentinel, 50), 7);
}

#[test]
fn a_degraded_rule_without_fallback_lets_calls_pass() {
    let backend = Arc::new(HandBackend::default());
    let (sentinel, _) = engine(&backend);
    let config = ClusterFlowConfig::new(4)
        .global(true)
        .fallback_to_local_when_fail(false);
    let rule = FlowRule::qps("r", 1.0).cluster(config);
    sentinel.flow_rules().load_rules(vec![rule]).unwrap();
    assert_eq!(passes(&sentinel, 5), 0, "live: the empty lease blocks");
    backend.slot(4).set_degraded(true);
    assert_eq!(passes(&sentinel, 5), 5);
}

#[test]
fn leased_tokens_are_spent_first_while_degraded() {
    let backend = Arc::new(HandBackend::default());
    let (sentinel, _) = engine(&backend);
    let rule = FlowRule::qps("r", 2.0).cluster(ClusterFlowConfig::new(5).global(true));
    sentinel.flow_rules().load_rules(vec![rule]).unwrap();
    let slot = backend.slot(5);
    slot.add_tokens(4);
    slot.set_degraded(true);
    // 4 from the lease, then the local share (2 / 1 replica) counted on the same window.
    assert_eq!(passes(&sentinel, 10), 4);
}

#[test]
fn a_reload_keeps_the_slot_of_an_unchanged_rule_and_a_new_flow_id_starts_fresh() {
    let backend = Arc::new(HandBackend::default());
    let (sentinel, _) = engine(&backend);
    let rule = FlowRule::qps("r", 100.0).cluster(ClusterFlowConfig::new(6).global(true));
    sentinel
        .flow_rules()
        .load_rules(vec![rule.clone()])
        .unwrap();
    let before = backend.slot(6);
    before.add_tokens(5);
    let other = FlowRule::qps("other", 1.0);
    sentinel
        .flow_rules()
        .load_rules(vec![rule.clone(), other])
        .unwrap();
    assert!(
        Arc::ptr_eq(&before, &backend.slot(6)),
        "unchanged rule, same slot"
    );
    assert_eq!(passes(&sentinel, 10), 5, "its lease carried over");
    let moved = FlowRule::qps("r", 100.0).cluster(ClusterFlowConfig::new(8).global(true));
    sentinel.flow_rules().load_rules(vec![moved]).unwrap();
    assert_eq!(backend.slot(8).tokens(), 0);
    assert_eq!(
        passes(&sentinel, 3),
        0,
        "a new flowId starts with an empty lease"
    );
}

#[test]
fn without_a_backend_a_cluster_rule_is_checked_locally_as_before() {
    let clock = FakeClock::new();
    let sentinel = Sentinel::builder().clock(clock).build();
    let rule = FlowRule::qps("r", 3.0).cluster(ClusterFlowConfig::new(9).global(true));
    sentinel.flow_rules().load_rules(vec![rule]).unwrap();
    assert_eq!(passes(&sentinel, 10), 3);
}

fn issues_of(error: RuleError) -> Vec<(usize, String)> {
    match error {
        RuleError::Invalid { issues, .. } => {
            issues.into_iter().map(|i| (i.index, i.field)).collect()
        }
        other => panic!("expected invalid rules, got {other:?}"),
    }
}

#[test]
fn validation_names_the_index_and_field_of_bad_cluster_configs() {
    let backend = Arc::new(HandBackend::default());
    let (sentinel, _) = engine(&backend);
    let mut no_flow_id = FlowRule::qps("a", 1.0).cluster(ClusterFlowConfig::new(1));
    if let Some(c) = no_flow_id.cluster_config.as_mut() {
        c.flow_id = None;
    }
    let mut bad_type = FlowRule::qps("b", 1.0).cluster(ClusterFlowConfig::new(2));
    if let Some(c) = bad_type.cluster_config.as_mut() {
        c.threshold_type = 2;
    }
    let error = sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("ok", 1.0), no_flow_id, bad_type])
        .unwrap_err();
    let found = issues_of(error);
    assert!(
        found.contains(&(1, "clusterConfig.flowId".into())),
        "{found:?}"
    );
    assert!(
        found.contains(&(2, "clusterConfig.thresholdType".into())),
        "{found:?}"
    );

    let window =
        FlowRule::qps("c", 1.0).cluster(ClusterFlowConfig::new(3).window_interval_ms(120_000));
    let shaped = FlowRule::qps("d", 1.0)
        .control_behavior(crate::flow::ControlBehavior::RateLimiter)
        .cluster(ClusterFlowConfig::new(4));
    let thread = FlowRule::thread("e", 1.0).cluster(ClusterFlowConfig::new(5));
    let error = sentinel
        .flow_rules()
        .load_rules(vec![window, shaped, thread])
        .unwrap_err();
    let found = issues_of(error);
    assert_eq!(
        found,
        vec![
            (0, "clusterConfig.windowIntervalMs".into()),
            (1, "controlBehavior".into()),
            (2, "grade".into()),
        ]
    );
}

#[test]
fn a_window_limit_counts_live_replicas_for_a_per_instance_threshold() {
    let global = ClusterRuleSpec::of(
        &FlowRule::qps("r", 1000.0).cluster(ClusterFlowConfig::new(1).global(true)),
    )
    .unwrap();
    assert_eq!(global.window_limit(4), 1000);
    let local = ClusterRuleSpec::of(
        &FlowRule::qps("r", 50.0).cluster(ClusterFlowConfig::new(1).window_interval_ms(500)),
    )
    .unwrap();
    assert_eq!(local.window_limit(3), 75);
}

/// A backend that keeps the reporter the engine attaches.
#[derive(Debug, Default)]
struct Reporting {
    events: Mutex<Option<ClusterEvents>>,
}

impl ClusterBackend for Reporting {
    fn register(&self, specs: &[ClusterRuleSpec]) -> Vec<Arc<ClusterSlot>> {
        specs
            .iter()
            .map(|spec| Arc::new(ClusterSlot::new(spec.clone())))
            .collect()
    }

    fn attach(&self, events: ClusterEvents) {
        *self.events.lock().unwrap_or_else(|e| e.into_inner()) = Some(events);
    }
}

/// The attached reporter reaches the engine's listeners while the engine lives, and goes
/// nowhere (without keeping it alive) once it is gone.
#[test]
fn the_backend_reports_degradation_to_the_listeners_while_the_engine_lives() {
    use crate::events::SentinelEvent;
    let backend = Arc::new(Reporting::default());
    let sentinel = Sentinel::builder().cluster_backend(backend.clone()).build();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let into = seen.clone();
    sentinel.add_listener(move |event: &SentinelEvent| {
        let name = match event {
            SentinelEvent::ClusterDegraded { backend, reason } => {
                format!("degraded {backend} {reason}")
            }
            SentinelEvent::ClusterResumed { backend } => format!("resumed {backend}"),
            _ => return,
        };
        into.lock().unwrap_or_else(|e| e.into_inner()).push(name);
    });
    let events = backend
        .events
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .expect("attached at build");
    events.degraded("redis", "timeout");
    events.resumed("redis");
    assert_eq!(
        *seen.lock().unwrap_or_else(|e| e.into_inner()),
        vec![
            "degraded redis timeout".to_owned(),
            "resumed redis".to_owned()
        ]
    );
    drop(sentinel);
    events.degraded("redis", "after the engine");
    assert_eq!(seen.lock().unwrap_or_else(|e| e.into_inner()).len(), 2);
}

/// Issue #49 (#45): a starved replica spent the tokens leased for a window after that window
/// ended, where the store grants the full limit again (1 042 of 1 000 in a second). A lease
/// records its window's end, and none of its tokens is spent at or after it.
#[test]
fn a_lease_is_never_spent_after_the_end_of_its_window() {
    let clock = FakeClock::at_ms(10_000);
    let spec = ClusterRuleSpec::of(
        &FlowRule::qps("r", 100.0).cluster(ClusterFlowConfig::new(12).global(true)),
    )
    .expect("a cluster rule");
    let slot = ClusterSlot::with_clock(spec, Arc::new(clock.clone()));
    slot.add_lease(10, 11_000);
    assert_eq!(slot.lease_end_ms(), 11_000);
    for _ in 0..4 {
        assert_eq!(slot.try_lease(1), ClusterDecision::Pass);
    }
    clock.set_ms(10_999);
    assert_eq!(
        slot.try_lease(1),
        ClusterDecision::Pass,
        "the last ms is in"
    );
    let _ = slot.take_misses();
    // The window ended; the expiry has not dropped the 5 tokens left (a starved process).
    clock.set_ms(11_000);
    assert_eq!(slot.try_lease(1), ClusterDecision::Block);
    assert_eq!(slot.try_lease(2), ClusterDecision::Block);
    assert_eq!(slot.take_misses(), 3, "refused as from an empty lease");
    slot.set_degraded(true);
    assert_eq!(slot.try_lease(1), ClusterDecision::Degraded);
    slot.set_degraded(false);
    // The next window's lease replaces it.
    slot.drain();
    slot.add_lease(3, 12_000);
    assert_eq!(slot.try_lease(3), ClusterDecision::Pass);
    assert_eq!(slot.try_lease(1), ClusterDecision::Block);
    // Tokens added without an end never expire (a backend with no windows).
    let plain = ClusterSlot::with_clock(slot.spec().clone(), Arc::new(clock.clone()));
    plain.add_tokens(2);
    clock.advance_ms(1_000_000);
    assert_eq!(plain.lease_end_ms(), ClusterSlot::NO_END);
    assert_eq!(plain.try_lease(2), ClusterDecision::Pass);
}

/// Issue #49 point 4: global or per instance is said by the constructor's name.
#[test]
fn shared_and_per_instance_constructors_say_which_limit_they_are() {
    let spec = |config: ClusterFlowConfig| {
        ClusterRuleSpec::of(&FlowRule::qps("r", 100.0).cluster(config)).expect("a cluster rule")
    };
    let shared = spec(ClusterFlowConfig::shared_limit(1));
    let per_instance = spec(ClusterFlowConfig::per_instance_limit(2));
    assert!(shared.global && !per_instance.global);
    assert_eq!(shared.window_limit(4), 100, "all replicas together");
    assert_eq!(per_instance.window_limit(4), 400, "each replica");
    assert_eq!(
        ClusterFlowConfig::per_instance_limit(2),
        ClusterFlowConfig::new(2),
        "new stays Sentinel's default"
    );
}
