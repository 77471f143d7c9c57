//! How a data source treats a deleted key, and a first read that fails or is rejected.

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
/// the first read fails, or finds a payload that is rejected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StartMode {
    /// The default: only an unreachable store fails the start; what the store holds never
    /// does.
    ///
    /// A store that cannot be read (down, a wrong address, refused credentials) returns
    /// [`DataSourceError::Source`](crate::datasource::DataSourceError::Source), so a
    /// misconfiguration shows at once. A stored payload that is rejected (a syntax error, an
    /// invalid rule, over the size cap) starts the source from the local snapshot, the last
    /// good rules (see
    /// [`DataSourceBuilder::snapshot_file`](crate::datasource::DataSourceBuilder::snapshot_file)),
    /// or with no rules from this source when there is none; `status()`
    /// ([`store_rejected`](crate::datasource::SourceStatus::store_rejected), `last_error`),
    /// a [`RulesRejected`](crate::SentinelEvent::RulesRejected) event, a `tracing` error and
    /// the `sentinel_datasource_store_rejected` metric say so, and the source watches on:
    /// the fix applies when it is stored. A bad write followed by a deploy, a crash restart
    /// or a scale-out starts every new instance.
    #[default]
    FailIfUnreachable,
    /// Return the error of a first read that fails **or whose payload is rejected**: the
    /// caller decides.
    ///
    /// The consequence: with `start(...).await?` in `main`, a bad write to the store followed
    /// by a deploy, a crash restart or a scale-out stops every new instance at start, while
    /// the running ones keep their rules. Choose it only where an instance must never run
    /// without the stored rules, and alert on it.
    FailFast,
    /// Never fail the start: apply the local snapshot (see
    /// [`DataSourceBuilder::snapshot_file`](crate::datasource::DataSourceBuilder::snapshot_file)),
    /// start anyway, and keep retrying in the background. With no snapshot, start with no
    /// rules from this source. A first payload that is rejected is handled the same way.
    Snapshot,
}
