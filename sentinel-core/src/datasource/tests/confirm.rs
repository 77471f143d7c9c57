//! A change read right after a reconnect (a deletion above all) is confirmed by a second
//! read before it applies (virtual time: the default 2 s pass on Tokio's paused clock).

use super::*;

/// A store holding `flow_payload(seq)` under `k`, an engine, and a source over the key with a
/// quick backoff and the default confirmation time.
async fn setup(seq: u64) -> (MemoryStore, Sentinel, DataSource) {
    let store = MemoryStore::new();
    store.put("k", flow_payload(seq));
    let sentinel = Sentinel::new();
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .backoff(Duration::from_millis(100), Duration::from_millis(400))
        .start(&sentinel)
        .await
        .expect("starts");
    (store, sentinel, source)
}

/// How long from now until the flow sequence in force is `seq`.
async fn time_until(sentinel: &Sentinel, seq: Option<u64>) -> Duration {
    let from = tokio::time::Instant::now();
    wait_until("the rules expected", || {
        applied_seq::<FlowRule>(sentinel) == seq
    })
    .await;
    from.elapsed()
}

/// Asserts that `waited` is the 2 s of the default confirmation time.
fn assert_confirmation_time(waited: Duration) {
    assert!(
        waited >= Duration::from_millis(1900) && waited <= Duration::from_millis(2100),
        "applied after {waited:?}"
    );
}

/// Takes the store down until the source sees it, then runs `meanwhile` and brings the store
/// back; returns once the source has connected again.
async fn outage(store: &MemoryStore, source: &DataSource, meanwhile: impl FnOnce()) {
    store.set_down(true);
    wait_status(source, "disconnect", |s| !s.connected).await;
    meanwhile();
    store.set_down(false);
    wait_status(source, "reconnect", |s| s.connected).await;
}

/// The restart of a store that answers before it has loaded its data: the key reads as
/// missing right after the reconnect, then comes back. The rules never go.
#[tokio::test(start_paused = true)]
async fn a_key_missing_right_after_a_reconnect_is_read_again_and_the_rules_stay() {
    let (store, sentinel, source) = setup(1).await;
    outage(&store, &source, || store.delete("k")).await;
    // The reconnect read found the key missing: held, not applied, and the status says so.
    let reconnected = tokio::time::Instant::now();
    assert!(source.status().confirming, "{:?}", source.status());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));
    store.put("k", flow_payload(1)); // the store has loaded its data
    let status = wait_status(&source, "the deletion withdrawn", |s| {
        s.unconfirmed_changes == 1
    })
    .await;
    assert!(reconnected.elapsed() >= Duration::from_millis(1900));
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(1));
    assert_eq!(status.applied_count, 1, "{status:?}");
    wait_status(&source, "confirmed", |s| !s.confirming).await;
    // Later changes apply as usual.
    store.put("k", flow_payload(2));
    wait_status(&source, "the next value", |s| s.applied_count == 2).await;
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(2));
    source.close().await;
}

/// A real deletion made during the outage is applied, once the confirmation time after the
/// reconnect is over; a deletion later than that applies at once.
#[tokio::test(start_paused = true)]
async fn a_deletion_still_there_after_the_delay_is_applied() {
    let (store, sentinel, source) = setup(1).await;
    outage(&store, &source, || store.delete("k")).await;
    assert_confirmation_time(time_until(&sentinel, None).await);
    assert_eq!(source.status().unconfirmed_changes, 0);

    store.put("k", flow_payload(2));
    wait_status(&source, "the new value", |s| s.applied_count == 3).await;
    store.delete("k");
    assert!(time_until(&sentinel, None).await < Duration::from_millis(100));
    source.close().await;
}

/// Deletes `k` (which holds sequence 1) and restores it within the confirmation time: the
/// rules never change, the status shows the deletion held, then withdrawn.
async fn expect_deletion_withdrawn(store: &MemoryStore, sentinel: &Sentinel, source: DataSource) {
    store.delete("k");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(applied_seq::<FlowRule>(sentinel), Some(1));
    assert!(source.status().confirming, "{:?}", source.status());
    store.put("k", flow_payload(1));
    wait_status(&source, "the deletion withdrawn", |s| {
        s.unconfirmed_changes == 1
    })
    .await;
    assert_eq!(applied_seq::<FlowRule>(sentinel), Some(1));
    source.close().await;
}

/// A deletion that the watch reports soon after a reconnect is confirmed too.
#[tokio::test(start_paused = true)]
async fn a_deletion_watched_soon_after_a_reconnect_is_confirmed() {
    let (store, sentinel, source) = setup(1).await;
    outage(&store, &source, || {}).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    expect_deletion_withdrawn(&store, &sentinel, source).await;
}

