//! Dynamic rule sources: read rules from a config store, convert, validate and apply them.

mod source;

pub use source::{BoxError, RawEntry, RawPayload, ReadableDataSource, SourceError, WatchEvent};
