//! Where the Redis is and how the backend paces itself.

use std::time::Duration;

/// Where the shared counters live.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedisTarget {
    /// One server: `host:port` or a `redis://` URL (which may carry a password).
    Server(String),
    /// The master that Redis Sentinel names `master`, asked of the first sentinel that
    /// answers (`host:port` each), again on every reconnect, so a failover is followed.
    Sentinel {
        /// The sentinels.
        sentinels: Vec<String>,
        /// The master's name.
        master: String,
    },
    /// A Redis Cluster, reached through any of these nodes (`host:port` each). Every key of
    /// a flow is in one slot (hash tag `{flowId}`).
    Cluster(Vec<String>),
}

/// The backend's settings. Build with [`RedisClusterConfig::new`] and the setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RedisClusterConfig {
    /// Where Redis is.
    pub target: RedisTarget,
    /// Key prefix (default `sentinel:cluster`).
    pub prefix: String,
    /// This replica's name in the membership (default: `<pid>-<random>`).
    pub replica_id: String,
    /// Hard time budget of every Redis call (default 5 ms).
    pub call_timeout: Duration,
    /// Time budget of a connect (default 500 ms). Connecting happens in the background.
    pub connect_timeout: Duration,
    /// A replica stops counting this long after its last heartbeat (default 2 s); it
    /// heartbeats every third of it.
    pub heartbeat_ttl: Duration,
    /// A lease holds about this much of the replica's own traffic (default 100 ms).
    pub lease_horizon: Duration,
    /// A lease is at most this fraction of a window's limit, divided by the live replicas
    /// and weighted by the replica's share of the admissions (default 0.05): all leases
    /// together, and so what a window can strand, stay within twice this fraction.
    pub max_lease_fraction: f64,
    /// An unused remainder is given back after this long without calls (default 250 ms).
    pub idle_return: Duration,
    /// How often the background task looks at the leases (default 5 ms).
    pub tick: Duration,
    /// Consecutive failed calls that open the breaker (default 3) ...
    pub failures_to_open: u32,
    /// ... when they span at least this long (default 500 ms): slow calls on a starved
    /// machine (an empty lease blocks meanwhile: under-admission, never over) do not degrade
    /// the cluster checks, an outage does within about this long.
    pub open_after: Duration,
    /// While the breaker is open, how often Redis is probed (default 200 ms).
    pub probe_interval: Duration,
    /// After Redis answers again, a flow in the local fallback goes back to leases at the
    /// first window that begins at least this long later (default 300 ms: longer than
    /// `probe_interval`, so every replica has seen Redis back and charged what it admitted
    /// locally). Meanwhile it keeps its local share and charges what it admits.
    pub resume_after: Duration,
    /// Flows decided one script call per admission ([`exact mode`](crate#exact-mode)).
    pub exact_flows: Vec<i64>,
}

impl RedisClusterConfig {
    /// The defaults, for `target`.
    pub fn new(target: RedisTarget) -> Self {
        Self {
            target,
            prefix: "sentinel:cluster".to_owned(),
            replica_id: default_replica_id(),
            call_timeout: Duration::from_millis(5),
            connect_timeout: Duration::from_millis(500),
            heartbeat_ttl: Duration::from_secs(2),
            lease_horizon: Duration::from_millis(100),
            max_lease_fraction: 0.05,
            idle_return: Duration::from_millis(250),
            tick: Duration::from_millis(5),
            failures_to_open: 3,
            open_after: Duration::from_millis(500),
            probe_interval: Duration::from_millis(200),
            resume_after: Duration::from_millis(300),
            exact_flows: Vec::new(),
        }
    }

    /// Sets the key prefix.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets this replica's id.
    pub fn replica_id(mut self, id: impl Into<String>) -> Self {
        self.replica_id = id.into();
        self
    }

    /// Sets the budget of every Redis call.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Sets the heartbeat TTL.
    pub fn heartbeat_ttl(mut self, ttl: Duration) -> Self {
        self.heartbeat_ttl = ttl;
        self
    }

    /// Decides `flow_id` in exact mode.
    pub fn exact_flow(mut self, flow_id: i64) -> Self {
        self.exact_flows.push(flow_id);
        self
    }
}

fn default_replica_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    // A random suffix from the standard library's per-process random hasher keys.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!("{}-{:016x}", std::process::id(), h.finish())
}
