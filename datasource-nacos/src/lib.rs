//! Nacos as a Sentinel rule source, over Nacos's HTTP Open API v1.
//!
//! [`NacosSource`] implements [`ReadableDataSource`](sentinel_core::datasource::ReadableDataSource)
//! for one config (a dataId in a group) or several: it GETs them, then long-polls
//! `/nacos/v1/cs/configs/listener` with their MD5s and reads again when the server reports a
//! change. The generic driver in `sentinel-core`
//! ([`DataSource`](sentinel_core::datasource::DataSource)) does the rest: converting,
//! validating, applying, deduplicating, backoff and status. [`NacosRuleWriter`] publishes
//! rules as the Sentinel dashboard does. HTTP goes through reqwest with rustls (no OpenSSL).
//!
//! # The dashboard's conventions
//!
//! The Sentinel dashboard (with its Nacos rule publishers) and Spring Cloud Alibaba keep an
//! application's rules in group `SENTINEL_GROUP`, one dataId per family: `{app}-flow-rules`,
//! `{app}-degrade-rules`, `{app}-system-rules`, `{app}-authority-rules` and
//! `{app}-param-rules`, each a JSON list of Sentinel (Java) rules (the authority and param
//! ones as the dashboard's nested `{"rule": {...}}` entities). A Rust service pointed at the
//! same dataIds sees the same rules and follows every change. [`NacosSource::dashboard`]
//! reads the five; [`dashboard_keys`] names them, to give each its converter:
//!
//! ```no_run
//! use sentinel_core::datasource::{
//!     AuthorityJson, DataSource, DegradeJson, FlowJson, ParamFlowJson, SystemJson,
//! };
//! use sentinel_core::Sentinel;
//! use sentinel_datasource_nacos::{dashboard_keys, NacosConfig, NacosSource};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = NacosConfig::builder()
//!     .servers(["10.0.0.1:8848,10.0.0.2:8848"])
//!     .namespace("prod")
//!     .credentials("nacos", "nacos")
//!     .build()?;
//!
//! let sentinel = Sentinel::new();
//! let [flow, degrade, system, authority, param] = dashboard_keys("orders");
//! let source = DataSource::builder(NacosSource::dashboard(config, "orders")?, FlowJson::new())
//!     .converter_for(flow.entry_key(), FlowJson::new())
//!     .converter_for(degrade.entry_key(), DegradeJson::new())
//!     .converter_for(system.entry_key(), SystemJson::new())
//!     .converter_for(authority.entry_key(), AuthorityJson::new())
//!     .converter_for(param.entry_key(), ParamFlowJson::new())
//!     .name("nacos-orders")
//!     .start(&sentinel)
//!     .await?;
//! // The five dataIds are read and applied as one update, and so is every later change.
//! println!("{} flow rules", sentinel.flow_rules().rules().len());
//! source.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! `examples/src/bin/nacos.rs` is a runnable version that prints passes and blocks while
//! you publish with `curl`.
//!
//! # Absent configs, failover, auth
//!
//! - A config that does not exist (404) has no entry in the payload; when none of a source's
//!   configs exists the payload is absent and the driver's
//!   [`DeletePolicy`](sentinel_core::datasource::DeletePolicy) applies (it clears the rules
//!   by default, as Sentinel does). Re-creating the config applies it again.
//! - Several server addresses: the source talks to one at a time and moves to the next on a
//!   connection error, so a dead server costs one connect timeout.
//! - The long poll asks the server to hold for
//!   [`long_poll_timeout`](NacosConfigBuilder::long_poll_timeout) (30 s by default); every
//!   other request is bounded by the request timeout.
//! - A long poll is silent by design, so while it waits the source checks every
//!   [`DEFAULT_HEALTH_CHECK_INTERVAL`] (1 s) that the server answers a `GET
//!   /v1/console/health/readiness` ([`health_check`](NacosConfigBuilder::health_check)).
//!   A check unanswered within [`DEFAULT_HEALTH_CHECK_TIMEOUT`] (2 s) ends the poll as a
//!   broken connection: a server that freezes without closing its connections (`SIGSTOP`,
//!   a stalled VM, a partition) is reported `connected: false`, with a `last_error` naming
//!   both settings, within 3 s by default ([`NacosConfig::frozen_server_detection`]) rather
//!   than after the 35 s of long poll and request timeout. A server must leave a check
//!   unanswered for 2 s to be taken for dead. `Debug` of a [`NacosConfig`] shows the
//!   settings.
//! - The writer retries a publish (or delete) once when the server closed the reused
//!   connection it went on without answering (common after a stall: the server drops
//!   connections idle past its keep-alive); a publish is idempotent.
//! - With [`credentials`](NacosConfigBuilder::credentials) the source logs in
//!   (`/nacos/v1/auth/login`), keeps the `accessToken`, logs in again at 90 % of its
//!   `tokenTtl`, and logs in again when a server answers 403 to it (an expired or revoked
//!   token), counted in `SourceStatus::reauthentications`. Wrong credentials are
//!   `SourceError::Auth`. The password and the token never appear in `describe`, `Debug`,
//!   logs, errors or status.
//! - The access key / secret key signature of Alibaba Cloud's hosted Nacos (MSE, ACM) is not
//!   implemented: no public specification of it was at hand, only the Java client's
//!   source. Use username and password, which MSE supports too.
//!
//! # Server versions
//!
//! Tested against rnacos 0.8.8, a Nacos-compatible server, whose v1 config API matches
//! Nacos's. Expected to work with Nacos 1.x and 2.x (both serve the v1 Open API, and 2.x
//! still answers v1 long polls), and with Nacos 3.x where the v1 client API is on or its
//! legacy adapter is installed (3.0 turned the v1 API off by default).
//!
//! # Settings
//!
//! [`NacosConfigBuilder`], checked by [`build`](NacosConfigBuilder::build) (a zero value is a
//! [`ConfigError`] naming the setting):
//!
//! | setting | default | what |
//! | --- | --- | --- |
//! | [`servers`](NacosConfigBuilder::servers) | none (required) | `host:port` of each server |
//! | [`context_path`](NacosConfigBuilder::context_path), [`namespace`](NacosConfigBuilder::namespace) | `/nacos`, public | where the configs live |
//! | [`credentials`](NacosConfigBuilder::credentials) | none | user and password |
//! | [`connect_timeout`](NacosConfigBuilder::connect_timeout) | [`DEFAULT_CONNECT_TIMEOUT`] (3 s) | one connection |
//! | [`request_timeout`](NacosConfigBuilder::request_timeout) | [`DEFAULT_REQUEST_TIMEOUT`] (5 s) | one request |
//! | [`health_check`](NacosConfigBuilder::health_check) | 1 s, 2 s | the server's liveness |
//! | [`long_poll_timeout`](NacosConfigBuilder::long_poll_timeout) | [`DEFAULT_LONG_POLL_TIMEOUT`] (30 s) | one long poll |
//! | [`max_payload_bytes`](NacosConfigBuilder::max_payload_bytes) | [`DEFAULT_MAX_PAYLOAD_BYTES`] (4 MiB) | one read |
//!
//! # Status and health
//!
//! The driver publishes a [`SourceStatus`](sentinel_core::datasource::SourceStatus)
//! (`DataSource::status`, or `status_watch` to wait on changes): `connected`, `last_error`
//! (secret-free), `disconnects`, the counts of applied, rejected and unchanged updates, and
//! `health_check`: what this source checks (a readiness request every interval beside the long poll, answered within the timeout) and
//! `detection`, the longest a frozen server goes unnoticed (3 s by default).
//! The same figures reach the dashboard transport and the console.
//!
//! # More
//!
//! [Stores](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/stores.md) (this backend beside the others, and the write recipes),
//! [sources' health](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/sources.md) (detection times, and the settings renamed in 0.1.1),
//! [formats](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/formats.md), [adding a backend](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/adding-a-backend.md).
#![cfg_attr(docsrs, feature(doc_cfg))]

mod client;
mod config;
mod source;
mod writer;

pub use config::{
    ConfigError, ConfigKey, NacosConfig, NacosConfigBuilder, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_GROUP, DEFAULT_HEALTH_CHECK_INTERVAL, DEFAULT_HEALTH_CHECK_TIMEOUT,
    DEFAULT_LONG_POLL_TIMEOUT, DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_REQUEST_TIMEOUT, SENTINEL_GROUP,
};
pub use sentinel_core::datasource::{encode_rules, WriteError};
pub use source::{dashboard_keys, NacosSource};
pub use writer::{NacosRuleTarget, NacosRuleWriter};
