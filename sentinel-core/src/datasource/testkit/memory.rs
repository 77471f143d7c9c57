//! The conformance harness over the in-memory store.

use async_trait::async_trait;

use super::{ConformanceHarness, Unsupported};
use crate::datasource::{MemorySource, MemoryStore};

/// A [`ConformanceHarness`] over a [`MemoryStore`]; `stop_server` makes the store
/// unreachable.
#[derive(Debug, Clone, Default)]
pub struct MemoryHarness {
    store: MemoryStore,
}

impl MemoryHarness {
    /// The key the harness writes.
    pub const KEY: &'static str = "conformance/flow";

    /// A harness over a new store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The store.
    pub fn store(&self) -> &MemoryStore {
        &self.store
    }
}

#[async_trait]
impl ConformanceHarness for MemoryHarness {
    type Source = MemorySource;

    fn make_source(&self) -> MemorySource {
        self.store.source(Self::KEY)
    }

    async fn write(&self, bytes: &[u8]) {
        self.store.put(Self::KEY, bytes);
    }

    async fn delete(&self) {
        self.store.delete(Self::KEY);
    }

    async fn stop_server(&self) -> Result<(), Unsupported> {
        self.store.set_down(true);
        Ok(())
    }

    async fn start_server(&self) -> Result<(), Unsupported> {
        self.store.set_down(false);
        Ok(())
    }

    async fn write_while_down(&self, bytes: &[u8]) -> Result<(), Unsupported> {
        self.store.put(Self::KEY, bytes);
        Ok(())
    }
}
