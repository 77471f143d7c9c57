//! Driver tests over the in-memory backend.

use super::testkit::{self, MemoryHarness};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_source_conforms() {
    let harness = MemoryHarness::new();
    let report = testkit::run_conformance(&harness).await;
    let report = report.unwrap_or_else(|failure| panic!("{failure}"));
    assert!(report
        .checks
        .iter()
        .all(|(_, outcome)| *outcome == testkit::CheckOutcome::Passed));
}
