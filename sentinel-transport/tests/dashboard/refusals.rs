//! Every refused command is counted where an operator looks, since the stock dashboard
//! shows "success" for some refused edits: `Transport::status()`, a `tracing` warning and
//! the `sentinel_transport_refused_total` counter, and the engine's `CommandRefused` event to
//! its listeners (issue #46, point 3); and a caller
//! refused with 403 is logged once per address with the setting that admits it (point 5).
//!
//! These tests run on a current-thread runtime so that the command center's task records
//! into the test's thread-local metrics recorder and tracing subscriber.

use std::io::Write;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::MetricKind;
use sentinel_transport::RefusalReason;

use super::*;

/// Log lines written by the subscriber the test installs.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Installs a subscriber writing here, for this thread, until the guard drops.
    fn install(&self) -> tracing::subscriber::DefaultGuard {
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner()))
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// The value of `sentinel_transport_refused_total` for `app` and `reason`.
fn refused_metric(recorder: &metrics_util::debugging::Snapshotter, app: &str, reason: &str) -> u64 {
    recorder
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, _, _, _)| {
            key.kind() == MetricKind::Counter
                && key.key().name() == "sentinel_transport_refused_total"
                && key
                    .key()
                    .labels()
                    .any(|l| l.key() == "app" && l.value() == app)
                && key
                    .key()
                    .labels()
                    .any(|l| l.key() == "reason" && l.value() == reason)
        })
        .map(|(_, _, _, value)| match value {
            DebugValue::Counter(n) => n,
            _ => 0,
        })
        .sum()
}

#[tokio::test]
async fn every_refused_command_is_counted_in_status_a_warning_and_a_metric() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _metrics = metrics::set_default_local_recorder(&recorder);
    let logs = Captured::default();
    let _logs = logs.install();

    let sentinel = Sentinel::new();
    let read_only = start(&sentinel, config("refusals-ro")).await;
    let dashboard = Dashboard::calling(local(&read_only));
    // Refused degrade and system edits: the stock dashboard shows "success" for these.
    for ty in ["degrade", "system"] {
        let (status, _) = dashboard
            .post("setRules", &[("type", ty), ("data", "[]")])
            .await;
        assert_eq!(status, 400);
    }
    assert_eq!(
        dashboard.get("setSwitch", &[("value", "false")]).await.0,
        400
    );
    // Reads are not refusals.
    assert_eq!(dashboard.get("getRules", &[("type", "flow")]).await.0, 200);
    let status = read_only.status();
    assert_eq!(status.refused, 3, "{status:?}");
    assert_eq!(
        status.refused_by_reason.get(&RefusalReason::ReadOnly),
        Some(&3)
    );
    let last = status.last_refused.expect("the latest refusal");
    assert_eq!(last.command, "setSwitch");
    assert!(last.message.contains("read-only"), "{}", last.message);
    assert!(last.caller.is_loopback());
    assert_eq!(refused_metric(&snapshotter, "refusals-ro", "read_only"), 3);
    read_only.shutdown().await;

    let writable = start(&sentinel, config("refusals-rw").access(Access::ReadWrite)).await;
    let dashboard = Dashboard::calling(local(&writable));
    let (status, body) = dashboard
        .post("setRules", &[("type", "authority"), ("data", "[]")])
        .await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = dashboard
        .post("setRules", &[("type", "bogus"), ("data", "[]")])
        .await;
    assert_eq!(status, 400);
    let status = writable.status();
    assert_eq!(status.refused, 2, "{status:?}");
    assert_eq!(
        status.refused_by_reason.get(&RefusalReason::NoStore),
        Some(&1)
    );
    assert_eq!(
        status.refused_by_reason.get(&RefusalReason::BadRequest),
        Some(&1)
    );
    assert_eq!(refused_metric(&snapshotter, "refusals-rw", "no_store"), 1);
    writable.shutdown().await;

    let warnings: Vec<String> = logs
        .lines()
        .into_iter()
        .filter(|l| l.contains("WARN") && l.contains("command refused"))
        .collect();
    assert_eq!(warnings.len(), 5, "{warnings:#?}");
    assert!(
        warnings.iter().any(|l| l.contains("reason=no_store")),
        "{warnings:#?}"
    );
    assert!(
        warnings.iter().all(|l| l.contains("caller=127.0.0.1")),
        "each warning names the caller: {warnings:#?}"
    );
}

