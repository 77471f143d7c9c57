//! The data sources' status and the rules in force by source (`GET api/sources`,
//! `GET api/rules`).

use std::time::{SystemTime, UNIX_EPOCH};

use sentinel_core::datasource::SourceStatus;
use sentinel_core::RuleFamily;
use serde::Serialize;

use crate::record::{Issue, RuleEvent};
use crate::state::State;

/// One data source, its status and whether the console may edit its store.
#[derive(Debug, Clone, Serialize)]
pub struct Source {
    /// The source's name.
    pub name: String,
    /// True while the backend answers.
    pub connected: bool,
    /// True once closed.
    pub closed: bool,
    /// The backend revision of the payload whose rules are in force (the last one applied;
    /// a later rejected payload does not change it).
    pub revision: Option<String>,
    /// Hex SHA-256 of the payload whose rules are in force.
    pub hash: Option<String>,
    /// When rules from it were last applied (Unix epoch ms): the time of the payload of
    /// `revision` and `hash`.
    pub last_applied_ms: Option<u64>,
    /// True while the payload the store holds is rejected: the rules in force are older.
    pub store_rejected: bool,
    /// The backend revision of the last rejected payload (kept after a later apply: the
    /// rejection is then resolved).
    pub rejected_revision: Option<String>,
    /// Hex SHA-256 of the last rejected payload (`None` for one over the size cap).
    pub rejected_hash: Option<String>,
    /// When the last payload was rejected (Unix epoch ms).
    pub last_rejected_ms: Option<u64>,
    /// The rule-table version after its last apply.
    pub rules_version: Option<u64>,
    /// Why the last read, watch or payload failed.
    pub last_error: Option<String>,
    /// Payloads applied, rejected, unchanged.
    pub applied: u64,
    /// Payloads rejected.
    pub rejected: u64,
    /// Payloads that were the same as the last one.
    pub unchanged: u64,
    /// Times the connection was lost.
    pub disconnects: u64,
    /// Logins again after an expired or revoked token.
    pub reauthentications: u64,
    /// The families it owns.
    pub families: Vec<String>,
    /// Rules skipped in lenient mode, with index and field.
    pub skipped: Vec<Issue>,
    /// True when the rules in force came from the local snapshot file.
    pub from_snapshot: bool,
    /// The last rejection's issues (index, field), if the console saw one.
    pub last_rejection: Option<RuleEvent>,
    /// What the console writes to when editing, if the application gave a writer.
    pub writer: Option<String>,
    /// Whether the page offers the source for editing: a writer whose store keeps
    /// revisions (or holds nothing yet).
    pub editable: bool,
    /// Why a source with a writer is not offered for editing.
    pub not_editable: Option<String>,
    /// How many shadow rules it supplies.
    pub shadow_rules: usize,
}

impl Source {
    pub(crate) fn of(
        status: &SourceStatus,
        last_rejection: Option<RuleEvent>,
        writer: Option<String>,
        keeps_revisions: Option<bool>,
    ) -> Self {
        let editable = writer.is_some() && keeps_revisions != Some(false);
        Self {
            name: status.name.clone(),
            connected: status.connected,
            closed: status.closed,
            revision: status.applied_revision.clone(),
            hash: status.applied_hash.clone(),
            last_applied_ms: status.last_applied_at.and_then(epoch_ms),
            store_rejected: status.store_rejected,
            rejected_revision: status.rejected_revision.clone(),
            rejected_hash: status.rejected_hash.clone(),
            last_rejected_ms: status.last_rejected_at.and_then(epoch_ms),
            rules_version: status.rules_version,
            last_error: status.last_error.clone(),
            applied: status.applied_count,
            rejected: status.rejected_count,
            unchanged: status.unchanged_count,
            disconnects: status.disconnects,
            reauthentications: status.reauthentications,
            families: status.families.iter().map(RuleFamily::to_string).collect(),
            skipped: status.skipped.iter().map(Issue::from).collect(),
            from_snapshot: status.from_snapshot,
            last_rejection,
            not_editable: (writer.is_some() && !editable)
                .then(|| crate::edit::NO_REVISIONS.to_owned()),
            writer,
            editable,
            shadow_rules: status.shadow_rules,
        }
    }
}

/// `at` in milliseconds since the Unix epoch (`None` before it or past `u64`).
fn epoch_ms(at: SystemTime) -> Option<u64> {
    at.duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_millis()).ok())
}

/// The rules one source contributes.
#[derive(Debug, Clone, Serialize)]
pub struct SourceRules {
    /// The source (`api` for `load_rules` calls).
    pub source: String,
    /// Active rules per family this source carries.
    pub counts: Vec<(String, usize)>,
    /// The rules as a combined Sentinel JSON document, `{"flow": [...], ...}`.
    pub document: serde_json::Value,
}

/// Every rule in force, by source.
#[derive(Debug, Clone, Serialize)]
pub struct Rules {
    /// The rule-table version.
    pub version: u64,
    /// Active rules per family, over every source.
    pub active: Vec<(String, usize)>,
    /// Each source's part.
    pub sources: Vec<SourceRules>,
}

/// Whether the source has read a payload from its store: an applied or a rejected one (an
/// unchanged or kept payload follows one of those).
pub(crate) fn store_has_rules(status: &SourceStatus) -> bool {
    status
        .applied_revision
        .as_ref()
        .or(status.rejected_revision.as_ref())
        .is_some()
}

impl State {
    pub(crate) fn sources(&self) -> Vec<Source> {
        self.sources
            .iter()
            .map(|rx| {
                let status = rx.borrow().clone();
                let rejection = self.recorder.last_rejection(&status.name);
                let writer = self
                    .editing
                    .as_ref()
                    .and_then(|e| e.writers.get(&status.name));
                let keeps = writer.and_then(|w| w.keeps_revisions(store_has_rules(&status)));
                Source::of(
                    &status,
                    rejection,
                    writer.map(|w| w.writer.describe()),
                    keeps,
                )
            })
            .collect()
    }

    pub(crate) fn rules(&self) -> Rules {
        let active = self.sentinel.active_rules();
        let counts = vec![
            ("flow".to_owned(), active.flow.len()),
            ("degrade".to_owned(), active.degrade.len()),
            ("system".to_owned(), active.system.len()),
            ("authority".to_owned(), active.authority.len()),
            ("paramFlow".to_owned(), active.param_flow.len()),
        ];
        let sources = self
            .sentinel
            .rules_by_source()
            .into_iter()
            .map(|(source, set)| {
                let counts = [
                    ("flow", set.flow.as_ref().map(Vec::len)),
                    ("degrade", set.degrade.as_ref().map(Vec::len)),
                    ("system", set.system.as_ref().map(Vec::len)),
                    ("authority", set.authority.as_ref().map(Vec::len)),
                    ("paramFlow", set.param_flow.as_ref().map(Vec::len)),
                ]
                .into_iter()
                .filter_map(|(f, n)| n.map(|n| (f.to_owned(), n)))
                .collect();
                let document = set
                    .to_combined_json()
                    .ok()
                    .and_then(|bytes| serde_json::from_slice(&bytes).ok())
                    .unwrap_or(serde_json::Value::Null);
                SourceRules {
                    source,
                    counts,
                    document,
                }
            })
            .collect();
        Rules {
            version: active.version,
            active: counts,
            sources,
        }
    }
}
