//! The three change modes: notify, payload and keyspace notifications, and subscribing
//! before the first read.

use super::*;

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
