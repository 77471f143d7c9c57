//! Reconnecting: capped exponential backoff, doubling for a watch that fails at once and
//! starting over after a healthy one (virtual time).

use super::*;

#[tokio::test(start_paused = true)]
async fn reconnects_with_capped_exponential_backoff() {
    let store = MemoryStore::new();
    store.put("k", flow_payload(1));
    let sentinel = Sentinel::new();
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .backoff(Duration::from_millis(100), Duration::from_millis(800))
        .start(&sentinel)
        .await
        .expect("starts");
    let reads_at_start = store.read_count();
    store.set_down(true);
    wait_status(&source, "disconnect", |s| !s.connected).await;
    // Paused time auto-advances while the driver sleeps.
    while store.read_count() < reads_at_start + 8 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let times = store.read_times();
    let gaps: Vec<Duration> = times[times.len() - 7..]
        .windows(2)
        .map(|w| w[1] - w[0])
        .collect();
    // Reads 2..=8 after the disconnect: their delays were 400 ms, then the 800 ms cap.
    let steps = [400u64, 800, 800, 800, 800, 800];
    for (gap, step) in gaps.iter().zip(steps) {
        let step = Duration::from_millis(step);
        assert!(
            *gap >= step / 2 && *gap <= step + Duration::from_millis(1),
            "{gaps:?}"
        );
    }
    store.put("k", flow_payload(2));
    store.set_down(false);
    wait_status(&source, "reconnect", |s| {
        s.connected && s.applied_count == 2
    })
    .await;
    assert_eq!(source.status().disconnects, 1);
    source.close().await;
}

/// A backend whose watch fails after `healthy_for`, recording when it is read.
struct FailingWatch {
    reads: Arc<std::sync::Mutex<Vec<tokio::time::Instant>>>,
    healthy_for: Duration,
}

#[async_trait::async_trait]
impl ReadableDataSource for FailingWatch {
    fn describe(&self) -> String {
        "failing watch".into()
    }

    async fn read(&mut self) -> Result<RawPayload, SourceError> {
        if let Ok(mut reads) = self.reads.lock() {
            reads.push(tokio::time::Instant::now());
        }
        Ok(RawPayload::single("k", flow_payload(1)))
    }

    async fn watch(&mut self) -> Result<WatchEvent, SourceError> {
        tokio::time::sleep(self.healthy_for).await;
        Err(SourceError::Connection {
            message: "gone".into(),
            source: None,
        })
    }
}

/// The gaps between the backend's reads while `healthy_for` and the backoff play out for
/// `run` (virtual time).
async fn read_gaps(healthy_for: Duration, run: Duration) -> Vec<Duration> {
    let reads = Arc::new(std::sync::Mutex::new(Vec::new()));
    let backend = FailingWatch {
        reads: reads.clone(),
        healthy_for,
    };
    let sentinel = Sentinel::new();
    let source = DataSource::builder(backend, FlowJson::new())
        .backoff(Duration::from_millis(100), Duration::from_secs(60))
        .start(&sentinel)
        .await
        .expect("starts");
    tokio::time::sleep(run).await;
    source.close().await;
    let reads = reads.lock().map(|r| r.clone()).unwrap_or_default();
    reads.windows(2).map(|w| w[1] - w[0]).collect()
}

#[tokio::test(start_paused = true)]
async fn backoff_doubles_for_a_watch_that_fails_at_once() {
    let gaps = read_gaps(Duration::ZERO, Duration::from_secs(30)).await;
    assert!(gaps.len() >= 6, "{gaps:?}");
    for (i, gap) in gaps.iter().take(6).enumerate() {
        let step = Duration::from_millis(100) * 2u32.pow(i as u32);
        assert!(
            *gap >= step / 2 && *gap <= step,
            "gap {i} is {gap:?}, expected {:?}..={step:?}",
            step / 2
        );
    }
}

#[tokio::test(start_paused = true)]
async fn backoff_starts_over_after_a_healthy_watch() {
    // Each watch runs 11 s (over the 10 s that count as healthy) before it fails: every
    // reconnect waits the initial delay again, not a doubled one.
    let gaps = read_gaps(Duration::from_secs(11), Duration::from_secs(60)).await;
    assert!(gaps.len() >= 4, "{gaps:?}");
    for gap in &gaps {
        let backoff = gap.saturating_sub(Duration::from_secs(11));
        assert!(
            backoff >= Duration::from_millis(50) && backoff <= Duration::from_millis(100),
            "{gaps:?}"
        );
    }
}
