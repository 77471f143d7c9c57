//! The entry hot path: entry + exit on one resource, 1 and 2 threads, with and without rules.
#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sentinel_core::circuit_breaker::DegradeRule;
use sentinel_core::flow::FlowRule;
use sentinel_core::param_flow::{ParamFlowRule, ParamValue};
use sentinel_core::Sentinel;

/// An engine with the given rules on resource "r".
fn engine(flow: bool, breaker: bool) -> Sentinel {
    let sentinel = Sentinel::new();
    if flow {
        sentinel
            .flow_rules()
            .load_rules(vec![FlowRule::qps("r", 1e12)])
            .expect("valid rule");
    }
    if breaker {
        sentinel
            .degrade_rules()
            .load_rules(vec![DegradeRule::error_ratio("r", 0.99, 10)])
            .expect("valid rule");
    }
    sentinel
}

/// Runs `iters` entries on each of `threads` threads at once; returns the wall time, which
/// is the per-thread time per entry times `iters`.
fn run_threads(sentinel: &Sentinel, threads: usize, iters: u64, by_handle: bool) -> Duration {
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let handle = sentinel.resource("r");
                barrier.wait();
                for _ in 0..iters {
                    let entry = if by_handle {
                        handle.entry().enter()
                    } else {
                        sentinel.entry("r").enter()
                    };
                    drop(std::hint::black_box(entry));
                }
                barrier.wait();
            });
        }
        barrier.wait();
        let start = Instant::now();
        barrier.wait();
        start.elapsed()
    })
}

fn entry_exit(c: &mut Criterion) {
    let mut group = c.benchmark_group("entry_exit");
    group.throughput(Throughput::Elements(1));
    let cases = [
        ("no_rule", false, false),
        ("qps_rule", true, false),
        ("qps_rule_and_breaker", true, true),
    ];
    let shadow_qps = || {
        let sentinel = Sentinel::new();
        let rules = sentinel_core::RuleSet::new().with_flow(vec![FlowRule::qps("r", 1e12)]);
        sentinel.load_shadow_rules(rules).expect("valid rule");
        sentinel
    };
    let engines = cases
        .into_iter()
        .map(|(name, flow, breaker)| (name, engine(flow, breaker)))
        // One shadow QPS rule and no enforced rule: compare with `qps_rule`.
        .chain([("shadow_qps_rule", shadow_qps())]);
    for (name, sentinel) in engines {
        let handle = sentinel.resource("r");
        group.bench_function(BenchmarkId::new(name, "1_thread_handle"), |b| {
            b.iter(|| drop(std::hint::black_box(handle.entry().enter())))
        });
        group.bench_function(BenchmarkId::new(name, "1_thread_by_name"), |b| {
            b.iter(|| drop(std::hint::black_box(sentinel.entry("r").enter())))
        });
        group.bench_function(BenchmarkId::new(name, "2_threads_handle"), |b| {
            b.iter_custom(|iters| run_threads(&sentinel, 2, iters, true))
        });
    }
    group.finish();
}

/// Entry + exit through a handle with one param-flow rule and one argument, the values drawn
/// in turn from a working set of 1 000; and the same handle without arguments.
fn param_entry_exit(c: &mut Criterion) {
    let mut group = c.benchmark_group("param_entry_exit");
    group.throughput(Throughput::Elements(1));
    let sentinel = Sentinel::new();
    sentinel
        .param_flow_rules()
        .load_rules(vec![ParamFlowRule::qps("r", 0, 1e6)])
        .expect("valid rule");
    let handle = sentinel.resource("r");
    let values: Vec<[ParamValue<'static>; 1]> = (0..1_000u64)
        .map(|i| [ParamValue::from(i * 7919)])
        .collect();
    let mut next = 0;
    group.bench_function("qps_param_rule/1_thread_handle_1000_values", |b| {
        b.iter(|| {
            next = (next + 1) % values.len();
            drop(std::hint::black_box(
                handle.entry().args(&values[next]).enter(),
            ))
        })
    });
    let names: Vec<String> = (0..1_000).map(|i| format!("user-{i}")).collect();
    let names: Vec<[ParamValue<'_>; 1]> = names.iter().map(|n| [ParamValue::from(n)]).collect();
    group.bench_function("qps_param_rule/1_thread_handle_1000_strings", |b| {
        b.iter(|| {
            next = (next + 1) % names.len();
            drop(std::hint::black_box(
                handle.entry().args(&names[next]).enter(),
            ))
        })
    });
    group.bench_function("qps_param_rule/1_thread_handle_no_args", |b| {
        b.iter(|| drop(std::hint::black_box(handle.entry().enter())))
    });
    group.finish();
}

criterion_group!(benches, entry_exit, param_entry_exit);
criterion_main!(benches);
