//! An etcd with authentication: the right and wrong passwords, permissions and tokens.

use super::*;

/// The auth-enabled server, written to as root.
async fn root_writer() -> sentinel_datasource_etcd::EtcdRuleWriter {
    writer(
        builder(&auth_endpoints())
            .credentials("root", "rootpw")
            .build()
            .expect("config"),
    )
    .await
}

/// The `app` user's config on the auth-enabled server (it may read `/rules/` only).
fn app_config() -> sentinel_datasource_etcd::EtcdConfig {
    builder(&auth_endpoints())
        .credentials("app", "apppw")
        .build()
        .expect("config")
}

/// A fresh key under `/rules` for `test`, holding `v1` written as root: the root writer and
/// the key.
async fn key_at_v1(test: &str) -> (sentinel_datasource_etcd::EtcdRuleWriter, String) {
    let root = root_writer().await;
    let key = unique_key("/rules", test);
    root.put_bytes(&key, "v1").await.expect("put v1");
    (root, key)
}

#[tokio::test]
async fn wrong_password_is_an_auth_error_without_the_password() {
    let _ = root_writer().await;
    let cfg = builder(&auth_endpoints())
        .credentials("app", "not-the-pw-41")
        .build()
        .expect("config");
    let mut source = EtcdSource::key(cfg, unique_key("/rules", "wrong_pw"));
    match read(&mut source).await {
        Err(e @ SourceError::Auth { .. }) => {
            let text = format!("{e} {e:?}");
            assert!(!text.contains("not-the-pw-41"), "{text}");
        }
        other => panic!("expected an auth error, got {other:?}"),
    }
    assert!(!format!("{source:?}").contains("not-the-pw-41"));
    assert!(!source.describe().contains("not-the-pw-41"));
}

#[tokio::test]
async fn missing_credentials_are_an_auth_error() {
    let _ = root_writer().await;
    let mut source = EtcdSource::key(config(&auth_endpoints()), unique_key("/rules", "anon"));
    match read(&mut source).await {
        Err(SourceError::Auth { .. }) => {}
        other => panic!("expected an auth error, got {other:?}"),
    }
}

#[tokio::test]
async fn right_password_reads_and_watches() {
    let (root, key) = key_at_v1("right_pw").await;

    let cfg = app_config();
    let mut source = EtcdSource::key(cfg, key.clone());
    let payload = read(&mut source).await.expect("read as app");
    assert_eq!(values(&payload), [(key.clone(), "v1".to_owned())]);

    root.put_bytes(&key, "v2").await.expect("put v2");
    let payload = next_value(&mut source).await;
    assert_eq!(values(&payload), [(key, "v2".to_owned())]);
}

#[tokio::test]
async fn key_outside_the_granted_prefix_is_permission_denied() {
    let root = root_writer().await;
    let key = unique_key("/other", "denied");
    root.put_bytes(&key, "secret rules").await.expect("put");

    let cfg = app_config();
    let mut source = EtcdSource::key(cfg.clone(), key.clone());
    match read(&mut source).await {
        Err(SourceError::PermissionDenied { .. }) => {}
        other => panic!("expected permission denied, got {other:?}"),
    }
    let mut source = EtcdSource::prefix(cfg, "/other/");
    match read(&mut source).await {
        Err(SourceError::PermissionDenied { .. }) => {}
        other => panic!("expected permission denied for the prefix, got {other:?}"),
    }
}

/// The auth server runs with `--auth-token-ttl 2`: an idle source's token expires, and the
/// source must authenticate again by itself for both reads and new watches.
#[tokio::test]
async fn expired_token_is_renewed() {
    let (root, key) = key_at_v1("token_ttl").await;

    let cfg = app_config();
    let mut source = EtcdSource::key(cfg, key.clone());
    read(&mut source).await.expect("first read");

    tokio::time::sleep(Duration::from_secs(3)).await;
    let payload = read(&mut source)
        .await
        .expect("read after the token expired");
    assert_eq!(values(&payload), [(key.clone(), "v1".to_owned())]);

    // The watch opens lazily, after the token has expired again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    root.put_bytes(&key, "v2").await.expect("put v2");
    let event = watch(&mut source).await;
    match event {
        Ok(WatchEvent::Changed(payload)) => {
            assert_eq!(values(&payload), [(key, "v2".to_owned())]);
        }
        other => panic!("expected the change after re-authenticating, got {other:?}"),
    }
}
