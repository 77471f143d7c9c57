//! The data-source conformance kit (cargo feature `testkit`): checks a backend against the
//! data-source contract (DESIGN §4) with [`run_conformance`].
//!
//! A backend crate's test implements [`ConformanceHarness`] over a real server and calls
//! [`run_conformance`], or single checks such as [`check_ordered_updates`] with its own
//! numbers. Every wait is bounded by [`ConformanceHarness::timeout`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use super::converter::FlowJson;
use super::driver::{DataSource, DataSourceBuilder, DeletePolicy, StartMode};
use super::memory::{MemorySource, MemoryStore};
use super::snapshot;
use super::source::ReadableDataSource;
use super::status::SourceStatus;
use crate::engine::{Inner, Sentinel};
use crate::events::SentinelEvent;
use crate::rules::{RuleFamily, Validation};

/// A check that the backend cannot run (it cannot stop its server, for example).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Unsupported;

/// What a backend's conformance test provides: fresh sources for one fixed key, and ways to
/// change what the key holds.
#[async_trait]
pub trait ConformanceHarness: Send + Sync {
    /// The backend's source type.
    type Source: ReadableDataSource;

    /// A new source reading the harness's key.
    fn make_source(&self) -> Self::Source;

    /// Stores `bytes` under the key. Panics if the server refuses.
    async fn write(&self, bytes: &[u8]);

    /// Deletes the key.
    async fn delete(&self);

    /// Stops the server (for the disconnect and snapshot-start checks).
    async fn stop_server(&self) -> Result<(), Unsupported> {
        Err(Unsupported)
    }

    /// Starts the server again.
    async fn start_server(&self) -> Result<(), Unsupported> {
        Err(Unsupported)
    }

    /// The longest any single wait may take (10 s by default).
    fn timeout(&self) -> Duration {
        Duration::from_secs(10)
    }

    /// Adjusts every data source the kit builds (the kit already sets a 20 ms - 500 ms
    /// backoff).
    fn configure(&self, builder: DataSourceBuilder) -> DataSourceBuilder {
        builder
    }
}

/// A conformance check that did not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("conformance check `{check}` failed: {message}")]
#[non_exhaustive]
pub struct ConformanceFailure {
    /// The check.
    pub check: &'static str,
    /// What was expected and what happened.
    pub message: String,
}

/// The result of one check that did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CheckOutcome {
    /// Every assertion held.
    Passed,
    /// The harness cannot run it (it cannot stop its server).
    Skipped,
}

/// The results of [`run_conformance`], by check name.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConformanceReport {
    /// Each check and its outcome, in run order.
    pub checks: Vec<(&'static str, CheckOutcome)>,
}

/// Runs every check of the data-source contract (DESIGN §4, points 1 to 10), in order,
/// stopping at the first failure.
pub async fn run_conformance<H: ConformanceHarness>(
    harness: &H,
) -> Result<ConformanceReport, ConformanceFailure> {
    let mut checks = Vec::new();
    checks.push(("initial_load", check_initial_load(harness).await?));
    checks.push(("ordered_updates", check_ordered_updates(harness, 50).await?));
    checks.push(("bad_payload", check_bad_payload(harness).await?));
    checks.push(("identical_payload", check_identical_payload(harness).await?));
    checks.push(("delete", check_delete(harness).await?));
    checks.push(("disconnect", check_disconnect(harness).await?));
    checks.push(("status", check_status(harness).await?));
    checks.push(("close", check_close(harness).await?));
    checks.push(("snapshot", check_snapshot(harness).await?));
    checks.push(("size_cap", check_size_cap(harness).await?));
    Ok(ConformanceReport { checks })
}

/// The resource every conformance payload limits.
pub const CONFORMANCE_RESOURCE: &str = "conformance";

