//! What the console keeps from the engine's events: a bounded ring of breaker transitions,
//! one of rule applies and rejections, one of commands refused, and the cluster backend's
//! state.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use sentinel_core::circuit_breaker::{BreakerState, DegradeGrade, DegradeRule};
use sentinel_core::{Sentinel, SentinelEvent};
use serde::Serialize;
use tokio::sync::watch;

/// One circuit-breaker transition, as the timeline shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Transition {
    /// Rises by one per transition recorded (the page keys rows by it).
    pub seq: u64,
    /// When, in Unix epoch milliseconds.
    pub at_ms: u64,
    /// The resource.
    pub resource: String,
    /// The state before (`CLOSED`, `OPEN`, `HALF_OPEN`).
    pub from: String,
    /// The state after.
    pub to: String,
    /// The breaker's strategy (`error ratio`, `error count`, `slow ratio`).
    pub strategy: &'static str,
    /// The measured value that tripped it, if a threshold did.
    pub value: Option<f64>,
    /// Why, in words: the threshold crossed, or the probe's result.
    pub reason: String,
}

/// One rule apply or rejection.
#[derive(Debug, Clone, Serialize)]
pub struct RuleEvent {
    /// Rises by one per event recorded.
    pub seq: u64,
    /// When, in Unix epoch milliseconds.
    pub at_ms: u64,
    /// The rule source (`api` or a data source's name).
    pub source: String,
    /// `applied` or `rejected`.
    pub kind: &'static str,
    /// The rule-table version after an apply.
    pub version: Option<u64>,
    /// The families replaced and their active rule counts, for an apply.
    pub families: Vec<(String, usize)>,
    /// The error of a rejection (names the payload; never its body).
    pub error: Option<String>,
    /// A rejection's issues: rule index, family and field.
    pub issues: Vec<Issue>,
}

/// One command a command port refused, as the engine reported it
/// ([`SentinelEvent::CommandRefused`], sent by `Sentinel::report_command_refused`: the
/// dashboard transport, or any other component taking commands).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandRefusal {
    /// Rises by one per event recorded.
    pub seq: u64,
    /// When, in Unix epoch milliseconds.
    pub at_ms: u64,
    /// What refused it (`transport`...).
    pub component: String,
    /// The command (`setRules`...).
    pub command: String,
    /// Why, in a word (`read_only`, `invalid_rules`...).
    pub reason: String,
    /// What the caller was told (never a rule payload).
    pub message: String,
}

/// One problem with one rule, as the page shows it inline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Issue {
    /// The family (`flow`, `degrade`...).
    pub family: String,
    /// The rule's 0-based index in its family's list.
    pub index: usize,
    /// The rule's resource, if readable.
    pub resource: Option<String>,
    /// The offending field.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl From<&sentinel_core::RuleIssue> for Issue {
    fn from(issue: &sentinel_core::RuleIssue) -> Self {
        Self {
            family: issue.family.to_string(),
            index: issue.index,
            resource: issue.resource.clone(),
            field: issue.field.clone(),
            message: issue.message.clone(),
        }
    }
}

/// The cluster backend's state as its events report it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClusterState {
    /// True between a `ClusterDegraded` and the next `ClusterResumed` event.
    pub degraded: bool,
    /// The backend named by the last event.
    pub backend: Option<String>,
    /// Why it degraded, without secrets.
    pub reason: Option<String>,
    /// When the last change happened, in Unix epoch milliseconds.
    pub since_ms: Option<u64>,
}

#[derive(Debug, Default)]
struct Rings {
    transitions: VecDeque<Transition>,
    rules: VecDeque<RuleEvent>,
    refused: VecDeque<CommandRefusal>,
    cluster: ClusterState,
    seq: u64,
}

/// The shared recorder: the engine's listener writes, the handlers read.
#[derive(Debug)]
pub(crate) struct Recorder {
    capacity: usize,
    /// Unix epoch ms minus the engine clock's ms, fixed when the console starts.
    epoch_offset_ms: i128,
    rings: Mutex<Rings>,
    /// Bumped on every event: open event streams wake on it.
    changed: watch::Sender<u64>,
}

impl Recorder {
    pub(crate) fn new(sentinel: &Sentinel, capacity: usize) -> Arc<Self> {
        let (changed, _) = watch::channel(0);
        Arc::new(Self {
            capacity: capacity.max(1),
            epoch_offset_ms: epoch_ms() as i128 - sentinel.clock().now_ms() as i128,
            rings: Mutex::new(Rings::default()),
            changed,
        })
    }

    /// Engine-clock milliseconds as Unix epoch milliseconds.
    pub(crate) fn to_epoch(&self, engine_ms: u64) -> u64 {
        u64::try_from((engine_ms as i128 + self.epoch_offset_ms).max(0)).unwrap_or(u64::MAX)
    }

