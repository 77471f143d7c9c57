//! The NATS data source end to end: `NatsSource` driven by the generic `DataSource` driver
//! into a `Sentinel`, against real nats-server instances, through the data-source
//! conformance kit.
//!
//! ```text
//! scripts/services.sh start nats
//! eval "$(scripts/services.sh env)"
//! cargo test -p sentinel-datasource-nats --test conformance
//! ```
//!
//! The test that stops and restarts a server uses its own instance, `nats-fault`, whose
//! JetStream store survives the restart.

mod support;

use std::time::Duration;

use async_trait::async_trait;
use sentinel_core::datasource::testkit::{
    check_ordered_updates, expect_all_conformance, expect_conformance_skipping, ConformanceHarness,
    WAIT,
};
use sentinel_datasource_nats::{NatsRuleWriter, NatsSource};
use sentinel_test_support::{fault_lock, services, ServerControl};
use support::{addr, bucket_writer, config, fault_addr, unique_bucket};

/// The conformance kit's view of one key of a bucket.
struct NatsHarness {
    addr: String,
    bucket: String,
    writer: tokio::sync::Mutex<NatsRuleWriter>,
    /// How the harness stops and starts the server.
    control: ServerControl,
}

const KEY: &str = "rules.flow";

impl NatsHarness {
    async fn new(addr: &str, test: &str, control: ServerControl) -> Self {
        let bucket = unique_bucket(test);
        Self {
            addr: addr.to_owned(),
            writer: tokio::sync::Mutex::new(bucket_writer(config(addr), &bucket).await),
            bucket,
            control,
        }
    }

    /// Puts `value` (or deletes the key, for `None`), reconnecting and retrying (bounded)
    /// while the server comes back from a restart.
    async fn store(&self, value: Option<&[u8]>) {
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut writer = self.writer.lock().await;
        loop {
            let result = match value {
                Some(bytes) => writer.put_bytes(KEY, bytes).await.map(drop),
                None => writer.delete(KEY).await,
            };
            match result {
                Ok(()) => return,
                Err(_) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if let Ok(fresh) =
                        NatsRuleWriter::connect(config(&self.addr), &self.bucket).await
                    {
                        *writer = fresh;
                    }
                }
                Err(error) => panic!("write {KEY}: {error}"),
            }
        }
    }
}

#[async_trait]
impl ConformanceHarness for NatsHarness {
    type Source = NatsSource;

    fn make_source(&self) -> NatsSource {
        NatsSource::key(config(self.control.addr(&self.addr)), &self.bucket, KEY)
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
    services(&["start", "nats-fault"]).await;
    let harness = NatsHarness::new(
        &fault_addr(),
        "conformance",
        ServerControl::Restart("nats-fault"),
    )
    .await;
    // A stopped server takes no write, so disconnect's catch-up part is skipped here; the
    // partition test shows it.
    expect_conformance_skipping(&harness, &["disconnect"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_kit_passes_through_a_network_partition() {
    let control = ServerControl::partition(&addr()).await;
    let harness = NatsHarness::new(&addr(), "partition", control).await;
    expect_all_conformance(&harness).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_puts_end_in_the_final_value_and_never_go_back() {
    let harness = NatsHarness::new(&addr(), "rapid", ServerControl::Fixed).await;
    check_ordered_updates(&harness, 500)
        .await
        .unwrap_or_else(|failure| panic!("{failure}"));
}

/// Rules written through the writer's [`WritableDataSource`] target come back through a
/// [`NatsSource`] exactly; compare-and-set uses the key's revision.
#[tokio::test]
async fn rules_written_through_the_writer_are_applied_exactly() {
    let bucket = unique_bucket("round-trip");
    let target = bucket_writer(config(&addr()), &bucket).await.at("rules");
    let source = NatsSource::key(config(&addr()), &bucket, "rules");
    sentinel_core::datasource::testkit::expect_round_trip(&target, source, true).await;
}
