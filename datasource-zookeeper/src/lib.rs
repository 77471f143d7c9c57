//! ZooKeeper znodes as a Sentinel rule source.
//!
//! [`ZooKeeperSource`] implements [`ReadableDataSource`](sentinel_core::datasource::ReadableDataSource)
//! for one znode (the layout of Sentinel's own `ZookeeperDataSource`: one znode per rule
//! family, such as `/sentinel_rule_config/{app}/flow`), or for every child of a znode, whose
//! union applies atomically. It reads with a one-shot watch set by the same request, reads
//! again (and sets new watches) whenever one fires, and reads again after every reconnect or
//! new session, so a change written while it was away is never missed. The generic driver in
//! `sentinel-core` ([`DataSource`](sentinel_core::datasource::DataSource)) does the rest:
//! converting, validating, applying, deduplicating, backoff and status.
//! [`ZooKeeperRuleWriter`] stores rules, with compare-and-set on the znode's version.
//!
//! ```no_run
//! use sentinel_core::datasource::{DataSource, FlowJson};
//! use sentinel_core::flow::FlowRule;
//! use sentinel_core::{RuleSet, Sentinel};
//! use sentinel_datasource_zookeeper::{ZooKeeperConfig, ZooKeeperRuleWriter, ZooKeeperSource};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = ZooKeeperConfig::builder()
//!     .servers(["10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181"])
//!     .chroot("/sentinel")
//!     .credentials("app", "apppw")
//!     .build()?;
//!
//! // The znode holds Sentinel's flow rule JSON: [{"resource":"GET:/order","count":5}]
//! let sentinel = Sentinel::new();
//! let source = DataSource::builder(
//!     ZooKeeperSource::node(config.clone(), "/sentinel_rule_config/orders/flow"),
//!     FlowJson::new(),
//! )
//! .name("zk-flow")
//! .start(&sentinel)
//! .await?;
//!
//! // Elsewhere, an operator changes the rules, unless someone else did first.
//! let writer = ZooKeeperRuleWriter::connect(config).await?;
//! let path = "/sentinel_rule_config/orders/flow";
//! let seen = writer.version(path).await?.map(|v| v.version);
//! let rules = RuleSet::new().with_flow(vec![FlowRule::qps("GET:/order", 20.0)]);
//! writer.put_rules_if(path, &rules, seen).await?;
//! source.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! # The client crate
//!
//! [`zookeeper-client`](https://docs.rs/zookeeper-client) (kezhuw), chosen over
//! `tokio-zookeeper` and `zookeeper-async` for its maintenance and protocol coverage: 36
//! releases since 2022, the latest (0.11.2) in July 2026, and the 3.5+ protocol with
//! sessions that reconnect to any server of a multi-server connect string (and report their
//! state), one-shot and persistent watches, digest auth, ACLs, chroot, multi-ops and, behind
//! features, TLS and SASL. `tokio-zookeeper` (jonhoo, 0.4) connects to a single socket
//! address and has no authentication or chroot; `zookeeper-async` (last release March 2024)
//! is a port of the synchronous `rust-zookeeper` client, with a catch-all watcher and
//! callback watches. This crate enables only its `tokio` feature (no TLS, no SASL).
//!
//! # Sessions, reconnects, deletes
//!
//! - Every change of the session's state (the connection lost, the session expired) ends
//!   the watch; the driver backs off and reads again once the client is back, on a new
//!   session if the old one expired, and watches again. An update written meanwhile is in
//!   that read; nothing is applied twice or out of order.
//! - The revision is the highest zxid read (`mzxid`; for children also the parent's
//!   `pzxid`). A read behind one already made (a new session on a lagging server) is synced
//!   and made again, and never applied.
//! - A server that freezes without closing the connection (`SIGSTOP`, a stalled VM, a
//!   partition) is noticed by the client's PINGs: a connection left silent for the
//!   [`health_check`](ZooKeeperConfigBuilder::health_check) (default
//!   [`DEFAULT_HEALTH_CHECK_TIMEOUT`], 2 s) is dropped and the source reports
//!   `connected: false`, within 3 s by default ([`ZooKeeperConfig::frozen_server_detection`]).
//! - A deleted znode is no value: the driver's
//!   [`DeletePolicy`](sentinel_core::datasource::DeletePolicy) applies (clear by default);
//!   a re-created one applies again. For a children source, a child added or removed changes
//!   the union; a missing parent is no rules.
//! - Digest credentials ([`credentials`](ZooKeeperConfigBuilder::credentials), as `addauth
//!   digest user:pw`) are sent with every session. ZooKeeper does not check a digest
//!   password when it is given, only against a znode's ACL: a wrong password is a
//!   `SourceError::PermissionDenied` on the first read of a protected znode. No secret
//!   appears in `describe`, `Debug`, logs, errors or status.
//!
//! # Server versions
//!
//! Tested against Debian's ZooKeeper 3.8. The source's requests (`getData`, `exists`,
//! `getChildren2`, `sync`, all with one-shot watches) exist since 3.4; the writer creates
//! znodes with `create2` (3.5 and later).
//!
//! # Settings
//!
//! [`ZooKeeperConfigBuilder`], checked by [`build`](ZooKeeperConfigBuilder::build) (a zero
//! value or a bad address is a [`ConfigError`] naming it):
//!
//! | setting | default | what |
//! | --- | --- | --- |
//! | [`servers`](ZooKeeperConfigBuilder::servers) | none (required) | `host:port`, several (comma-separated too) |
//! | [`chroot`](ZooKeeperConfigBuilder::chroot) | none | every path under it |
//! | [`credentials`](ZooKeeperConfigBuilder::credentials) | none | digest user and password |
//! | [`connect_timeout`](ZooKeeperConfigBuilder::connect_timeout) | [`DEFAULT_CONNECT_TIMEOUT`] (3 s) | establishing a session |
//! | [`request_timeout`](ZooKeeperConfigBuilder::request_timeout) | [`DEFAULT_REQUEST_TIMEOUT`] (5 s) | one request |
//! | [`session_timeout`](ZooKeeperConfigBuilder::session_timeout) | [`DEFAULT_SESSION_TIMEOUT`] (10 s) | asked of the server |
//! | [`health_check`](ZooKeeperConfigBuilder::health_check) | [`DEFAULT_HEALTH_CHECK_TIMEOUT`] (2 s) | a silent connection is dropped |
//! | [`max_payload_bytes`](ZooKeeperConfigBuilder::max_payload_bytes) | [`DEFAULT_MAX_PAYLOAD_BYTES`] (4 MiB) | one read |
//!
//! # Status and health
//!
//! The driver publishes a [`SourceStatus`](sentinel_core::datasource::SourceStatus):
//! `connected`, `last_error` (secret-free), `disconnects`, the counts of applied, rejected
//! and unchanged updates, the revision (zxid) applied, and `health_check`: what this source
//! checks (the client's PING, a silent connection dropped after the health check) and
//! `detection`, the longest a frozen server goes unnoticed (3 s by default).
//!
//! # More
//!
//! [Stores](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/stores.md) (this backend beside the others, with its latency figures),
//! [sources' health](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/sources.md),
//! [formats](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/formats.md), [adding a backend](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/adding-a-backend.md).
#![cfg_attr(docsrs, feature(doc_cfg))]

mod config;
mod connect;
mod source;
mod writer;

pub use config::{
    ConfigError, ZooKeeperConfig, ZooKeeperConfigBuilder, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_HEALTH_CHECK_TIMEOUT, DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_SESSION_TIMEOUT,
};
pub use sentinel_core::datasource::{encode_rules, WriteError};
pub use source::ZooKeeperSource;
pub use writer::{MissingParent, NodeAcl, NodeVersion, ZooKeeperRuleTarget, ZooKeeperRuleWriter};
