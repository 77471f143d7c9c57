//! The data-source conformance kit (cargo feature `testkit`): checks a backend against the
//! data-source contract (DESIGN §4) with [`run_conformance`], and the helpers a backend's
//! tests wait and observe with ([`wait_status`], [`wait_until`], [`EventRecorder`],
//! [`applied_seq`]).
//!
//! A backend crate's test implements [`ConformanceHarness`] over a real server and calls
//! [`run_conformance`], or single checks such as [`check_ordered_updates`] with its own
//! numbers. Every wait is bounded by [`ConformanceHarness::timeout`].
//!
//! The rest serves every backend's tests alike: driving a source by hand ([`read`],
//! [`watch`], [`next_value`]) and checking a round trip ([`expect_round_trip`]). The
//! repository's own plumbing (its test servers, a partition proxy, a binary's output, the
//! benches' latencies) lives in the workspace's unpublished `sentinel-test-support` crate.

use std::time::Duration;

use async_trait::async_trait;

use super::driver::DataSourceBuilder;
use super::source::ReadableDataSource;

mod by_hand;
mod checks;
mod fixture;
mod memory;
mod observe;
mod round_trip;
mod snapshot_checks;

pub use by_hand::{next_value, read, values, watch};
pub use checks::{
    check_bad_payload, check_bad_payload_at_start, check_close, check_delete, check_disconnect,
    check_identical_payload, check_initial_load, check_ordered_updates, check_status,
};
pub use memory::MemoryHarness;
pub use observe::{
    applied_seq, flow_payload, status_within, until_within, wait_status, wait_until, AppliedRecord,
    EventRecorder, Sequenced, CONFORMANCE_RESOURCE, WAIT,
};
pub use round_trip::expect_round_trip;
pub use snapshot_checks::{check_size_cap, check_snapshot};

/// A check that the backend cannot run (it cannot stop its server, for example).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Unsupported;

/// What a backend's conformance test provides: fresh sources for one fixed key, and ways to
/// change what the key holds.
#[async_trait]
pub trait ConformanceHarness: Send + Sync {
    /// The backend's source type.
    type Source: ReadableDataSource;

    /// A new source reading the harness's key.
    fn make_source(&self) -> Self::Source;

    /// Stores `bytes` under the key. Panics if the server refuses.
    async fn write(&self, bytes: &[u8]);

    /// Deletes the key.
    async fn delete(&self);

    /// Stops the server (for the disconnect and snapshot-start checks).
    async fn stop_server(&self) -> Result<(), Unsupported> {
        Err(Unsupported)
    }

    /// Starts the server again.
    async fn start_server(&self) -> Result<(), Unsupported> {
        Err(Unsupported)
    }

    /// Stores `bytes` under the key while the server is stopped (a write the source cannot
    /// see until it reconnects and reads again), where the harness has a way to.
    async fn write_while_down(&self, bytes: &[u8]) -> Result<(), Unsupported> {
        let _ = bytes;
        Err(Unsupported)
    }

    /// The longest any single wait may take (10 s by default).
    fn timeout(&self) -> Duration {
        Duration::from_secs(10)
    }

    /// Adjusts every data source the kit builds (the kit already sets a 20 ms - 500 ms
    /// backoff, and no local snapshot but where a check names one).
    fn configure(&self, builder: DataSourceBuilder) -> DataSourceBuilder {
        builder
    }
}

/// A conformance check that did not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("conformance check `{check}` failed: {message}")]
#[non_exhaustive]
pub struct ConformanceFailure {
    /// The check.
    pub check: &'static str,
    /// What was expected and what happened.
    pub message: String,
}

/// The result of one check that did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CheckOutcome {
    /// Every assertion held.
    Passed,
    /// All or part of it did not run, for `reason` (the harness cannot stop its server, for
    /// example); what ran held.
    Skipped {
        /// What was not checked, and why.
        reason: &'static str,
    },
}

/// The results of [`run_conformance`], by check name. Its `Display` is a one-line summary:
/// `9 passed, 2 skipped: disconnect (...), snapshot (...)`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConformanceReport {
    /// Each check and its outcome, in run order.
    pub checks: Vec<(&'static str, CheckOutcome)>,
}

impl ConformanceReport {
    /// True when every check ran in full.
    pub fn all_passed(&self) -> bool {
        self.checks
            .iter()
            .all(|(_, outcome)| *outcome == CheckOutcome::Passed)
    }
}

impl std::fmt::Display for ConformanceReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let skipped: Vec<String> = self
            .checks
            .iter()
            .filter_map(|(check, outcome)| match outcome {
                CheckOutcome::Passed => None,
                CheckOutcome::Skipped { reason } => Some(format!("{check} ({reason})")),
            })
            .collect();
        let passed = self.checks.len() - skipped.len();
        write!(f, "{passed} passed, {} skipped", skipped.len())?;
        if !skipped.is_empty() {
            write!(f, ": {}", skipped.join(", "))?;
        }
        Ok(())
    }
}

/// Runs every check of the data-source contract (DESIGN §4, points 1 to 10, point 3 twice:
/// on a running source and at the start of a new one), in order, stopping at the first
/// failure.
pub async fn run_conformance<H: ConformanceHarness>(
    harness: &H,
) -> Result<ConformanceReport, ConformanceFailure> {
    let mut checks = Vec::new();
    checks.push(("initial_load", check_initial_load(harness).await?));
    checks.push(("ordered_updates", check_ordered_updates(harness, 50).await?));
    checks.push(("bad_payload", check_bad_payload(harness).await?));
    checks.push((
        "bad_payload_at_start",
        check_bad_payload_at_start(harness).await?,
    ));
    checks.push(("identical_payload", check_identical_payload(harness).await?));
    checks.push(("delete", check_delete(harness).await?));
    checks.push(("disconnect", check_disconnect(harness).await?));
    checks.push(("status", check_status(harness).await?));
    checks.push(("close", check_close(harness).await?));
    checks.push(("snapshot", check_snapshot(harness).await?));
    checks.push(("size_cap", check_size_cap(harness).await?));
    Ok(ConformanceReport { checks })
}

/// [`run_conformance`] for a test: prints the report and returns it, or panics with the
/// failure.
///
/// # Panics
///
/// When a check fails.
pub async fn expect_conformance<H: ConformanceHarness>(harness: &H) -> ConformanceReport {
    match run_conformance(harness).await {
        Ok(report) => {
            println!("conformance: {report}");
            report
        }
        Err(failure) => panic!("{failure}"),
    }
}

/// [`expect_conformance`], asserting that every check of the contract ran in full.
///
/// # Panics
///
/// When a check fails or is skipped.
pub async fn expect_all_conformance<H: ConformanceHarness>(harness: &H) -> ConformanceReport {
    expect_conformance_skipping(harness, &[]).await
}

/// [`expect_conformance`], asserting that every check of the contract ran, and ran in full
/// except `skipped` (a stopped server that takes no write skips `disconnect`'s catch-up
/// part, for example).
///
/// # Panics
///
/// When a check fails, or the checks skipped are not exactly `skipped`.
pub async fn expect_conformance_skipping<H: ConformanceHarness>(
    harness: &H,
    skipped: &[&str],
) -> ConformanceReport {
    let report = expect_conformance(harness).await;
    assert_eq!(report.checks.len(), 11, "{report:?}");
    let not_passed: Vec<&str> = report
        .checks
        .iter()
        .filter(|(_, outcome)| *outcome != CheckOutcome::Passed)
        .map(|(check, _)| *check)
        .collect();
    assert_eq!(not_passed, skipped, "{report}");
    report
}
