//! Circuit-breaker tests on the fake clock: `cycles` (each strategy's open, probe and close),
//! `probes` (the half-open probe and the breaker's edges with the rest of the engine).

use std::sync::{Arc, Barrier, Mutex};

use super::*;
use crate::test_support::engine;
use crate::{BlockError, Entry, FakeClock, Sentinel, SentinelEvent};

fn state(s: &Sentinel) -> BreakerState {
    s.circuit_breakers()[0].1
}

/// The seed documents' rule: max RT 500 ms, slow ratio 1.0, 5 calls, 1 s interval, 1 s open.
fn seed_rule() -> DegradeRule {
    DegradeRule::slow_ratio("r", 500.0, 1.0, 1)
        .min_request_amount(5)
        .stat_interval_ms(1000)
}

/// Enters `n` calls now, lets `rt_ms` pass, and exits them all in order; the last `errors`
/// of them failed.
fn calls(s: &Sentinel, clock: &FakeClock, n: usize, errors: usize, rt_ms: u64) {
    let mut entries: Vec<Entry<'_>> = (0..n)
        .map(|_| s.entry("r").enter().expect("closed breaker passes"))
        .collect();
    clock.advance_ms(rt_ms);
    for e in entries.iter_mut().rev().take(errors) {
        e.set_error();
    }
    drop(entries);
}

mod cycles;
mod probes;
