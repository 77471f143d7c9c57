use std::time::Duration;

use super::*;
use crate::flow::FlowRule;
use crate::{Clock, FakeClock};

/// An engine on a fake clock standing at the start of a second.
fn engine() -> (FakeClock, Sentinel) {
    let clock = FakeClock::new();
    let now = clock.now_ms();
    clock.advance_ms(1000 - now % 1000);
    let sentinel = Sentinel::builder().clock(clock.clone()).build();
    (clock, sentinel)
}

fn call(sentinel: &Sentinel, clock: &FakeClock, resource: &str, rt_ms: u64) -> bool {
    match sentinel.entry(resource).enter() {
        Ok(entry) => {
            clock.advance_ms(rt_ms);
            drop(entry);
            true
        }
        Err(_) => false,
    }
}

#[test]
fn a_second_reads_its_passes_blocks_and_rt_from_the_windows() {
    let (clock, sentinel) = engine();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("r", 3.0)])
        .unwrap();
    let start = clock.now_ms();
    // Five calls in the first half of the second, each taking 20 ms: three pass.
    let passed = (0..5).filter(|_| call(&sentinel, &clock, "r", 20)).count();
    assert_eq!(passed, 3);
    clock.advance_ms(1000 - (clock.now_ms() - start));
    let seconds = sentinel.resource_seconds("r", start, start + 1000);
    assert_eq!(seconds.len(), 1);
    let second = seconds[0];
    assert_eq!(second.second_ms, start);
    assert_eq!((second.pass, second.block, second.success), (3, 2, 3));
    assert_eq!(second.rt_sum_ms, 60);
    assert_eq!(second.avg_rt_ms(), 20.0);
    assert_eq!(
        sentinel.block_reasons("r").map(|b| (b.flow, b.total())),
        Some((2, 2))
    );
}

#[test]
fn a_second_rolled_into_the_minute_window_reads_the_same() {
    let (clock, sentinel) = engine();
    let start = clock.now_ms();
    for _ in 0..4 {
        call(&sentinel, &clock, "r", 100);
    }
    // Calls a few seconds later reuse the second-level buckets: the first second is only in
    // the minute window now.
    clock.advance_ms(3000);
    call(&sentinel, &clock, "r", 1);
    clock.advance_ms(600);
    call(&sentinel, &clock, "r", 1);
    clock.advance_ms(1000);
    let seconds = sentinel.resource_seconds("r", start, start + 1000);
    assert_eq!(seconds.len(), 1);
    assert_eq!((seconds[0].pass, seconds[0].success), (4, 4));
    assert_eq!(seconds[0].rt_sum_ms, 400);
}

#[test]
fn a_second_that_has_not_ended_is_not_given() {
    let (clock, sentinel) = engine();
    let start = clock.now_ms();
    call(&sentinel, &clock, "r", 1);
    assert!(sentinel.resource_seconds("r", start, u64::MAX).is_empty());
    clock.advance_ms(999);
    assert_eq!(sentinel.resource_seconds("r", start, u64::MAX).len(), 1);
}

#[test]
fn collecting_twice_adds_each_second_once_and_a_late_collect_catches_up() {
    let (clock, sentinel) = engine();
    let series = MetricSeries::new();
    let start = clock.now_ms();
    for s in 0..5 {
        for _ in 0..=s {
            call(&sentinel, &clock, "a", 0);
        }
        call(&sentinel, &clock, "b", 0);
        clock.advance_ms(1000);
        if s == 0 {
            assert_eq!(series.collect(&sentinel), 2);
            assert_eq!(series.collect(&sentinel), 0);
        }
    }
    // Four seconds were not collected on time: one late call collects them all.
    assert_eq!(series.collect(&sentinel), 8);
    let rows = series.rows(start, start + 5000, Some("a"));
    let passes: Vec<u64> = rows.iter().map(|r| r.stats.pass).collect();
    assert_eq!(passes, [1, 2, 3, 4, 5]);
    assert_eq!(series.rows(start, start + 5000, None).len(), 10);
    assert_eq!(
        series.rows(start, start + 5000, None),
        series.rows(start, start + 5000, None)
    );
    assert_eq!(series.newest_second(), Some(start + 4000));
    // Ordered by second, then resource.
    let all = series.rows(start + 1000, start + 2000, None);
    let names: Vec<&str> = all.iter().map(|r| &*r.resource).collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn blocks_by_reason_go_to_the_newest_second_collected() {
    let (clock, sentinel) = engine();
    sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("r", 1.0)])
        .unwrap();
    let series = MetricSeries::new();
    for _ in 0..3 {
        call(&sentinel, &clock, "r", 0);
    }
    clock.advance_ms(1000);
    series.collect(&sentinel);
    for _ in 0..2 {
        call(&sentinel, &clock, "r", 0);
    }
    clock.advance_ms(1000);
    series.collect(&sentinel);
    let rows = series.rows(0, u64::MAX, Some("r"));
    let blocks: Vec<(u64, u64)> = rows
        .iter()
        .map(|r| (r.stats.block, r.blocks.flow))
        .collect();
    assert_eq!(blocks, [(2, 2), (1, 1)]);
}

#[test]
fn the_ring_drops_rows_past_its_age_and_its_row_bound() {
    let (clock, sentinel) = engine();
    let series = MetricSeries::new()
        .retain(Duration::from_secs(3))
        .max_rows(5);
    for _ in 0..10 {
        call(&sentinel, &clock, "a", 0);
        call(&sentinel, &clock, "b", 0);
        clock.advance_ms(1000);
        series.collect(&sentinel);
        assert!(series.len() <= 5);
    }
    let rows = series.rows(0, u64::MAX, None);
    let newest = series.newest_second().unwrap();
    assert!(rows.iter().all(|r| r.stats.second_ms + 3000 >= newest));
    assert_eq!(rows.last().map(|r| r.stats.second_ms), Some(newest));
    assert_eq!(MetricSeries::ROW_BYTES, 128);
}

#[test]
fn concurrency_is_sampled_when_collected() {
    let (clock, sentinel) = engine();
    let series = MetricSeries::new();
    let held = sentinel.entry("r").enter().unwrap();
    clock.advance_ms(1000);
    series.collect(&sentinel);
    drop(held);
    let rows = series.rows(0, u64::MAX, Some("r"));
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].stats.pass, rows[0].concurrency), (1, 1));
}
