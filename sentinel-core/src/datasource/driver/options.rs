//! How a data source treats a deleted key and a failed first read.

/// What a deleted key, or an empty payload, does to the rules a source applied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeletePolicy {
    /// Clear them, as Sentinel does. The default.
    #[default]
    Clear,
    /// Keep them until a non-empty payload arrives.
    Keep,
}

/// What [`DataSourceBuilder::start`](crate::datasource::DataSourceBuilder::start) does when
/// the first read fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StartMode {
    /// Return the error: the caller decides. The default.
    #[default]
    FailFast,
    /// Apply the local snapshot (see
    /// [`DataSourceBuilder::snapshot_file`](crate::datasource::DataSourceBuilder::snapshot_file)),
    /// start anyway, and keep retrying in the background. With no snapshot, start with no
    /// rules from this source. A first payload that is rejected is handled the same way.
    Snapshot,
}
