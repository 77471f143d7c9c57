//! `promote` and `demote`: move rules between the shadow section and the enforced lists of
//! the combined document one key holds, with compare-and-set. The stored text is edited in
//! place (`edit`): the moved rules change, every other byte stays as it was.

use sentinel_core::datasource::{
    encode_rules_as, CombinedJson, Converter, Encoding, Expected, ReadableDataSource,
    WritableDataSource, WriteError,
};
use sentinel_core::shadow::{RuleSelector, ShadowMove};
use sentinel_core::{RuleFamily, RuleSet};
use serde_json::json;

use crate::edit;
use crate::failure::{chain, Failure};
use crate::format::Family;
use crate::output::report;
use crate::remote::rejected;
use crate::store::{Access, AskPassword, Store};

/// What `promote` or `demote` moves.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Move {
    /// The store URL of one key holding a combined document (etcd, Redis, NATS or a znode:
    /// they keep revisions).
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

/// Runs `promote` (`how` is a promote) or `demote`: reads the revision, then the document,
/// moves the rules in its text (see [`crate::edit`]), and writes the text back only if the
/// store still holds that revision.
pub(crate) async fn run(
    what: Move,
    how: ShadowMove,
    ask: &AskPassword,
    json: bool,
) -> Result<(), Failure> {
    let store = Store::parse(&what.at)?;
    if !store.keeps_revisions() {
        return Err(Failure::Usage(format!(
            "{store}: promote and demote compare and set, which needs etcd, Redis, NATS or ZooKeeper"
        )));
    }
    let access = ask.access(&store)?;
    let moved = match moved(&store, &access, &what, how).await {
        Err(failure @ Failure::Store(_)) => return Err(store.explain(failure).await),
        other => other?,
    };
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
            "edited_in_place": !moved.rewritten,
        }),
        || {
            let at = moved
                .revision
                .map(|r| format!(" (revision {r})"))
                .unwrap_or_default();
            let rewritten = if moved.rewritten {
                "; the stored text could not be edited in place, so the document was \
                 written re-encoded"
            } else {
                ""
            };
            format!(
                "{verb} {} {family} rule(s) in {store}{at}{rewritten}",
                moved.moved
            )
        },
    );
    Ok(())
}

/// Opens the store and runs [`move_stored`] within the timeout.
async fn moved(
    store: &Store,
    access: &Access,
    what: &Move,
    how: ShadowMove,
) -> Result<Moved, Failure> {
    let writer = store.writer(access).await?;
    let mut source = store.source(access)?;
    let moved = tokio::time::timeout(
        access.timeout,
        move_stored(store, &mut *source, &*writer, what, how),
    )
    .await;
    source.close().await;
    moved.map_err(|_| Failure::Store(format!("{store}: no answer in time")))?
}

/// What [`move_stored`] did.
#[derive(Debug)]
struct Moved {
    moved: usize,
    revision: Option<u64>,
    /// The document was written re-encoded (every default spelt out), not edited in place.
    rewritten: bool,
}

/// Moves the rules `what` picks in the document `source` reads, and writes it with
/// compare-and-set through `writer`.
async fn move_stored(
    store: &Store,
    source: &mut dyn ReadableDataSource,
    writer: &dyn WritableDataSource,
    what: &Move,
    how: ShadowMove,
) -> Result<Moved, Failure> {
    // The revision first: any write after it makes the compare-and-set fail, whether it
    // came before or after the read below.
    let revision = match what.if_revision {
        Some(revision) => Some(revision),
        None => writer.revision().await.map_err(|e| store.failed(e))?,
    };
    let payload = source.read().await.map_err(|e| store.failed(e))?;
    let [entry] = &payload.entries[..] else {
        return Err(Failure::Usage(format!(
            "{}: expected one stored document, found {} entries",
            writer.describe(),
            payload.entries.len()
        )));
    };
    let mut rules = CombinedJson::new()
        .convert(&entry.value)
        .map_err(|e| rejected(&entry.key, &e))?;
    let family = sentinel_core::RuleFamily::from(what.family);
    let mut selector = RuleSelector::new(family);
    if let Some(resource) = &what.resource {
        selector = selector.resource(resource.clone());
    }
    if let Some(index) = what.index {
        selector = selector.index(index);
    }
    // The typed move says what the result must be (and names what matches nothing).
    let moved = match how {
        ShadowMove::PromoteReplacing => rules.promote_replacing(&selector),
        ShadowMove::Demote => rules.demote(&selector),
        _ => rules.promote(&selector),
    }
    .map_err(|e| Failure::Usage(e.to_string()))?;
    let promote = how != ShadowMove::Demote;
    let edit = edit::Move {
        family: family.as_str(),
        promote,
        resource: what.resource.as_deref(),
        index: what.index,
        // Authority: one rule per resource, so a moved one replaces its resource's.
        replace: how == ShadowMove::PromoteReplacing || family == RuleFamily::Authority,
    };
    // The stored text with the rules moved, kept only if it reads as the typed move says.
    let edited = std::str::from_utf8(&entry.value)
        .ok()
        .and_then(|text| edit::move_rules(text, &edit).ok())
        .filter(|(text, n)| {
            *n == moved
                && CombinedJson::new()
                    .convert(text.as_bytes())
                    .is_ok_and(|read| {
                        without_empty_shadow(read) == without_empty_shadow(rules.clone())
                    })
        });
    let (bytes, rewritten) = match edited {
        Some((text, _)) => (text.into_bytes(), false),
        None => (
            encode_rules_as(&writer.describe(), &rules, Encoding::Combined)
                .map_err(|e| Failure::Usage(chain(&e)))?,
            true,
        ),
    };
    let revision = writer
        .store(bytes, Expected::Revision(revision))
        .await
        .map_err(|e| match e {
            WriteError::Conflict { .. } => Failure::Conflict(format!(
                "compare-and-set lost: {}; nothing was changed",
                chain(&e)
            )),
            WriteError::NoRevisions { .. } => Failure::Usage(chain(&e)),
            other => store.failed(other),
        })?;
    Ok(Moved {
        moved,
        revision,
        rewritten,
    })
}

/// `set` with no empty list in its shadow section, and no empty shadow section: what a
/// source applies is the same either way.
fn without_empty_shadow(mut set: RuleSet) -> RuleSet {
    if let Some(shadow) = set.shadow.as_deref_mut() {
        fn drop_empty<T>(list: &mut Option<Vec<T>>) {
            if list.as_ref().is_some_and(Vec::is_empty) {
                *list = None;
            }
        }
        drop_empty(&mut shadow.flow);
        drop_empty(&mut shadow.degrade);
        drop_empty(&mut shadow.system);
        drop_empty(&mut shadow.authority);
        drop_empty(&mut shadow.param_flow);
        if shadow.families().is_empty() {
            set.shadow = None;
        }
    }
    set
}
