//! Where the Redis is and how the backend paces itself.

use std::time::Duration;

use crate::error::ClusterError;

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

/// The backend's settings, built with [`RedisClusterConfig::builder`] and checked by
/// [`build`](RedisClusterConfigBuilder::build). Each setter of the builder documents its
/// default.
#[derive(Debug, Clone)]
pub struct RedisClusterConfig {
    pub(crate) target: RedisTarget,
    pub(crate) prefix: String,
    pub(crate) replica_id: String,
    pub(crate) call_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) heartbeat_ttl: Duration,
    pub(crate) lease_horizon: Duration,
    pub(crate) max_lease_fraction: f64,
    pub(crate) idle_return: Duration,
    pub(crate) tick: Duration,
    pub(crate) failures_to_open: u32,
    pub(crate) open_after: Duration,
    pub(crate) probe_interval: Duration,
    pub(crate) resume_after: Duration,
    pub(crate) exact_flows: Vec<i64>,
}

impl RedisClusterConfig {
    /// A builder with the defaults, for `target`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sentinel_cluster_redis::{RedisClusterConfig, RedisTarget};
    ///
    /// let config = RedisClusterConfig::builder(RedisTarget::Server("127.0.0.1:6379".into()))
    ///     .prefix("shop:cluster")
    ///     .call_timeout(Duration::from_millis(10))
    ///     .build()?;
    /// assert_eq!(config.prefix(), "shop:cluster");
    /// # Ok::<(), sentinel_cluster_redis::ClusterError>(())
    /// ```
    pub fn builder(target: RedisTarget) -> RedisClusterConfigBuilder {
        RedisClusterConfigBuilder {
            config: Self {
                target,
                prefix: "sentinel:cluster".to_owned(),
                replica_id: default_replica_id(),
                call_timeout: Duration::from_millis(5),
                connect_timeout: Duration::from_millis(500),
                heartbeat_ttl: Duration::from_secs(2),
                lease_horizon: Duration::from_millis(200),
                max_lease_fraction: 0.05,
                idle_return: Duration::from_millis(250),
                tick: Duration::from_millis(5),
                failures_to_open: 3,
                open_after: Duration::from_millis(500),
                probe_interval: Duration::from_millis(200),
                resume_after: Duration::from_millis(300),
                exact_flows: Vec::new(),
            },
        }
    }

    /// Where Redis is.
    pub fn target(&self) -> &RedisTarget {
        &self.target
    }

    /// The keys' prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// This replica's name in the membership.
    pub fn replica_id(&self) -> &str {
        &self.replica_id
    }

    /// The time budget of one Redis call (and of [`acquire_exact_blocking`]).
    ///
    /// [`acquire_exact_blocking`]: crate::RedisClusterBackend::acquire_exact_blocking
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }
}

/// Builds a [`RedisClusterConfig`]: every setter says its default; [`build`](Self::build)
/// checks the values.
#[derive(Debug, Clone)]
#[must_use]
pub struct RedisClusterConfigBuilder {
    config: RedisClusterConfig,
}