/// One key of a prefix missing after a reconnect is a deletion too: the rules it gave stay.
#[tokio::test(start_paused = true)]
async fn a_prefix_key_missing_after_a_reconnect_is_confirmed() {
    let store = MemoryStore::new();
    store.put("rules/a", r#"[{"resource":"a","count":1}]"#);
    store.put("rules/b", r#"[{"resource":"b","count":2}]"#);
    let sentinel = Sentinel::new();
    let source = DataSource::builder(store.prefix_source("rules/"), FlowJson::new())
        .backoff(Duration::from_millis(100), Duration::from_millis(400))
        .start(&sentinel)
        .await
        .expect("starts");
    outage(&store, &source, || store.delete("rules/b")).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(flow_count(&sentinel), 2);
    store.put("rules/b", r#"[{"resource":"b","count":2}]"#);
    wait_status(&source, "the deletion withdrawn", |s| {
        s.unconfirmed_changes == 1
    })
    .await;
    assert_eq!(flow_count(&sentinel), 2);
    source.close().await;
}

/// With the time set to zero, a deletion read at the reconnect applies at once (the
/// behaviour before confirmation, kept as an explicit choice).
#[tokio::test(start_paused = true)]
async fn no_confirmation_applies_a_deletion_at_the_reconnect() {
    let store = MemoryStore::new();
    store.put("k", flow_payload(1));
    let sentinel = Sentinel::new();
    let source = DataSource::builder(store.source("k"), FlowJson::new())
        .backoff(Duration::from_millis(100), Duration::from_millis(400))
        .confirm_after_reconnect(Duration::ZERO)
        .start(&sentinel)
        .await
        .expect("starts");
    outage(&store, &source, || store.delete("k")).await;
    assert!(time_until(&sentinel, None).await < Duration::from_millis(100));
    source.close().await;
}

/// A store replaying its history after a restart shows older values before the current one:
/// none of them is applied.
#[tokio::test(start_paused = true)]
async fn an_older_value_read_right_after_a_reconnect_is_never_applied() {
    let (store, sentinel, source) = setup(5).await;
    let recorder = testkit::EventRecorder::attach(&sentinel, "memory key k");
    outage(&store, &source, || store.put("k", flow_payload(3))).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    store.put("k", flow_payload(4));
    tokio::time::sleep(Duration::from_millis(300)).await;
    store.put("k", flow_payload(5)); // replayed up to the current value
    wait_status(&source, "the change withdrawn", |s| {
        s.unconfirmed_changes >= 1
    })
    .await;
    // Nothing was applied after the start's value.
    assert_eq!(recorder.seqs::<FlowRule>(), Vec::<Option<u64>>::new());
    assert_eq!(applied_seq::<FlowRule>(&sentinel), Some(5));
    source.close().await;
}

/// A value written during an outage applies once the confirmation time after the reconnect
/// is over.
#[tokio::test(start_paused = true)]
async fn a_value_written_during_an_outage_applies_after_the_confirmation_time() {
    let (store, sentinel, source) = setup(1).await;
    outage(&store, &source, || store.put("k", flow_payload(2))).await;
    assert_confirmation_time(time_until(&sentinel, Some(2)).await);
    assert_eq!(source.status().unconfirmed_changes, 0);
    source.close().await;
}

/// A memory source whose backend says it failed over to another server when told to.
struct FailingOver {
    inner: MemorySource,
    failovers: Arc<std::sync::atomic::AtomicU64>,
}

#[async_trait::async_trait]
impl ReadableDataSource for FailingOver {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    async fn read(&mut self) -> Result<RawPayload, SourceError> {
        self.inner.read().await
    }
    async fn watch(&mut self) -> Result<WatchEvent, SourceError> {
        self.inner.watch().await
    }
    fn reconnects(&self) -> u64 {
        self.failovers.load(Ordering::SeqCst)
    }
}

/// A backend that fails over by itself (no error reaches the driver) and then sees the key
/// missing: the deletion is confirmed as after a reconnect of the driver's own.
#[tokio::test(start_paused = true)]
async fn a_deletion_right_after_a_failover_of_the_backend_is_confirmed() {
    let store = MemoryStore::new();
    store.put("k", flow_payload(1));
    let failovers = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let backend = FailingOver {
        inner: store.source("k"),
        failovers: failovers.clone(),
    };
    let sentinel = Sentinel::new();
    let source = DataSource::builder(backend, FlowJson::new())
        .start(&sentinel)
        .await
        .expect("starts");
    // The backend moved to a server that has not loaded the key yet.
    failovers.store(1, Ordering::SeqCst);
    expect_deletion_withdrawn(&store, &sentinel, source).await;
}
