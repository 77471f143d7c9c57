//! `RedisSource` and `RedisRuleWriter` against real Redis servers: the three change modes, a
//! killed subscription, a restart, auth, a Redis Sentinel failover and a cluster. Start the
//! servers first:
//!
//! ```text
//! scripts/services.sh start redis
//! cargo test -p sentinel-datasource-redis --all-features
//! ```
//!
//! The tests that stop a server or kill every subscription use their own instance,
//! `redis-fault`, under a lock, so they never disturb the servers the other tests share. The
//! frozen-server test freezes (SIGSTOP) and thaws its own, `redis-freeze`. The failover test
//! is the only user of the `redis-ha` trio here (cluster-redis's outage test fails it over
//! too, from another test binary; both follow whichever master the sentinel names).

#[path = "../support/mod.rs"]
mod support;

mod access;
mod faults;
mod modes;

use std::time::Duration;

use sentinel_core::datasource::testkit::{
    applied_seq, flow_payload, read, until_within, wait_status, wait_until, watch, WAIT,
};
use sentinel_core::datasource::{
    DataSource, DataSourceError, FlowJson, ReadableDataSource, SourceError, StartMode, WatchEvent,
};
use sentinel_core::flow::FlowRule;
use sentinel_core::Sentinel;
use sentinel_datasource_redis::{ChangeMode, RedisConfig, RedisRuleWriter, RedisSource};
use sentinel_test_support::{fault_lock, services};
use support::{
    addr, append_set_while_down, auth_addr, builder, config, expect_frozen_server_noticed,
    expect_resumed, fault_addr, freeze_addr, keyspace_addr, master_name, raw, retried, run,
    sentinel_addrs, sentinel_builder, unique_key, writer,
};

/// Starts a driver over `source` into a fresh engine, failing the start on a read error.
async fn start(source: RedisSource) -> (Sentinel, DataSource) {
    let sentinel = Sentinel::new();
    let ds = DataSource::builder(source, FlowJson::new())
        .name("redis-test")
        .backoff(Duration::from_millis(20), Duration::from_millis(200))
        .start(&sentinel)
        .await
        .unwrap_or_else(|e| panic!("start: {e:?}"));
    (sentinel, ds)
}

/// A key that holds payload 1, and a driver (into its own engine) that applied it.
struct Live {
    key: String,
    channel: String,
    writer: RedisRuleWriter,
    sentinel: Sentinel,
    ds: DataSource,
}

/// Stores payload 1 under `key` through `config`, then starts a source on it in `mode` and
/// waits until the payload is applied.
async fn live(config: RedisConfig, key: String, mode: fn(String) -> ChangeMode) -> Live {
    let channel = format!("{key}:changed");
    let writer = writer(config.clone()).await;
    writer
        .put_bytes(&key, &channel, flow_payload(1))
        .await
        .expect("set 1");
    let (sentinel, ds) = start(RedisSource::new(config, key.clone(), mode(channel.clone()))).await;
    wait_seq(&sentinel, 1).await;
    Live {
        key,
        channel,
        writer,
        sentinel,
        ds,
    }
}

/// Waits until the flow rules carry sequence number `seq`.
async fn wait_seq(sentinel: &Sentinel, seq: u64) {
    wait_until(&format!("payload {seq} applied"), || {
        applied_seq::<FlowRule>(sentinel) == Some(seq)
    })
    .await;
}

/// How soon after a failover a change must be applied: a bound with room for a loaded
/// machine (it takes tens of milliseconds), far below the ~10 s the old master takes to be
/// demoted.
const FOLLOWED_WITHIN: Duration = Duration::from_secs(5);

/// Writes payload `seq`, retrying (bounded) while the deployment settles after a failover
/// or a thaw.
async fn put_until_ok(t: &Live, seq: u64) {
    retried(&format!("write {seq}"), || {
        t.writer.put_bytes(&t.key, &t.channel, flow_payload(seq))
    })
    .await;
}

/// The master the sentinel names now.
async fn after_failover(sentinel: &mut redis::aio::MultiplexedConnection) -> (String, u16) {
    run(
        sentinel,
        redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(master_name()),
    )
    .await
}

/// Polls the async `condition` every 100 ms until it holds (`true`) or `timeout` passes.
async fn until_within_async<F, Fut>(timeout: Duration, condition: F) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if condition().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
