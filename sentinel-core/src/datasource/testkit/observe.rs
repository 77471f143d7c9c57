//! What a backend's tests wait for and observe: a source's status, a condition, the applies
//! and rejections of a source, and which numbered payload is active.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::authority::AuthorityRule;
use crate::circuit_breaker::DegradeRule;
use crate::datasource::{DataSource, SourceStatus};
use crate::engine::{ActiveRules, FamilyRule, Sentinel};
use crate::events::SentinelEvent;
use crate::flow::FlowRule;
use crate::rules::{RuleError, RuleFamily};
use crate::system::SystemRule;

/// The longest [`wait_status`] and [`wait_until`] wait: 15 s.
pub const WAIT: Duration = Duration::from_secs(15);

/// The resource every conformance payload limits.
pub const CONFORMANCE_RESOURCE: &str = "conformance";

/// Waits until `source`'s status satisfies `condition` and returns that status; `Err` with
/// the last status seen once `timeout` passes.
pub async fn status_within(
    source: &DataSource,
    timeout: Duration,
    condition: impl Fn(&SourceStatus) -> bool,
) -> Result<SourceStatus, SourceStatus> {
    let mut rx = source.status_watch();
    let found = match tokio::time::timeout(timeout, rx.wait_for(|s| condition(s))).await {
        Ok(Ok(status)) => Some(status.clone()),
        _ => None,
    };
    found.ok_or_else(|| source.status())
}

/// Waits (at most [`WAIT`]) until `source`'s status satisfies `condition`. Panics naming
/// `what` and the last status, for tests.
pub async fn wait_status(
    source: &DataSource,
    what: &str,
    condition: impl Fn(&SourceStatus) -> bool,
) -> SourceStatus {
    match status_within(source, WAIT, condition).await {
        Ok(status) => status,
        Err(status) => panic!("timed out after {WAIT:?} waiting for {what}; status is {status:?}"),
    }
}

/// Polls `condition` every 5 ms until it holds (`true`) or `timeout` passes (`false`).
pub async fn until_within(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    while !condition() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}

/// Polls `condition` until it holds; panics naming `what` after [`WAIT`], for tests.
pub async fn wait_until(what: &str, condition: impl FnMut() -> bool) {
    assert!(
        until_within(WAIT, condition).await,
        "timed out after {WAIT:?} waiting for {what}"
    );
}

/// A rule family whose test payloads carry a sequence number, so a test can tell which
/// payload is active: the rule on [`CONFORMANCE_RESOURCE`] (for system rules, the only
/// rule) holds the number.
pub trait Sequenced: FamilyRule {
    /// A payload of this family (Sentinel JSON) carrying `seq`.
    fn payload(seq: u64) -> Vec<u8>;

    /// The sequence number among `rules`, if one carries it.
    fn seq_in(rules: &[Self]) -> Option<u64>;
}

impl Sequenced for FlowRule {
    fn payload(seq: u64) -> Vec<u8> {
        format!(r#"[{{"resource":"{CONFORMANCE_RESOURCE}","count":{seq},"grade":1}}]"#).into_bytes()
    }

    fn seq_in(rules: &[Self]) -> Option<u64> {
        let rule = rules.iter().find(|r| r.resource == CONFORMANCE_RESOURCE)?;
        Some(rule.count as u64)
    }
}

impl Sequenced for DegradeRule {
    fn payload(seq: u64) -> Vec<u8> {
        format!(
            r#"[{{"resource":"{CONFORMANCE_RESOURCE}","grade":2,"count":{seq},"timeWindow":1}}]"#
        )
        .into_bytes()
    }

