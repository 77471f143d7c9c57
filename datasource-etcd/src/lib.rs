//! etcd as a Sentinel rule source.
//!
//! [`EtcdSource`] implements [`ReadableDataSource`](sentinel_core::datasource::ReadableDataSource)
//! for one key or for every key under a prefix: it GETs the value, notes the revision, and
//! watches from the next revision, so no change between the read and the watch is lost. The
//! generic driver in `sentinel-core` does the rest (converting, validating, applying, backoff).
//! [`EtcdRuleWriter`] stores payloads, for tools and tests.
//!
//! ```no_run
//! use datasource_etcd::{EtcdConfig, EtcdRuleWriter, EtcdSource};
//! use sentinel_core::datasource::{ReadableDataSource, WatchEvent};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = EtcdConfig::builder()
//!     .endpoints(["http://127.0.0.1:2379"])
//!     .credentials("app", "apppw")
//!     .build()?;
//!
//! let writer = EtcdRuleWriter::connect(config.clone()).await?;
//! writer
//!     .put_bytes("/rules/flow", r#"[{"resource":"GET /api","count":10}]"#)
//!     .await?;
//!
//! let mut source = EtcdSource::key(config, "/rules/flow");
//! let current = source.read().await?;
//! println!("revision {:?}, {} bytes", current.revision, current.size());
//! match source.watch().await? {
//!     WatchEvent::Changed(payload) => println!("new value at {:?}", payload.revision),
//!     WatchEvent::Resync => println!("read again"),
//!     _ => {}
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Decisions worth knowing:
//! - A prefix source keeps the entries it read and applies each watch response to them, so
//!   several keys changed in one transaction arrive as one payload.
//! - A compacted watch position yields `WatchEvent::Resync`; the driver reads again.
//! - Keys that are not UTF-8 are converted lossily.
//! - Waiting on an open watch has no timeout. HTTP/2 keep-alive pings (10 s by default) detect a
//!   dead connection; every other request is bounded by the request timeout.
//!
//! Features: `tls` connects to `https://` endpoints through rustls and adds `TlsConfig`.

mod config;
mod error;
mod source;
mod writer;

#[cfg(feature = "tls")]
pub use config::TlsConfig;
pub use config::{
    ConfigError, EtcdConfig, EtcdConfigBuilder, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_REQUEST_TIMEOUT,
};
pub use source::EtcdSource;
pub use writer::{encode_rules, EtcdRuleWriter, WriteError};
