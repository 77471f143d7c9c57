//! Where the Nacos-compatible servers (rnacos) of `scripts/services.sh` listen, how tests
//! reach them or fail naming the command that starts them, and the Nacos-specific helpers of
//! this crate's tests. The waits, the event recorder and the server script helpers are the
//! testkit's (`sentinel_core::datasource::testkit`).

#![allow(dead_code)]

use std::time::Duration;

use sentinel_core::datasource::testkit::WAIT;
use sentinel_core::datasource::SourceError;
use sentinel_datasource_nacos::{ConfigKey, NacosConfig, NacosConfigBuilder, NacosRuleWriter};
use sentinel_test_support::env_or;

// Not every test binary of this crate uses them.
#[allow(unused_imports)]
pub(crate) use sentinel_test_support::{expect_frozen_server_noticed, expect_resumed, retried};

/// What to run when a server is missing.
pub(crate) const START_HINT: &str =
    "start the test servers with `scripts/services.sh start nacos` \
     (from the repository root; the first run builds rnacos, about 10 minutes; \
     `eval \"$(scripts/services.sh env)\"` exports the addresses)";

/// The plain rnacos most tests share (`SENTINEL_NACOS_ADDR`).
pub(crate) fn addr() -> String {
    env_or("SENTINEL_NACOS_ADDR", "127.0.0.1:18848")
}

/// The rnacos with auth on (`SENTINEL_NACOS_AUTH_ADDR`), admin user `admin:adminpw`.
pub(crate) fn auth_addr() -> String {
    env_or("SENTINEL_NACOS_AUTH_ADDR", "127.0.0.1:18849")
}

/// The rnacos the fault tests stop and restart (`SENTINEL_NACOS_FAULT_ADDR`).
pub(crate) fn fault_addr() -> String {
    env_or("SENTINEL_NACOS_FAULT_ADDR", "127.0.0.1:18850")
}

/// The auth instance's admin user and password.
/// The rnacos the frozen-server tests freeze and thaw (`SENTINEL_NACOS_FREEZE_ADDR`,
/// `scripts/services.sh start nacos-freeze`).
pub(crate) fn freeze_addr() -> String {
    env_or("SENTINEL_NACOS_FREEZE_ADDR", "127.0.0.1:18851")
}

pub(crate) const ADMIN: (&str, &str) = ("admin", "adminpw");

/// A dataId no other test (or earlier run) uses.
pub(crate) fn unique_id(test: &str) -> String {
    sentinel_test_support::unique_key("sentinel-test", test).replace('/', "-")
}

/// A key in `SENTINEL_GROUP` no other test uses.
pub(crate) fn unique_key(test: &str) -> ConfigKey {
    ConfigKey::new(unique_id(test), "SENTINEL_GROUP")
}

/// A config builder for `servers`, with short timeouts so failures show quickly (rnacos
/// holds a long poll at least 10 s, whatever is asked).
pub(crate) fn builder(servers: &str) -> NacosConfigBuilder {
    NacosConfig::builder()
        .servers([servers])
        .connect_timeout(Duration::from_secs(1))
        .request_timeout(Duration::from_secs(3))
        .long_poll_timeout(Duration::from_secs(10))
}

/// A config for `servers`, with short timeouts.
pub(crate) fn config(servers: &str) -> NacosConfig {
    builder(servers).build().expect("valid test config")
}

/// A writer for `config`, proven with a publish. Fails the test, naming the command that
/// starts the servers, when the server does not answer.
pub(crate) async fn writer(config: NacosConfig) -> NacosRuleWriter {
    let at = config.describe();
    let probe = async {
        let writer = NacosRuleWriter::new(config)?;
        writer
            .put_bytes(
                &ConfigKey::new("sentinel-test-probe", "SENTINEL_GROUP"),
                "ok",
            )
            .await?;
        Ok::<_, SourceError>(writer)
    };
    match tokio::time::timeout(WAIT, probe).await {
        Ok(Ok(writer)) => writer,
        Ok(Err(e)) => panic!("Nacos at {at} is unreachable ({e}); {START_HINT}"),
        Err(_) => panic!("Nacos at {at} did not answer within {WAIT:?}; {START_HINT}"),
    }
}
