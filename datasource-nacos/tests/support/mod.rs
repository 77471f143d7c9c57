//! Where the Nacos-compatible servers (rnacos) of `scripts/services.sh` listen (re-exported
//! from `sentinel_test_support::addresses::nacos`), how tests reach them or fail naming the
//! command that starts them, and the Nacos-specific helpers of this crate's tests. The
//! waits, the event recorder and the server script helpers are the testkit's
//! (`sentinel_core::datasource::testkit`).

#![allow(dead_code)]

use std::time::Duration;

use sentinel_core::datasource::testkit::WAIT;
use sentinel_core::datasource::SourceError;
use sentinel_datasource_nacos::{ConfigKey, NacosConfig, NacosConfigBuilder, NacosRuleWriter};

// Not every test binary of this crate uses them.
#[allow(unused_imports)]
pub(crate) use sentinel_test_support::addresses::nacos::{
    addr, auth_addr, fault_addr, freeze_addr, START_HINT,
};
#[allow(unused_imports)]
pub(crate) use sentinel_test_support::{expect_frozen_server_noticed, expect_resumed, retried};

/// The auth instance's admin user and password.
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
