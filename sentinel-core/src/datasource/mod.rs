//! Dynamic rule sources: read rules from a config store, convert, validate and apply them.
//!
//! The pipeline is **source -> bytes -> converter -> typed rules -> validate -> compile ->
//! atomic swap**. A backend ([`ReadableDataSource`]) only reads and watches raw bytes; a
//! [`Converter`] turns bytes into a [`RuleSet`](crate::RuleSet); the generic driver
//! ([`DataSource`]) owns the loop: initial load, dedupe, apply, status, backoff, reconnect,
//! snapshot.

mod converter;
mod source;

pub use converter::{
    converter_fn, CombinedJson, Converted, Converter, FlowJson, FnConverter, GoFlowJson,
};
pub use source::{BoxError, RawEntry, RawPayload, ReadableDataSource, SourceError, WatchEvent};
