//! Dynamic rule sources: read rules from a config store, convert, validate and apply them.
//!
//! The pipeline is **source -> bytes -> converter -> typed rules -> validate -> compile ->
//! atomic swap**:
//! - a backend ([`ReadableDataSource`]) only reads and watches raw bytes ([`RawPayload`]);
//! - a [`Converter`] turns bytes into a [`RuleSet`](crate::RuleSet) ([`FlowJson`],
//!   [`CombinedJson`], [`GoFlowJson`], or a closure through [`converter_fn`]);
//! - the generic driver ([`DataSource`]) owns the loop for every backend: initial load,
//!   dedupe, apply, status ([`SourceStatus`]), backoff and reconnect, local snapshot.
//!
//! [`MemoryStore`] is an in-memory backend. With the `testkit` feature, `testkit` holds the
//! conformance kit that backend crates run against their servers.

mod converter;
mod driver;
mod memory;
mod snapshot;
mod source;
mod status;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
#[cfg(test)]
mod tests;

pub use converter::{
    converter_fn, CombinedJson, Converted, Converter, FlowJson, FnConverter, GoFlowJson,
};
pub use driver::{
    DataSource, DataSourceBuilder, DataSourceError, DeletePolicy, StartMode,
    DEFAULT_MAX_PAYLOAD_BYTES,
};
pub use memory::{MemorySource, MemoryStore};
pub use source::{BoxError, RawEntry, RawPayload, ReadableDataSource, SourceError, WatchEvent};
pub use status::SourceStatus;
