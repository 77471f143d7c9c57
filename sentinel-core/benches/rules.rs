//! Validate + compile + swap of flow rule sets.
#![allow(missing_docs)] // criterion_group! generates undocumented functions

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use sentinel_core::flow::{ControlBehavior, FlowRule};
use sentinel_core::Sentinel;

fn rules(n: usize) -> Vec<FlowRule> {
    (0..n)
        .map(|i| {
            let rule = FlowRule::qps(format!("resource-{i}"), 100.0 + i as f64);
            if i % 4 == 0 {
                rule.control_behavior(ControlBehavior::WarmUp)
            } else {
                rule
            }
        })
        .collect()
}

fn load(c: &mut Criterion) {
    let mut group = c.benchmark_group("load_flow_rules");
    group.sample_size(20);
    for n in [10usize, 1_000, 10_000] {
        let sentinel = Sentinel::new();
        let set = rules(n);
        group.throughput(Throughput::Elements(n as u64));
        // Alternate two different sets so every load compiles new controllers.
        let other: Vec<FlowRule> = set
            .iter()
            .cloned()
            .map(|mut r| {
                r.count += 1.0;
                r
            })
            .collect();
        let mut flip = false;
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter_batched(
                || {
                    flip = !flip;
                    if flip {
                        set.clone()
                    } else {
                        other.clone()
                    }
                },
                |rules| sentinel.flow_rules().load_rules(rules).expect("valid"),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, load);
criterion_main!(benches);
