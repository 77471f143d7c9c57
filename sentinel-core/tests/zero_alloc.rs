//! Entry + exit allocates nothing on the heap, shown with a counting global allocator.
#![allow(unsafe_code)] // a GlobalAlloc impl is unsafe by definition

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use sentinel_core::authority::AuthorityRule;
use sentinel_core::circuit_breaker::DegradeRule;
use sentinel_core::flow::{ControlBehavior, FlowRule};
use sentinel_core::param_flow::{ParamFlowItem, ParamFlowRule, ParamValue};
use sentinel_core::system::{ManualSystemStatus, SystemRule};
use sentinel_core::{FakeClock, Sentinel};

struct Counting;

thread_local! {
    // Only this thread's allocations count: background threads (the clock upkeep, the test
    // harness) allocate on their own schedule.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

fn counting() -> bool {
    COUNTING.try_with(Cell::get).unwrap_or(false)
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counting() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if counting() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> usize {
    ALLOCATIONS.store(0, Ordering::SeqCst);
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.load(Ordering::SeqCst)
}

// One test function, so no other test thread allocates while counting.
#[test]
fn entry_and_exit_do_not_allocate() {
    let sentinel = Sentinel::new();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("r", 1e12)])
        .expect("valid rule");
    sentinel
        .degrade_rules()
        .load_rules(vec![DegradeRule::error_ratio("b", 0.9, 10)])
        .expect("valid rule");
    let handle = sentinel.resource("r");
    // Warm up: the resource node, origin node and arc-swap's per-thread slots are created
    // on first use, and a node's minute window when its first round rolls up (four 500 ms
    // rounds are kept: the warm-up runs past them).
    let warm_until = std::time::Instant::now() + std::time::Duration::from_millis(2_100);
    while std::time::Instant::now() < warm_until {
        drop(sentinel.entry("r").origin("web").inbound().enter());
        drop(sentinel.entry("b").enter());
        drop(sentinel.entry("b").enter());
        drop(handle.entry().enter());
    }

    let by_handle = allocations_during(|| {
        for _ in 0..10_000 {
            let entry = handle.entry().enter();
            assert!(entry.is_ok());
        }
    });
    assert_eq!(by_handle, 0, "entry + exit through a handle allocated");

    let by_name = allocations_during(|| {
        for _ in 0..10_000 {
            let entry = sentinel.entry("r").origin("web").inbound().enter();
            assert!(entry.is_ok());
        }
    });
    assert_eq!(by_name, 0, "entry + exit by name with an origin allocated");

    let with_breaker = allocations_during(|| {
        for _ in 0..10_000 {
            let mut entry = sentinel.entry("b").enter().expect("closed");
            entry.set_error();
            drop(entry);
            // The breaker may open on errors; keep it closed with successes.
            drop(sentinel.entry("b").enter());
            drop(sentinel.entry("b").enter());
        }
    });
    assert_eq!(
        with_breaker, 0,
        "entry + exit with a circuit breaker allocated"
    );
}

/// Shadow rules (see `sentinel_core::shadow`), passing and would-blocking, beside enforced
/// ones, on a fake clock that stays in one second (a rule's one event a second, sent on its
/// first would-block of the second, is made during the warm-up).
#[test]
fn shadow_rules_do_not_allocate() {
    let clock = sentinel_core::FakeClock::at_ms(1_000_000);
    let sentinel = Sentinel::builder().clock(clock.clone()).build();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("r", 1e12)])
        .expect("valid rule");
    let shadow = sentinel_core::RuleSet::new()
        .with_flow(vec![FlowRule::qps("r", 5.0), FlowRule::qps("s", 1e12)])
        .with_degrade(vec![DegradeRule::error_ratio("b", 0.9, 10)]);
    sentinel
        .load_shadow_rules(shadow)
        .expect("valid shadow rules");
    let handle = sentinel.resource("r");
    let passing = sentinel.resource("s");
    let warm = || {
        for _ in 0..100 {
            drop(handle.entry().enter());
            drop(passing.entry().enter());
            // Failures open the shadow breaker now: its transition event is made here.
            if let Ok(mut entry) = sentinel.entry("b").enter() {
                entry.set_error();
            }
            drop(sentinel.entry("r").origin("web").enter());
        }
    };
    warm();
    let allocations = allocations_during(|| {
        for _ in 0..10_000 {
            assert!(handle.entry().enter().is_ok(), "a shadow rule never blocks");
            assert!(passing.entry().enter().is_ok());
            let mut entry = sentinel
                .entry("b")
                .enter()
                .expect("a shadow breaker never blocks");
            entry.set_error();
            drop(entry);
            drop(sentinel.entry("r").origin("web").enter());
        }
    });
    assert_eq!(allocations, 0, "a shadow check or would-block allocated");
    let stats = sentinel.shadow_stats_of("r");
    assert!(
        stats[0].total > 10_000,
        "the shadow rule counted would-blocks"
    );
    let breaker = sentinel.shadow_stats_of("b");
    assert!(
        breaker[0].total >= 10_000,
        "the open shadow breaker counted would-blocks"
    );
}

