//! Where the ZooKeeper servers of `scripts/services.sh` listen, how tests reach them or fail
//! naming the command that starts them, and the ZooKeeper-specific helpers of this crate's
//! tests. The waits, the event recorder and the server script helpers are the testkit's
//! (`sentinel_core::datasource::testkit`) and test-support's.
//!
//! The addresses belong in `sentinel_test_support::addresses` beside the other stores'; they
//! are here until that module has a `zookeeper` part.

#![allow(dead_code)]

use std::time::Duration;

use sentinel_core::datasource::testkit::WAIT;
use sentinel_datasource_zookeeper::{ZooKeeperConfig, ZooKeeperConfigBuilder, ZooKeeperRuleWriter};
use sentinel_test_support::env_or;

#[allow(unused_imports)]
pub(crate) use sentinel_test_support::{expect_frozen_server_noticed, expect_resumed, retried};

/// What to run when a ZooKeeper server is missing.
pub(crate) const START_HINT: &str = "start the test servers with `scripts/services.sh start \
     zookeeper` (from the repository root; `eval \"$(scripts/services.sh env)\"` exports the \
     addresses)";

/// The plain ZooKeeper most tests share (`SENTINEL_ZOOKEEPER_ADDR`).
pub(crate) fn addr() -> String {
    env_or("SENTINEL_ZOOKEEPER_ADDR", "127.0.0.1:12181")
}

/// The ZooKeeper the fault tests stop, kill and restart (`SENTINEL_ZOOKEEPER_FAULT_ADDR`);
/// its data survives a restart.
pub(crate) fn fault_addr() -> String {
    env_or("SENTINEL_ZOOKEEPER_FAULT_ADDR", "127.0.0.1:12182")
}

/// The ZooKeeper the frozen-server tests freeze and thaw (`SENTINEL_ZOOKEEPER_FREEZE_ADDR`).
pub(crate) fn freeze_addr() -> String {
    env_or("SENTINEL_ZOOKEEPER_FREEZE_ADDR", "127.0.0.1:12183")
}

/// A znode path no other test (or earlier run) uses, under `/sentinel`.
pub(crate) fn unique_path(test: &str) -> String {
    sentinel_test_support::unique_key("/sentinel", test)
}

/// A config builder for the server at `addr`, with short timeouts so failures show quickly.
pub(crate) fn builder(addr: &str) -> ZooKeeperConfigBuilder {
    ZooKeeperConfig::builder()
        .servers([addr])
        .connect_timeout(Duration::from_secs(3))
        .request_timeout(Duration::from_secs(3))
}

/// A config for the server at `addr`, with short timeouts.
pub(crate) fn config(addr: &str) -> ZooKeeperConfig {
    builder(addr).build().expect("valid test config")
}

/// A writer; fails the test, naming the command that starts the servers, when the server
/// does not answer.
pub(crate) async fn writer(config: ZooKeeperConfig) -> ZooKeeperRuleWriter {
    let at = config.describe();
    match tokio::time::timeout(WAIT, ZooKeeperRuleWriter::connect(config)).await {
        Ok(Ok(writer)) => writer,
        Ok(Err(e)) => panic!("ZooKeeper at {at} is unreachable ({e}); {START_HINT}"),
        Err(_) => panic!("ZooKeeper at {at} did not answer within {WAIT:?}; {START_HINT}"),
    }
}
