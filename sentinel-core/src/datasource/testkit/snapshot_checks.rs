//! Points 9 and 10 of the conformance checks: the local snapshot and the size cap; and the
//! temporary directory the checks keep files in.

use std::path::PathBuf;

use super::fixture::Fixture;
use super::observe::flow_payload;
use super::{CheckOutcome, ConformanceFailure, ConformanceHarness};
use crate::datasource::snapshot;
use crate::datasource::StartMode;
use crate::rules::Validation;

/// Point 9, local snapshot: every apply writes the snapshot file; with the server down a
/// `Snapshot` start applies it, and the source converges once the server is back.
pub async fn check_snapshot<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let dir = TempDir::new();
    let path = dir.0.join("rules.json");
    let fx = Fixture::new("snapshot", harness.timeout());
    let read_snapshot = || {
        std::fs::read(&path)
            .ok()
            .and_then(|b| snapshot::decode(&b, Validation::Strict).ok())
            .and_then(|(set, _)| set.flow)
            .and_then(|rules| rules.first().map(|r| r.count as u64))
    };
    harness.write(&flow_payload(1)).await;
    let p = path.clone();
    let source = fx.start(harness, move |b| b.snapshot_file(p)).await?;
    fx.ensure(read_snapshot() == Some(1), || {
        "no snapshot after the initial load".into()
    })?;
    harness.write(&flow_payload(2)).await;
    fx.wait("snapshot of sequence 2", || read_snapshot() == Some(2))
        .await?;
    source.close().await;

    if harness.stop_server().await.is_err() {
        return Ok(CheckOutcome::Skipped {
            reason: "the harness cannot stop its server: a Snapshot start with the server down \
                     not checked",
        });
    }
    let fx = Fixture::new("snapshot", harness.timeout());
    let p = path.clone();
    let started = fx
        .start(harness, move |b| {
            b.snapshot_file(p).start_mode(StartMode::Snapshot)
        })
        .await;
    let source = match started {
        Ok(source) => source,
        Err(e) => {
            let _ = harness.start_server().await;
            return Err(e);
        }
    };
    let status = source.status();
    let from_snapshot = fx.seq() == Some(2) && status.from_snapshot && !status.connected;
    let restarted = harness.start_server().await;
    fx.ensure(from_snapshot, || {
        format!("snapshot start: sequence {:?}, status {status:?}", fx.seq())
    })?;
    fx.ensure(restarted.is_ok(), || {
        "the server could not be restarted".into()
    })?;
    harness.write(&flow_payload(3)).await;
    fx.wait_seq(Some(3)).await?;
    let status = fx
        .wait_status(&source, "connected, not from snapshot", |s| {
            s.connected && !s.from_snapshot
        })
        .await?;
    fx.ensure(status.applied_count >= 1, || format!("status: {status:?}"))?;
    source.close().await;
    Ok(CheckOutcome::Passed)
}

/// Point 10, size cap: a payload over the cap is rejected with a clear error and the rules
/// stay.
pub async fn check_size_cap<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("size_cap", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let source = fx.start(harness, |b| b.max_payload_bytes(512)).await?;
    let big: Vec<String> = (0..40)
        .map(|i| format!(r#"{{"resource":"conformance-{i}","count":1}}"#))
        .collect();
    harness
        .write(format!("[{}]", big.join(",")).as_bytes())
        .await;
    let status = fx
        .wait_status(&source, "oversized payload rejected", |s| {
            s.rejected_count >= 1
        })
        .await?;
    let error = status.last_error.unwrap_or_default();
    fx.ensure(error.contains("cap"), || format!("unclear error: {error}"))?;
    fx.ensure(fx.seq() == Some(1), || {
        format!("rules changed to {:?}", fx.seq())
    })?;
    harness.write(&flow_payload(2)).await;
    fx.wait_seq(Some(2)).await?;
    source.close().await;
    Ok(CheckOutcome::Passed)
}

/// A temporary directory removed on drop.
pub(super) struct TempDir(pub(super) PathBuf);

impl TempDir {
    pub(super) fn new() -> Self {
        let path = std::env::temp_dir().join(format!(
            "sentinel-conformance-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        let _ = std::fs::create_dir_all(&path);
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
