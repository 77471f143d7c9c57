//! What a backend reports about itself: whether checks are decided on Redis, and what it
//! did since it started.

/// Whether cluster checks are decided on Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClusterStatus {
    /// Not connected yet.
    Connecting,
    /// Cluster checks are decided on Redis.
    Live,
    /// Redis is unreachable: cluster rules fall back to local checks (or pass).
    Degraded {
        /// The last error.
        error: String,
    },
    /// [`RedisClusterBackend::shutdown`](crate::RedisClusterBackend::shutdown) was called.
    Stopped,
}

/// What a backend did since it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ClusterStats {
    /// Redis script calls sent.
    pub redis_calls: u64,
    /// Calls that failed or ran over their budget.
    pub failed_calls: u64,
    /// Tokens granted to this replica.
    pub granted: u64,
    /// Tokens granted and not spent before their window ended (under-admission).
    pub stranded: u64,
    /// Tokens given back unused.
    pub given_back: u64,
    /// Times checks were degraded to local.
    pub degraded: u64,
    /// Times checks resumed on Redis.
    pub resumed: u64,
}
