//! Dynamic rule sources: read rules from a config store, convert, validate and apply them.
//!
//! The pipeline is **source -> bytes -> converter -> typed rules -> validate -> compile ->
//! atomic swap**:
//! - a backend ([`ReadableDataSource`]) only reads and watches raw bytes ([`RawPayload`]);
//! - a [`Converter`] turns bytes into a [`RuleSet`](crate::RuleSet): Sentinel JSON per family
//!   ([`FlowJson`], [`DegradeJson`], [`SystemJson`], [`AuthorityJson`], [`ParamFlowJson`]),
//!   the combined document ([`CombinedJson`]), sentinel-golang's JSON ([`GoFlowJson`],
//!   [`GoCircuitBreakerJson`], [`GoSystemJson`], [`GoHotspotJson`], [`GoIsolationJson`]), or a closure through [`converter_fn`];
//! - the generic driver ([`DataSource`]) owns the loop for every backend: initial load,
//!   dedupe, apply, status ([`SourceStatus`]), backoff and reconnect, local snapshot.
//!
//! Validation has one authority, each family's `validate` (for example
//! [`FlowRule::validate`](crate::flow::FlowRule::validate)), and it runs once per rule: the
//! built-in converters run it, so that their errors name each rule's place in its payload
//! and lenient mode can skip rules; the engine runs it on what comes from
//! `load_rules` and from converters that do not validate (a [`converter_fn`]).
//!
//! [`backend`] holds what every backend's configuration shares: credentials, TLS, timeouts,
//! address checks and the builder's errors.
//!
//! [`MemoryStore`] is an in-memory backend. With the `testkit` feature, `testkit` holds the
//! conformance kit that backend crates run against their servers, and the helpers their
//! tests wait with.

pub mod backend;
mod converter;
mod driver;
mod memory;
#[cfg(feature = "schema")]
pub mod schema;
mod secret;
mod snapshot;
mod source;
mod status;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
#[cfg(test)]
mod tests;
mod write;

/// Entry points for the fuzz targets in `fuzz/` (feature `fuzzing`): not part of the API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub use converter::differential as fuzzing;
#[cfg(test)]
pub(crate) use converter::java_converter;
#[cfg(feature = "yaml")]
pub use converter::KubernetesYaml;
pub use converter::{
    converter_fn, AuthorityJson, CombinedJson, Converted, Converter, DegradeJson, FlowJson,
    FnConverter, GoCircuitBreakerJson, GoFlowJson, GoHotspotJson, GoIsolationJson, GoSystemJson,
    ParamFlowJson, SystemJson,
};
pub use driver::{
    default_snapshot_dir, DataSource, DataSourceBuilder, DataSourceError, DeletePolicy, StartMode,
    SNAPSHOT_DIR_ENV,
};
pub use memory::{MemorySource, MemoryStore};
pub use secret::Secret;
pub use source::{
    address_list, BoxError, HealthCheck, RawEntry, RawPayload, ReadableDataSource, SourceError,
    WatchEvent, DEFAULT_MAX_PAYLOAD_BYTES,
};
pub use status::SourceStatus;
pub use write::{
    encode_rules, encode_rules_as, Encoding, Expected, WritableDataSource, WriteError,
};
