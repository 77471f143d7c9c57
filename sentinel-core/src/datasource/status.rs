//! What a data source reports about itself.

use std::time::SystemTime;

use crate::rules::{RuleFamily, RuleIssue};

/// The state of one data source, from [`DataSource::status`](super::DataSource::status).
///
/// Every field is a plain value: a status is a snapshot, cheap to clone and compare.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SourceStatus {
    /// The source's name: its key in the engine's union of sources and in errors.
    pub name: String,
    /// True while the backend answers (after a successful read, until an error).
    pub connected: bool,
    /// True once the source is closed (or dropped); nothing is applied after that.
    pub closed: bool,
    /// The backend revision (etcd revision, Nacos MD5...) of the last payload processed,
    /// whatever became of it: applied, unchanged, kept or rejected. Kept for compatibility;
    /// for the provenance of the rules in force read [`applied_revision`](Self::applied_revision),
    /// for a broken store [`rejected_revision`](Self::rejected_revision).
    pub last_revision: Option<String>,
    /// Hex SHA-256 of the last payload processed (applied, kept or rejected), over every
    /// entry's key and value. Kept for compatibility; see [`applied_hash`](Self::applied_hash)
    /// and [`rejected_hash`](Self::rejected_hash).
    pub last_hash: Option<String>,
    /// The backend revision of the payload whose rules are in force: set when a payload is
    /// applied (an empty one included), left alone by an unchanged, kept or rejected one.
    /// It pairs with [`last_applied_at`](Self::last_applied_at).
    pub applied_revision: Option<String>,
    /// Hex SHA-256 of the payload whose rules are in force (see
    /// [`applied_revision`](Self::applied_revision)).
    pub applied_hash: Option<String>,
    /// The backend revision of the last payload rejected (syntax, type or validation
    /// errors, or over the size cap). Kept after a later apply, so that a rejection can be
    /// shown as resolved: [`store_rejected`](Self::store_rejected) says whether it still
    /// stands.
    pub rejected_revision: Option<String>,
    /// Hex SHA-256 of the last payload rejected; `None` for a payload over the size cap
    /// (it is not read in full, so not hashed).
    pub rejected_hash: Option<String>,
    /// When the last payload was rejected.
    pub last_rejected_at: Option<SystemTime>,
    /// When rules from this source were last applied.
    pub last_applied_at: Option<SystemTime>,
    /// The engine's rule-table version after this source's last apply.
    pub rules_version: Option<u64>,
    /// Why the last read, watch or payload failed; `None` after a successful apply.
    pub last_error: Option<String>,
    /// Payloads applied (the initial load included).
    pub applied_count: u64,
    /// Payloads rejected (syntax, type, validation errors, or over the size cap).
    pub rejected_count: u64,
    /// Payloads identical to the last one processed, and so not applied again.
    pub unchanged_count: u64,
    /// Deletions (or empty payloads) left alone under [`DeletePolicy::Keep`](super::DeletePolicy::Keep).
    pub kept_count: u64,
    /// Times the connection was lost.
    pub disconnects: u64,
    /// True while a change read right after a reconnect waits for its confirming read (see
    /// [`DataSourceBuilder::confirm_after_reconnect`](super::DataSourceBuilder::confirm_after_reconnect)):
    /// the rules in force stay until then.
    pub confirming: bool,
    /// Changes (deletions, other values) read right after a reconnect that the confirming
    /// read did not show, and so never applied: the store answered before it had loaded its
    /// data (see
    /// [`DataSourceBuilder::confirm_after_reconnect`](super::DataSourceBuilder::confirm_after_reconnect)).
    pub unconfirmed_changes: u64,
    /// How the backend checks that its store still answers, and how long a frozen store can
    /// go unnoticed ([`ReadableDataSource::health_check`](super::ReadableDataSource::health_check)).
    pub health_check: Option<super::HealthCheck>,
    /// How often the backend logged in again after the server refused its token (expired or
    /// revoked): a backend with token auth reports it; 0 for the others.
    pub reauthentications: u64,
    /// The issues of the rules the last apply skipped in lenient mode (a rule can have
    /// several).
    pub skipped: Vec<RuleIssue>,
    /// How many rules the last apply skipped in lenient mode.
    pub skipped_rules: usize,
    /// How many shadow rules (see [`crate::shadow`]) the source supplies, after its last
    /// applied payload.
    pub shadow_rules: usize,
    /// The warnings of the last apply: unknown keys, and in lenient mode absent fields read
    /// as Sentinel's defaults (see [`LoadReport::warnings`](crate::LoadReport::warnings)).
    pub warnings: Vec<RuleIssue>,
    /// The families this source owns: every family it has applied. A later payload
    /// replaces all of them (a family it no longer carries is cleared for this source).
    pub families: Vec<RuleFamily>,
    /// True while the payload the store holds is rejected (a syntax error, an invalid rule,
    /// over the size cap): the rules in force are older ones (the last good payload's, the
    /// local snapshot's, or none) until a payload that applies is stored.
    pub store_rejected: bool,
    /// True when the rules in force came from the local snapshot, not the server.
    pub from_snapshot: bool,
    /// Where the local snapshot is kept (`None`: nowhere, see
    /// [`DataSourceBuilder::without_snapshot`](super::DataSourceBuilder::without_snapshot)).
    pub snapshot_file: Option<std::path::PathBuf>,
    /// Why the last snapshot write or read failed, if it did.
    pub snapshot_error: Option<String>,
}

