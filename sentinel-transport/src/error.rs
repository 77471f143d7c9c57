//! The transport's errors: starting it ([`TransportError`]) and refused rule edits
//! ([`EditError`]).

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use sentinel_core::datasource::WriteError;
use sentinel_core::{RuleError, RuleFamily, RuleIssue};

use crate::status::RefusalReason;

/// Why the transport did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// No port from the configured one up to `port + port_attempts - 1` could be bound.
    #[error(
        "cannot bind the command center on {first} (tried {attempts} ports from there): {source}"
    )]
    Bind {
        /// The first address tried.
        first: SocketAddr,
        /// How many consecutive ports were tried.
        attempts: u16,
        /// The last bind error.
        #[source]
        source: std::io::Error,
    },
    /// A setting is unusable; `setting` names it.
    #[error("transport config: `{setting}`: {message}")]
    Config {
        /// The builder method of the setting.
        setting: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The heartbeat's HTTP client could not be built (no TLS backend for https...).
    #[error("cannot build the heartbeat HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// Why a `setRules` / `setParamFlowRules` / `setSwitch` from the dashboard changed nothing.
/// Its text is the body of the command center's 400 answer, so the dashboard's message shows
/// it; it never contains the rules themselves beyond the resource names of invalid ones.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EditError {
    /// The command center is read-only (the default).
    #[error(
        "`{command}` refused: this command center is read-only (the default); \
         start the transport with Access::ReadWrite to accept edits from the dashboard"
    )]
    ReadOnly {
        /// The refused command.
        command: String,
    },
    /// No rule store is configured for the family and memory-only edits are not chosen.
    #[error(
        "{family} rules cannot be edited here: no rule store is configured for them \
         (TransportConfigBuilder::rule_store) and memory-only edits are off \
         (TransportConfigBuilder::memory_only_edits)"
    )]
    NoStore {
        /// The family.
        family: RuleFamily,
    },
    /// `type` names no rule family this command edits.
    #[error("invalid type")]
    InvalidType,
    /// The request carries no `data` parameter.
    #[error("Bad data: the request has no `data` parameter")]
    NoData,
    /// The rules could not be read, or one is invalid: every issue names the rule's index and
    /// field. Nothing was changed.
    #[error("{family} rules refused, nothing changed: {}", describe_rule_error(.source))]
    Rules {
        /// The family.
        family: RuleFamily,
        /// The converter's or the engine's error.
        #[source]
        source: RuleError,
    },
    /// The edit was derived from rules that changed since the page loaded: its caller was
    /// shown them at an older revision than the store's current one, or was shown nothing
    /// since this instance started (it restarted since the page loaded). Nothing was
    /// changed.
    #[error(
        "{family} rules not written, nothing changed: the rules changed since the page \
         loaded ({}; {target} is at revision {}); reload the page and edit again",
        shown_text(.shown), Revision(*.current)
    )]
    StaleView {
        /// The family.
        family: RuleFamily,
        /// The store and key ([`WritableDataSource::describe`](sentinel_core::datasource::WritableDataSource::describe)).
        target: String,
        /// The revision of the rules the edit derives from; `None` when this instance
        /// showed the caller no rules since it started.
        shown: Option<Option<u64>>,
        /// The store's revision now.
        current: Option<u64>,
    },
    /// The list sent is more than one change (add, edit or delete one rule) away from every
    /// list this instance showed the caller. Nothing was changed.
    #[error(
        "{family} rules not written, nothing changed: the list sent by {caller} is not one \
         change away from the rules this service showed it (the rules changed since the \
         page loaded?); reload the page and edit again"
    )]
    NotDerived {
        /// The family.
        family: RuleFamily,
        /// Who sent it.
        caller: IpAddr,
    },
    /// Someone else wrote the store between the edit's check and its compare-and-set
    /// write. Nothing was changed.
    #[error(
        "{family} rules not written, nothing changed: {target} changed since the rules were \
         last read (expected revision {}); reload the page and edit again",
        Revision(*.expected)
    )]
    Conflict {
        /// The family.
        family: RuleFamily,
        /// The store and key ([`WritableDataSource::describe`](sentinel_core::datasource::WritableDataSource::describe)).
        target: String,
        /// The revision the write expected.
        expected: Option<u64>,
    },
    /// The store did not answer within the answer time; `written` says what is known.
    #[error("{family} rules: {target} did not answer within {waited:.1?}: {written}")]
    TimedOut {
        /// The family.
        family: RuleFamily,
        /// The store and key.
        target: String,
        /// How long the edit waited.
        waited: Duration,
        /// Whether the edit may have been written.
        written: Written,
    },
    /// The store accepted the edit, but this engine did not apply it within the answer
    /// time. The edit is in the store.
    #[error(
        "{family} rules written to {target} (revision {}) but not applied by this engine \
         within {waited:.1?}: the store holds the edit; is this service's data source \
         reading that key? Reload the page to see the rules in force",
        Revision(*.revision)
    )]
    NotApplied {
        /// The family.
        family: RuleFamily,
        /// The store and key.
        target: String,
        /// The store's revision after the write.
        revision: Option<u64>,
        /// How long the edit waited.
        waited: Duration,
    },
    /// The store refused the write or could not be reached. Nothing was changed.
    #[error("{family} rules not written, nothing changed: {}", describe_write_error(.source))]
    Store {
        /// The family.
        family: RuleFamily,
        /// The store's error.
        #[source]
        source: WriteError,
    },
}

