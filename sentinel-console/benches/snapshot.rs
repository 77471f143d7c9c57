//! What one viewer costs the server per second: one snapshot (collecting the second, sorting
//! every resource's newest second, the top 50 rows with sparklines) and its JSON, with 100 and
//! 10 000 resources.
#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use sentinel_console::{Console, ResourceQuery};
use sentinel_core::series::MetricSeries;
use sentinel_core::{FakeClock, Sentinel};

fn snapshot(c: &mut Criterion) {
    let mut group = c.benchmark_group("console_snapshot");
    for resources in [100usize, 10_000] {
        let clock = FakeClock::at_ms(1_000_000);
        let sentinel = Sentinel::builder().clock(clock.clone()).build();
        let series = Arc::new(MetricSeries::new());
        let console = Console::builder(&sentinel)
            .series(series)
            .build()
            .expect("a console");
        let names: Vec<String> = (0..resources).map(|i| format!("res/{i:05}")).collect();
        // A minute of history: every resource called every second.
        for _ in 0..60 {
            for (i, name) in names.iter().enumerate() {
                for _ in 0..(i % 7 + 1) {
                    drop(sentinel.entry(name).enter());
                }
            }
            clock.advance_ms(1000);
            console.series().collect(&sentinel);
        }
        let query = ResourceQuery::default();
        group.bench_with_input(BenchmarkId::new("json", resources), &resources, |b, _| {
            b.iter(|| serde_json::to_vec(&console.snapshot(&query)).map(|v| v.len()))
        });
    }
    group.finish();
}

criterion_group!(benches, snapshot);
criterion_main!(benches);
