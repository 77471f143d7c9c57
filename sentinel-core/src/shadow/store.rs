//! Promote and demote on a store: read the combined document a writable source's key holds,
//! move the rules, and write it back with compare-and-set.

use crate::datasource::{
    CombinedJson, Converter, Encoding, Expected, ReadableDataSource, SourceError,
    WritableDataSource, WriteError,
};
use crate::rule_set::RuleSet;
use crate::rules::RuleError;

use super::promote::{RuleSelector, ShadowMoveError};

/// Which way [`move_stored_rules`] moves rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShadowMove {
    /// [`RuleSet::promote`].
    Promote,
    /// [`RuleSet::promote_replacing`].
    PromoteReplacing,
    /// [`RuleSet::demote`].
    Demote,
}

/// What a [`move_stored_rules`] did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ShadowMoved {
    /// How many rules moved.
    pub moved: usize,
    /// The store's revision after the write.
    pub revision: Option<u64>,
    /// The document written.
    pub rules: RuleSet,
}

/// Why a [`move_stored_rules`] wrote nothing (the store is unchanged).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShadowStoreError {
    /// The store could not be read.
    #[error("reading the rules: {0}")]
    Read(#[source] SourceError),
    /// The key holds nothing, or several entries (a prefix): promote works on one key.
    #[error("{0}")]
    NotOneKey(String),
    /// The stored value is not a valid combined document.
    #[error("the stored rules: {0}")]
    Stored(#[source] RuleError),
    /// No rule matches the selector.
    #[error(transparent)]
    Select(#[from] ShadowMoveError),
    /// Someone else wrote between the read and the write (or the revision given is not the
    /// stored one): nothing was written. Read again and retry.
    #[error("compare-and-set lost: {0}; nothing was changed")]
    Conflict(#[source] WriteError),
    /// The write failed (including a store that keeps no revisions).
    #[error(transparent)]
    Write(WriteError),
}

/// Moves the rules `selector` picks between the shadow section and the enforced lists of
/// the combined document that `writer`'s key holds (`source` reads that key), and writes
/// the document back only if the store still holds the revision read first (or `expected`,
/// when given): a concurrent write makes it [`ShadowStoreError::Conflict`] and changes
/// nothing. Needs a store that keeps revisions (etcd, Redis, NATS).
pub async fn move_stored_rules(
    source: &mut dyn ReadableDataSource,
    writer: &dyn WritableDataSource,
    selector: &RuleSelector,
    how: ShadowMove,
    expected: Option<u64>,
) -> Result<ShadowMoved, ShadowStoreError> {
    // The revision first: any write after it makes the compare-and-set fail, whether it
    // came before or after the read below.
    let revision = match expected {
        Some(revision) => Some(revision),
        None => writer.revision().await.map_err(ShadowStoreError::Read)?,
    };
    let payload = source.read().await.map_err(ShadowStoreError::Read)?;
    let [entry] = &payload.entries[..] else {
        return Err(ShadowStoreError::NotOneKey(format!(
            "{}: expected one stored document, found {} entries",
            writer.describe(),
            payload.entries.len()
        )));
    };
    let mut rules = CombinedJson::new()
        .convert(&entry.value)
        .map_err(|e| ShadowStoreError::Stored(e.with_payload(&entry.key)))?;
    let moved = match how {
        ShadowMove::Promote => rules.promote(selector)?,
        ShadowMove::PromoteReplacing => rules.promote_replacing(selector)?,
        ShadowMove::Demote => rules.demote(selector)?,
    };
    let written = writer
        .write_as(&rules, Encoding::Combined, Expected::Revision(revision))
        .await
        .map_err(|e| match e {
            WriteError::Conflict { .. } => ShadowStoreError::Conflict(e),
            other => ShadowStoreError::Write(other),
        })?;
    Ok(ShadowMoved {
        moved,
        revision: written,
        rules,
    })
}
