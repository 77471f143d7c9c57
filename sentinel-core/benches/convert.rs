//! Source-to-applied cost: JSON bytes -> convert -> validate -> compile -> one atomic swap,
//! for 10, 1 000 and 10 000 flow rules.
#![allow(missing_docs)] // criterion_group! generates an undocumented function

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sentinel_core::datasource::{Converter, FlowJson};
use sentinel_core::Sentinel;

fn payload(rules: usize, generation: usize) -> Vec<u8> {
    let items: Vec<String> = (0..rules)
        .map(|i| {
            format!(
                r#"{{"resource":"GET:/api/item/{i}","limitApp":"default","grade":1,"count":{},"strategy":0,"controlBehavior":{},"app":"shop","gmtCreate":1573130440602}}"#,
                100 + (i + generation) % 7,
                i % 2
            )
        })
        .collect();
    format!("[{}]", items.join(",")).into_bytes()
}

fn convert_and_apply(c: &mut Criterion) {
    let mut group = c.benchmark_group("convert_validate_swap");
    for rules in [10usize, 1_000, 10_000] {
        // Two payloads that differ in every other threshold, so each apply changes rules.
        let payloads = [payload(rules, 0), payload(rules, 1)];
        let sentinel = Sentinel::new();
        let converter = FlowJson::new();
        let mut turn = 0usize;
        group.throughput(Throughput::Elements(rules as u64));
        group.bench_with_input(BenchmarkId::from_parameter(rules), &rules, |b, _| {
            b.iter(|| {
                turn += 1;
                let set = converter
                    .convert(&payloads[turn % 2])
                    .expect("valid payload");
                sentinel
                    .flow_rules()
                    .load_rules(set.flow.unwrap_or_default())
                    .expect("applies")
            })
        });
        group.bench_with_input(BenchmarkId::new("convert_only", rules), &rules, |b, _| {
            b.iter(|| converter.convert(&payloads[0]).expect("valid payload"))
        });
    }
    group.finish();
}

criterion_group!(benches, convert_and_apply);
criterion_main!(benches);
