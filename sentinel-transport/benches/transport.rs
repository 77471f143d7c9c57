//! The transport's costs: the entry hot path with and without a running transport (same
//! run), and the per-second roll-up (`MetricSeries::collect`, what the transport's collector
//! calls once a second) for 1 000 and 10 000 resources.
#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use sentinel_core::flow::FlowRule;
use sentinel_core::series::MetricSeries;
use sentinel_core::{FakeClock, Limits, Sentinel};
use sentinel_transport::{Transport, TransportConfig};

/// An engine whose resource `r` has a flow rule that never blocks: the hot path checks a rule.
fn engine() -> Sentinel {
    let sentinel = Sentinel::new();
    let never_blocks = FlowRule::qps("r", 1e12);
    sentinel
        .flow_rules()
        .load_rules(vec![never_blocks])
        .expect("valid rule");
    sentinel
}

fn hot_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("hot_path");
    group.throughput(Throughput::Elements(1));
    let plain = engine();
    group.bench_function("entry_exit/without_transport", |b| {
        b.iter(|| drop(std::hint::black_box(plain.entry("r").enter())))
    });
    let served = engine();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let config = TransportConfig::builder("bench")
        .port(0)
        .build()
        .expect("a config");
    let transport = runtime
        .block_on(Transport::start(served.clone(), config))
        .expect("the transport starts");
    group.bench_function("entry_exit/with_transport", |b| {
        b.iter(|| drop(std::hint::black_box(served.entry("r").enter())))
    });
    group.finish();
    runtime.block_on(transport.shutdown());
}

fn rollup(c: &mut Criterion) {
    let mut group = c.benchmark_group("rollup");
    group.sample_size(20);
    for resources in [1_000usize, 10_000] {
        let clock = FakeClock::at_ms(1_000_000);
        let sentinel = Sentinel::builder()
            .clock(clock.clone())
            .limits(Limits::default().max_resources(resources + 10))
            .build();
        let names: Vec<String> = (0..resources).map(|i| format!("GET:/r/{i}")).collect();
        let series = Arc::new(MetricSeries::new());
        // Warm: one second collected, so each measured call adds exactly one second.
        for name in &names {
            drop(sentinel.entry(name).enter());
        }
        clock.advance_ms(1000);
        series.collect(&sentinel);
        group.throughput(Throughput::Elements(resources as u64));
        group.bench_with_input(
            BenchmarkId::new("collect_one_second", resources),
            &resources,
            |b, _| {
                b.iter_batched(
                    || {
                        for name in &names {
                            drop(sentinel.entry(name).enter());
                        }
                        clock.advance_ms(1000);
                    },
                    |()| series.collect(&sentinel),
                    BatchSize::PerIteration,
                )
            },
        );
        println!(
            "rollup/{resources}: {} rows held, {} bytes of rows ({} per row)",
            series.len(),
            series.len() * MetricSeries::ROW_BYTES,
            MetricSeries::ROW_BYTES
        );
    }
    group.finish();
}

criterion_group!(benches, hot_path, rollup);
criterion_main!(benches);
