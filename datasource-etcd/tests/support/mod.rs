//! Where the etcd servers of `scripts/services.sh` listen (re-exported from
//! `sentinel_test_support::addresses::etcd`), how tests reach them or fail naming the
//! command that starts them, and the etcd-specific helpers of this crate's tests. The waits
//! and the event recorder are the testkit's (`sentinel_core::datasource::testkit`).

#![allow(dead_code)]

use std::time::Duration;

use sentinel_core::datasource::testkit::WAIT;
use sentinel_core::datasource::SourceError;
use sentinel_datasource_etcd::{EtcdConfig, EtcdConfigBuilder, EtcdRuleWriter};
use sentinel_test_support::services_path;

// Not every test binary of this crate uses them.
#[allow(unused_imports)]
pub(crate) use sentinel_test_support::addresses::etcd::{
    auth_endpoints, endpoints, fault_endpoints, freeze_endpoints, tls_endpoints, START_HINT,
};
#[allow(unused_imports)]
pub(crate) use sentinel_test_support::{expect_frozen_server_noticed, expect_resumed, retried};

/// The CA certificate (PEM) of the TLS etcd, made by the script (`SENTINEL_ETCD_TLS_CA`).
pub(crate) fn tls_ca_pem() -> Vec<u8> {
    let path = services_path("SENTINEL_ETCD_TLS_CA", "etcd-tls/certs/ca.pem");
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read the etcd-tls CA {} ({e}); {START_HINT}",
            path.display()
        )
    })
}

/// A config builder for `endpoints` with short timeouts, so failures show quickly.
pub(crate) fn builder(endpoints: &str) -> EtcdConfigBuilder {
    EtcdConfig::builder()
        .endpoints([endpoints])
        .connect_timeout(Duration::from_secs(2))
        .request_timeout(Duration::from_secs(5))
}

/// A config for `endpoints` with short timeouts.
pub(crate) fn config(endpoints: &str) -> EtcdConfig {
    builder(endpoints).build().expect("valid test config")
}

/// Connects a writer and proves the server answers with a write under `probe_key`. Fails the
/// test, naming the command that starts the servers, when it does not.
pub(crate) async fn writer_with_probe(config: EtcdConfig, probe_key: &str) -> EtcdRuleWriter {
    let endpoints = config.endpoints().join(",");
    let probe = async {
        let writer = EtcdRuleWriter::connect(config).await?;
        writer.put_bytes(probe_key, "ok").await?;
        Ok::<_, SourceError>(writer)
    };
    match tokio::time::timeout(WAIT, probe).await {
        Ok(Ok(writer)) => writer,
        Ok(Err(e)) => panic!("etcd at {endpoints} is unreachable ({e}); {START_HINT}"),
        Err(_) => panic!("etcd at {endpoints} did not answer within {WAIT:?}; {START_HINT}"),
    }
}

/// [`writer_with_probe`] with a probe key outside `/rules/`.
pub(crate) async fn writer(config: EtcdConfig) -> EtcdRuleWriter {
    writer_with_probe(config, "/sentinel-test/probe").await
}