impl SourceStatus {
    pub(crate) fn new(name: String) -> Self {
        Self {
            name,
            connected: false,
            closed: false,
            last_revision: None,
            last_hash: None,
            applied_revision: None,
            applied_hash: None,
            rejected_revision: None,
            rejected_hash: None,
            last_rejected_at: None,
            last_applied_at: None,
            rules_version: None,
            last_error: None,
            applied_count: 0,
            rejected_count: 0,
            unchanged_count: 0,
            kept_count: 0,
            disconnects: 0,
            confirming: false,
            unconfirmed_changes: 0,
            reauthentications: 0,
            health_check: None,
            skipped: Vec::new(),
            skipped_rules: 0,
            shadow_rules: 0,
            warnings: Vec::new(),
            families: Vec::new(),
            store_rejected: false,
            from_snapshot: false,
            snapshot_file: None,
            snapshot_error: None,
        }
    }
}

#[cfg(feature = "metrics")]
/// Follows one data source's status into the `sentinel_datasource_*` series, until the
/// source's driver ends (feature `metrics`; the series are listed in `telemetry`).
pub(crate) async fn report_source(mut status: tokio::sync::watch::Receiver<SourceStatus>) {
    loop {
        {
            let s = status.borrow_and_update();
            let source = s.name.clone();
            metrics::gauge!("sentinel_datasource_connected", "source" => source.clone())
                .set(if s.connected { 1.0 } else { 0.0 });
            if let Some(revision) = s
                .last_revision
                .as_deref()
                .and_then(|r| r.parse::<f64>().ok())
            {
                metrics::gauge!("sentinel_datasource_revision", "source" => source.clone())
                    .set(revision);
            }
            metrics::gauge!("sentinel_datasource_store_rejected", "source" => source.clone())
                .set(if s.store_rejected { 1.0 } else { 0.0 });
            metrics::counter!("sentinel_datasource_rejected_total", "source" => source.clone())
                .absolute(s.rejected_count);
            metrics::counter!("sentinel_datasource_disconnects_total", "source" => source)
                .absolute(s.disconnects);
        }
        if status.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(all(test, feature = "metrics"))]
mod tests {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    use super::*;

    /// A store holding a rejected payload shows in `sentinel_datasource_store_rejected` (1)
    /// and `sentinel_datasource_rejected_total`.
    #[test]
    fn a_rejected_stored_payload_shows_in_the_metrics() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || {
            let mut status = SourceStatus::new("rules".into());
            status.store_rejected = true;
            status.rejected_count = 2;
            let (tx, rx) = tokio::sync::watch::channel(status);
            drop(tx);
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a runtime");
            runtime.block_on(report_source(rx));
        });
        let snapshot = snapshotter.snapshot().into_vec();
        let value = |name: &str| {
            snapshot
                .iter()
                .find(|(key, _, _, _)| {
                    key.key().name() == name
                        && key
                            .key()
                            .labels()
                            .any(|l| l.key() == "source" && l.value() == "rules")
                })
                .map(|(_, _, _, value)| value)
        };
        assert!(
            matches!(value("sentinel_datasource_store_rejected"), Some(DebugValue::Gauge(v)) if v.into_inner() == 1.0),
            "{snapshot:?}"
        );
        assert!(
            matches!(
                value("sentinel_datasource_rejected_total"),
                Some(DebugValue::Counter(2))
            ),
            "{snapshot:?}"
        );
    }
}