    fn seq_in(rules: &[Self]) -> Option<u64> {
        let rule = rules.iter().find(|r| r.resource == CONFORMANCE_RESOURCE)?;
        Some(rule.count as u64)
    }
}

impl Sequenced for SystemRule {
    fn payload(seq: u64) -> Vec<u8> {
        format!(r#"[{{"qps":{seq}}}]"#).into_bytes()
    }

    fn seq_in(rules: &[Self]) -> Option<u64> {
        rules.first().filter(|r| r.qps >= 0.0).map(|r| r.qps as u64)
    }
}

impl Sequenced for AuthorityRule {
    fn payload(seq: u64) -> Vec<u8> {
        format!(r#"[{{"resource":"{CONFORMANCE_RESOURCE}","limitApp":"app-{seq}"}}]"#).into_bytes()
    }

    fn seq_in(rules: &[Self]) -> Option<u64> {
        let rule = rules.iter().find(|r| r.resource == CONFORMANCE_RESOURCE)?;
        rule.limit_app.strip_prefix("app-")?.parse().ok()
    }
}

/// A flow payload whose one rule carries `seq` as its `count`.
pub fn flow_payload(seq: u64) -> Vec<u8> {
    FlowRule::payload(seq)
}

/// The sequence number of family `R` active in `sentinel`, if any.
pub fn applied_seq<R: Sequenced>(sentinel: &Sentinel) -> Option<u64> {
    R::seq_in(&sentinel.rules::<R>().rules())
}

/// One apply of the recorded source, with every rule active right after it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AppliedRecord {
    /// The rule-table version the apply published.
    pub version: u64,
    /// The families it replaced.
    pub families: Vec<RuleFamily>,
    /// Every active rule right after it (`None` if the engine was already gone).
    pub rules: Option<ActiveRules>,
}

impl AppliedRecord {
    /// The sequence number of family `R` active right after this apply.
    pub fn seq<R: Sequenced>(&self) -> Option<u64> {
        let rules = self.rules.as_ref()?;
        R::seq_in(R::in_active(rules))
    }
}

#[derive(Debug, Default)]
struct Recorded {
    applied: Vec<AppliedRecord>,
    rejected: Vec<RuleError>,
}

/// Records every apply and rejection of one source of an engine, with the rules active
/// right after each apply. The engine runs listeners right after it publishes a table, and
/// a data source applies one payload at a time, so each record shows what that apply did.
///
/// ```
/// use sentinel_core::datasource::testkit::EventRecorder;
/// use sentinel_core::{flow::FlowRule, Sentinel, API_SOURCE};
///
/// let sentinel = Sentinel::new();
/// let recorder = EventRecorder::attach(&sentinel, API_SOURCE);
/// sentinel.flow_rules().load_rules(vec![FlowRule::qps("r", 1.0)]).unwrap();
/// assert_eq!(recorder.applied().len(), 1);
/// assert_eq!(recorder.rejections(), 0);
/// ```
#[derive(Debug, Clone)]
pub struct EventRecorder {
    recorded: Arc<Mutex<Recorded>>,
}

impl EventRecorder {
    /// Starts recording the applies and rejections of `source` in `sentinel`.
    pub fn attach(sentinel: &Sentinel, source: &str) -> Self {
        let recorded = Arc::new(Mutex::new(Recorded::default()));
        // A weak handle: the engine owns its listeners, which must not keep it alive.
        let (engine, source, log) = (sentinel.downgrade(), source.to_owned(), recorded.clone());
        sentinel.add_listener(move |event: &SentinelEvent| match event {
            SentinelEvent::RulesApplied {
                source: s,
                families,
                version,
                ..
            } if *s == source => {
                let rules = engine.upgrade().map(|e| e.active_rules());
                lock(&log).applied.push(AppliedRecord {
                    version: *version,
                    families: families.iter().map(|(family, _)| *family).collect(),
                    rules,
                });
            }
            SentinelEvent::RulesRejected { source: s, error } if *s == source => {
                lock(&log).rejected.push(error.clone());
            }
            _ => {}
        });
        Self { recorded }
    }

    /// Every apply so far, in order.
    pub fn applied(&self) -> Vec<AppliedRecord> {
        lock(&self.recorded).applied.clone()
    }

    /// The sequence of family `R` after each apply so far, in order.
    pub fn seqs<R: Sequenced>(&self) -> Vec<Option<u64>> {
        lock(&self.recorded)
            .applied
            .iter()
            .map(AppliedRecord::seq::<R>)
            .collect()
    }

    /// Every rejection so far, in order.
    pub fn rejected(&self) -> Vec<RuleError> {
        lock(&self.recorded).rejected.clone()
    }

    /// How many payloads were rejected so far.
    pub fn rejections(&self) -> usize {
        lock(&self.recorded).rejected.len()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
