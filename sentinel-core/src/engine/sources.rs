//! The names of an engine's running data sources: each names one part of the rule union,
//! so two running sources cannot share one; and the families each has applied, which its
//! next payload replaces.

use super::sentinel::{Sentinel, WeakSentinel};
use super::snapshot::Owned;
use crate::rules::RuleFamily;

/// A data source's hold on its name (see [`Sentinel::claim_source_name`]).
#[derive(Debug)]
pub(crate) struct SourceNameClaim {
    sentinel: WeakSentinel,
    name: String,
}

impl Sentinel {
    /// Reserves `name` for one running data source: `None` while another source holds it.
    /// The name is free again when the claim is dropped.
    pub(crate) fn claim_source_name(&self, name: &str) -> Option<SourceNameClaim> {
        let mut names = self
            .inner
            .source_names
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if names.contains_key(name) {
            return None;
        }
        names.insert(name.to_owned(), Owned::default());
        Some(SourceNameClaim {
            sentinel: self.downgrade(),
            name: name.to_owned(),
        })
    }

    /// The families the running source `name` has applied (none for another name).
    pub(crate) fn owned(&self, name: &str) -> Owned {
        self.inner
            .source_names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
            .unwrap_or_default()
    }

    /// Records that the running source `name` has applied `families` and `shadow`.
    pub(crate) fn own(&self, name: &str, families: Vec<RuleFamily>, shadow: Vec<RuleFamily>) {
        let mut names = self
            .inner
            .source_names
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(owned) = names.get_mut(name) {
            owned.families.extend(families);
            owned.shadow.extend(shadow);
        }
    }
}

impl Drop for SourceNameClaim {
    fn drop(&mut self) {
        if let Some(sentinel) = self.sentinel.upgrade() {
            sentinel
                .inner
                .source_names
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&self.name);
        }
    }
}
