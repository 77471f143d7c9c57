//! Costs of the primitives the hot path is built from, on this machine.
#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use criterion::{criterion_group, criterion_main, Criterion};
use sentinel_core::{Clock, SystemClock};

fn primitives(c: &mut Criterion) {
    let mut group = c.benchmark_group("primitives");
    let clock = SystemClock::new();
    group.bench_function("system_clock_now_ms", |b| {
        b.iter(|| std::hint::black_box(clock.now_ms()))
    });
    group.bench_function("system_clock_now_nanos", |b| {
        b.iter(|| std::hint::black_box(clock.now_nanos()))
    });
    group.bench_function("std_instant_now", |b| {
        b.iter(|| std::hint::black_box(std::time::Instant::now()))
    });
    let swap = ArcSwap::from_pointee(42u64);
    group.bench_function("arc_swap_load", |b| {
        b.iter(|| std::hint::black_box(**swap.load()))
    });
    let counter = AtomicU64::new(0);
    group.bench_function("atomic_fetch_add", |b| {
        b.iter(|| counter.fetch_add(1, Ordering::Relaxed))
    });
    let divisor = std::hint::black_box(500u64);
    let mut t = 1_000_000u64;
    group.bench_function("u64_division_by_runtime_value", |b| {
        b.iter(|| {
            t += 1;
            std::hint::black_box(t / divisor)
        })
    });
    let reduced = strength_reduce::StrengthReducedU64::new(divisor);
    group.bench_function("u64_division_strength_reduced", |b| {
        b.iter(|| {
            t += 1;
            std::hint::black_box(t / reduced)
        })
    });
    let arc = Arc::new(1u64);
    group.bench_function("arc_clone_drop", |b| {
        b.iter(|| drop(std::hint::black_box(arc.clone())))
    });
    group.finish();
}

criterion_group!(benches, primitives);
criterion_main!(benches);
