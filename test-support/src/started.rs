//! A backend's source started under the generic driver into a fresh engine, as the backends'
//! tests start one, and the flow rules it applied.

use std::time::Duration;

use sentinel_core::datasource::testkit::EventRecorder;
use sentinel_core::datasource::{DataSource, FlowJson, ReadableDataSource};
use sentinel_core::Sentinel;

/// Starts a driver named `name` over `source` (flow rule JSON, a short backoff) into a fresh
/// engine, failing the test on a start error.
pub async fn start_flow(source: impl ReadableDataSource, name: &str) -> (Sentinel, DataSource) {
    let (sentinel, ds, _) = start_recorded(source, name).await;
    (sentinel, ds)
}

/// [`start_flow`], with a recorder of the source's events attached before the start.
pub async fn start_recorded(
    source: impl ReadableDataSource,
    name: &str,
) -> (Sentinel, DataSource, EventRecorder) {
    let sentinel = Sentinel::new();
    let recorder = EventRecorder::attach(&sentinel, name);
    let ds = DataSource::builder(source, FlowJson::new())
        .name(name)
        .backoff(Duration::from_millis(20), Duration::from_millis(200))
        .start(&sentinel)
        .await
        .unwrap_or_else(|e| panic!("start {name}: {e:?}"));
    (sentinel, ds, recorder)
}

/// The resources of the flow rules `sentinel` applies, sorted.
pub fn flow_resources(sentinel: &Sentinel) -> Vec<String> {
    let mut names: Vec<String> = sentinel
        .flow_rules()
        .rules()
        .iter()
        .map(|r| r.resource.clone())
        .collect();
    names.sort();
    names
}
