//! The server's metrics, through the `metrics` facade (a debugging recorder installed for
//! this test binary only).

mod support;

use std::sync::Arc;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use sentinel_token_server::protocol::RequestBody;
use sentinel_token_server::TokenServer;
use support::{Client, Fake};

type Metrics = Vec<(
    metrics_util::CompositeKey,
    Option<metrics::Unit>,
    Option<metrics::SharedString>,
    DebugValue,
)>;

/// One snapshot. The debugging recorder resets what it reports (counters, histograms, and
/// gauges moved by increments): take one, then read it.
fn snapshot(snapshotter: &Snapshotter) -> Metrics {
    snapshotter.snapshot().into_vec()
}

fn value(snapshot: &Metrics, kind: MetricKind, name: &str, labels: &[(&str, &str)]) -> f64 {
    snapshot
        .iter()
        .find(|(key, _, _, _)| {
            let k = key.key();
            key.kind() == kind
                && k.name() == name
                && labels
                    .iter()
                    .all(|(n, v)| k.labels().any(|l| l.key() == *n && l.value() == *v))
        })
        .map_or(0.0, |(_, _, _, v)| match v {
            DebugValue::Counter(c) => *c as f64,
            DebugValue::Gauge(g) => g.into_inner(),
            DebugValue::Histogram(h) => h.len() as f64,
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_decisions_rejected_frames_and_clients_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");
    let server = TokenServer::builder()
        .bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .start(Arc::new(Fake::default()))
        .await
        .expect("server");
    let mut c = Client::connect(server.local_addr()).await;
    c.call(RequestBody::Ping {
        namespace: Some("app-m".into()),
    })
    .await;
    c.flow(1, 1).await;
    c.flow(2, 1).await;
    c.flow(2, 1).await;
    c.send_raw(&[0, 5, 0, 0, 0, 9, 42]).await;
    c.flow(3, 1).await;
    use MetricKind::{Counter, Gauge, Histogram};
    let s = &snapshot(&snapshotter);
    assert_eq!(
        value(
            s,
            Counter,
            "sentinel_token_server_requests_total",
            &[("type", "ping")]
        ),
        1.0
    );
    assert_eq!(
        value(
            s,
            Counter,
            "sentinel_token_server_requests_total",
            &[("type", "flow")]
        ),
        4.0
    );
    let decisions = "sentinel_token_server_decisions_total";
    assert_eq!(
        value(s, Counter, decisions, &[("type", "flow"), ("status", "ok")]),
        1.0
    );
    assert_eq!(
        value(
            s,
            Counter,
            decisions,
            &[("type", "flow"), ("status", "blocked")]
        ),
        2.0
    );
    assert_eq!(
        value(s, Counter, decisions, &[("status", "no_rule_exists")]),
        1.0
    );
    assert_eq!(
        value(s, Histogram, "sentinel_token_server_decision_seconds", &[]),
        4.0
    );
    assert_eq!(
        value(
            s,
            Counter,
            "sentinel_token_server_rejected_frames_total",
            &[("reason", "unknown_type")]
        ),
        1.0
    );
    assert_eq!(
        value(s, Gauge, "sentinel_token_server_connections", &[]),
        1.0
    );
    assert_eq!(
        value(
            s,
            Gauge,
            "sentinel_token_server_connected_clients",
            &[("namespace", "app-m")]
        ),
        1.0
    );
    server.shutdown().await;
    let s = &snapshot(&snapshotter);
    // Since the last snapshot: the one connection closed.
    assert_eq!(
        value(s, Gauge, "sentinel_token_server_connections", &[]),
        -1.0
    );
    assert_eq!(
        value(
            s,
            Gauge,
            "sentinel_token_server_connected_clients",
            &[("namespace", "app-m")]
        ),
        0.0
    );
}
