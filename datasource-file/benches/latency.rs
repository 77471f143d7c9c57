//! File write -> rules applied latency, through the driver, with the default debounce.
//!
//! `cargo bench -p sentinel-datasource-file --bench latency` prints p50, p99 and max over 100 updates
//! for two writers: an editor's save (temporary file + rename) and an in-place rewrite
//! (truncate + write). The budget is p99 <= 150 ms; the process exits with status 1 past it.
//!
//! Each update is timed from just before the write to the engine's `RulesApplied` event, and
//! the next write starts once the previous one is applied.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use sentinel_core::datasource::testkit::{applied_seq, flow_payload};
use sentinel_core::datasource::{DataSource, FlowJson};
use sentinel_core::flow::FlowRule;
use sentinel_core::{Sentinel, SentinelEvent};
use sentinel_datasource_file::{FileSource, DEFAULT_DEBOUNCE};
use sentinel_test_support::Latencies;
use tokio::sync::mpsc;

const UPDATES: u64 = 100;
const BUDGET_P99: Duration = Duration::from_millis(150);
/// Longest wait for one update; a miss aborts the run.
const WAIT: Duration = Duration::from_secs(10);

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and gets a no-op.
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("latency: run with `cargo bench -p sentinel-datasource-file --bench latency`");
        return ExitCode::SUCCESS;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    println!(
        "file write -> applied, {UPDATES} updates, default debounce {DEFAULT_DEBOUNCE:?}, \
         budget p99 <= {BUDGET_P99:?}"
    );
    let mut within = true;
    for (name, writer) in [
        ("rename", save_atomically as fn(&Path, &[u8])),
        ("in-place", rewrite_in_place),
    ] {
        let mut latencies = Latencies::with_capacity(UPDATES as usize);
        for sample in runtime.block_on(measure(writer)) {
            latencies.record(sample);
        }
        let p50 = latencies.percentile(50.0);
        let p99 = latencies.percentile(99.0);
        let max = latencies.percentile(100.0);
        let verdict = if p99 <= BUDGET_P99 {
            "within budget"
        } else {
            "OVER BUDGET"
        };
        println!(
            "{name:>9}: p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms  ({verdict})",
            ms(p50),
            ms(p99),
            ms(max)
        );
        within &= p99 <= BUDGET_P99;
    }
    if within {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Writes `UPDATES` payloads with `write`, one at a time, and returns each one's latency.
async fn measure(write: fn(&Path, &[u8])) -> Vec<Duration> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("flow-rules.json");
    fs::write(&path, flow_payload(0)).expect("write");

    let sentinel = Sentinel::new();
    let (tx, mut applied) = mpsc::unbounded_channel();
    sentinel.add_listener(move |event: &SentinelEvent| {
        if let SentinelEvent::RulesApplied { .. } = event {
            let _ = tx.send(Instant::now());
        }
    });
    let source = DataSource::builder(
        FileSource::new(&path).expect("valid settings"),
        FlowJson::new(),
    )
    .start(&sentinel)
    .await
    .expect("the data source starts");
    // The initial load.
    applied.recv().await.expect("the initial apply");

    let mut latencies = Vec::with_capacity(UPDATES as usize);
    for seq in 1..=UPDATES {
        let written = Instant::now();
        write(&path, &flow_payload(seq));
        // An in-place rewrite may be read half-written and rejected first: wait for this
        // sequence, not just any apply.
        loop {
            let at = tokio::time::timeout(WAIT, applied.recv())
                .await
                .unwrap_or_else(|_| panic!("update {seq} not applied within {WAIT:?}"))
                .expect("the listener lives as long as the engine");
            if applied_seq::<FlowRule>(&sentinel) == Some(seq) {
                latencies.push(at - written);
                break;
            }
        }
    }
    source.close().await;
    latencies
}

/// An editor's save: a temporary file in the same directory, renamed over the rules file.
fn save_atomically(path: &Path, bytes: &[u8]) {
    let temp = path.with_file_name(".flow-rules.json.swp");
    let mut file = fs::File::create(&temp).expect("create");
    file.write_all(bytes).expect("write");
    drop(file);
    fs::rename(&temp, path).expect("rename");
}

/// Truncate and write in place.
fn rewrite_in_place(path: &Path, bytes: &[u8]) {
    fs::write(path, bytes).expect("write");
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