#[tokio::test]
async fn every_refused_command_reaches_the_engine_s_listeners_without_the_rules_sent() {
    let sentinel = Sentinel::new();
    let events = refused_events(&sentinel);
    let read_only = start(&sentinel, config("refusals-event-ro")).await;
    let dashboard = Dashboard::calling(local(&read_only));
    let payload = dashboard_flow_rule("payload-marker-resource", 5.0);
    let (status, _) = dashboard
        .post(
            "setRules",
            &[("type", "flow"), ("data", &format!("[{payload}]"))],
        )
        .await;
    assert_eq!(status, 400);
    let seen = events.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert!(
        seen[0].starts_with("transport setRules read_only ") && seen[0].contains("read-only"),
        "{seen:#?}"
    );
    assert!(!seen[0].contains("payload-marker"), "{seen:#?}");
    read_only.shutdown().await;

    // An invalid rule: the event names the rule's index and field, not what was sent.
    let writable = start(
        &sentinel,
        config("refusals-event-rw")
            .access(Access::ReadWrite)
            .memory_only_edits(true),
    )
    .await;
    let dashboard = Dashboard::calling(local(&writable));
    let invalid = r#"[{"resource":"r","count":-1,"limitApp":"payload-marker-app","grade":1}]"#;
    let (status, body) = dashboard
        .post("setRules", &[("type", "flow"), ("data", invalid)])
        .await;
    assert_eq!(status, 400, "{body}");
    let seen = events.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(seen.len(), 2, "{seen:#?}");
    assert!(
        seen[1].starts_with("transport setRules invalid_rules ") && seen[1].contains("count"),
        "{seen:#?}"
    );
    assert!(!seen[1].contains("payload-marker"), "{seen:#?}");
    writable.shutdown().await;
}

#[tokio::test]
async fn a_refused_caller_is_counted_and_logged_once_with_the_setting_that_admits_it() {
    let logs = Captured::default();
    let _logs = logs.install();
    let ip = outward_ip();
    let sentinel = Sentinel::new();
    let events = refused_events(&sentinel);
    // A caller that is not this host: this host's outward address calling loopback while
    // the service advertises another address (a documentation address).
    let transport = start(
        &sentinel,
        config("refused-caller-app")
            .bind_ip(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
            .advertise_ip(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7))),
    )
    .await;
    let stranger = Dashboard::calling_from(local(&transport), ip);
    for _ in 0..3 {
        let (status, body) = stranger.get("version", &[]).await;
        assert_eq!(status, 403, "{body}");
        assert!(body.contains(&ip.to_string()), "{body}");
    }
    let status = transport.status();
    assert_eq!(status.refused, 3);
    assert_eq!(
        status.refused_by_reason.get(&RefusalReason::Forbidden),
        Some(&3)
    );
    assert_eq!(status.forbidden_callers, [ip]);
    let warnings: Vec<String> = logs
        .lines()
        .into_iter()
        .filter(|l| l.contains("WARN") && l.contains("forbidden"))
        .collect();
    assert_eq!(warnings.len(), 1, "once per address: {warnings:#?}");
    assert!(
        warnings[0].contains("allow_clients") && warnings[0].contains(&ip.to_string()),
        "{}",
        warnings[0]
    );
    // The engine's listeners hear of it once per address too.
    let seen = events.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert!(
        seen[0].starts_with("transport version forbidden ") && seen[0].contains(&ip.to_string()),
        "{seen:#?}"
    );
    transport.shutdown().await;
}

#[tokio::test]
async fn the_status_watch_changes_with_each_refusal_and_keeps_the_latest_ones_newest_first() {
    let sentinel = Sentinel::new();
    let transport = start(&sentinel, config("refusals-watch")).await;
    let mut watch = transport.status_watch();
    assert_eq!(watch.borrow_and_update().refused, 0);
    let dashboard = Dashboard::calling(local(&transport));
    let (status, _) = dashboard
        .post("setRules", &[("type", "degrade"), ("data", "[]")])
        .await;
    assert_eq!(status, 400);
    let changed = tokio::time::timeout(Duration::from_secs(5), watch.changed()).await;
    assert!(matches!(changed, Ok(Ok(()))), "the watch saw the refusal");
    let seen = watch.borrow_and_update().clone();
    assert_eq!(seen.refused, 1);
    assert_eq!(seen.recent.len(), 1);
    assert_eq!(seen.recent[0].command, "setRules");
    assert_eq!(seen.recent[0].reason, RefusalReason::ReadOnly);
    assert!(seen.recent[0].at_ms > 0);

    // More refusals than are kept: the newest first, the oldest dropped.
    let kept = sentinel_transport::TransportStatus::RECENT;
    for _ in 0..kept {
        assert_eq!(
            dashboard.get("setSwitch", &[("value", "false")]).await.0,
            400
        );
    }
    let status = transport.status();
    assert_eq!(status.refused, kept as u64 + 1);
    assert_eq!(status.recent.len(), kept);
    assert!(status.recent.iter().all(|r| r.command == "setSwitch"));
    assert_eq!(status.last_refused.as_ref(), status.recent.first());
    assert!(status.recent.windows(2).all(|w| w[0].at_ms >= w[1].at_ms));
    assert_eq!(*watch.borrow(), status, "the watch holds the same status");
    transport.shutdown().await;
}
