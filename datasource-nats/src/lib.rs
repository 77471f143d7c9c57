//! NATS JetStream key-value buckets as a Sentinel rule source.
//!
//! [`NatsSource`] implements [`ReadableDataSource`](sentinel_core::datasource::ReadableDataSource)
//! for one key of a bucket, or for every key matching a wildcard (`rules.flow.>`), whose
//! union applies atomically like the etcd prefix source. It reads at a noted stream position
//! and watches from the position after it, so nothing between the read and the watch is
//! lost. The generic driver in `sentinel-core`
//! ([`DataSource`](sentinel_core::datasource::DataSource)) does the rest: converting,
//! validating, applying, deduplicating, backoff and status. [`NatsRuleWriter`] stores rules,
//! with an optional compare-and-set on the revision.
//!
//! No Sentinel port has this store; its buckets are versioned and watchable, which fits the
//! data-source contract as closely as etcd does.
//!
//! ```no_run
//! use sentinel_core::datasource::{DataSource, FlowJson};
//! use sentinel_core::flow::FlowRule;
//! use sentinel_core::{RuleSet, Sentinel};
//! use sentinel_datasource_nats::{NatsConfig, NatsRuleWriter, NatsSource};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = NatsConfig::builder()
//!     .servers(["nats://10.0.0.1:4222"])
//!     .credentials("app", "apppw")
//!     .build()?;
//!
//! // The key holds Sentinel's flow rule JSON: [{"resource":"GET:/order","count":5}]
//! let sentinel = Sentinel::new();
//! let source = DataSource::builder(NatsSource::key(config.clone(), "rules", "orders.flow"), FlowJson::new())
//!     .name("nats-flow")
//!     .start(&sentinel)
//!     .await?;
//!
//! // Elsewhere, an operator changes the rules, unless someone else did first.
//! let writer = NatsRuleWriter::connect(config, "rules").await?;
//! let seen = writer.revision("orders.flow").await?.unwrap_or(0);
//! let rules = RuleSet::new().with_flow(vec![FlowRule::qps("GET:/order", 20.0)]);
//! writer.put_rules_if("orders.flow", &rules, seen).await?;
//! source.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! `examples/src/bin/nats.rs` is a runnable version that prints passes and blocks while you
//! `nats kv put` (or run its `put` subcommand).
//!
//! # Disconnects, deletes, a missing bucket
//!
//! - The client reconnects by itself. A disconnect ends the watch; the driver backs off,
//!   reads again once the client is back (updates made meanwhile are in that read) and
//!   watches from the new position. An update is never lost and never applied twice out of
//!   order. A disconnect during the read or while the watch is being set up ends them too:
//!   the source listens for disconnects from before its read until the watch ends.
//! - A server that freezes without closing the connection (`SIGSTOP`, a stalled VM, a
//!   partition) is noticed by the client's PINGs, sent every
//!   [`health_check_interval`](NatsConfigBuilder::health_check_interval) (default
//!   [`DEFAULT_HEALTH_CHECK_INTERVAL`],
//!   1 s) on an idle connection: with two unanswered when the third is due, the client
//!   drops the connection and the source reports `connected: false`, within 3 s by default
//!   ([`NatsConfig::frozen_server_detection`]); the error in the status names the interval.
//!   A server must stay silent for over 2 s to be taken for dead. `Debug` of a
//!   [`NatsConfig`] shows the interval.
//! - A delete or purge marker removes its key; a key source then has no value, and the
//!   driver's [`DeletePolicy`](sentinel_core::datasource::DeletePolicy) applies.
//! - A bucket that does not exist is, by default, an error naming it
//!   ([`MissingBucket::Fail`]: the start fails, unless with `StartMode::Snapshot`). With
//!   [`MissingBucket::Wait`] the source starts with no rules and applies the bucket's keys
//!   once it exists.
//! - Auth: user and password, token, nkey seed or creds file. Refused credentials are
//!   `SourceError::Auth`. No secret appears in `describe`, `Debug`, logs, errors or status.
//!
//! # Server versions
//!
//! Needs nats-server 2.10 or newer with JetStream: async-nats 0.51 cannot create or read a KV
//! bucket on 2.9 (Debian 12's package). Tested against nats-server 2.15.
//!
//! # Features
//!
//! `tls`: TLS through rustls (ring) and
//! `NatsConfigBuilder::tls_ca_certificate_file`.
//!
//! # Settings
//!
//! [`NatsConfigBuilder`], checked by [`build`](NatsConfigBuilder::build) (a zero value is a
//! [`ConfigError`] naming the setting):
//!
//! | setting | default | what |
//! | --- | --- | --- |
//! | [`servers`](NatsConfigBuilder::servers) | none (required) | `nats://host:port` |
//! | [`credentials`](NatsConfigBuilder::credentials), [`token`](NatsConfigBuilder::token), [`nkey`](NatsConfigBuilder::nkey), [`creds_file`](NatsConfigBuilder::creds_file) | none | one way to authenticate |
//! | [`connect_timeout`](NatsConfigBuilder::connect_timeout) | [`DEFAULT_CONNECT_TIMEOUT`] (3 s) | one connection |
//! | [`request_timeout`](NatsConfigBuilder::request_timeout) | [`DEFAULT_REQUEST_TIMEOUT`] (5 s) | one JetStream request |
//! | [`health_check_interval`](NatsConfigBuilder::health_check_interval) | [`DEFAULT_HEALTH_CHECK_INTERVAL`] (1 s) | the client's PINGs |
//! | [`max_payload_bytes`](NatsConfigBuilder::max_payload_bytes) | [`DEFAULT_MAX_PAYLOAD_BYTES`] (4 MiB) | one read |
//! | [`missing_bucket`](NatsConfigBuilder::missing_bucket) | [`MissingBucket::Fail`] | a bucket that does not exist |
//! | `tls_ca_certificate_file` (feature `tls`) | none | a CA certificate file |
//!
//! # Status and health
//!
//! The driver publishes a [`SourceStatus`](sentinel_core::datasource::SourceStatus)
//! (`DataSource::status`, or `status_watch` to wait on changes): `connected`, `last_error`
//! (secret-free), `disconnects`, the counts of applied, rejected and unchanged updates, and
//! `health_check`: what this source checks (the client's PING every interval, two unanswered dropping the connection) and
//! `detection`, the longest a frozen server goes unnoticed (three intervals, 3 s by default).
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
mod source;
mod writer;

#[allow(deprecated)]
pub use config::DEFAULT_PING_INTERVAL;
pub use config::{
    ConfigError, MissingBucket, NatsConfig, NatsConfigBuilder, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_HEALTH_CHECK_INTERVAL, DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_REQUEST_TIMEOUT,
};
pub use sentinel_core::datasource::{encode_rules, WriteError};
pub use source::NatsSource;
pub use writer::{NatsRuleTarget, NatsRuleWriter};
