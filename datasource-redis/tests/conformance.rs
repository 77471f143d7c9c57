//! The Redis data source end to end: `RedisSource` driven by the generic `DataSource` driver
//! into a `Sentinel`, against real Redis servers, through the data-source conformance kit.
//!
//! ```text
//! scripts/services.sh start redis
//! eval "$(scripts/services.sh env)"
//! cargo test -p sentinel-datasource-redis --test conformance
//! ```
//!
//! The test that stops and restarts a server uses its own instance, `redis-fault`, whose data
//! lives in an append-only file: a value "written while it is down" is appended to that file,
//! so the restarted server holds it.

mod support;

use std::time::Duration;

use async_trait::async_trait;
use sentinel_core::datasource::testkit::{
    check_ordered_updates, expect_all_conformance, ConformanceHarness, Unsupported, WAIT,
};
use sentinel_datasource_redis::{ChangeMode, RedisConfig, RedisRuleWriter, RedisSource};
use sentinel_test_support::{fault_lock, services, ServerControl};
use support::{
    addr, append_set_while_down, config, fault_addr, keyspace_addr, raw, run, unique_key, writer,
};

/// The conformance kit's view of one Redis key.
struct RedisHarness {
    /// The server itself (the writer's).
    addr: String,
    key: String,
    channel: String,
    /// `Notify`, `Payload` or `Keyspace`; in `Keyspace` the harness writes with plain SET and
    /// DEL, with no publisher.
    mode: ChangeMode,
    writer: tokio::sync::Mutex<RedisRuleWriter>,
    /// How the harness stops and starts the server.
    control: ServerControl,
}

impl RedisHarness {
    async fn new(addr: &str, test: &str, mode: fn(String) -> ChangeMode) -> Self {
        let key = unique_key(test);
        let channel = format!("{key}:changed");
        Self {
            addr: addr.to_owned(),
            mode: mode(channel.clone()),
            channel,
            key,
            writer: tokio::sync::Mutex::new(writer(config(addr)).await),
            control: ServerControl::Fixed,
        }
    }

    fn restartable(mut self) -> Self {
        self.control = ServerControl::Restart("redis-fault");
        self
    }

    async fn partitioned(mut self) -> Self {
        self.control = ServerControl::partition(&self.addr).await;
        self
    }

    /// Stores `value` (or deletes the key, for `None`) with the writer, reconnecting and
    /// retrying (bounded) while the server comes back from a restart.
    async fn store(&self, value: Option<&[u8]>) {
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut writer = self.writer.lock().await;
        loop {
            let result = match value {
                Some(bytes) => writer.put_bytes(&self.key, &self.channel, bytes).await,
                None => writer.delete(&self.key, &self.channel).await,
            };
            match result {
                Ok(_) => return,
                Err(_) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    if let Ok(fresh) = RedisRuleWriter::connect(config(&self.addr)).await {
                        *writer = fresh;
                    }
                }
                Err(error) => panic!("write {}: {error}", self.key),
            }
        }
    }
}

fn notify(channel: String) -> ChangeMode {
    ChangeMode::Notify(channel)
}

fn payload(channel: String) -> ChangeMode {
    ChangeMode::Payload(channel)
}

fn keyspace(_: String) -> ChangeMode {
    ChangeMode::Keyspace
}

#[async_trait]
impl ConformanceHarness for RedisHarness {
    type Source = RedisSource;

    fn make_source(&self) -> RedisSource {
        let config: RedisConfig = config(self.control.addr(&self.addr));
        RedisSource::new(config, self.key.clone(), self.mode.clone())
    }

    async fn write(&self, bytes: &[u8]) {
        if self.mode == ChangeMode::Keyspace {
            let mut conn = raw(&self.addr).await;
            let () = run(&mut conn, redis::cmd("SET").arg(&self.key).arg(bytes)).await;
            return;
        }
        self.store(Some(bytes)).await;
    }

    async fn delete(&self) {
        if self.mode == ChangeMode::Keyspace {
            let mut conn = raw(&self.addr).await;
            let _: u64 = run(&mut conn, redis::cmd("DEL").arg(&self.key)).await;
            return;
        }
        self.store(None).await;
    }

    sentinel_test_support::server_control!(control, stop_start);