/// Every rule family and controller, passing and blocking, on a fake clock (a rate limiter's
/// queueing then advances the clock instead of sleeping).
fn every_path(sentinel: &Sentinel) {
    let _ = sentinel.entry("warm").enter();
    let _ = sentinel.entry("paced").enter();
    let _ = sentinel.entry("warm-paced").enter();
    let _ = sentinel.entry("related").enter();
    let _ = sentinel.entry("read").enter();
    let _ = sentinel.entry("chained").context("entrance").enter();
    let held = sentinel.entry("bulkhead").enter();
    let _ = sentinel.entry("bulkhead").enter(); // blocked: the one place is held
    drop(held);
    let _ = sentinel.entry("guarded").origin("friend").enter();
    let _ = sentinel.entry("inbound").inbound().enter();
    let _ = sentinel.entry("closed").enter(); // blocked by a QPS limit of 0
}

// Kept in the same test function as the cases above would race them; a second function runs
// on its own thread and counts only its own allocations.
#[test]
fn every_family_and_controller_does_not_allocate() {
    let clock = FakeClock::at_ms(10_000);
    let status = ManualSystemStatus::new();
    let sentinel = Sentinel::builder()
        .clock(clock.clone())
        .system_status(status)
        .build();
    sentinel
        .flow_rules()
        .load_rules(vec![
            FlowRule::qps("warm", 1e9).control_behavior(ControlBehavior::WarmUp),
            FlowRule::qps("paced", 1e9)
                .control_behavior(ControlBehavior::RateLimiter)
                .max_queueing_time_ms(1_000),
            FlowRule::qps("warm-paced", 1e9)
                .control_behavior(ControlBehavior::WarmUpRateLimiter)
                .max_queueing_time_ms(1_000),
            FlowRule::qps("related", 1e9).relate("read"),
            FlowRule::qps("chained", 1e9).chain("entrance"),
            FlowRule::thread("bulkhead", 1.0),
            FlowRule::qps("closed", 0.0),
        ])
        .expect("valid rules");
    sentinel
        .authority_rules()
        .load_rules(vec![AuthorityRule::white_list("guarded", "friend")])
        .expect("valid rule");
    sentinel
        .system_rules()
        .load_rules(vec![SystemRule::new().qps(1e9)])
        .expect("valid rule");
    // Past four 500 ms rounds, so that every node has rolled a round up (its minute window
    // is made then).
    for _ in 0..2_100 {
        every_path(&sentinel);
        clock.advance_ms(1);
    }
    let allocations = allocations_during(|| {
        for _ in 0..2_000 {
            every_path(&sentinel);
            clock.advance_ms(1);
        }
    });
    assert_eq!(allocations, 0, "a check or a block allocated");
}

/// A resource two threads have entered: the fast path folds its passes into the shared
/// count and takes quotas ahead (`stat::fold`). Using a quota, taking a new one, taking the
/// other thread's back when the window is full, and handing quotas back when a round starts
/// allocate nothing.
#[test]
fn several_threads_on_one_resource_do_not_allocate() {
    let clock = FakeClock::at_ms(10_000);
    let sentinel = Sentinel::builder().clock(clock.clone()).build();
    // A limit of 2 000 a second: quotas of 31; about 1 000 calls a round fill it.
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("shared", 2_000.0)])
        .expect("valid rule");
    let handle = sentinel.resource("shared");
    let burst = |calls: usize| {
        for _ in 0..calls {
            drop(handle.entry().enter());
        }
    };
    burst(1);
    // The other thread takes a quota and keeps most of it.
    std::thread::scope(|s| {
        s.spawn(|| burst(1));
    });
    // Past four 500 ms rounds, so that the node's buckets have all been restarted once.
    for _ in 0..6 {
        burst(1_500);
        std::thread::scope(|s| {
            s.spawn(|| burst(1));
        });
        clock.advance_ms(500);
    }
    let allocations = allocations_during(|| {
        for _ in 0..6 {
            burst(1_500);
            clock.advance_ms(500);
        }
    });
    assert_eq!(allocations, 0, "a folded pass, quota or block allocated");
}

