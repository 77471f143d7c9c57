//! The names of an engine's running data sources: each names one part of the rule union,
//! so two running sources cannot share one.

use super::sentinel::{Sentinel, WeakSentinel};

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
        names.insert(name.to_owned()).then(|| SourceNameClaim {
            sentinel: self.downgrade(),
            name: name.to_owned(),
        })
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
