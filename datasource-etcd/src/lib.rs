//! etcd as a Sentinel rule source.
//!
//! [`EtcdSource`] implements [`ReadableDataSource`](sentinel_core::datasource::ReadableDataSource)
//! for one key or for every key under a prefix: it GETs the value, notes the revision, and
//! watches from the next revision, so no change between the read and the watch is lost. The
//! generic driver in `sentinel-core` ([`DataSource`](sentinel_core::datasource::DataSource))
//! does the rest: converting, validating, applying, deduplicating, backoff and status.
//! [`EtcdRuleWriter`] stores rules: [`put_rules`](EtcdRuleWriter::put_rules) validates a
//! [`RuleSet`](sentinel_core::RuleSet) first, [`put_bytes`](EtcdRuleWriter::put_bytes) stores
//! bytes as given.
//!
//! # Pointing the engine at an etcd key
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use sentinel_datasource_etcd::{EtcdConfig, EtcdRuleWriter, EtcdSource};
//! use sentinel_core::datasource::{DataSource, FlowJson, StartMode};
//! use sentinel_core::flow::FlowRule;
//! use sentinel_core::{RuleSet, Sentinel};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = EtcdConfig::builder()
//!     .endpoints(["http://10.0.0.1:2379,http://10.0.0.2:2379"])
//!     .credentials("app", "apppw")
//!     .request_timeout(Duration::from_secs(5))
//!     .build()?;
//!
//! // The key holds Sentinel's flow rule JSON: [{"resource":"GET:/order","count":5}]
//! let sentinel = Sentinel::new();
//! let backend = EtcdSource::key(config.clone(), "/rules/flow");
//! let source = DataSource::builder(backend, FlowJson::new())
//!     .name("etcd-flow")
//!     .start_mode(StartMode::Snapshot)
//!     .snapshot_file("/var/lib/myapp/flow-rules.json")
//!     .start(&sentinel)
//!     .await?;
//! println!("{} flow rules", sentinel.flow_rules().rules().len());
//! println!("status {:?}", source.status());
//!
//! // Elsewhere, a tool changes the rules; every running engine applies them.
//! let writer = EtcdRuleWriter::connect(config).await?;
//! let rules = RuleSet::new().with_flow(vec![FlowRule::qps("GET:/order", 20.0)]);
//! writer.put_rules("/rules/flow", &rules).await?;
//!
//! source.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! `examples/src/bin/etcd.rs` is a runnable version that prints passes and blocks while you
//! change the key with `etcdctl`.
//!
//! # Key or prefix
//!
//! - [`EtcdSource::key`] reads one key. A missing or deleted key means "no rules" (the driver's
//!   [`DeletePolicy`](sentinel_core::datasource::DeletePolicy) decides whether that clears
//!   them).
//! - [`EtcdSource::prefix`] reads every key under a prefix, for example one key per service
//!   or team: `/rules/flow/orders`, `/rules/flow/payments`. Each key holds a document of the
//!   converter's format; the driver converts each and applies the union in one step. Adding,
//!   changing or removing a key under the prefix is one update, and several keys changed in
//!   one etcd transaction arrive as one update. One invalid key rejects the whole update and
//!   the previous union stays. End the prefix with `/`, or `/rules/flow` also matches
//!   `/rules/flow-old`.
//!
//! # Authentication and TLS
//!
//! With [`EtcdConfigBuilder::credentials`] the client authenticates on connect and
//! re-authenticates when etcd refuses its token (simple tokens expire after
//! `--auth-token-ttl` of inactivity and do not survive a server restart). Wrong credentials
//! fail the start with `SourceError::Auth`; a user without read permission on the key gets
//! `SourceError::PermissionDenied`. The password never appears in `Debug` output, logs or
//! errors.
//!
//! The `tls` feature adds `TlsConfig` (a CA certificate, an optional client identity, a
//! domain name override) for `https://` endpoints.
//!
//! # Compaction, disconnects and timeouts
//!
//! A source talks to one endpoint of its list at a time. A connection failure moves it to the
//! next one, and a read tries each endpoint once before it fails, so a dead first endpoint
//! costs one connect timeout, not the start.
//!
//! - If etcd has compacted its history past the revision the watch starts from, etcd cancels
//!   the watch; the source reports a resync and the driver GETs the key again and watches from
//!   the new revision. Nothing is lost: the GET returns the latest value. This is not counted
//!   as an error.
//! - A broken connection (server restart, network loss) is a `SourceError::Connection`: the
//!   source drops its client, the driver marks itself disconnected and retries with
//!   exponential backoff and jitter (see
//!   [`DataSourceBuilder::backoff`](sentinel_core::datasource::DataSourceBuilder::backoff)),
//!   then GETs again and watches again. A change made while the client was away is applied
//!   after the reconnect; the rules in force stay until then.
//! - Every request (connect, GET, authenticate, opening a watch) is bounded by the request
//!   timeout (10 s by default).
//! - A server that freezes without closing the connection (`SIGSTOP`, a stalled VM, a
//!   partition) is noticed by the watch check
//!   ([`EtcdConfigBuilder::health_check`]): every [`DEFAULT_HEALTH_CHECK_INTERVAL`] (1 s) a
//!   watching source sends a progress request on its watch stream, and a stream silent for
//!   [`DEFAULT_HEALTH_CHECK_TIMEOUT`] (2 s) after one is a broken connection. The status then
//!   says `connected: false`, with a `last_error` naming both settings, within 3 s by default
//!   ([`EtcdConfig::frozen_server_detection`]); a server must stay silent for 2 s to be taken
//!   for dead, which a busy one on a loaded machine is not. HTTP/2 keep-alive pings (10 s and
//!   10 s by default, [`EtcdConfigBuilder::keep_alive`]) back it up. `Debug` of an
//!   [`EtcdConfig`] shows both.
//! - Values are capped at 4 MiB in total by default
//!   ([`EtcdConfigBuilder::max_payload_bytes`]); keys that are not UTF-8 are converted
//!   lossily.
//!
//! # Server versions
//!
//! Tested against etcd 3.4.23 (the v3 gRPC API; 3.4 or newer is expected to work).
//!
//! # Features
//!
//! `tls`: connects to `https://` endpoints through rustls and adds `TlsConfig`.
//!
//! # Settings
//!
//! [`EtcdConfigBuilder`], checked by [`build`](EtcdConfigBuilder::build) (a zero value is a
//! [`ConfigError`] naming the setting):
//!
//! | setting | default | what |
//! | --- | --- | --- |
//! | [`endpoints`](EtcdConfigBuilder::endpoints), [`endpoint`](EtcdConfigBuilder::endpoint) | none (required) | `http://host:port`, or `https://` with `tls` |
//! | [`credentials`](EtcdConfigBuilder::credentials) | none | user and password |
//! | [`connect_timeout`](EtcdConfigBuilder::connect_timeout) | [`DEFAULT_CONNECT_TIMEOUT`] (5 s) | one connection |
//! | [`request_timeout`](EtcdConfigBuilder::request_timeout) | [`DEFAULT_REQUEST_TIMEOUT`] (10 s) | one request |
//! | [`health_check`](EtcdConfigBuilder::health_check) | 1 s, 2 s | progress requests on the watch |
//! | [`keep_alive`](EtcdConfigBuilder::keep_alive) | 10 s, 10 s | HTTP/2 pings |
//! | [`max_payload_bytes`](EtcdConfigBuilder::max_payload_bytes) | [`DEFAULT_MAX_PAYLOAD_BYTES`] (4 MiB) | one read |
//! | `tls` (feature `tls`) | none | CA, client identity, domain |
//!
//! # Status and health
//!
//! The driver publishes a [`SourceStatus`](sentinel_core::datasource::SourceStatus)
//! (`DataSource::status`, or `status_watch` to wait on changes): `connected`, `last_error`
//! (secret-free), `disconnects`, the counts of applied, rejected and unchanged updates, and
//! `health_check`: what this source checks (a progress request on the open watch every interval, answered within the timeout) and
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
mod error;
mod source;
mod writer;

#[cfg(feature = "tls")]
pub use config::TlsConfig;
pub use config::{
    ConfigError, EtcdConfig, EtcdConfigBuilder, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_HEALTH_CHECK_INTERVAL, DEFAULT_HEALTH_CHECK_TIMEOUT, DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_REQUEST_TIMEOUT,
};
#[allow(deprecated)]
pub use config::{DEFAULT_WATCH_CHECK_INTERVAL, DEFAULT_WATCH_CHECK_TIMEOUT};
pub use sentinel_core::datasource::{encode_rules, WriteError};
pub use source::EtcdSource;
pub use writer::{EtcdRuleTarget, EtcdRuleWriter};
