//! The round trip every writable backend passes: rules written through its
//! [`WritableDataSource`] are read back by its [`ReadableDataSource`], and an engine applies
//! exactly what was written.

use crate::circuit_breaker::DegradeRule;
use crate::datasource::{
    CombinedJson, DataSource, ReadableDataSource, WritableDataSource, WriteError,
};
use crate::engine::Sentinel;
use crate::flow::FlowRule;
use crate::param_flow::ParamFlowRule;
use crate::rule_set::RuleSet;

use super::observe::wait_until;

/// Two rule sets of several families, the second replacing the first.
fn sets() -> [RuleSet; 2] {
    [
        RuleSet::new()
            .with_flow(vec![FlowRule::qps("round-trip", 5.0)])
            .with_degrade(vec![DegradeRule::error_ratio("round-trip", 0.5, 10)])
            .with_param_flow(vec![ParamFlowRule::qps("round-trip", 0, 3.0)]),
        RuleSet::new()
            .with_flow(vec![
                FlowRule::qps("round-trip", 7.0),
                FlowRule::thread("round-trip-b", 2.0),
            ])
            .with_degrade(vec![])
            .with_param_flow(vec![ParamFlowRule::thread("round-trip", -1, 1.0)]),
    ]
}

/// Whether `sentinel`'s active rules are exactly `set`'s (for the families it carries).
fn active_is(sentinel: &Sentinel, set: &RuleSet) -> bool {
    let active = sentinel.active_rules();
    set.flow.as_ref().is_none_or(|r| *r == active.flow)
        && set.degrade.as_ref().is_none_or(|r| *r == active.degrade)
        && set
            .param_flow
            .as_ref()
            .is_none_or(|r| *r == active.param_flow)
}

/// Writes two rule sets through `writer`, each read back through `source` (which must read
/// what `writer` writes: the same key) by a data source on a fresh engine, and checks the
/// engine applied exactly what was written. Then an invalid set is refused and the rules
/// stay. When `revisions` is set, the store keeps revisions: a compare-and-set on the current
/// revision succeeds and one on a stale revision is a [`WriteError::Conflict`]; otherwise
/// compare-and-set is [`WriteError::NoRevisions`].
///
/// Panics (naming the writer) on any difference.
pub async fn expect_round_trip<S: ReadableDataSource + 'static>(
    writer: &dyn WritableDataSource,
    source: S,
    revisions: bool,
) {
    let target = writer.describe();
    let [first, second] = sets();
    writer
        .write(&first)
        .await
        .unwrap_or_else(|e| panic!("{target}: write: {e}"));
    let sentinel = Sentinel::new();
    let ds = DataSource::builder(source, CombinedJson::new())
        .name("round-trip")
        .start(&sentinel)
        .await
        .unwrap_or_else(|e| panic!("{target}: the source does not start: {e}"));
    wait_until(&format!("{target}: the first set applied"), || {
        active_is(&sentinel, &first)
    })
    .await;

    let before = writer
        .revision()
        .await
        .unwrap_or_else(|e| panic!("{target}: revision: {e}"));
    assert_eq!(
        before.is_some(),
        revisions,
        "{target}: revision() {before:?}"
    );
    let written = if revisions {
        writer.write_if(&second, before).await
    } else {
        writer.write(&second).await
    };
    let after = written.unwrap_or_else(|e| panic!("{target}: second write: {e}"));
    wait_until(&format!("{target}: the second set applied"), || {
        active_is(&sentinel, &second)
    })
    .await;
    assert_eq!(
        sentinel.flow_rules().rules(),
        second.flow.clone().unwrap_or_default()
    );

    let stale = writer.write_if(&first, before).await;
    if revisions {
        assert!(
            after.is_some(),
            "{target}: a store with revisions returns one"
        );
        assert!(
            matches!(stale, Err(WriteError::Conflict { .. })),
            "{target}: a stale compare-and-set: {stale:?}"
        );
    } else {
        assert!(
            matches!(stale, Err(WriteError::NoRevisions { .. })),
            "{target}: compare-and-set without revisions: {stale:?}"
        );
    }

    let invalid = RuleSet::new().with_flow(vec![FlowRule::qps("", -1.0)]);
    let refused = writer.write(&invalid).await;
    let issues = refused.as_ref().err().map_or(0, |e| e.issues().len());
    assert_eq!(
        issues, 2,
        "{target}: an invalid set is refused naming both issues: {refused:?}"
    );
    assert!(active_is(&sentinel, &second), "{target}: the rules stayed");
    assert_eq!(ds.status().rejected_count, 0, "{target}: {:?}", ds.status());
    ds.close().await;
}
