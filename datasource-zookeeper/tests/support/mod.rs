//! Where the ZooKeeper servers of `scripts/services.sh` listen (re-exported from
//! `sentinel_test_support::addresses::zookeeper`), how tests reach them or fail naming the
//! command that starts them, and the ZooKeeper-specific helpers of this crate's tests. The
//! waits, the event recorder and the server script helpers are the testkit's
//! (`sentinel_core::datasource::testkit`) and test-support's.

#![allow(dead_code)]

use std::time::Duration;

use sentinel_core::datasource::testkit::WAIT;
use sentinel_datasource_zookeeper::{ZooKeeperConfig, ZooKeeperConfigBuilder, ZooKeeperRuleWriter};

// Not every test binary of this crate uses them.
#[allow(unused_imports)]
pub(crate) use sentinel_test_support::addresses::zookeeper::{
    addr, fault_addr, fault_pid_file, freeze_addr, START_HINT,
};
#[allow(unused_imports)]
pub(crate) use sentinel_test_support::{expect_frozen_server_noticed, expect_resumed, retried};

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