impl RedisClusterConfigBuilder {
    /// The keys' prefix (default `sentinel:cluster`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.config.prefix = prefix.into();
        self
    }

    /// This replica's name in the membership (default `<pid>-<random>`; must not be empty).
    pub fn replica_id(mut self, id: impl Into<String>) -> Self {
        self.config.replica_id = id.into();
        self
    }

    /// The hard time budget of every Redis call (default 5 ms; > 0): a lease call over it
    /// counts as a failure (its answer, if it comes later, still goes into the lease and
    /// closes the breaker). Exact mode's calls answer within it.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.config.call_timeout = timeout;
        self
    }

    /// The time budget of a connect (default 500 ms; > 0). Connecting happens in the
    /// background.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// A replica stops counting this long after its last heartbeat (default 2 s; > 0); it
    /// heartbeats every third of it.
    pub fn heartbeat_ttl(mut self, ttl: Duration) -> Self {
        self.config.heartbeat_ttl = ttl;
        self
    }

    /// A lease holds about this much of the replica's own traffic, and no more than it can
    /// spend before the window ends (default 200 ms; > 0): a steady replica calls Redis
    /// about twice per horizon (it tops up at half).
    pub fn lease_horizon(mut self, horizon: Duration) -> Self {
        self.config.lease_horizon = horizon;
        self
    }

    /// A lease is at most this fraction of a window's limit per live replica, times the
    /// replica's demand over a fair share (1 to the live replicas) (default 0.05; in
    /// (0, 1]): all leases together stay within about twice this fraction of the limit,
    /// which bounds what a window strands and what a starved process can spend late.
    /// Redis also caps a lease at the replica's max-min fair part of the window.
    pub fn max_lease_fraction(mut self, fraction: f64) -> Self {
        self.config.max_lease_fraction = fraction;
        self
    }

    /// An unused remainder is given back after this long without calls (default 250 ms).
    pub fn idle_return(mut self, after: Duration) -> Self {
        self.config.idle_return = after;
        self
    }

    /// How often the background task looks at the leases (default 5 ms; > 0).
    pub fn tick(mut self, tick: Duration) -> Self {
        self.config.tick = tick;
        self
    }

    /// The breaker opens after this many consecutive failed calls (default 3; > 0) ...
    pub fn failures_to_open(mut self, failures: u32) -> Self {
        self.config.failures_to_open = failures;
        self
    }

    /// ... when they span at least this long with no answer in between (default 500 ms):
    /// slow calls on a starved machine (an empty lease blocks meanwhile: under-admission,
    /// never over) do not degrade the cluster checks, an outage does within about this long.
    pub fn open_after(mut self, after: Duration) -> Self {
        self.config.open_after = after;
        self
    }

    /// While the breaker is open, how often Redis is probed (default 200 ms; > 0), each probe
    /// with this budget.
    pub fn probe_interval(mut self, interval: Duration) -> Self {
        self.config.probe_interval = interval;
        self
    }

    /// After Redis answers again, a flow in the local fallback goes back to leases at the
    /// first window that begins at least this long later (default 300 ms: longer than the
    /// probe interval, so every replica has seen Redis back and charged what it admitted
    /// locally) and once Redis counts the live replicas it counted before the outage (or a
    /// heartbeat TTL later). Meanwhile it keeps its local share and charges what it admits.
    pub fn resume_after(mut self, after: Duration) -> Self {
        self.config.resume_after = after;
        self
    }

    /// Decides `flow_id` in exact mode, one script call per admission (default: none).
    pub fn exact_flow(mut self, flow_id: i64) -> Self {
        self.config.exact_flows.push(flow_id);
        self
    }

    /// The settings, checked.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Config`] names the first setting out of range.
    pub fn build(self) -> Result<RedisClusterConfig, ClusterError> {
        check(&self.config)?;
        Ok(self.config)
    }
}

fn check(config: &RedisClusterConfig) -> Result<(), ClusterError> {
    let positive = [
        ("call_timeout", config.call_timeout),
        ("connect_timeout", config.connect_timeout),
        ("heartbeat_ttl", config.heartbeat_ttl),
        ("lease_horizon", config.lease_horizon),
        ("tick", config.tick),
        ("probe_interval", config.probe_interval),
    ];
    for (field, value) in positive {
        if value.is_zero() {
            return Err(ClusterError::Config {
                field,
                message: "must be > 0".into(),
            });
        }
    }
    if !(config.max_lease_fraction > 0.0 && config.max_lease_fraction <= 1.0) {
        return Err(ClusterError::Config {
            field: "max_lease_fraction",
            message: format!("must be in (0, 1], got {}", config.max_lease_fraction),
        });
    }
    if config.failures_to_open == 0 {
        return Err(ClusterError::Config {
            field: "failures_to_open",
            message: "must be > 0".into(),
        });
    }
    if config.replica_id.is_empty() {
        return Err(ClusterError::Config {
            field: "replica_id",
            message: "must not be empty".into(),
        });
    }
    Ok(())
}

fn default_replica_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    // A random suffix from the standard library's per-process random hasher keys.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!("{}-{:016x}", std::process::id(), h.finish())
}
