//! Reaching the servers: a wrong password, an ACL user, a Redis Cluster, and TLS.

use super::*;

#[tokio::test]
async fn a_wrong_password_is_an_auth_error_without_the_secret() {
    let key = unique_key("wrong_password");
    for cfg in [
        builder(&auth_addr()).password("not-the-pw-123").build(),
        builder(&auth_addr())
            .credentials("app", "not-the-pw-123")
            .build(),
    ] {
        let cfg = cfg.expect("valid");
        let mut source = RedisSource::notify(cfg, key.clone(), format!("{key}:changed"));
        let err = read(&mut source).await.expect_err("refused");
        assert!(matches!(err, SourceError::Auth { .. }), "{err:?}");
        let text = format!("{err} {err:?} {source:?} {}", source.describe());
        assert!(!text.contains("not-the-pw-123"), "{text}");
    }
    // No credentials at all: NOAUTH.
    let mut source = RedisSource::notify(config(&auth_addr()), key.clone(), "rules:x");
    let err = read(&mut source).await.expect_err("refused");
    assert!(matches!(err, SourceError::Auth { .. }), "{err:?}");
}

#[tokio::test]
async fn an_acl_user_may_read_its_keys_and_is_denied_others_without_the_secret() {
    let app = |()| {
        builder(&auth_addr())
            .credentials("app", "apppw")
            .build()
            .expect("valid")
    };
    let key = unique_key("acl");
    let channel = format!("{key}:changed");
    let w = RedisRuleWriter::connect(app(()))
        .await
        .expect("the app user connects");
    w.put_bytes(&key, &channel, "v1")
        .await
        .expect("app may write rules:*");
    let mut source = RedisSource::notify(app(()), key.clone(), channel);
    let payload = read(&mut source).await.expect("app may read rules:*");
    assert_eq!(payload.entries[0].value, b"v1");

    // A key outside rules:* (the channel is allowed, so the GET is what is refused).
    let mut other = RedisSource::notify(app(()), "other:flow", "rules:other");
    let err = read(&mut other).await.expect_err("denied");
    assert!(
        matches!(err, SourceError::PermissionDenied { .. }),
        "{err:?}"
    );
    assert!(!format!("{err} {err:?}").contains("apppw"));
    // A channel outside rules:* is refused at SUBSCRIBE.
    let mut other = RedisSource::notify(app(()), key.clone(), "other:changed");
    let err = read(&mut other).await.expect_err("denied");
    assert!(
        matches!(err, SourceError::PermissionDenied { .. }),
        "{err:?}"
    );
}

#[cfg(feature = "cluster")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_a_key_on_a_later_shard_is_read_and_watched() {
    use support::cluster_addrs;
    let nodes = cluster_addrs();
    let first = nodes.split(',').next().expect("a node").to_owned();
    let cfg = RedisConfig::builder()
        .cluster([nodes.as_str()])
        .connect_timeout(Duration::from_secs(2))
        .request_timeout(Duration::from_secs(2))
        .health_check(
            Duration::from_secs(1),
            sentinel_datasource_redis::DEFAULT_HEALTH_CHECK_TIMEOUT,
        )
        .build()
        .expect("valid cluster config");
    // A key whose slot the first node does not serve.
    let mut first_conn = raw(&first).await;
    let mut key = String::new();
    for n in 0..100 {
        let candidate = format!("{}-{n}", unique_key("cluster"));
        // A plain connection to the first node answers MOVED for another shard's key.
        let here: Result<Option<Vec<u8>>, redis::RedisError> = redis::cmd("GET")
            .arg(&candidate)
            .query_async(&mut first_conn)
            .await;
        if here.is_err_and(|e| e.code() == Some("MOVED")) {
            key = candidate;
            break;
        }
    }
    assert!(!key.is_empty(), "no key off the first shard in 100 tries");
    let t = live(cfg.clone(), key, ChangeMode::Notify).await;
    t.writer
        .put_bytes(&t.key, &t.channel, flow_payload(2))
        .await
        .expect("set 2");
    wait_seq(&t.sentinel, 2).await;

    // A compare-and-set runs its script on the key's shard too.
    use sentinel_core::datasource::{Expected, WritableDataSource, WriteError};
    let target = writer(cfg).await.at(t.key.clone(), t.channel.clone());
    let read = target.revision().await.expect("the revision");
    assert!(read.is_some(), "a stored key has a revision");
    target
        .store(flow_payload(3), Expected::Revision(read))
        .await
        .expect("set 3 if unchanged");
    wait_seq(&t.sentinel, 3).await;
    let stale = target
        .store(flow_payload(4), Expected::Revision(read))
        .await;
    assert!(
        matches!(stale, Err(WriteError::Conflict { .. })),
        "{stale:?}"
    );
    t.ds.close().await;
}

#[cfg(feature = "tls")]
#[tokio::test]
async fn tls_with_the_servers_ca_reads_and_follows_the_key() {
    use sentinel_datasource_redis::TlsConfig;
    use support::{tls_addr, tls_ca_pem};
    let cfg = builder(&tls_addr())
        .tls(TlsConfig::new().ca_certificate_pem(tls_ca_pem()))
        .build()
        .expect("valid tls config");
    let t = live(cfg, unique_key("tls"), ChangeMode::Notify).await;
    t.writer
        .put_bytes(&t.key, &t.channel, flow_payload(2))
        .await
        .expect("set 2 over tls");
    wait_seq(&t.sentinel, 2).await;
    t.ds.close().await;

    // Without the CA the server's certificate is not trusted.
    let untrusted = builder(&tls_addr())
        .tls(TlsConfig::new())
        .build()
        .expect("valid tls config");
    let mut source = RedisSource::notify(untrusted, unique_key("tls_untrusted"), "rules:x");
    let err = read(&mut source).await.expect_err("untrusted certificate");
    assert!(matches!(err, SourceError::Connection { .. }), "{err:?}");
}
