//! The Nacos data source end to end: `NacosSource` driven by the generic `DataSource` driver
//! into a `Sentinel`, against real rnacos servers, through the data-source conformance kit.
//!
//! ```text
//! scripts/services.sh start nacos
//! eval "$(scripts/services.sh env)"
//! cargo test -p sentinel-datasource-nacos --test conformance
//! ```
//!
//! The test that stops and restarts a server mid-long-poll uses its own instance,
//! `nacos-fault`, under a lock.

mod support;

use async_trait::async_trait;
use sentinel_core::datasource::testkit::{
    check_ordered_updates, expect_all_conformance, expect_conformance_skipping, ConformanceHarness,
};
use sentinel_datasource_nacos::{ConfigKey, NacosRuleWriter, NacosSource};
use sentinel_test_support::{fault_lock, services, ServerControl};
use support::{addr, config, fault_addr, retried, unique_key, writer};

/// The conformance kit's view of one Nacos config.
struct NacosHarness {
    addr: String,
    key: ConfigKey,
    writer: NacosRuleWriter,
    /// How the harness stops and starts the server.
    control: ServerControl,
}

impl NacosHarness {
    async fn new(addr: &str, test: &str) -> Self {
        Self {
            addr: addr.to_owned(),
            key: unique_key(test),
            writer: writer(config(addr)).await,
            control: ServerControl::Fixed,
        }
    }
}

#[async_trait]
impl ConformanceHarness for NacosHarness {
    type Source = NacosSource;

    fn make_source(&self) -> NacosSource {
        let at = self.control.addr(&self.addr);
        NacosSource::configs(config(at), [self.key.clone()]).expect("a source")
    }

    async fn write(&self, bytes: &[u8]) {
        // Nacos refuses blank content ("content is blank"): an empty config does not exist
        // there, so the kit's empty payload is a deletion.
        if bytes.trim_ascii().is_empty() {
            return self.delete().await;
        }
        let content = String::from_utf8_lossy(bytes).into_owned();
        retried("publish", || self.writer.put_bytes(&self.key, &content)).await;
    }

    async fn delete(&self) {
        retried("delete", || self.writer.delete(&self.key)).await;
    }

    sentinel_test_support::server_control!(control);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_kit_passes_with_the_server_restarted_mid_long_poll() {
    let _fault = fault_lock().await;
    services(&["start", "nacos-fault"]).await;
    let mut harness = NacosHarness::new(&fault_addr(), "conformance").await;
    harness.control = ServerControl::Restart("nacos-fault");
    // A stopped server takes no publish, so disconnect's catch-up part is skipped here; the
    // partition test shows it.
    expect_conformance_skipping(&harness, &["disconnect"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_kit_passes_through_a_network_partition() {
    let mut harness = NacosHarness::new(&addr(), "partition").await;
    harness.control = ServerControl::partition(&addr()).await;
    expect_all_conformance(&harness).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_publishes_end_in_the_final_value_and_never_go_back() {
    let harness = NacosHarness::new(&addr(), "rapid").await;
    check_ordered_updates(&harness, 200)
        .await
        .unwrap_or_else(|failure| panic!("{failure}"));
}

/// Rules published through the writer's [`WritableDataSource`] target come back through a
/// [`NacosSource`] exactly.
#[tokio::test]
async fn rules_written_through_the_writer_are_applied_exactly() {
    let key = unique_key("round-trip");
    let target = writer(config(&addr())).await.at(key.clone());
    let source = NacosSource::configs(config(&addr()), [key]).expect("a source");
    sentinel_core::datasource::testkit::expect_round_trip(&target, source, false).await;
}
