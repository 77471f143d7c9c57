//! Finds the etcd servers that `scripts/services.sh` starts, and helpers shared by the tests.

#![allow(dead_code)]

mod servers;

pub use servers::run_services as services;
pub use servers::*;

use sentinel_core::datasource::{RawPayload, ReadableDataSource, SourceError, WatchEvent};

/// `source.read()` within [`WAIT`].
pub async fn read<S: ReadableDataSource>(source: &mut S) -> Result<RawPayload, SourceError> {
    tokio::time::timeout(WAIT, source.read())
        .await
        .expect("read did not finish in time")
}

/// `source.watch()` within [`WAIT`].
pub async fn watch<S: ReadableDataSource>(source: &mut S) -> Result<WatchEvent, SourceError> {
    tokio::time::timeout(WAIT, source.watch())
        .await
        .expect("watch did not report in time")
}

/// The next value, as the driver would apply it: a `Resync` is answered with a read. Fails the
/// test on an error.
pub async fn next_value<S: ReadableDataSource>(source: &mut S) -> RawPayload {
    match watch(source).await {
        Ok(WatchEvent::Changed(payload)) => payload,
        Ok(WatchEvent::Resync) => read(source).await.expect("read after resync"),
        Ok(other) => panic!("unexpected watch event {other:?}"),
        Err(e) => panic!("watch failed: {e}"),
    }
}

/// The values of a payload as UTF-8 strings, by key.
pub fn values(payload: &RawPayload) -> Vec<(String, String)> {
    payload
        .entries
        .iter()
        .map(|e| {
            (
                e.key.clone(),
                String::from_utf8_lossy(&e.value).into_owned(),
            )
        })
        .collect()
}
