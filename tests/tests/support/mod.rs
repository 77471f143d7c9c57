//! Shared pieces of the end-to-end tests: where the servers are, a way to fail clearly when
//! they are not running, the `scripts/services.sh` wrapper, and bounded waits.

#![allow(dead_code)]

#[path = "../../../datasource-etcd/tests/support/servers.rs"]
mod servers;

pub use servers::*;

use std::time::Duration;

use sentinel_core::datasource::{DataSource, SourceStatus};

/// Runs `scripts/services.sh` with `args` on a blocking thread; fails the test if it fails.
pub async fn services(args: &[&str]) {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_services(&args);
    })
    .await
    .expect("services.sh thread");
}

/// Serialises the tests that stop and restart `etcd-fault`: they run in one process, on
/// parallel threads, and share that one server.
pub async fn fault_lock() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// Waits (at most [`WAIT`]) until `source`'s status satisfies `condition`.
pub async fn wait_status(
    source: &DataSource,
    what: &str,
    condition: impl Fn(&SourceStatus) -> bool,
) -> SourceStatus {
    let mut rx = source.status_watch();
    let found = match tokio::time::timeout(WAIT, rx.wait_for(|s| condition(s))).await {
        Ok(Ok(status)) => Some(status.clone()),
        _ => None,
    };
    found.unwrap_or_else(|| {
        panic!(
            "timed out after {WAIT:?} waiting for {what}; status is {:?}",
            source.status()
        )
    })
}

/// Polls `condition` every 5 ms until it holds; fails the test after [`WAIT`].
pub async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
