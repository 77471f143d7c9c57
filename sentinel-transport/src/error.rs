//! The transport's errors: starting it ([`TransportError`]) and refused rule edits
//! ([`EditError`]).

use std::net::SocketAddr;

use sentinel_core::datasource::WriteError;
use sentinel_core::{RuleError, RuleFamily, RuleIssue};

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
        command: &'static str,
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
    /// Someone else wrote the store since this instance last read or wrote the family's
    /// rules. Nothing was changed.
    #[error(
        "{family} rules not written, nothing changed: {target} changed since the rules were \
         last read (expected revision {expected:?}); reload the rules and edit again"
    )]
    Conflict {
        /// The family.
        family: RuleFamily,
        /// The store and key ([`WritableDataSource::describe`](sentinel_core::datasource::WritableDataSource::describe)).
        target: String,
        /// The revision the write expected.
        expected: Option<u64>,
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
