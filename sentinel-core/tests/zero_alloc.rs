//! Entry + exit allocates nothing on the heap, shown with a counting global allocator.
#![allow(unsafe_code)] // a GlobalAlloc impl is unsafe by definition

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use sentinel_core::circuit_breaker::DegradeRule;
use sentinel_core::flow::FlowRule;
use sentinel_core::Sentinel;

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
    // on first use.
    for _ in 0..100 {
        drop(sentinel.entry("r").origin("web").inbound().enter());
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