    fn rings(&self) -> MutexGuard<'_, Rings> {
        self.rings.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Records one event. Runs on the thread that caused it: a push under a short lock,
    /// only for breaker transitions, rule updates and refused commands, never per call.
    pub(crate) fn on_event(&self, event: &SentinelEvent, now_engine_ms: u64) {
        let at_ms = self.to_epoch(now_engine_ms);
        let mut rings = self.rings();
        rings.seq += 1;
        let seq = rings.seq;
        match event {
            SentinelEvent::BreakerStateChanged {
                resource,
                rule,
                from,
                to,
                value,
            } => {
                let transition = Transition {
                    seq,
                    at_ms,
                    resource: resource.clone(),
                    from: from.to_string(),
                    to: to.to_string(),
                    strategy: strategy(rule),
                    value: *value,
                    reason: reason(rule, *from, *to, *value),
                };
                push(&mut rings.transitions, transition, self.capacity);
            }
            SentinelEvent::RulesApplied {
                source,
                families,
                version,
                ..
            } => {
                let event = RuleEvent {
                    seq,
                    at_ms,
                    source: source.clone(),
                    kind: "applied",
                    version: Some(*version),
                    families: families.iter().map(|(f, n)| (f.to_string(), *n)).collect(),
                    error: None,
                    issues: Vec::new(),
                };
                push(&mut rings.rules, event, self.capacity);
            }
            SentinelEvent::RulesRejected { source, error } => {
                let event = RuleEvent {
                    seq,
                    at_ms,
                    source: source.clone(),
                    kind: "rejected",
                    version: None,
                    families: Vec::new(),
                    error: Some(error.to_string()),
                    issues: error.issues().iter().map(Issue::from).collect(),
                };
                push(&mut rings.rules, event, self.capacity);
            }
            SentinelEvent::CommandRefused {
                component,
                command,
                reason,
                message,
            } => {
                let refusal = CommandRefusal {
                    seq,
                    at_ms,
                    component: component.clone(),
                    command: command.clone(),
                    reason: reason.clone(),
                    message: message.clone(),
                };
                push(&mut rings.refused, refusal, self.capacity);
            }
            SentinelEvent::ClusterDegraded { backend, reason } => {
                rings.cluster = ClusterState {
                    degraded: true,
                    backend: Some(backend.clone()),
                    reason: Some(reason.clone()),
                    since_ms: Some(at_ms),
                };
            }
            SentinelEvent::ClusterResumed { backend } => {
                rings.cluster = ClusterState {
                    degraded: false,
                    backend: Some(backend.clone()),
                    reason: None,
                    since_ms: Some(at_ms),
                };
            }
            _ => {}
        }
        drop(rings);
        self.changed.send_replace(seq);
    }

    /// Wakes the open event streams for a change the engine's events do not carry (a
    /// refusal of the dashboard transport).
    #[cfg_attr(not(feature = "transport"), allow(dead_code))]
    pub(crate) fn touch(&self) {
        self.changed.send_modify(|_| {});
    }

    /// The newest `limit` transitions, newest first.
    pub(crate) fn transitions(&self, limit: usize) -> Vec<Transition> {
        self.rings()
            .transitions
            .iter()
            .rev()
            .take(limit)
            .cloned()
            .collect()
    }

    /// The newest `limit` rule events, newest first.
    pub(crate) fn rule_events(&self, limit: usize) -> Vec<RuleEvent> {
        self.rings()
            .rules
            .iter()
            .rev()
            .take(limit)
            .cloned()
            .collect()
    }

    /// The newest `limit` refused commands, newest first.
    pub(crate) fn commands_refused(&self, limit: usize) -> Vec<CommandRefusal> {
        self.rings()
            .refused
            .iter()
            .rev()
            .take(limit)
            .cloned()
            .collect()
    }

    /// The last rejection of `source`, if any is still in the ring.
    pub(crate) fn last_rejection(&self, source: &str) -> Option<RuleEvent> {
        self.rings()
            .rules
            .iter()
            .rev()
            .find(|e| e.kind == "rejected" && e.source == source)
            .cloned()
    }

    pub(crate) fn cluster(&self) -> ClusterState {
        self.rings().cluster.clone()
    }
}

fn push<T>(ring: &mut VecDeque<T>, item: T, capacity: usize) {
    if ring.len() >= capacity {
        ring.pop_front();
    }
    ring.push_back(item);
}

pub(crate) fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

pub(crate) fn strategy(rule: &DegradeRule) -> &'static str {
    match rule.grade {
        DegradeGrade::SlowRequestRatio => "slow ratio",
        DegradeGrade::ErrorRatio => "error ratio",
        DegradeGrade::ErrorCount => "error count",
    }
}

fn reason(rule: &DegradeRule, from: BreakerState, to: BreakerState, value: Option<f64>) -> String {
    match (from, to) {
        (BreakerState::Closed, BreakerState::Open) => {
            let threshold = match rule.grade {
                DegradeGrade::SlowRequestRatio => rule.slow_ratio_threshold,
                _ => rule.count,
            };
            match value {
                Some(v) => format!("{} {v:.3} over threshold {threshold}", strategy(rule)),
                None => format!("{} over threshold {threshold}", strategy(rule)),
            }
        }
        (BreakerState::HalfOpen, BreakerState::Open) => "probe failed".to_owned(),
        (BreakerState::HalfOpen, BreakerState::Closed) => "probe succeeded".to_owned(),
        (BreakerState::Open, BreakerState::HalfOpen) => {
            format!(
                "retry timeout ({} s) passed, probe admitted",
                rule.time_window
            )
        }
        _ => "state changed".to_owned(),
    }
}