/// Refused calls on two threads at once on one resource (a QPS rule of 0, the fast path's
/// fold, the block tally's lines, the error naming the rule): neither thread allocates once
/// it has made its first block.
#[test]
fn refused_calls_on_two_threads_do_not_allocate() {
    let clock = FakeClock::at_ms(10_000);
    let sentinel = Sentinel::builder().clock(clock.clone()).build();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("closed", 0.0)])
        .expect("valid rule");
    let handle = sentinel.resource("closed");
    let refused = |calls: usize| {
        for _ in 0..calls {
            assert!(handle.entry().enter().is_err(), "a count of 0 refuses");
        }
    };
    let start = std::sync::Barrier::new(2);
    let counted = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                refused(100);
                start.wait();
                let before = ALLOCATIONS.load(Ordering::SeqCst);
                COUNTING.with(|c| c.set(true));
                refused(20_000);
                COUNTING.with(|c| c.set(false));
                counted.fetch_add(
                    ALLOCATIONS.load(Ordering::SeqCst) - before,
                    Ordering::SeqCst,
                );
            });
        }
    });
    assert_eq!(
        counted.load(Ordering::SeqCst),
        0,
        "a refused call allocated"
    );
    let reasons = sentinel.block_reasons("closed").expect("the resource");
    assert_eq!(reasons.flow, 40_200, "the block tally is exact");
}

/// Param-flow rules of every kind, passing and blocking, over 200 000 distinct values: the
/// per-value tables are allocated when the rules load, never on a call.
#[test]
fn param_flow_does_not_allocate() {
    let clock = FakeClock::at_ms(10_000);
    let sentinel = Sentinel::builder().clock(clock.clone()).build();
    sentinel
        .param_flow_rules()
        .load_rules(vec![
            ParamFlowRule::qps("tokens", 0, 2.0).item(ParamFlowItem::new("0", "int", 0)),
            ParamFlowRule::qps("paced", 0, 1e6).rate_limiter(10),
            ParamFlowRule::thread("inside", 0, 1.0),
            ParamFlowRule::qps("named", 0, 2.0).param_key("user"),
        ])
        .expect("valid rules");
    let tokens = sentinel.resource("tokens");
    let run = |from: u64, to: u64| {
        for i in from..to {
            let args = [ParamValue::from(i % 100_000), ParamValue::from("x")];
            drop(tokens.entry().args(&args).enter());
            drop(sentinel.entry("paced").args(&args).enter());
            let held = sentinel.entry("inside").args(&args).enter();
            let _ = sentinel.entry("inside").args(&args).enter(); // blocked
            drop(held);
            let user = [("user", ParamValue::from(i))];
            drop(sentinel.entry("named").attachments(&user).enter());
            clock.advance_ms(1);
        }
    };
    run(0, 2_100);
    let allocations = allocations_during(|| run(2_100, 202_100));
    assert_eq!(allocations, 0, "a param-flow check allocated");
}

/// A cluster backend that hands out slots and lets the test fill and degrade them.
#[derive(Debug, Default)]
struct LeaseBackend {
    slots: std::sync::Mutex<Vec<std::sync::Arc<sentinel_core::cluster::ClusterSlot>>>,
}

impl sentinel_core::cluster::ClusterBackend for LeaseBackend {
    fn register(
        &self,
        specs: &[sentinel_core::cluster::ClusterRuleSpec],
    ) -> Vec<std::sync::Arc<sentinel_core::cluster::ClusterSlot>> {
        let slots: Vec<_> = specs
            .iter()
            .map(|s| std::sync::Arc::new(sentinel_core::cluster::ClusterSlot::new(s.clone())))
            .collect();
        *self.slots.lock().unwrap_or_else(|e| e.into_inner()) = slots.clone();
        slots
    }
}

/// Cluster rules with a backend: admitted from the lease, blocked on an empty one, and the
/// degraded fallback passing and blocking.
#[test]
fn cluster_rules_do_not_allocate() {
    use sentinel_core::flow::ClusterFlowConfig;
    let clock = FakeClock::at_ms(10_000);
    let backend = std::sync::Arc::new(LeaseBackend::default());
    let sentinel = Sentinel::builder()
        .clock(clock.clone())
        .cluster_backend(backend.clone())
        .build();
    sentinel
        .flow_rules()
        .load_rules(vec![
            FlowRule::qps("leased", 1e9).cluster(ClusterFlowConfig::new(1).global(true)),
            FlowRule::qps("empty", 1e9).cluster(ClusterFlowConfig::new(2).global(true)),
            FlowRule::qps("fallback", 5.0).cluster(ClusterFlowConfig::new(3).global(true)),
        ])
        .expect("valid rules");
    let slots = backend
        .slots
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    slots[0].add_tokens(1 << 40);
    slots[2].set_degraded(true);
    let paths = |sentinel: &Sentinel| {
        assert!(sentinel.entry("leased").enter().is_ok());
        assert!(sentinel.entry("empty").enter().is_err());
        let _ = sentinel.entry("fallback").enter();
    };
    for _ in 0..2_100 {
        paths(&sentinel);
        clock.advance_ms(1);
    }
    let allocations = allocations_during(|| {
        for _ in 0..2_000 {
            paths(&sentinel);
            clock.advance_ms(1);
        }
    });
    assert_eq!(allocations, 0, "a cluster check allocated");
}
