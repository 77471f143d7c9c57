//! Dynamic rule sources: read rules from a config store, convert, validate and apply them.
//!
//! The pipeline is **source -> bytes -> converter -> typed rules -> validate -> compile ->
//! atomic swap**:
//! - a backend ([`ReadableDataSource`]) only reads and watches raw bytes ([`RawPayload`]);
//! - a [`Converter`] turns bytes into a [`RuleSet`](crate::RuleSet): Sentinel JSON per family
//!   ([`FlowJson`], [`DegradeJson`], [`SystemJson`], [`AuthorityJson`]), the combined
//!   document ([`CombinedJson`]), sentinel-golang's JSON ([`GoFlowJson`],
//!   [`GoCircuitBreakerJson`], [`GoSystemJson`]), or a closure through [`converter_fn`];
//! - the generic driver ([`DataSource`]) owns the loop for every backend: initial load,
//!   dedupe, apply, status ([`SourceStatus`]), backoff and reconnect, local snapshot.
//!
//! [`MemoryStore`] is an in-memory backend. With the `testkit` feature, `testkit` holds the
//! conformance kit that backend crates run against their servers.

mod converter;
mod driver;
mod golang;
mod memory;
mod snapshot;
mod source;
mod status;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
#[cfg(test)]
mod tests;

pub use converter::{
    converter_fn, AuthorityJson, CombinedJson, Converted, Converter, DegradeJson, FlowJson,
    FnConverter, SystemJson,
};
pub use driver::{
    DataSource, DataSourceBuilder, DataSourceError, DeletePolicy, StartMode,
    DEFAULT_MAX_PAYLOAD_BYTES,
};
pub use golang::{GoCircuitBreakerJson, GoFlowJson, GoSystemJson};
pub use memory::{MemorySource, MemoryStore};
pub use source::{BoxError, RawEntry, RawPayload, ReadableDataSource, SourceError, WatchEvent};
pub use status::SourceStatus;
