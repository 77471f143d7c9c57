//! The attribute's cost against a hand-written entry through a pre-resolved handle, in the
//! same run: the same body (an addition) guarded both ways, one QPS rule too high to block.
#![allow(missing_docs)] // criterion_group! generates an undocumented function

use std::hint::black_box;
use std::sync::OnceLock;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sentinel_core::flow::FlowRule;
use sentinel_core::param_flow::{ParamFlowRule, ParamValue};
use sentinel_core::{BlockError, ResourceHandle, Sentinel};
use sentinel_macros::sentinel;

fn engine() -> &'static Sentinel {
    static ENGINE: OnceLock<Sentinel> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let sentinel = Sentinel::new();
        sentinel
            .flow_rules()
            .load_rules(vec![
                FlowRule::qps("bench.attribute", 1e12),
                FlowRule::qps("bench.by_hand", 1e12),
                FlowRule::qps("bench.attribute_args", 1e12),
                FlowRule::qps("bench.by_hand_args", 1e12),
            ])
            .expect("valid rules");
        sentinel
            .param_flow_rules()
            .load_rules(vec![
                ParamFlowRule::qps("bench.attribute_args", 0, 1e12),
                ParamFlowRule::qps("bench.by_hand_args", 0, 1e12),
            ])
            .expect("valid rules");
        sentinel
    })
}

#[sentinel(resource = "bench.attribute", sentinel = engine())]
#[inline(never)] // both sides called alike, and countable by callgrind
fn attribute(x: u64) -> Result<u64, BlockError> {
    Ok(x.wrapping_add(1))
}

#[inline(never)] // both sides called alike, and countable by callgrind
fn by_hand(x: u64) -> Result<u64, BlockError> {
    static HANDLE: OnceLock<ResourceHandle> = OnceLock::new();
    let handle = HANDLE.get_or_init(|| engine().resource("bench.by_hand"));
    let mut entry = handle.entry().enter()?;
    let result = Ok(x.wrapping_add(1));
    if result.is_err() {
        entry.set_error();
    }
    result
}

#[sentinel(resource = "bench.attribute_args", sentinel = engine(), args(user))]
#[inline(never)] // both sides called alike, and countable by callgrind
fn attribute_args(user: u64) -> Result<u64, BlockError> {
    Ok(user.wrapping_add(1))
}

#[inline(never)] // both sides called alike, and countable by callgrind
fn by_hand_args(user: u64) -> Result<u64, BlockError> {
    static HANDLE: OnceLock<ResourceHandle> = OnceLock::new();
    let handle = HANDLE.get_or_init(|| engine().resource("bench.by_hand_args"));
    let args = [ParamValue::from(user)];
    let mut entry = handle.entry().args(&args).enter()?;
    let result = Ok(user.wrapping_add(1));
    if result.is_err() {
        entry.set_error();
    }
    result
}

fn guard(c: &mut Criterion) {
    let mut group = c.benchmark_group("guard");
    group.throughput(Throughput::Elements(1));
    group.bench_function("bare", |b| {
        b.iter(|| Ok::<u64, BlockError>(black_box(7u64).wrapping_add(1)))
    });
    // Alternating pairs, so that a drift of the machine hits both sides.
    for round in 0..2 {
        group.bench_function(format!("by_hand/{round}"), |b| {
            b.iter(|| by_hand(black_box(7)))
        });
        group.bench_function(format!("attribute/{round}"), |b| {
            b.iter(|| attribute(black_box(7)))
        });
    }
    for round in 0..2 {
        group.bench_function(format!("by_hand_args/{round}"), |b| {
            b.iter(|| by_hand_args(black_box(7)))
        });
        group.bench_function(format!("attribute_args/{round}"), |b| {
            b.iter(|| attribute_args(black_box(7)))
        });
    }
    group.finish();
}

criterion_group!(benches, guard);
criterion_main!(benches);
