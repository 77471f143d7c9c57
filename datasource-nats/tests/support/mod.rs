//! Where the NATS servers of `scripts/services.sh` listen, how tests reach them or fail naming
//! the command that starts them, and the NATS-specific helpers of this crate's tests. The
//! waits, the event recorder and the server script helpers are the testkit's
//! (`sentinel_core::datasource::testkit`).

#![allow(dead_code)]

use std::time::Duration;

use sentinel_core::datasource::testkit::WAIT;
use sentinel_datasource_nats::{NatsConfig, NatsConfigBuilder, NatsRuleWriter};
use sentinel_test_support::env_or;

// Not every test binary of this crate uses them.
#[allow(unused_imports)]
pub(crate) use sentinel_test_support::{expect_frozen_server_noticed, expect_resumed, retried};

/// What to run when a server is missing.
pub(crate) const START_HINT: &str = "start the test servers with `scripts/services.sh start nats` \
     (from the repository root; `eval \"$(scripts/services.sh env)\"` exports the addresses)";

/// The plain nats-server most tests share (`SENTINEL_NATS_ADDR`).
pub(crate) fn addr() -> String {
    env_or("SENTINEL_NATS_ADDR", "127.0.0.1:14222")
}

/// The nats-server with user/password auth on (`SENTINEL_NATS_AUTH_ADDR`): user `app`,
/// password `apppw`.
pub(crate) fn auth_addr() -> String {
    env_or("SENTINEL_NATS_AUTH_ADDR", "127.0.0.1:14223")
}

/// The nats-server the fault tests stop and restart (`SENTINEL_NATS_FAULT_ADDR`); its
/// JetStream store survives a restart.
pub(crate) fn fault_addr() -> String {
    env_or("SENTINEL_NATS_FAULT_ADDR", "127.0.0.1:14224")
}

/// The nats-server the frozen-server tests freeze and thaw (`SENTINEL_NATS_FREEZE_ADDR`,
/// `scripts/services.sh start nats-freeze`).
pub(crate) fn freeze_addr() -> String {
    env_or("SENTINEL_NATS_FREEZE_ADDR", "127.0.0.1:14226")
}

/// The nats-server that serves TLS only (`SENTINEL_NATS_TLS_ADDR`), with a CA the script made
/// (`SENTINEL_NATS_TLS_CA`).
pub(crate) fn tls_addr() -> String {
    env_or("SENTINEL_NATS_TLS_ADDR", "127.0.0.1:14225")
}

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
