//! The ZooKeeper data source end to end: `ZooKeeperSource` driven by the generic
//! `DataSource` driver into a `Sentinel`, against real ZooKeeper servers, through the
//! data-source conformance kit.
//!
//! ```text
//! scripts/services.sh start zookeeper
//! eval "$(scripts/services.sh env)"
//! cargo test -p sentinel-datasource-zookeeper --test conformance
//! ```
//!
//! The test that stops and restarts a server uses its own instance, `zookeeper-fault`, whose
//! data survives the restart.

mod support;

use async_trait::async_trait;
use sentinel_core::datasource::testkit::{
    check_ordered_updates, expect_all_conformance, expect_conformance_skipping, ConformanceHarness,
};
use sentinel_datasource_zookeeper::{ZooKeeperRuleWriter, ZooKeeperSource};
use sentinel_test_support::{fault_lock, retried, services, ServerControl};
use support::{addr, config, fault_addr, unique_path, writer};

/// The conformance kit's view of one znode.
struct ZooKeeperHarness {
    addr: String,
    path: String,
    writer: ZooKeeperRuleWriter,
    /// How the harness stops and starts the server.
    control: ServerControl,
}

impl ZooKeeperHarness {
    async fn new(addr: &str, test: &str, control: ServerControl) -> Self {
        Self {
            addr: addr.to_owned(),
            writer: writer(config(addr)).await,
            path: unique_path(test),
            control,
        }
    }

    /// Writes `value` (or deletes the znode, for `None`), retrying (bounded) while the server
    /// comes back from a restart: the writer's client reconnects by itself, and starts a new
    /// session when its own expired.
    async fn store(&self, value: Option<&[u8]>) {
        let what = format!("write {}", self.path);
        match value {
            Some(bytes) => {
                retried(&what, || self.writer.put_bytes(&self.path, bytes.to_vec())).await;
            }
            None => retried(&what, || self.writer.delete(&self.path)).await,
        }
    }
}

#[async_trait]
impl ConformanceHarness for ZooKeeperHarness {
    type Source = ZooKeeperSource;

    fn make_source(&self) -> ZooKeeperSource {
        ZooKeeperSource::node(config(self.control.addr(&self.addr)), &self.path)
    }

    async fn write(&self, bytes: &[u8]) {
        self.store(Some(bytes)).await;
    }

    async fn delete(&self) {
        self.store(None).await;
    }

    sentinel_test_support::server_control!(control);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_kit_passes_with_server_restarts() {
    let _fault = fault_lock().await;
    services(&["start", "zookeeper-fault"]).await;
    let harness = ZooKeeperHarness::new(
        &fault_addr(),
        "conformance",
        ServerControl::Restart("zookeeper-fault"),
    )
    .await;
    // A stopped server takes no write, so disconnect's catch-up part is skipped here; the
    // partition test shows it.
    expect_conformance_skipping(&harness, &["disconnect"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_kit_passes_through_a_network_partition() {
    let control = ServerControl::partition(&addr()).await;
    let harness = ZooKeeperHarness::new(&addr(), "partition", control).await;
    expect_all_conformance(&harness).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_writes_end_in_the_final_value_and_never_go_back() {
    let harness = ZooKeeperHarness::new(&addr(), "rapid", ServerControl::Fixed).await;
    check_ordered_updates(&harness, 500)
        .await
        .unwrap_or_else(|failure| panic!("{failure}"));
}

/// Rules written through the writer's [`WritableDataSource`] target come back through a
/// [`ZooKeeperSource`] exactly; compare-and-set uses the znode's mzxid and version.
#[tokio::test]
async fn rules_written_through_the_writer_are_applied_exactly() {
    let path = unique_path("round-trip");
    let target = writer(config(&addr())).await.at(&path);
    let source = ZooKeeperSource::node(config(&addr()), &path);
    sentinel_core::datasource::testkit::expect_round_trip(&target, source, true).await;
}
