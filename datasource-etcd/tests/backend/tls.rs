//! An etcd over TLS (feature `tls`).

use super::*;
use sentinel_datasource_etcd::TlsConfig;
use support::{tls_ca_pem, tls_endpoints};

#[tokio::test]
async fn reads_and_watches_over_tls() {
    let cfg = builder(&tls_endpoints())
        .tls(TlsConfig::new().ca_certificate_pem(tls_ca_pem()))
        .build()
        .expect("config");
    let w = writer(cfg.clone()).await;
    let key = unique_key("/sentinel-test", "tls");
    w.put_bytes(&key, "v1").await.expect("put v1");

    let mut source = EtcdSource::key(cfg, key.clone());
    let payload = read(&mut source).await.expect("read over TLS");
    assert_eq!(values(&payload), [(key.clone(), "v1".to_owned())]);
    w.put_bytes(&key, "v2").await.expect("put v2");
    let payload = next_value(&mut source).await;
    assert_eq!(values(&payload), [(key, "v2".to_owned())]);
}

#[tokio::test]
async fn untrusted_server_certificate_is_refused() {
    // Make sure the server is up, so the failure below is about trust.
    let trusted = builder(&tls_endpoints())
        .tls(TlsConfig::new().ca_certificate_pem(tls_ca_pem()))
        .build()
        .expect("config");
    let _ = writer(trusted).await;

    let cfg = builder(&tls_endpoints())
        .tls(TlsConfig::new())
        .build()
        .expect("config");
    let mut source = EtcdSource::key(cfg, "/sentinel-test/tls-untrusted");
    match read(&mut source).await {
        Err(SourceError::Connection { .. }) => {}
        other => panic!("expected a connection error, got {other:?}"),
    }
}
