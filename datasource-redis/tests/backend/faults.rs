//! Faults: a killed subscription, a restart with the key changed, a Redis Sentinel failover
//! and a frozen server.

use super::*;

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
