//! Refused commands, counted where an operator looks: [`TransportStatus`] (through
//! [`Transport::status`](crate::Transport::status), and
//! [`Transport::status_watch`](crate::Transport::status_watch) for a page such as
//! sentinel-console's), the engine's
//! [`SentinelEvent::CommandRefused`](sentinel_core::SentinelEvent::CommandRefused) (to its
//! listeners, with the engine's `tracing` warning, logged inside a `transport` span that
//! names the caller) and the `sentinel_transport_refused_total` counter of the `metrics`
//! facade. A caller refused with 403 is an event and a warning once per address (a
//! scanner must not flood the log or the listeners); every such refusal is counted.
//!
//! The stock dashboard shows "success" for degrade, system and authority edits even when
//! the machine refused them (the error reaches only the dashboard's log), so a refusal
//! must be visible on the machine's side. Counted: every edit command refused or not
//! applied in time (`setRules`, `setParamFlowRules`, `setSwitch`) and every caller refused
//! with 403. Unknown commands and bad read parameters are answered as Java answers them
//! and not counted (the dashboard asks for commands a Rust service does not serve, such as
//! the gateway's, on every page).

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use sentinel_core::Sentinel;
use tokio::sync::watch;

use crate::metric::epoch_now_ms;

/// Why a command was refused: the `reason` label of `sentinel_transport_refused_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum RefusalReason {
    /// The caller is neither loopback, this host, a configured dashboard nor allowed (403).
    Forbidden,
    /// The command center is read-only.
    ReadOnly,
    /// No rule store for the family and memory-only edits are off.
    NoStore,
    /// `type` names no family, or `data` is missing.
    BadRequest,
    /// The rules could not be read or one is invalid.
    InvalidRules,
    /// The edit was derived from rules that changed since the page loaded, or from no
    /// rules this instance showed the caller.
    StaleView,
    /// The store changed between the edit's check and its compare-and-set write.
    Conflict,
    /// The store refused the write, keeps no revisions, or did not answer in time.
    Store,
    /// The store accepted the edit but this engine did not apply it in time.
    NotApplied,
}

impl RefusalReason {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::Forbidden => "forbidden",
            RefusalReason::ReadOnly => "read_only",
            RefusalReason::NoStore => "no_store",
            RefusalReason::BadRequest => "bad_request",
            RefusalReason::InvalidRules => "invalid_rules",
            RefusalReason::StaleView => "stale_view",
            RefusalReason::Conflict => "conflict",
            RefusalReason::Store => "store",
            RefusalReason::NotApplied => "not_applied",
        }
    }
}

impl fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One refused command.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusal {
    /// The command (`setRules`...), or `other` for a path that names none.
    pub command: String,
    /// Why.
    pub reason: RefusalReason,
    /// The answer's body: what the caller was told.
    pub message: String,
    /// Who called.
    pub caller: IpAddr,
    /// When, in epoch milliseconds.
    pub at_ms: i64,
}

/// What the transport refused since it started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransportStatus {
    /// Commands refused, every reason together.
    pub refused: u64,
    /// Commands refused, per reason.
    pub refused_by_reason: BTreeMap<RefusalReason, u64>,
    /// The latest refusal.
    pub last_refused: Option<Refusal>,
    /// The latest refusals, newest first (the last [`TransportStatus::RECENT`]).
    pub recent: Vec<Refusal>,
    /// The distinct addresses refused with 403 (the first 256 of them).
    pub forbidden_callers: Vec<IpAddr>,
}

impl TransportStatus {
    /// How many refusals [`recent`](Self::recent) keeps.
    pub const RECENT: usize = 50;
}

/// The transport's count of refusals, shared by the command center and the handle; a
/// watch, so a page ([`Transport::status_watch`](crate::Transport::status_watch)) learns of
/// a refusal when it happens.
#[derive(Debug)]
pub(crate) struct Refusals {
    app: String,
    sentinel: Sentinel,
    status: watch::Sender<TransportStatus>,
}

impl Refusals {
    /// The forbidden addresses remembered (each is logged at `warn` once).
    pub(crate) const CALLERS: usize = 256;

    /// The component name the engine's events carry.
    pub(crate) const COMPONENT: &'static str = "transport";

    pub(crate) fn new(app: &str, sentinel: Sentinel) -> Self {
        Self {
            app: app.to_owned(),
            sentinel,
            status: watch::Sender::new(TransportStatus::default()),
        }
    }

    pub(crate) fn status(&self) -> TransportStatus {
        self.status.borrow().clone()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<TransportStatus> {
        self.status.subscribe()
    }

    /// Counts a refusal of `command` (a served command's name, or `other`: a bounded
    /// label): status and metric; and tells the engine (its event and warning; for
    /// 403, once per address). `message` is the answer's body, which never holds a rule
    /// payload (see [`EditError`](crate::EditError)).
    pub(crate) fn refused(
        &self,
        command: &str,
        reason: RefusalReason,
        caller: IpAddr,
        message: &str,
    ) {
        let refusal = Refusal {
            command: command.to_owned(),
            reason,
            message: message.to_owned(),
            caller,
            at_ms: epoch_now_ms(),
        };
        let mut first_from_caller = false;
        self.status.send_modify(|status| {
            status.refused += 1;
            *status.refused_by_reason.entry(reason).or_default() += 1;
            status.recent.truncate(TransportStatus::RECENT - 1);
            status.recent.insert(0, refusal.clone());
            status.last_refused = Some(refusal);
            first_from_caller =
                reason == RefusalReason::Forbidden && !status.forbidden_callers.contains(&caller);
            if first_from_caller && status.forbidden_callers.len() < Self::CALLERS {
                status.forbidden_callers.push(caller);
            }
        });
        metrics::counter!(
            "sentinel_transport_refused_total",
            "app" => self.app.clone(),
            "command" => command.to_owned(),
            "reason" => reason.as_str(),
        )
        .increment(1);
        if reason != RefusalReason::Forbidden || first_from_caller {
            // The engine logs the warning; the span names who called.
            let span = tracing::warn_span!("transport", app = %self.app, %caller);
            let _entered = span.enter();
            self.sentinel.report_command_refused(
                Self::COMPONENT,
                command,
                reason.as_str(),
                message,
            );
        } else {
            tracing::debug!(%caller, command, "command refused (403), logged once per address");
        }
    }
}
