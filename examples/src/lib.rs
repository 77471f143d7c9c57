//! Shared pieces of the example programs: a simulated workload and a per-second report.
//!
//! The repository README's code is compiled as this crate's doctests (see [`readme`]), so
//! it cannot go stale.

use std::error::Error;
use std::time::Duration;

use sentinel_core::Sentinel;

/// Runs a simulated resource under steady load: `rate` calls per second, each taking
/// `work` of pretend work, until the task is dropped.
pub async fn simulate(sentinel: Sentinel, resource: &'static str, rate: u32, work: Duration) {
    let mut tick = tokio::time::interval(Duration::from_secs(1) / rate.max(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        let sentinel = sentinel.clone();
        tokio::spawn(async move {
            let _ = sentinel
                .entry(resource)
                .inbound()
                .run(tokio::time::sleep(work))
                .await;
        });
    }
}

/// One line per resource: passes and blocks in the last complete second.
pub fn report(sentinel: &Sentinel, resources: &[&str]) -> String {
    resources
        .iter()
        .map(|r| match sentinel.resource_stats(r) {
            Some(s) => format!(
                "{r}: pass {:>4} block {:>4}",
                s.pass_last_second, s.block_last_second
            ),
            None => format!("{r}: no traffic yet"),
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// An error and its causes, one after the other: `a: b: c`.
pub fn error_chain(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

#[doc = include_str!("../../README.md")]
pub mod readme {}
