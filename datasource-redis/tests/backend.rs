//! `RedisSource` and `RedisRuleWriter` against real Redis servers: the three change modes, a
//! killed subscription, a restart, auth, a Redis Sentinel failover and a cluster. Start the
//! servers first:
//!
//! ```text
//! scripts/services.sh start redis
//! cargo test -p sentinel-datasource-redis --all-features
//! ```
//!
//! The tests that stop a server or kill every subscription use their own instance,
//! `redis-fault`, under a lock, so they never disturb the servers the other tests share. The
//! frozen-server test freezes (SIGSTOP) and thaws its own, `redis-freeze`. The failover test
//! is the only user of the `redis-ha` trio here (cluster-redis's outage test fails it over
//! too, from another test binary; both follow whichever master the sentinel names).

mod support;

use std::time::Duration;

use sentinel_core::datasource::testkit::{
    applied_seq, flow_payload, read, until_within, wait_status, wait_until, watch, WAIT,
};
use sentinel_core::datasource::{
    DataSource, DataSourceError, FlowJson, ReadableDataSource, SourceError, StartMode, WatchEvent,
};
use sentinel_core::flow::FlowRule;
use sentinel_core::Sentinel;
use sentinel_datasource_redis::{ChangeMode, RedisConfig, RedisRuleWriter, RedisSource};
use sentinel_test_support::{fault_lock, services};
use support::{
    addr, append_set_while_down, auth_addr, builder, config, expect_frozen_server_noticed,
    expect_resumed, fault_addr, freeze_addr, keyspace_addr, master_name, raw, retried, run,
    sentinel_addrs, sentinel_builder, unique_key, writer,
};

/// Starts a driver over `source` into a fresh engine, failing the start on a read error.
async fn start(source: RedisSource) -> (Sentinel, DataSource) {
    let sentinel = Sentinel::new();
    let ds = DataSource::builder(source, FlowJson::new())
        .name("redis-test")
        .backoff(Duration::from_millis(20), Duration::from_millis(200))
        .start(&sentinel)
        .await
        .unwrap_or_else(|e| panic!("start: {e:?}"));
    (sentinel, ds)
}

/// A key that holds payload 1, and a driver (into its own engine) that applied it.
struct Live {
    key: String,
    channel: String,
    writer: RedisRuleWriter,
    sentinel: Sentinel,
    ds: DataSource,
}

/// Stores payload 1 under `key` through `config`, then starts a source on it in `mode` and
/// waits until the payload is applied.
async fn live(config: RedisConfig, key: String, mode: fn(String) -> ChangeMode) -> Live {
    let channel = format!("{key}:changed");
    let writer = writer(config.clone()).await;
    writer
        .put_bytes(&key, &channel, flow_payload(1))
        .await
        .expect("set 1");
    let (sentinel, ds) = start(RedisSource::new(config, key.clone(), mode(channel.clone()))).await;
    wait_seq(&sentinel, 1).await;
    Live {
        key,
        channel,
        writer,
        sentinel,
        ds,
    }
}

/// Waits until the flow rules carry sequence number `seq`.
async fn wait_seq(sentinel: &Sentinel, seq: u64) {
    wait_until(&format!("payload {seq} applied"), || {
        applied_seq::<FlowRule>(sentinel) == Some(seq)
    })
    .await;
}

#[tokio::test]
async fn subscribe_comes_before_get_so_a_change_in_between_is_seen() {
    let key = unique_key("before_get");
    let channel = format!("{key}:changed");
    let w = writer(config(&addr())).await;
    w.put_bytes(&key, &channel, "v1").await.expect("set v1");

    let mut source = RedisSource::notify(config(&addr()), key.clone(), channel.clone());
    let first = read(&mut source).await.expect("read");
    assert_eq!(first.entries[0].value, b"v1");
    // Written after the read, before the first watch: the subscription is already there.
    let receivers = w.put_bytes(&key, &channel, "v2").await.expect("set v2");
    assert_eq!(
        receivers, 1,
        "the source's subscription received the message"
    );
    assert_eq!(watch(&mut source).await.expect("watch"), WatchEvent::Resync);
    let again = read(&mut source).await.expect("re-read");
    assert_eq!(again.entries[0].value, b"v2");
    source.close().await;
}

#[tokio::test]
async fn notify_mode_a_message_that_disagrees_with_the_key_loses_to_the_key() {
    let t = live(
        config(&addr()),
        unique_key("notify_disagrees"),
        ChangeMode::Notify,
    )
    .await;

    // The key says 2; a message claims 3. The key is the truth.
    let mut conn = raw(&addr()).await;
    let () = run(
        &mut conn,
        redis::cmd("SET").arg(&t.key).arg(flow_payload(2)),
    )
    .await;
    let _: u64 = run(
        &mut conn,
        redis::cmd("PUBLISH").arg(&t.channel).arg(flow_payload(3)),
    )
    .await;
    wait_seq(&t.sentinel, 2).await;
    assert!(
        !until_within(Duration::from_millis(300), || applied_seq::<FlowRule>(
            &t.sentinel
        ) == Some(3))
        .await,
        "the message's payload was applied in notify mode"
    );
    t.ds.close().await;
}

