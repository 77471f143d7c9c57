//! The dashboard transport's refused commands (with the `transport` feature and
//! `ConsoleBuilder::transport`): the stock Sentinel
//! dashboard shows "success" for some edits the service refused (degrade, system and
//! authority rules), so the console shows what the command center refused, why and when.

use serde::Serialize;

/// What the dashboard transport refused since it started.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DashboardRefusals {
    /// Commands refused, every reason together.
    pub refused: u64,
    /// Commands refused per reason (`read_only`, `invalid_rules`, `stale_view`...).
    pub by_reason: Vec<(String, u64)>,
    /// The latest refusals, newest first.
    pub recent: Vec<RefusedCommand>,
    /// The addresses refused with 403 (not loopback, this host, a configured dashboard or
    /// an allowed client).
    pub forbidden_callers: Vec<String>,
}

/// One command the transport refused.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RefusedCommand {
    /// When, in Unix epoch milliseconds.
    pub at_ms: i64,
    /// The command (`setRules`, `setParamFlowRules`, `setSwitch`...).
    pub command: String,
    /// Why, as the `reason` label of `sentinel_transport_refused_total`.
    pub reason: String,
    /// What the caller was told.
    pub message: String,
    /// Who called.
    pub caller: String,
}

/// How many refusals a snapshot carries.
#[cfg(feature = "transport")]
const SHOWN: usize = 20;

#[cfg(feature = "transport")]
impl From<&sentinel_transport::TransportStatus> for DashboardRefusals {
    fn from(status: &sentinel_transport::TransportStatus) -> Self {
        Self {
            refused: status.refused,
            by_reason: status
                .refused_by_reason
                .iter()
                .map(|(reason, n)| (reason.to_string(), *n))
                .collect(),
            recent: status
                .recent
                .iter()
                .take(SHOWN)
                .map(|r| RefusedCommand {
                    at_ms: r.at_ms,
                    command: r.command.clone(),
                    reason: r.reason.to_string(),
                    message: r.message.clone(),
                    caller: r.caller.to_string(),
                })
                .collect(),
            forbidden_callers: status
                .forbidden_callers
                .iter()
                .map(ToString::to_string)
                .collect(),
        }
    }
}

/// Reads a transport's status as the page shows it.
pub(crate) type ReadRefusals = Box<dyn Fn() -> DashboardRefusals + Send + Sync>;

/// The reader of `status`, and a task that wakes the open event streams on each refusal
/// (through `recorder`) until the transport or the console is gone. Without a Tokio
/// runtime the page still shows refusals, with the next second's update.
#[cfg(feature = "transport")]
pub(crate) fn watch(
    status: tokio::sync::watch::Receiver<sentinel_transport::TransportStatus>,
    recorder: &std::sync::Arc<crate::record::Recorder>,
) -> ReadRefusals {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let mut changes = status.clone();
        let recorder = std::sync::Arc::downgrade(recorder);
        runtime.spawn(async move {
            while changes.changed().await.is_ok() {
                let Some(recorder) = recorder.upgrade() else {
                    return;
                };
                recorder.touch();
            }
        });
    }
    Box::new(move || DashboardRefusals::from(&*status.borrow()))
}