    async fn write_while_down(&self, bytes: &[u8]) -> Result<(), Unsupported> {
        match self.control {
            ServerControl::Partition(_) => {
                self.write(bytes).await;
                return Ok(());
            }
            ServerControl::Fixed => return Err(Unsupported),
            _ => {}
        }
        append_set_while_down(&self.key, bytes);
        Ok(())
    }

    fn timeout(&self) -> Duration {
        WAIT
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_kit_passes_with_server_restarts() {
    let _fault = fault_lock().await;
    services(&["start", "redis-fault"]).await;
    let harness = RedisHarness::new(&fault_addr(), "conformance", notify)
        .await
        .restartable();
    expect_all_conformance(&harness).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_kit_passes_through_a_network_partition() {
    let harness = RedisHarness::new(&addr(), "partition", notify)
        .await
        .partitioned()
        .await;
    expect_all_conformance(&harness).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_kit_passes_in_payload_mode() {
    let harness = RedisHarness::new(&addr(), "payload", payload)
        .await
        .partitioned()
        .await;
    expect_all_conformance(&harness).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_kit_passes_in_keyspace_mode_with_plain_sets() {
    let harness = RedisHarness::new(&keyspace_addr(), "keyspace", keyspace)
        .await
        .partitioned()
        .await;
    expect_all_conformance(&harness).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_set_publish_ends_in_the_final_value_and_never_goes_back_in_notify_mode() {
    let harness = RedisHarness::new(&addr(), "rapid-notify", notify).await;
    check_ordered_updates(&harness, 500)
        .await
        .unwrap_or_else(|failure| panic!("{failure}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_set_publish_ends_in_the_final_value_and_never_goes_back_in_payload_mode() {
    let harness = RedisHarness::new(&addr(), "rapid-payload", payload).await;
    check_ordered_updates(&harness, 500)
        .await
        .unwrap_or_else(|failure| panic!("{failure}"));
}

/// Rules written through the writer's [`WritableDataSource`] target (SET and PUBLISH in one
/// transaction, or in one script for a compare-and-set on the value's digest) come back
/// through a [`RedisSource`] exactly.
#[tokio::test]
async fn rules_written_through_the_writer_are_applied_exactly() {
    let key = unique_key("round-trip");
    let channel = format!("{key}:changed");
    let target = writer(config(&addr()))
        .await
        .at(key.clone(), channel.clone());
    let source = RedisSource::new(config(&addr()), key, ChangeMode::Notify(channel));
    sentinel_core::datasource::testkit::expect_round_trip(&target, source, true).await;
}

/// A compare-and-set on a Redis key compares the digest of its value: "nothing stored" only
/// while the key is absent, a stale digest is a conflict that writes nothing, and writing the
/// value the key holds already succeeds (a retried write is not a conflict).
#[tokio::test]
async fn compare_and_set_compares_the_value_digest() {
    use sentinel_core::datasource::{WritableDataSource, WriteError};
    use sentinel_core::{flow::FlowRule, RuleSet};

    let key = unique_key("cas");
    let target = writer(config(&addr()))
        .await
        .at(key.clone(), format!("{key}:changed"));
    let rules = |count: f64| RuleSet::new().with_flow(vec![FlowRule::qps("cas", count)]);
    assert_eq!(target.revision().await.expect("revision"), None);
    let first = target
        .write_if(&rules(1.0), None)
        .await
        .expect("nothing stored yet");
    assert_eq!(target.revision().await.expect("revision"), first);
    let refused = target.write_if(&rules(2.0), None).await;
    assert!(
        matches!(refused, Err(WriteError::Conflict { .. })),
        "{refused:?}"
    );
    let second = target
        .write_if(&rules(2.0), first)
        .await
        .expect("the revision read");
    assert_ne!(second, first);
    let stale = target.write_if(&rules(3.0), first).await;
    assert!(
        matches!(stale, Err(WriteError::Conflict { .. })),
        "{stale:?}"
    );
    assert_eq!(target.revision().await.expect("revision"), second);
    // The value stored already: a success, whatever revision was expected.
    let again = target
        .write_if(&rules(2.0), first)
        .await
        .expect("the same value again");
    assert_eq!(again, second);
}