fn describe_issues(issues: &[RuleIssue]) -> String {
    issues
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn describe_rule_error(error: &RuleError) -> String {
    match error {
        RuleError::Invalid { issues, .. } => describe_issues(issues),
        other => other.to_string(),
    }
}

fn describe_write_error(error: &WriteError) -> String {
    let issues = error.issues();
    if issues.is_empty() {
        error.to_string()
    } else {
        format!("{error}: {}", describe_issues(issues))
    }
}

/// A store revision as messages print it: the number, or `none` when nothing is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Revision(pub(crate) Option<u64>);

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(revision) => write!(f, "{revision}"),
            None => f.write_str("none (nothing stored)"),
        }
    }
}

fn shown_text(shown: &Option<Option<u64>>) -> String {
    match shown {
        Some(revision) => format!("the page showed revision {}", Revision(*revision)),
        None => "this service has shown the page no rules since it started".to_owned(),
    }
}

/// What is known of an edit whose store did not answer in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Written {
    /// Another edit of the family held the store: nothing was written.
    Busy,
    /// The revision was not read: nothing was written.
    No,
    /// The write was sent: the edit may or may not be written.
    Unknown,
}

impl fmt::Display for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Written::Busy => "another edit of these rules was in progress; nothing was written",
            Written::No => "nothing was written",
            Written::Unknown => {
                "the edit may or may not be written; reload the page to see the rules in force"
            }
        })
    }
}

impl EditError {
    /// The reason a refusal is counted under.
    pub fn reason(&self) -> RefusalReason {
        match self {
            EditError::ReadOnly { .. } => RefusalReason::ReadOnly,
            EditError::NoStore { .. } => RefusalReason::NoStore,
            EditError::InvalidType | EditError::NoData => RefusalReason::BadRequest,
            EditError::Rules { .. } => RefusalReason::InvalidRules,
            EditError::StaleView { .. } | EditError::NotDerived { .. } => RefusalReason::StaleView,
            EditError::Conflict { .. } => RefusalReason::Conflict,
            EditError::Store { .. } | EditError::TimedOut { .. } => RefusalReason::Store,
            EditError::NotApplied { .. } => RefusalReason::NotApplied,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_print_as_numbers_not_rust_debug() {
        let conflict = EditError::Conflict {
            family: RuleFamily::Flow,
            target: "etcd key /rules/flow".into(),
            expected: Some(27),
        }
        .to_string();
        assert!(conflict.contains("expected revision 27)"), "{conflict}");
        assert!(!conflict.contains("Some("), "{conflict}");
        let stale = EditError::StaleView {
            family: RuleFamily::Flow,
            target: "etcd key /rules/flow".into(),
            shown: Some(Some(27)),
            current: None,
        }
        .to_string();
        assert!(
            stale.contains("showed revision 27") && stale.contains("revision none"),
            "{stale}"
        );
        let unapplied = EditError::NotApplied {
            family: RuleFamily::Flow,
            target: "etcd key /rules/flow".into(),
            revision: Some(28),
            waited: Duration::from_millis(2500),
        }
        .to_string();
        assert!(
            unapplied.contains("(revision 28)") && unapplied.contains("2.5s"),
            "{unapplied}"
        );
    }
}
