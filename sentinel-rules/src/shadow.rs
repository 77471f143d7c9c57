//! `promote` and `demote`: move rules between the shadow section and the enforced lists of
//! the combined document one key holds, with compare-and-set.

use sentinel_core::datasource::WriteError;
use sentinel_core::shadow::{move_stored_rules, RuleSelector, ShadowMove, ShadowStoreError};
use serde_json::json;

use crate::failure::{chain, Failure};
use crate::format::Family;
use crate::output::report;
use crate::store::{AskPassword, Store};

/// What `promote` or `demote` moves.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Move {
    /// The store URL of one key holding a combined document (etcd, Redis or NATS: they keep
    /// revisions).
    #[arg(long)]
    pub(crate) at: String,
    /// The rule family.
    #[arg(long, value_enum)]
    pub(crate) family: Family,
    /// Only the rules of this resource.
    #[arg(long)]
    pub(crate) resource: Option<String>,
    /// Only the rule at this position (0-based) of the family's list.
    #[arg(long)]
    pub(crate) index: Option<usize>,
    /// Write only if the stored revision is this one (from `get --json`); default: the
    /// revision read just before. Exit 5 if someone wrote since.
    #[arg(long, value_name = "REVISION")]
    pub(crate) if_revision: Option<u64>,
}

/// Runs `promote` (`how` is a promote) or `demote`.
pub(crate) async fn run(
    what: Move,
    how: ShadowMove,
    ask: &AskPassword,
    json: bool,
) -> Result<(), Failure> {
    let store = Store::parse(&what.at)?;
    if !store.keeps_revisions() {
        return Err(Failure::Usage(format!(
            "{store}: promote and demote compare and set, which needs etcd, Redis or NATS"
        )));
    }
    let access = ask.access(&store)?;
    let writer = store.writer(&access).await?;
    let mut source = store.source(&access)?;
    let mut selector = RuleSelector::new(what.family.into());
    if let Some(resource) = &what.resource {
        selector = selector.resource(resource.clone());
    }
    if let Some(index) = what.index {
        selector = selector.index(index);
    }
    let moved = tokio::time::timeout(
        access.timeout,
        move_stored_rules(&mut *source, &*writer, &selector, how, what.if_revision),
    )
    .await;
    source.close().await;
    let moved = moved
        .map_err(|_| Failure::Store(format!("{store}: no answer in time")))?
        .map_err(|e| match &e {
            ShadowStoreError::Conflict(_) => Failure::Conflict(chain(&e)),
            ShadowStoreError::Select(_) | ShadowStoreError::NotOneKey(_) => {
                Failure::Usage(chain(&e))
            }
            ShadowStoreError::Write(WriteError::NoRevisions { .. }) => Failure::Usage(chain(&e)),
            _ => Failure::Store(format!("{store}: {}", chain(&e))),
        })?;
    let verb = if how == ShadowMove::Demote {
        "demoted"
    } else {
        "promoted"
    };
    let family = sentinel_core::RuleFamily::from(what.family);
    report(
        json,
        json!({
            "ok": true,
            "at": store.to_string(),
            verb: moved.moved,
            "family": family.as_str(),
            "revision": moved.revision,
        }),
        || {
            let at = moved
                .revision
                .map(|r| format!(" (revision {r})"))
                .unwrap_or_default();
            format!("{verb} {} {family} rule(s) in {store}{at}", moved.moved)
        },
    );
    Ok(())
}