#[tokio::test]
async fn payload_mode_applies_the_message_payload() {
    let t = live(
        config(&addr()),
        unique_key("payload_mode"),
        ChangeMode::Payload,
    )
    .await;

    // Only PUBLISH, as some of Sentinel Java's publishers do: the key keeps 1.
    let mut conn = raw(&addr()).await;
    let receivers: u64 = run(
        &mut conn,
        redis::cmd("PUBLISH").arg(&t.channel).arg(flow_payload(2)),
    )
    .await;
    assert_eq!(receivers, 1);
    wait_seq(&t.sentinel, 2).await;
    let stored: Vec<u8> = run(&mut conn, redis::cmd("GET").arg(&t.key)).await;
    assert_eq!(stored, flow_payload(1));
    t.ds.close().await;
}

#[tokio::test]
async fn keyspace_mode_applies_a_plain_set_and_a_del_with_no_publisher() {
    let key = unique_key("keyspace_mode");
    let source = RedisSource::new(config(&keyspace_addr()), key.clone(), ChangeMode::Keyspace);
    let (sentinel, ds) = start(source).await;
    assert!(sentinel.flow_rules().rules().is_empty());

    let mut conn = raw(&keyspace_addr()).await;
    let () = run(&mut conn, redis::cmd("SET").arg(&key).arg(flow_payload(7))).await;
    wait_seq(&sentinel, 7).await;
    let _: u64 = run(&mut conn, redis::cmd("DEL").arg(&key)).await;
    wait_until("the deleted key cleared the rules", || {
        sentinel.flow_rules().rules().is_empty()
    })
    .await;
    ds.close().await;
}

#[tokio::test]
async fn keyspace_mode_on_a_server_with_notifications_off_fails_the_start_naming_the_setting() {
    let key = unique_key("keyspace_off");
    // redis-main runs with notify-keyspace-events off, Redis's default.
    let source = RedisSource::new(config(&addr()), key, ChangeMode::Keyspace);
    let started = tokio::time::timeout(
        WAIT,
        DataSource::builder(source, FlowJson::new())
            .start_mode(StartMode::FailFast)
            .start(&Sentinel::new()),
    )
    .await
    .expect("the start must fail, not wait");
    let Err(err) = started else {
        panic!("keyspace mode started on a server without keyspace notifications");
    };
    let text = format!("{err}: {:?}", std::error::Error::source(&err));
    assert!(matches!(err, DataSourceError::Source { .. }), "{err:?}");
    assert!(text.contains("notify-keyspace-events"), "{text}");
    assert!(text.contains("KA"), "{text}");
}

#[tokio::test]
async fn a_killed_subscription_reconnects_and_the_reread_recovers_a_change_made_meanwhile() {
    let _fault = fault_lock().await;
    services(&["start", "redis-fault"]).await;
    let t = live(
        config(&fault_addr()),
        unique_key("client_kill"),
        ChangeMode::Notify,
    )
    .await;

    // Kill every subscription, then change the key with no message: nobody is subscribed,
    // so only the re-GET after the reconnect can find the change.
    let mut conn = raw(&fault_addr()).await;
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .ignore()
        .cmd("SET")
        .arg(&t.key)
        .arg(flow_payload(2))
        .ignore();
    let () = tokio::time::timeout(WAIT, pipe.query_async(&mut conn))
        .await
        .expect("in time")
        .expect("kill + set");
    wait_seq(&t.sentinel, 2).await;
    let status = wait_status(&t.ds, "a counted disconnect", |s| {
        s.disconnects >= 1 && s.connected
    })
    .await;
    assert_eq!(status.rejected_count, 0, "{status:?}");
    t.ds.close().await;
}

