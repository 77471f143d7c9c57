//! Redis as a Sentinel rule source, live through pub/sub.
//!
//! [`RedisSource`] implements [`ReadableDataSource`](sentinel_core::datasource::ReadableDataSource)
//! for one key. It SUBSCRIBEs first, then GETs the key, on start and after every reconnect,
//! so nothing written between the two is missed and nothing written while it was away is
//! lost. The generic driver in `sentinel-core`
//! ([`DataSource`](sentinel_core::datasource::DataSource)) does the rest: converting,
//! validating, applying, deduplicating, backoff and status. [`RedisRuleWriter`] stores rules
//! with the transaction Sentinel's publishers use, `MULTI; SET key v; PUBLISH channel v; EXEC`,
//! so Sentinel Java services listening on the same key and channel see the change too.
//!
//! # Pointing the engine at a Redis key
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use sentinel_core::datasource::{DataSource, FlowJson, StartMode};
//! use sentinel_core::flow::FlowRule;
//! use sentinel_core::{RuleSet, Sentinel};
//! use sentinel_datasource_redis::{RedisConfig, RedisRuleWriter, RedisSource};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = RedisConfig::builder()
//!     .server("10.0.0.1:6379")
//!     .credentials("app", "apppw")
//!     .request_timeout(Duration::from_secs(2))
//!     .build()?;
//!
//! // The key holds Sentinel's flow rule JSON: [{"resource":"GET:/order","count":5}]
//! let sentinel = Sentinel::new();
//! let backend = RedisSource::notify(config.clone(), "rules:flow", "rules:flow:changed");
//! let source = DataSource::builder(backend, FlowJson::new())
//!     .name("redis-flow")
//!     .start_mode(StartMode::Snapshot)
//!     .snapshot_file("/var/lib/myapp/flow-rules.json")
//!     .start(&sentinel)
//!     .await?;
//! println!("{} flow rules", sentinel.flow_rules().rules().len());
//!
//! // Elsewhere, a tool changes the rules; every running engine applies them.
//! let writer = RedisRuleWriter::connect(config).await?;
//! let rules = RuleSet::new().with_flow(vec![FlowRule::qps("GET:/order", 20.0)]);
//! writer.put_rules("rules:flow", "rules:flow:changed", &rules).await?;
//!
//! source.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! `examples/src/bin/redis.rs` is a runnable version that prints passes and blocks while you
//! change the key with `redis-cli`.
//!
//! # Three ways to learn of a change
//!
//! [`ChangeMode`] chooses:
//! - [`Notify`](ChangeMode::Notify) (the default): any message on the channel makes the
//!   source GET the key again. The key is the truth: a message that is lost, repeated,
//!   reordered or disagrees with the key cannot leave stale rules.
//! - [`Payload`](ChangeMode::Payload): Sentinel Java's mode, for publishers that only
//!   PUBLISH: the message is the new value. The key is still read at start and after every
//!   reconnect.
//! - [`Keyspace`](ChangeMode::Keyspace): the key's keyspace notifications, so a plain `SET`
//!   by any tool is seen with no cooperating publisher. The server needs
//!   `notify-keyspace-events` with `K$g` (or `KA`); a source that finds them off fails with
//!   an error naming the setting, rather than waiting for notifications that never come.
//!
//! A deleted key (or a missing one) is an absent payload: the driver's
//! [`DeletePolicy`](sentinel_core::datasource::DeletePolicy) decides whether that clears the
//! rules (it does by default, as Sentinel does).
//!
//! # Deployments, connections and failures
//!
//! - One server ([`RedisConfigBuilder::server`]), the master of a Redis Sentinel group
//!   ([`RedisConfigBuilder::sentinel`], asked again on every reconnect, so the source and the
//!   writer follow a failover), or a Redis Cluster (`RedisConfigBuilder::cluster`, the
//!   `cluster` feature: the key is read through the cluster and its channel is subscribed on
//!   the shard that holds the key, where its keyspace notifications are sent).
//! - A source keeps two connections for its whole life: one multiplexed connection for
//!   commands and one for the subscription. A broken connection (a server restart,
//!   `CLIENT KILL`, an unanswered PING on the subscription) drops both; the driver backs off
//!   with jitter, then the source connects, subscribes and reads again.
//! - With Redis Sentinel a source also subscribes to a sentinel's `+switch-master` channel:
//!   when a failover of its master ends it reconnects to the new master and reads the key
//!   at once (no backoff), so a change written right after a `SENTINEL FAILOVER` is applied
//!   in well under a second rather than at the next PING.
//! - Every command is bounded by the request timeout; opening a connection by the connect
//!   timeout.
//!
//! # Noticing a frozen server
//!
//! A server that stops answering without closing its connections (`SIGSTOP`, a stalled VM,
//! a network partition) is noticed by the PING a source sends on its subscription every
//! [`health_check`](RedisConfigBuilder::health_check) interval (default
//! [`DEFAULT_HEALTH_CHECK_INTERVAL`], 1 s): unanswered within its timeout (default
//! [`DEFAULT_HEALTH_CHECK_TIMEOUT`], 2 s) it is a broken connection, and the source's status turns
//! `connected: false` with a `last_error` that names both settings. A frozen server is so
//! reported within interval + timeout, 3 s by default
//! ([`RedisConfig::frozen_server_detection`]); a server must leave a PING unanswered for 2 s
//! to be taken for dead, which a busy server on a loaded machine does not. `Debug` of a
//! [`RedisConfig`] shows both settings.
//! - Auth: the default user's password ([`RedisConfigBuilder::password`]) or an ACL user
//!   ([`RedisConfigBuilder::credentials`]), and a database index. Wrong credentials are
//!   `SourceError::Auth`; an ACL user who may not read the key (or subscribe to the channel)
//!   gets `SourceError::PermissionDenied`. The password never appears in `describe`, `Debug`,
//!   logs, errors or status.
//!
//! # Server versions
//!
//! Tested against Redis 7.0 (standalone, Redis Sentinel and Redis Cluster). ACL users need
//! Redis 6 or newer.
//!
//! # Features
//!
//! - `cluster`: Redis Cluster.
//! - `tls`: TLS through rustls (`TlsConfig`), with the system's roots or a given CA.
//!
//! # Settings
//!
//! [`RedisConfigBuilder`], checked by [`build`](RedisConfigBuilder::build) (a zero value is a
//! [`ConfigError`] naming the setting):
//!
//! | setting | default | what |
//! | --- | --- | --- |
//! | [`server`](RedisConfigBuilder::server), [`sentinel`](RedisConfigBuilder::sentinel), `cluster` (feature `cluster`) | none (required) | the deployment |
//! | [`credentials`](RedisConfigBuilder::credentials), [`password`](RedisConfigBuilder::password) | none | ACL user and password, or `requirepass` |
//! | [`db`](RedisConfigBuilder::db) | 0 | the database |
//! | [`connect_timeout`](RedisConfigBuilder::connect_timeout) | [`DEFAULT_CONNECT_TIMEOUT`] (5 s) | one connection |
//! | [`request_timeout`](RedisConfigBuilder::request_timeout) | [`DEFAULT_REQUEST_TIMEOUT`] (5 s) | one command |
//! | [`health_check`](RedisConfigBuilder::health_check) | 1 s, 2 s | PINGs on the subscription |
//! | [`max_payload_bytes`](RedisConfigBuilder::max_payload_bytes) | [`DEFAULT_MAX_PAYLOAD_BYTES`] (4 MiB) | one value |
//! | `tls` (feature `tls`) | none | a CA certificate |
//!
//! # Status and health
//!
//! The driver publishes a [`SourceStatus`](sentinel_core::datasource::SourceStatus)
//! (`DataSource::status`, or `status_watch` to wait on changes): `connected`, `last_error`
//! (secret-free), `disconnects`, the counts of applied, rejected and unchanged updates, and
//! `health_check`: what this source checks (a PING on the subscription every interval, answered within the timeout) and
//! `detection`, the longest a frozen server goes unnoticed (3 s by default).
//! The same figures reach the dashboard transport and the console.
//!
//! # More
//!
//! [Stores](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/stores.md) (this backend beside the others, and the write recipes),
//! [sources' health](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/sources.md) (detection times, and the settings renamed in 0.1.1),
//! [formats](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/formats.md), [adding a backend](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/adding-a-backend.md).
#![cfg_attr(docsrs, feature(doc_cfg))]

mod config;
mod connect;
mod error;
mod source;
mod writer;

#[cfg(feature = "tls")]
pub use config::TlsConfig;
pub use config::{
    ConfigError, RedisConfig, RedisConfigBuilder, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_HEALTH_CHECK_INTERVAL, DEFAULT_HEALTH_CHECK_TIMEOUT, DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_REQUEST_TIMEOUT,
};
#[allow(deprecated)]
pub use config::{DEFAULT_PING_INTERVAL, DEFAULT_PING_TIMEOUT};
pub use sentinel_core::datasource::{encode_rules, WriteError};
pub use source::{ChangeMode, RedisSource};
pub use writer::{RedisRuleTarget, RedisRuleWriter};
