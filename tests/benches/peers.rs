//! The engine beside a peer, in one run: governor's bare `check()` (a GCRA limiter without
//! statistics) against entry + exit with one QPS rule that never blocks, on one thread and
//! on two threads sharing one limiter / resource; then both refusing every call (a limit
//! used up, a count of 0). Issue #31's targets compare these figures from the same run:
//! `cargo bench -p sentinel-tests --bench peers`.
#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::num::NonZeroU32;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use governor::{Quota, RateLimiter};
use sentinel_core::flow::FlowRule;
use sentinel_core::Sentinel;

/// Runs `iters` calls of `call` on each of `threads` threads at once; the time of the slowest
/// thread. Each thread times itself from the moment they all start: a timer on another thread
/// could be scheduled late on a 2-core machine and miss part of the calls.
fn on_threads(threads: usize, iters: u64, call: &(dyn Fn() + Sync)) -> Duration {
    let barrier = Barrier::new(threads);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        call();
                    }
                    start.elapsed()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("a benchmark thread panicked"))
            .max()
            .unwrap_or_default()
    })
}

fn peers(c: &mut Criterion) {
    let mut group = c.benchmark_group("peers");
    group.throughput(Throughput::Elements(1));

    // A limit no benchmark reaches, so every call passes in both. The rule's count stays
    // within what the fast path folds on several threads (`stat::fold`: up to 2^31).
    let limit = NonZeroU32::new(u32::MAX).expect("non-zero");
    let governor = RateLimiter::direct(Quota::per_second(limit));
    let sentinel = Sentinel::new();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("r", 1e9)])
        .expect("valid rule");
    let handle = sentinel.resource("r");

    group.bench_function(BenchmarkId::new("governor_check", "1_thread"), |b| {
        b.iter(|| std::hint::black_box(governor.check()))
    });
    group.bench_function(BenchmarkId::new("sentinel_qps_handle", "1_thread"), |b| {
        b.iter(|| drop(std::hint::black_box(handle.entry().enter())))
    });
    group.bench_function(BenchmarkId::new("sentinel_qps_by_name", "1_thread"), |b| {
        b.iter(|| drop(std::hint::black_box(sentinel.entry("r").enter())))
    });
    group.bench_function(BenchmarkId::new("governor_check", "2_threads"), |b| {
        b.iter_custom(|iters| {
            on_threads(2, iters, &|| {
                std::hint::black_box(governor.check()).ok();
            })
        })
    });
    group.bench_function(BenchmarkId::new("sentinel_qps_handle", "2_threads"), |b| {
        b.iter_custom(|iters| {
            on_threads(2, iters, &|| {
                drop(std::hint::black_box(handle.entry().enter()))
            })
        })
    });

    // Every call refused: governor's one cell an hour, used up; a QPS count of 0.
    let one = NonZeroU32::new(1).expect("non-zero");
    let used_up = RateLimiter::direct(Quota::per_hour(one));
    let _ = used_up.check();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("r", 1e9), FlowRule::qps("closed", 0.0)])
        .expect("valid rules");
    let closed = sentinel.resource("closed");
    group.bench_function(BenchmarkId::new("governor_denied", "1_thread"), |b| {
        b.iter(|| std::hint::black_box(used_up.check()))
    });
    group.bench_function(BenchmarkId::new("sentinel_qps_blocked", "1_thread"), |b| {
        b.iter(|| drop(std::hint::black_box(closed.entry().enter())))
    });
    group.bench_function(BenchmarkId::new("governor_denied", "2_threads"), |b| {
        b.iter_custom(|iters| {
            on_threads(2, iters, &|| {
                std::hint::black_box(used_up.check()).ok();
            })
        })
    });
    group.bench_function(BenchmarkId::new("sentinel_qps_blocked", "2_threads"), |b| {
        b.iter_custom(|iters| {
            on_threads(2, iters, &|| {
                drop(std::hint::black_box(closed.entry().enter()))
            })
        })
    });
    group.finish();
}

criterion_group!(benches, peers);
criterion_main!(benches);