#[tokio::test]
async fn a_restart_with_the_key_changed_while_down_ends_with_the_new_value() {
    let _fault = fault_lock().await;
    services(&["start", "redis-fault"]).await;
    let t = live(
        config(&fault_addr()),
        unique_key("restart"),
        ChangeMode::Notify,
    )
    .await;

    services(&["stop", "redis-fault"]).await;
    wait_status(&t.ds, "disconnected", |s| !s.connected).await;
    append_set_while_down(&t.key, &flow_payload(2));
    services(&["start", "redis-fault"]).await;
    wait_seq(&t.sentinel, 2).await;
    t.ds.close().await;
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_is_followed_at_once_and_no_write_after_it_is_lost() {
    // PINGs a minute apart: only the sentinel's +switch-master can make the source leave the
    // demoted master within the waits below.
    let config = sentinel_builder()
        .health_check(
            Duration::from_secs(60),
            sentinel_datasource_redis::DEFAULT_HEALTH_CHECK_TIMEOUT,
        )
        .build()
        .expect("valid sentinel config");
    let t = live(config, unique_key("failover"), ChangeMode::Notify).await;

    let sentinel_addr = sentinel_addrs()
        .split(',')
        .next()
        .expect("one sentinel")
        .to_owned();
    let mut sentinel_conn = raw(&sentinel_addr).await;
    let before = after_failover(&mut sentinel_conn).await;
    // A failover is refused while the replica is not yet in sync or another one runs: retry.
    let asked = until_within_async(WAIT, || {
        let mut conn = sentinel_conn.clone();
        async move {
            redis::cmd("SENTINEL")
                .arg("FAILOVER")
                .arg(master_name())
                .query_async::<()>(&mut conn)
                .await
                .is_ok()
        }
    })
    .await;
    assert!(asked, "SENTINEL FAILOVER was refused for {WAIT:?}");
    let moved = until_within_async(WAIT, || {
        let mut conn = sentinel_conn.clone();
        let before = before.clone();
        async move {
            let now: Result<(String, u16), _> = redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(master_name())
                .query_async(&mut conn)
                .await;
            now.is_ok_and(|now| now != before)
        }
    })
    .await;
    assert!(
        moved,
        "the master did not move from {before:?} within {WAIT:?}"
    );

    // Written to the new master as soon as the sentinel names it: its PUBLISH reaches no
    // subscriber until the source moves, so only the re-read after +switch-master (published
    // as the failover ends, well under a second later) applies it in time. Without it the
    // source would wait for its next PING (a minute here) or for the sentinels to demote
    // the old master (about 10 s).
    let written = std::time::Instant::now();
    put_until_ok(&t, 2).await;
    let followed = until_within(FOLLOWED_WITHIN, || {
        applied_seq::<FlowRule>(&t.sentinel) == Some(2)
    })
    .await;
    assert!(
        followed,
        "a change written right after the failover was not applied within {FOLLOWED_WITHIN:?}: \
         the source did not follow +switch-master"
    );
    println!(
        "a change written right after the failover applied {:?} later",
        written.elapsed()
    );
    for seq in 3..=5 {
        put_until_ok(&t, seq).await;
    }
    wait_seq(&t.sentinel, 5).await;

    let (host, port) = after_failover(&mut sentinel_conn).await;
    let after = format!("{host}:{port}");
    let mut new_master = raw(&after).await;
    let subscribed = until_within_async(WAIT, || {
        let mut conn = new_master.clone();
        let channel = t.channel.clone();
        async move {
            let numsub: Result<(String, u64), _> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(channel)
                .query_async(&mut conn)
                .await;
            numsub.is_ok_and(|(_, n)| n == 1)
        }
    })
    .await;
    assert!(
        subscribed,
        "the source is not subscribed on the new master {after}"
    );
    // Every write went to the new master (the old one takes writes for seconds after the
    // switch, and loses them when it becomes a replica).
    let stored: Vec<u8> = run(&mut new_master, redis::cmd("GET").arg(&t.key)).await;
    assert_eq!(stored, flow_payload(5));
    assert!(t.ds.status().connected, "{:?}", t.ds.status());
    t.ds.close().await;
}

/// How soon after a failover a change must be applied: a bound with room for a loaded
/// machine (it takes tens of milliseconds), far below the ~10 s the old master takes to be
/// demoted.
const FOLLOWED_WITHIN: Duration = Duration::from_secs(5);

/// Writes payload `seq`, retrying (bounded) while the deployment settles after a failover
/// or a thaw.
async fn put_until_ok(t: &Live, seq: u64) {
    retried(&format!("write {seq}"), || {
        t.writer.put_bytes(&t.key, &t.channel, flow_payload(seq))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_server_is_reported_disconnected_within_the_health_check() {
    services(&["start", "redis-freeze"]).await;
    // The default health check: what a user gets.
    let config = RedisConfig::builder()
        .server(freeze_addr())
        .build()
        .expect("valid config");
    let noticed_within = config.frozen_server_detection();
    let t = live(config, unique_key("frozen"), ChangeMode::Notify).await;
    expect_frozen_server_noticed(&t.ds, "redis-freeze", noticed_within, &["ping", "1s", "2s"])
        .await;
    // Thawed, it is the same server: the source reconnects and follows it again.
    put_until_ok(&t, 2).await;
    expect_resumed(&t.ds, &t.sentinel, 2).await;
    t.ds.close().await;
}

/// The master the sentinel names now.
async fn after_failover(sentinel: &mut redis::aio::MultiplexedConnection) -> (String, u16) {
    run(
        sentinel,
        redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(master_name()),
    )
    .await
}

/// Polls the async `condition` every 100 ms until it holds (`true`) or `timeout` passes.
async fn until_within_async<F, Fut>(timeout: Duration, condition: F) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if condition().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
