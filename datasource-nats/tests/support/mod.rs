//! Where the NATS servers of `scripts/services.sh` listen (re-exported from
//! `sentinel_test_support::addresses::nats`), how tests reach them or fail naming the
//! command that starts them, and the NATS-specific helpers of this crate's tests. The
//! waits, the event recorder and the server script helpers are the testkit's
//! (`sentinel_core::datasource::testkit`).

#![allow(dead_code)]

use std::time::Duration;

use sentinel_core::datasource::testkit::WAIT;
use sentinel_datasource_nats::{NatsConfig, NatsConfigBuilder, NatsRuleWriter};

// Not every test binary of this crate uses them.
#[allow(unused_imports)]
pub(crate) use sentinel_test_support::addresses::nats::{
    addr, auth_addr, fault_addr, freeze_addr, tls_addr, START_HINT,
};
#[allow(unused_imports)]
pub(crate) use sentinel_test_support::{expect_frozen_server_noticed, expect_resumed, retried};

/// The TLS server's CA certificate file.
pub(crate) fn tls_ca() -> std::path::PathBuf {
    sentinel_test_support::services_path("SENTINEL_NATS_TLS_CA", "nats-tls/certs/ca.pem")
}

/// A bucket name no other test (or earlier run) uses.
pub(crate) fn unique_bucket(test: &str) -> String {
    sentinel_test_support::unique_key("sentinel", test).replace(['/', '.'], "_")
}

/// A config builder for the server at `addr`, with short timeouts so failures show quickly.
pub(crate) fn builder(addr: &str) -> NatsConfigBuilder {
    NatsConfig::builder()
        .servers([format!("nats://{addr}")])
        .connect_timeout(Duration::from_secs(1))
        .request_timeout(Duration::from_secs(2))
}

/// A config for the server at `addr`, with short timeouts.
pub(crate) fn config(addr: &str) -> NatsConfig {
    builder(addr).build().expect("valid test config")
}

/// A writer on a fresh bucket; fails the test, naming the command that starts the servers,
/// when the server does not answer.
pub(crate) async fn bucket_writer(config: NatsConfig, bucket: &str) -> NatsRuleWriter {
    let at = config.describe();
    match tokio::time::timeout(WAIT, NatsRuleWriter::create_bucket(config, bucket, 5)).await {
        Ok(Ok(writer)) => writer,
        Ok(Err(e)) => panic!("NATS at {at} is unreachable ({e}); {START_HINT}"),
        Err(_) => panic!("NATS at {at} did not answer within {WAIT:?}; {START_HINT}"),
    }
}