/// A flow payload whose one rule carries `seq` as its `count`.
pub fn flow_payload(seq: u64) -> Vec<u8> {
    format!(r#"[{{"resource":"{CONFORMANCE_RESOURCE}","count":{seq},"grade":1}}]"#).into_bytes()
}

/// The sequence number currently applied to `sentinel`, if any.
pub fn applied_seq(sentinel: &Sentinel) -> Option<u64> {
    sentinel
        .flow_rules()
        .rules()
        .iter()
        .find(|r| r.resource == CONFORMANCE_RESOURCE)
        .map(|r| r.count as u64)
}

/// Everything one check observes from its engine's events.
#[derive(Debug, Default)]
struct Seen {
    /// Sequence applied at each `RulesApplied` of the check's source (`None` = no rule).
    applied: Vec<Option<u64>>,
    rejected: usize,
}

/// One check's engine, source name and event log.
struct Fixture {
    check: &'static str,
    sentinel: Sentinel,
    name: String,
    seen: Arc<Mutex<Seen>>,
    timeout: Duration,
}

impl Fixture {
    fn new(check: &'static str, timeout: Duration) -> Self {
        let sentinel = Sentinel::new();
        let name = format!("conformance-{check}");
        let seen = Arc::new(Mutex::new(Seen::default()));
        let weak: Weak<Inner> = Arc::downgrade(&sentinel.inner);
        let (log, source) = (seen.clone(), name.clone());
        sentinel.add_listener(move |event: &SentinelEvent| {
            let mut seen = log.lock().unwrap_or_else(|e| e.into_inner());
            match event {
                SentinelEvent::RulesApplied { source: s, .. } if *s == source => {
                    let seq = weak
                        .upgrade()
                        .and_then(|inner| applied_seq(&Sentinel { inner }));
                    seen.applied.push(seq);
                }
                SentinelEvent::RulesRejected { source: s, .. } if *s == source => {
                    seen.rejected += 1
                }
                _ => {}
            }
        });
        Self {
            check,
            sentinel,
            name,
            seen,
            timeout,
        }
    }

    fn fail(&self, message: impl Into<String>) -> ConformanceFailure {
        ConformanceFailure {
            check: self.check,
            message: message.into(),
        }
    }

    fn ensure(&self, ok: bool, message: impl FnOnce() -> String) -> Result<(), ConformanceFailure> {
        if ok {
            Ok(())
        } else {
            Err(self.fail(message()))
        }
    }

    fn seen<T>(&self, f: impl FnOnce(&Seen) -> T) -> T {
        f(&self.seen.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn seq(&self) -> Option<u64> {
        applied_seq(&self.sentinel)
    }

    fn builder<H: ConformanceHarness>(&self, harness: &H) -> DataSourceBuilder {
        let builder = DataSource::builder(harness.make_source(), FlowJson::new())
            .name(self.name.clone())
            .backoff(Duration::from_millis(20), Duration::from_millis(500));
        harness.configure(builder)
    }

    async fn start<H: ConformanceHarness>(
        &self,
        harness: &H,
        tune: impl FnOnce(DataSourceBuilder) -> DataSourceBuilder,
    ) -> Result<DataSource, ConformanceFailure> {
        tune(self.builder(harness))
            .start(&self.sentinel)
            .await
            .map_err(|e| self.fail(format!("start failed: {e}")))
    }

    /// Polls `condition` until it holds or the timeout passes.
    async fn wait(
        &self,
        what: &str,
        mut condition: impl FnMut() -> bool,
    ) -> Result<(), ConformanceFailure> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        while !condition() {
            if tokio::time::Instant::now() >= deadline {
                return Err(self.fail(format!(
                    "timed out after {:?} waiting for {what}",
                    self.timeout
                )));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }

    async fn wait_seq(&self, seq: Option<u64>) -> Result<(), ConformanceFailure> {
        let what = format!("applied sequence {seq:?} (now {:?})", self.seq());
        self.wait(&what, || self.seq() == seq).await
    }

    /// Waits for the `RulesApplied` event of sequence `seq`. The engine publishes a table
    /// before its event reaches listeners, so checks that read the event log wait on the log.
    async fn wait_applied(&self, seq: u64) -> Result<(), ConformanceFailure> {
        let what = format!("the event applying sequence {seq}");
        self.wait(&what, || {
            self.seen(|s| s.applied.last() == Some(&Some(seq)))
        })
        .await
    }

    async fn wait_status(
        &self,
        source: &DataSource,
        what: &str,
        condition: impl Fn(&SourceStatus) -> bool,
    ) -> Result<SourceStatus, ConformanceFailure> {
        let mut rx = source.status_watch();
        let found = match tokio::time::timeout(self.timeout, rx.wait_for(|s| condition(s))).await {
            Ok(Ok(status)) => Some(status.clone()),
            _ => None,
        };
        match found {
            Some(status) => Ok(status),
            None => Err(self.fail(format!(
                "timed out after {:?} waiting for status: {what}; status is {:?}",
                self.timeout,
                source.status()
            ))),
        }
    }
}

/// Point 1, initial load: `start` applies the current value before it returns, an absent key
/// starts with no rules, and with the server down `FailFast` fails.
pub async fn check_initial_load<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("initial_load", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let source = fx.start(harness, |b| b).await?;
    fx.ensure(fx.seq() == Some(1), || {
        format!(
            "rules not applied when start returned: sequence {:?}",
            fx.seq()
        )
    })?;
    let status = source.status();
    fx.ensure(status.connected && status.applied_count == 1, || {
        format!("status after start: {status:?}")
    })?;
    source.close().await;

    let fx = Fixture::new("initial_load", harness.timeout());
    harness.delete().await;
    let source = fx.start(harness, |b| b).await?;
    fx.ensure(fx.seq().is_none(), || "an absent key loaded rules".into())?;
    harness.write(&flow_payload(2)).await;
    fx.wait_seq(Some(2)).await?;
    source.close().await;

    if harness.stop_server().await.is_ok() {
        let fx = Fixture::new("initial_load", harness.timeout());
        let result = fx
            .start(harness, |b| b.start_mode(StartMode::FailFast))
            .await;
        let _ = harness.start_server().await;
        match result {
            Ok(source) => {
                source.close().await;
                return Err(fx.fail("FailFast started with the server down"));
            }
            Err(_) => fx.ensure(fx.seq().is_none(), || {
                "rules applied by a failed start".into()
            })?,
        }
    }
    Ok(CheckOutcome::Passed)
}

/// Point 2, ordered updates: after `writes` rapid writes, the applied sequence never went
/// backwards and ends at the last value written.
pub async fn check_ordered_updates<H: ConformanceHarness>(
    harness: &H,
    writes: u64,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("ordered_updates", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let source = fx.start(harness, |b| b).await?;
    for seq in 2..=writes.max(2) {
        harness.write(&flow_payload(seq)).await;
    }
    let last = writes.max(2);
    fx.wait_applied(last).await?;
    let applied = fx.seen(|s| s.applied.clone());
    let ordered = applied.windows(2).all(|w| w[0] < w[1]);
    fx.ensure(ordered && applied.last() == Some(&Some(last)), || {
        format!("applied sequence not increasing or not ending at {last}: {applied:?}")
    })?;
    source.close().await;
    Ok(CheckOutcome::Passed)
}

/// Point 3, bad payload: a syntax error and an invalid rule are each rejected whole, the last
/// good rules stay, and status and an event say why; a good payload then applies.
pub async fn check_bad_payload<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("bad_payload", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let source = fx.start(harness, |b| b).await?;

    harness
        .write(br#"[{"resource": "conformance", "count": }]"#)
        .await;
    let status = fx
        .wait_status(&source, "syntax error rejected", |s| s.rejected_count >= 1)
        .await?;
    let error = status.last_error.unwrap_or_default();
    fx.ensure(error.contains("line"), || {
        format!("error does not name a position: {error}")
    })?;
    fx.ensure(fx.seq() == Some(1), || {
        format!("rules changed to {:?}", fx.seq())
    })?;

    harness
        .write(br#"[{"controlBehavior": "test", "count": 1}]"#)
        .await;
    let status = fx
        .wait_status(&source, "invalid rule rejected", |s| s.rejected_count >= 2)
        .await?;
    let error = status.last_error.unwrap_or_default();
    fx.ensure(
        error.contains("controlBehavior") && error.contains("resource"),
        || format!("error does not name the fields: {error}"),
    )?;
    fx.ensure(fx.seq() == Some(1), || {
        format!("rules changed to {:?}", fx.seq())
    })?;
    let rejected = fx.seen(|s| s.rejected);
    fx.ensure(rejected == 2, || {
        format!("{rejected} rejection events, expected 2")
    })?;

    harness.write(&flow_payload(2)).await;
    fx.wait_seq(Some(2)).await?;
    let status = fx
        .wait_status(&source, "error cleared", |s| s.last_error.is_none())
        .await?;
    fx.ensure(status.applied_count == 2, || format!("status: {status:?}"))?;
    source.close().await;
    Ok(CheckOutcome::Passed)
}

/// Point 4, identical payload: writing the same bytes again applies nothing.
pub async fn check_identical_payload<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("identical_payload", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let source = fx.start(harness, |b| b).await?;
    let version = fx.sentinel.rules_version();
    harness.write(&flow_payload(1)).await;
    harness.write(&flow_payload(1)).await;
    harness.write(&flow_payload(2)).await;
    fx.wait_applied(2).await?;
    let applied = fx.seen(|s| s.applied.clone());
    fx.ensure(applied == vec![Some(1), Some(2)], || {
        format!("identical payload re-applied: applies {applied:?}")
    })?;
    let now = fx.sentinel.rules_version();
    fx.ensure(now == version + 1, || {
        format!("rule version went from {version} to {now}, expected one apply")
    })?;
    source.close().await;
    Ok(CheckOutcome::Passed)
}

/// Point 5, delete: a deleted key and an empty payload clear the rules; with
/// [`DeletePolicy::Keep`] a deletion keeps them.
pub async fn check_delete<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("delete", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let source = fx.start(harness, |b| b).await?;
    harness.delete().await;
    fx.wait_seq(None).await?;
    harness.write(&flow_payload(2)).await;
    fx.wait_seq(Some(2)).await?;
    harness.write(b"").await;
    fx.wait_seq(None).await?;
    source.close().await;

    let fx = Fixture::new("delete", harness.timeout());
    harness.write(&flow_payload(3)).await;
    let source = fx
        .start(harness, |b| b.delete_policy(DeletePolicy::Keep))
        .await?;
    harness.delete().await;
    fx.wait_status(&source, "deletion kept", |s| s.kept_count >= 1)
        .await?;
    fx.ensure(fx.seq() == Some(3), || {
        format!("Keep lost the rules: {:?}", fx.seq())
    })?;
    harness.write(&flow_payload(4)).await;
    fx.wait_seq(Some(4)).await?;
    source.close().await;
    Ok(CheckOutcome::Passed)
}

/// Point 6, disconnect: with the server stopped the source reports disconnected; after a
/// restart it reconnects, re-reads and applies what was written.
pub async fn check_disconnect<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("disconnect", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let source = fx.start(harness, |b| b).await?;
    if harness.stop_server().await.is_err() {
        source.close().await;
        return Ok(CheckOutcome::Skipped);
    }
    let waited = fx
        .wait_status(&source, "disconnected", |s| {
            !s.connected && s.last_error.is_some()
        })
        .await;
    let restarted = harness.start_server().await;
    waited?;
    fx.ensure(restarted.is_ok(), || {
        "the server could not be restarted".into()
    })?;
    fx.ensure(fx.seq() == Some(1), || {
        "rules lost while disconnected".into()
    })?;
    harness.write(&flow_payload(2)).await;
    fx.wait_seq(Some(2)).await?;
    let status = fx
        .wait_status(&source, "connected", |s| s.connected)
        .await?;
    fx.ensure(status.disconnects >= 1, || format!("status: {status:?}"))?;
    source.close().await;
    Ok(CheckOutcome::Passed)
}

/// Point 7, status: name, connection, revision or hash, time of the last apply, last error
/// and the counts.
pub async fn check_status<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("status", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let before = SystemTime::now();
    let source = fx.start(harness, |b| b).await?;
    let s = source.status();
    let ok = s.name == fx.name
        && s.connected
        && !s.closed
        && s.last_hash.as_ref().is_some_and(|h| h.len() == 64)
        && s.last_applied_at.is_some_and(|t| t >= before)
        && s.rules_version == Some(fx.sentinel.rules_version())
        && s.last_error.is_none()
        && s.applied_count == 1
        && s.rejected_count == 0
        && s.families == vec![RuleFamily::Flow];
    fx.ensure(ok, || format!("status after start: {s:?}"))?;
    harness.write(b"{").await;
    let s = fx
        .wait_status(&source, "rejection counted", |s| s.rejected_count == 1)
        .await?;
    fx.ensure(s.last_error.is_some() && s.applied_count == 1, || {
        format!("status: {s:?}")
    })?;
    source.close().await;
    Ok(CheckOutcome::Passed)
}

/// Point 8, close: after `close` returns nothing is applied, and status says closed.
pub async fn check_close<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("close", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let source = fx.start(harness, |b| b).await?;
    let rx = source.status_watch();
    source.close().await;
    fx.ensure(rx.borrow().closed && !rx.borrow().connected, || {
        format!("status after close: {:?}", *rx.borrow())
    })?;
    harness.write(&flow_payload(2)).await;
    tokio::time::sleep(harness.timeout().min(Duration::from_millis(300))).await;
    fx.ensure(fx.seq() == Some(1), || {
        format!("applied after close: {:?}", fx.seq())
    })?;
    let applies = fx.seen(|s| s.applied.len());
    fx.ensure(applies == 1, || format!("{applies} applies, expected 1"))?;
    Ok(CheckOutcome::Passed)
}

/// Point 9, local snapshot: every apply writes the snapshot file; with the server down a
/// `Snapshot` start applies it, and the source converges once the server is back.
pub async fn check_snapshot<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let dir = TempDir::new();
    let path = dir.0.join("rules.json");
    let fx = Fixture::new("snapshot", harness.timeout());
    let read_snapshot = || {
        std::fs::read(&path)
            .ok()
            .and_then(|b| snapshot::decode(&b, Validation::Strict).ok())
            .and_then(|set| set.flow)
            .and_then(|rules| rules.first().map(|r| r.count as u64))
    };
    harness.write(&flow_payload(1)).await;
    let p = path.clone();
    let source = fx.start(harness, move |b| b.snapshot_file(p)).await?;
    fx.ensure(read_snapshot() == Some(1), || {
        "no snapshot after the initial load".into()
    })?;
    harness.write(&flow_payload(2)).await;
    fx.wait("snapshot of sequence 2", || read_snapshot() == Some(2))
        .await?;
    source.close().await;

    if harness.stop_server().await.is_err() {
        return Ok(CheckOutcome::Passed);
    }
    let fx = Fixture::new("snapshot", harness.timeout());
    let p = path.clone();
    let started = fx
        .start(harness, move |b| {
            b.snapshot_file(p).start_mode(StartMode::Snapshot)
        })
        .await;
    let source = match started {
        Ok(source) => source,
        Err(e) => {
            let _ = harness.start_server().await;
            return Err(e);
        }
    };
    let status = source.status();
    let from_snapshot = fx.seq() == Some(2) && status.from_snapshot && !status.connected;
    let restarted = harness.start_server().await;
    fx.ensure(from_snapshot, || {
        format!("snapshot start: sequence {:?}, status {status:?}", fx.seq())
    })?;
    fx.ensure(restarted.is_ok(), || {
        "the server could not be restarted".into()
    })?;
    harness.write(&flow_payload(3)).await;
    fx.wait_seq(Some(3)).await?;
    let status = fx
        .wait_status(&source, "connected, not from snapshot", |s| {
            s.connected && !s.from_snapshot
        })
        .await?;
    fx.ensure(status.applied_count >= 1, || format!("status: {status:?}"))?;
    source.close().await;
    Ok(CheckOutcome::Passed)
}

/// Point 10, size cap: a payload over the cap is rejected with a clear error and the rules
/// stay.
pub async fn check_size_cap<H: ConformanceHarness>(
    harness: &H,
) -> Result<CheckOutcome, ConformanceFailure> {
    let fx = Fixture::new("size_cap", harness.timeout());
    harness.write(&flow_payload(1)).await;
    let source = fx.start(harness, |b| b.max_payload_bytes(512)).await?;
    let big: Vec<String> = (0..40)
        .map(|i| format!(r#"{{"resource":"conformance-{i}","count":1}}"#))
        .collect();
    harness
        .write(format!("[{}]", big.join(",")).as_bytes())
        .await;
    let status = fx
        .wait_status(&source, "oversized payload rejected", |s| {
            s.rejected_count >= 1
        })
        .await?;
    let error = status.last_error.unwrap_or_default();
    fx.ensure(error.contains("cap"), || format!("unclear error: {error}"))?;
    fx.ensure(fx.seq() == Some(1), || {
        format!("rules changed to {:?}", fx.seq())
    })?;
    harness.write(&flow_payload(2)).await;
    fx.wait_seq(Some(2)).await?;
    source.close().await;
    Ok(CheckOutcome::Passed)
}

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let path = std::env::temp_dir().join(format!(
            "sentinel-conformance-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        let _ = std::fs::create_dir_all(&path);
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A [`ConformanceHarness`] over a [`MemoryStore`]; `stop_server` makes the store
/// unreachable.
#[derive(Debug, Clone, Default)]
pub struct MemoryHarness {
    store: MemoryStore,
}

impl MemoryHarness {
    /// The key the harness writes.
    pub const KEY: &'static str = "conformance/flow";

    /// A harness over a new store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The store.
    pub fn store(&self) -> &MemoryStore {
        &self.store
    }
}

#[async_trait]
impl ConformanceHarness for MemoryHarness {
    type Source = MemorySource;

    fn make_source(&self) -> MemorySource {
        self.store.source(Self::KEY)
    }

    async fn write(&self, bytes: &[u8]) {
        self.store.put(Self::KEY, bytes);
    }

    async fn delete(&self) {
        self.store.delete(Self::KEY);
    }

    async fn stop_server(&self) -> Result<(), Unsupported> {
        self.store.set_down(true);
        Ok(())
    }

    async fn start_server(&self) -> Result<(), Unsupported> {
        self.store.set_down(false);
        Ok(())
    }
}
