//! Promote and demote on an in-memory store with revisions.

use async_trait::async_trait;

use super::{move_stored_rules, RuleSelector, ShadowMove, ShadowStoreError};
use crate::datasource::{
    CombinedJson, Converter, Expected, MemoryStore, SourceError, WritableDataSource, WriteError,
};
use crate::RuleFamily;

/// A writer of one key of a [`MemoryStore`], comparing the store's revision.
struct MemoryWriter {
    store: MemoryStore,
    key: &'static str,
}

#[async_trait]
impl WritableDataSource for MemoryWriter {
    fn describe(&self) -> String {
        format!("memory:{}", self.key)
    }

    async fn store(&self, bytes: Vec<u8>, expected: Expected) -> Result<Option<u64>, WriteError> {
        if let Expected::Revision(want) = expected {
            if want != Some(self.store.revision()) {
                return Err(WriteError::Conflict {
                    key: self.key.to_owned(),
                    expected: want.unwrap_or(0),
                });
            }
        }
        self.store.put(self.key, bytes);
        Ok(Some(self.store.revision()))
    }

    async fn revision(&self) -> Result<Option<u64>, SourceError> {
        Ok(Some(self.store.revision()))
    }
}

const DOC: &str = r#"{"flow":[{"resource":"r","count":100}],
                      "shadow":{"flow":[{"resource":"r","count":10}]}}"#;

async fn stored(store: &MemoryStore) -> crate::RuleSet {
    use crate::datasource::ReadableDataSource as _;
    let payload = store.source("rules").read().await.unwrap();
    CombinedJson::new()
        .convert(&payload.entries[0].value)
        .unwrap()
}

#[tokio::test]
async fn promote_on_a_store_moves_the_rule_and_demote_moves_it_back() {
    let store = MemoryStore::new();
    store.put("rules", DOC);
    let writer = MemoryWriter {
        store: store.clone(),
        key: "rules",
    };
    let mut source = store.source("rules");
    let select = RuleSelector::new(RuleFamily::Flow).resource("r");
    let done = move_stored_rules(
        &mut source,
        &writer,
        &select,
        ShadowMove::PromoteReplacing,
        None,
    )
    .await
    .unwrap();
    assert_eq!(done.moved, 1);
    assert_eq!(done.revision, Some(store.revision()));
    let now = stored(&store).await;
    assert_eq!(now.flow.as_ref().unwrap()[0].count, 10.0);
    assert_eq!(now.flow.as_ref().unwrap().len(), 1);
    assert_eq!(now.shadow.as_ref().unwrap().flow.as_deref(), Some(&[][..]));

    let done = move_stored_rules(&mut source, &writer, &select, ShadowMove::Demote, None)
        .await
        .unwrap();
    assert_eq!(done.rules.shadow.unwrap().flow.unwrap()[0].count, 10.0);
}

#[tokio::test]
async fn a_promote_that_loses_the_race_changes_nothing() {
    let store = MemoryStore::new();
    store.put("rules", DOC);
    let stale = store.revision();
    // Someone else writes after the revision was read.
    store.put("rules", DOC.replace("100", "200"));
    let writer = MemoryWriter {
        store: store.clone(),
        key: "rules",
    };
    let before = store.revision();
    let mut source = store.source("rules");
    let select = RuleSelector::new(RuleFamily::Flow);
    let lost = move_stored_rules(
        &mut source,
        &writer,
        &select,
        ShadowMove::Promote,
        Some(stale),
    )
    .await;
    let error = lost.unwrap_err();
    assert!(matches!(error, ShadowStoreError::Conflict(_)), "{error}");
    assert!(error.to_string().contains("nothing was changed"), "{error}");
    assert_eq!(store.revision(), before, "nothing written");
    // A selector that matches nothing writes nothing either.
    let none = RuleSelector::new(RuleFamily::Degrade);
    let missing = move_stored_rules(&mut source, &writer, &none, ShadowMove::Promote, None).await;
    assert!(matches!(missing, Err(ShadowStoreError::Select(_))));
    assert_eq!(store.revision(), before);
}
