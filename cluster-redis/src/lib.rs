//! Cluster flow control for Sentinel on Redis: one limit shared by every replica of a
//! service, never over it, cheap on the hot path, safe when Redis is down.
//!
//! [`RedisClusterBackend`] implements [`sentinel_core::cluster::ClusterBackend`]. Install it
//! with [`SentinelBuilder::cluster_backend`](sentinel_core::SentinelBuilder::cluster_backend)
//! and every flow rule with `clusterMode: true` shares its limit, named by
//! `clusterConfig.flowId`, with every replica that uses the same Redis:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use sentinel_cluster_redis::{RedisClusterBackend, RedisClusterConfig, RedisTarget};
//! use sentinel_core::flow::{ClusterFlowConfig, FlowRule};
//! use sentinel_core::Sentinel;
//!
//! let config = RedisClusterConfig::builder(RedisTarget::Server("127.0.0.1:6379".into())).build()?;
//! // Inside a tokio runtime: the leases are fetched by background tasks on it.
//! let backend = RedisClusterBackend::start(config)?;
//! let sentinel = Sentinel::builder().cluster_backend(Arc::new(backend)).build();
//! // 1 000 calls per second across all replicas (thresholdType 1: global). Without
//! // `.global(true)`, `count` is per instance (thresholdType 0, Sentinel's default): the
//! // cluster's limit is then 1 000 x the live replicas.
//! let rule = FlowRule::qps("GET:/order", 1000.0).cluster(ClusterFlowConfig::new(7).global(true));
//! sentinel.flow_rules().load_rules(vec![rule])?;
//! let _entry = sentinel.entry("GET:/order").enter();
//! # Ok(()) }
//! ```
//!
//! # Leased mode (the default)
//!
//! A replica reserves before it admits. One script call (`EVALSHA`) grants it a lease of L
//! tokens out of `limit - granted` for the current window, the window being defined by
//! Redis's own clock (`TIME` in the script: window `floor(now / windowIntervalMs)`). The
//! replica then admits from the lease with one compare-and-swap on an atomic counter: no
//! network call, no await, no lock, no allocation on the hot path. A background task tops
//! the lease up when it falls to half of L, so callers do not wait for it. L follows the
//! replica's own demand (about `lease_horizon`, 200 ms, of the calls it offers, and no more
//! than it can spend before the window ends), at most `max_lease_fraction` (5 %) of the
//! window's limit per live replica times the replica's demand over a fair share (so all
//! leases together stay within about 10 % of the limit), so a replica calls Redis about 5
//! to 20 times a second with 4 and 16 replicas, whether or not the limit binds. Redis caps each grant at the replica's max-min
//! fair part of the window: every live replica reports its demand (calls offered per
//! second, smoothed), and needs what it was granted in the window plus its demand for the
//! rest of it; a replica needing less than an equal split gets its need (so a replica that
//! offers less than a fair share gets all it offers), the others split the rest. A replica
//! refused for fairness asks again half a horizon later (the light ones may leave some). An
//! unused remainder is given back after `idle_return` (250 ms) without calls, and a lease is
//! dropped when its window ends.
//!
//! **Accuracy.** Redis never grants more than the window's limit, and a replica never spends
//! a token outside the window it was granted for (its lease is dropped at a deadline computed
//! from the time Redis reported left, measured from when the call was sent), so a window
//! never admits more than its limit. The only error left is under-admission: tokens granted
//! and not spent before the window ended (stranded; a lease holds no more than its holder
//! spends before the window ends at its current rate), tokens reserved for a replica whose
//! demand fell (released as the window runs out), and the calls blocked while a replica
//! waits for its first lease of a window (one `tick`, 5 ms). [`ClusterStats::stranded`]
//! counts the stranded ones.
//!
//! # Exact mode
//!
//! For low limits, [`RedisClusterConfigBuilder::exact_flow`] decides a flow one script call
//! per admission (pipelined over the one multiplexed connection): await
//! [`RedisClusterBackend::acquire_exact`] (async code), or call
//! [`RedisClusterBackend::acquire_exact_blocking`] (synchronous code: it blocks the thread
//! for at most twice `call_timeout`, 10 ms by default, and answers `Degraded` past it), and
//! then call `enter()`, which spends the token it put in the slot. This mode cannot fit
//! inside `enter()` (it is a network round trip); `enter()` alone on an exact flow admits
//! only what an exact call granted.
//!
//! # Membership
//!
//! Every script call refreshes this replica in a sorted set per flow (score: its expiry in
//! Redis time, `heartbeat_ttl`, 2 s by default), and the background task heartbeats every
//! third of the TTL. `thresholdType` 0 multiplies `count` by the live replicas, and the
//! fallback below divides by them; a replica that dies stops counting within the TTL.
//!
//! # Failure
//!
//! Every Redis call has a hard budget (`call_timeout`, 5 ms), and the hot path never waits on
//! Redis. A call over its budget counts as a failure, but its answer, however late, goes into
//! the lease and says Redis is reachable. After `failures_to_open` (3) failures with no
//! answer for at least `open_after` (500 ms) a breaker opens (slow calls on a starved machine
//! do not open it: meanwhile an empty lease blocks, which under-admits but never
//! over-admits): the backend stops calling Redis except for a probe every `probe_interval`
//! (200 ms, each with that budget), and marks every slot degraded.
//! Redis keeps for each live replica a *reservation* (its demand for a window, at most an
//! equal share), and never grants the others what a live replica holds of a window (the
//! larger of what it was granted in it and its reservation). Tokens already leased are still
//! spent; then rules with `fallbackToLocalWhenFail` are checked by the backend itself, in the
//! lease, on Redis's windows (extrapolated from the last reply): each window this replica may
//! admit its reservation (`limit / live replicas` if Redis never answered), and in the window
//! the outage begins in, what it was granted in it counts against that. So a replica that
//! loses Redis alone (a starved process, a partition) while the others keep leasing does not
//! take what they are granted, for as long as Redis keeps its membership (`heartbeat_ttl`). When Redis answers
//! again, what the fallback admitted in the current window is charged to Redis before
//! anything is granted, and leases resume at the first window that begins `resume_after`
//! (300 ms) later once Redis counts the replicas it counted before the outage (or a
//! heartbeat TTL later). So the cluster stays at its limit through an outage that starts and
//! ends at any point of a window (SIGSTOP, SIGKILL and an empty restart, a network drop: see
//! `tests/outage.rs`). Rules without the fallback pass, as in Sentinel (the engine sees
//! [`Degraded`](sentinel_core::cluster::ClusterDecision::Degraded)).
//! Detection takes `open_after` after the first failed call, and a replica whose window is
//! exhausted calls Redis only when the next window begins: up to one window plus
//! `open_after` (1.5 s by default); meanwhile an empty lease blocks (under-admission).
//! [`RedisClusterBackend::status`] and [`RedisClusterBackend::subscribe`] say when checks are
//! degraded and when they resume, and a `tracing` warning and info mark both.
//!
//! Metrics, through the `metrics` facade (the library installs no recorder):
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `sentinel_cluster_degraded` | gauge | | 1 while checks are degraded to local ones |
//! | `sentinel_cluster_degraded_total` | counter | | times the checks degraded |
//! | `sentinel_cluster_redis_calls_total` | counter | | lease-script calls |
//! | `sentinel_cluster_redis_failures_total` | counter | | calls that failed or ran over budget |
//! | `sentinel_cluster_redis_call_seconds` | histogram | | a lease call's round trip |
//! | `sentinel_cluster_tokens_granted_total` | counter | `flow_id` | tokens Redis granted this replica |
//! | `sentinel_cluster_live_replicas` | gauge | `flow_id` | replicas heartbeating on the flow, at the last call |
//! | `sentinel_cluster_window_tokens_left` | gauge | `flow_id` | what the current window had left, at the last call |
//!
//! A failover (Redis Sentinel or Cluster) or a restart without persistence may lose the
//! window's counter: the new master then grants that window's limit again, so **a failover
//! can over-admit by at most one window's limit**, once. The next window is exact again.
//!
//! Param-flow cluster rules, concurrency (thread-grade) cluster rules and a token-server mode
//! are out of scope; such rules are refused when loaded while a backend is installed.
//!
//! # Settings
//!
//! [`RedisClusterConfig::builder`], each setter of [`RedisClusterConfigBuilder`] with its
//! default, checked by [`build`](RedisClusterConfigBuilder::build) (a typed
//! [`ClusterError::Config`] names the setting):
//!
//! | setting | default | what |
//! | --- | --- | --- |
//! | `prefix` | `sentinel:cluster` | the keys' prefix |
//! | `replica_id` | `<pid>-<random>` | this replica's name in the membership |
//! | `call_timeout` | 5 ms | the budget of one Redis call |
//! | `connect_timeout` | 500 ms | the budget of a connect (in the background) |
//! | `heartbeat_ttl` | 2 s | how long a silent replica still counts |
//! | `lease_horizon` | 100 ms | how much of its own traffic a lease holds |
//! | `max_lease_fraction` | 0.05 | a lease's cap, as a fraction of the window's limit per replica |
//! | `idle_return` | 250 ms | an unused remainder is given back after this long idle |
//! | `tick` | 5 ms | how often the background task looks at the leases |
//! | `failures_to_open`, `open_after` | 3, 500 ms | the breaker opens after this many failed calls spanning this long |
//! | `probe_interval` | 200 ms | how often an open breaker probes Redis |
//! | `resume_after` | 300 ms | leases resume at the first window that begins this long after Redis answers again |
//! | `exact_flow` | none | a `flowId` decided call by call (exact mode) |
//!
//! The backend runs on a tokio runtime: [`RedisClusterBackend::start`] outside one is a
//! [`ClusterError::NoRuntime`] (use [`RedisClusterBackend::start_on`] with a runtime's
//! handle from synchronous code), and if that runtime shuts down while the backend is in
//! use, the status turns degraded and the rules fall back (nothing blocks silently).
//!
//! # More
//!
//! [docs/cluster.md](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/cluster.md) (modes, failure, the load tool) and
//! [docs/stores.md](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/stores.md) (the Redis deployments).

mod backend;
mod config;
mod connect;
mod error;
mod scripts;
mod status;

pub use backend::RedisClusterBackend;
pub use config::{RedisClusterConfig, RedisClusterConfigBuilder, RedisTarget};
pub use error::ClusterError;
pub use status::{ClusterStats, ClusterStatus};
