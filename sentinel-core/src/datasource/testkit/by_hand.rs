//! Driving a source by hand, without the driver, with every wait bounded by [`WAIT`].

use super::observe::WAIT;
use crate::datasource::{RawPayload, ReadableDataSource, SourceError, WatchEvent};

/// `source.read()` within [`WAIT`].
///
/// # Panics
///
/// When the read does not finish in time.
pub async fn read<S: ReadableDataSource>(source: &mut S) -> Result<RawPayload, SourceError> {
    tokio::time::timeout(WAIT, source.read())
        .await
        .expect("read did not finish in time")
}

/// `source.watch()` within [`WAIT`].
///
/// # Panics
///
/// When the watch reports nothing in time.
pub async fn watch<S: ReadableDataSource>(source: &mut S) -> Result<WatchEvent, SourceError> {
    tokio::time::timeout(WAIT, source.watch())
        .await
        .expect("watch did not report in time")
}

/// The next value, as the driver would apply it: a `Resync` is answered with a read.
///
/// # Panics
///
/// On an error or an event other than a value, a resync or a failed read.
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
