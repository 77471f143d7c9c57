//! A Sentinel rule source backed by a local file.
//!
//! [`FileSource`] implements [`ReadableDataSource`]. Hand it to the generic driver in
//! `sentinel-core` ([`DataSource`](sentinel_core::datasource::DataSource)) with a converter,
//! and the driver keeps the engine's rules equal to the file: it applies the file at start,
//! then every change, rejecting a bad file whole and keeping the last good rules.
//!
//! ```
//! use std::time::Duration;
//! use sentinel_datasource_file::FileSource;
//! use sentinel_core::datasource::{DataSource, FlowJson};
//! use sentinel_core::Sentinel;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // In production this is a path such as /etc/sentinel/flow-rules.json.
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("flow-rules.json");
//! std::fs::write(&path, r#"[{"resource": "GET:/orders", "count": 100}]"#)?;
//!
//! let sentinel = Sentinel::new();
//! let source = DataSource::builder(FileSource::new(&path)?, FlowJson::new())
//!     .name("flow-rules")
//!     .start(&sentinel)
//!     .await?;
//! // The file is applied before `start` returns.
//! assert_eq!(sentinel.flow_rules().rules()[0].count, 100.0);
//!
//! // An editor saves: a temporary file renamed over the rules file.
//! let temp = dir.path().join(".flow-rules.json.swp");
//! std::fs::write(&temp, r#"[{"resource": "GET:/orders", "count": 50}]"#)?;
//! std::fs::rename(&temp, &path)?;
//!
//! // Applied about one debounce period later.
//! let mut status = source.status_watch();
//! tokio::time::timeout(Duration::from_secs(10), status.wait_for(|s| s.applied_count == 2))
//!     .await??;
//! assert_eq!(sentinel.flow_rules().rules()[0].count, 50.0);
//! source.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! Use [`CombinedJson`](sentinel_core::datasource::CombinedJson) for one file carrying
//! several families (`{"flow": [...], "degrade": [...]}`): a change to it replaces all of
//! them in one apply, one rule-table version.
//!
//! # How changes are seen
//!
//! - The file's **parent directory** is watched (not recursively), so a save that renames a
//!   new file over the old one (vim, VS Code, `kubectl cp`, Ansible...) is seen, and so is a
//!   Kubernetes ConfigMap update, which swaps the `..data` symlink that the mounted file
//!   resolves through. Events for other names in the directory are ignored, except ConfigMap
//!   entries (names starting with `..`).
//! - Events are **debounced**: the file is read once no event has come for the quiet period
//!   ([`DEFAULT_DEBOUNCE`], 50 ms), or at the latest four quiet periods after the first.
//! - The content is compared by **SHA-256** with what was last reported, never by
//!   modification time. An unchanged file yields no event. The payload revision is the hex
//!   digest.
//! - A **missing or empty file** is held back for the settle delay
//!   ([`DEFAULT_DELETE_SETTLE`], 500 ms), because saves pass through both states. If the file
//!   has content again by then, that content is reported, so a delete and re-create never
//!   clears the rules. Otherwise a missing file is reported as [`RawPayload::absent`] and an
//!   empty one as an empty entry, and the driver applies its delete policy: `Clear` (the
//!   default) clears this source's rules, `Keep` keeps them. A file created later is applied
//!   as usual. [`read`](ReadableDataSource::read) reports the current state at once, a
//!   missing file included.
//! - A file being **written in place** (truncate, then write) may be read half-written. The
//!   driver rejects that payload (its status shows the error) and keeps the old rules; the
//!   end of the write brings another event and the complete content. Writers that can,
//!   should write a temporary file and rename it.
//! - **Polling** ([`FileSourceBuilder::poll`]) reads the file at a fixed interval instead, for
//!   network filesystems that deliver no events (NFS, SMB, some FUSE mounts). The settle
//!   delay applies there too.
//! - If the directory is missing, or the watch cannot be set up (for example when the
//!   inotify watch limit is reached), the source checks the file once a second and tries the
//!   watch again each time. Meanwhile the source's status shows it disconnected, with the
//!   reason, until the directory can be watched again.
//!
//! Only events for the file's own name (and ConfigMap entries) count. If the path is a
//! symlink to a file with another name or in another directory, edits to that target are not
//! seen unless the link itself changes: point the source at the real file, or use polling.
//!
//! # Size caps
//!
//! Two caps apply, both 4 MiB by default:
//! - the source's own, [`FileSourceBuilder::max_payload_bytes`]: a larger file is not read at
//!   all, so a runaway file cannot take the process's memory. The source returns
//!   [`SourceError::TooLarge`] once per change of the file; the driver counts it as a rejected
//!   payload, shows it in its status, keeps the rules and goes on watching, so the file is
//!   applied as soon as it is back under the cap;
//! - the driver's, `DataSourceBuilder::max_payload_bytes`: a larger payload is rejected
//!   (counted in the status's `rejected_count`) and the rules stay.
//!
//! # Choosing the debounce
//!
//! The default quiet period, 50 ms, covers the burst of events of one save (editors write,
//! rename and fix permissions within a few milliseconds; kubelet's ConfigMap swap is four or
//! five directory entries) and leaves most of a 150 ms write-to-applied budget to the
//! driver: `benches/latency.rs` measures it (`cargo bench -p sentinel-datasource-file --bench
//! latency`). Raise it for writers that pause mid-write; lower it, or set zero, when every
//! millisecond counts and every writer renames.
//!
//! # Threads and tasks
//!
//! notify runs one thread per watch, which feeds a tokio channel. Reads run on tokio's
//! blocking pool and are awaited. [`close`](ReadableDataSource::close), or dropping the
//! source, stops the watch thread; the source spawns nothing else.
//!
//! # Using the source without the driver
//!
//! ```
//! use std::time::Duration;
//! use sentinel_datasource_file::FileSource;
//! use sentinel_core::datasource::{ReadableDataSource, WatchEvent};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("flow-rules.json");
//! std::fs::write(&path, r#"[{"resource":"GET /","count":10}]"#)?;
//!
//! let mut source = FileSource::builder(&path)
//!     .debounce(Duration::from_millis(20))
//!     .build()?;
//! let current = source.read().await?;
//! assert_eq!(current.entries[0].value, br#"[{"resource":"GET /","count":10}]"#);
//!
//! std::fs::write(&path, r#"[{"resource":"GET /","count":20}]"#)?;
//! let event = tokio::time::timeout(Duration::from_secs(5), source.watch()).await??;
//! let WatchEvent::Changed(update) = event else { panic!("expected a change") };
//! assert_eq!(update.entries[0].value, br#"[{"resource":"GET /","count":20}]"#);
//! source.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Settings
//!
//! [`FileSourceBuilder`] (from [`FileSource::builder`]), checked by
//! [`build`](FileSourceBuilder::build) (a refused setting is a [`ConfigError`]):
//!
//! | setting | default | what |
//! | --- | --- | --- |
//! | [`debounce`](FileSourceBuilder::debounce) | [`DEFAULT_DEBOUNCE`] (50 ms) | quiet period after an event |
//! | [`delete_settle`](FileSourceBuilder::delete_settle) | [`DEFAULT_DELETE_SETTLE`] (500 ms) | how long a missing or empty file may stay so |
//! | [`poll`](FileSourceBuilder::poll) | off (watch the directory) | poll every interval instead |
//! | [`max_payload_bytes`](FileSourceBuilder::max_payload_bytes) | [`DEFAULT_MAX_PAYLOAD_BYTES`] (4 MiB) | the file's size cap |
//!
//! # Status and health
//!
//! The driver publishes a [`SourceStatus`](sentinel_core::datasource::SourceStatus)
//! (`DataSource::status`, or `status_watch` to wait on changes): `connected` (false while the
//! directory cannot be watched), `last_error`, the counts of applied, rejected and unchanged
//! updates. A local file has no server to freeze, so the source names no `health_check`.
//!
//! # More
//!
//! [Stores](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/stores.md) (this backend beside the others),
//! [sources' health](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/sources.md) (and the settings renamed in 0.1.1),
//! [formats](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/formats.md), [adding a backend](https://github.com/sentinel-rs/sentinel-rs/blob/main/docs/adding-a-backend.md).
#![cfg_attr(docsrs, feature(doc_cfg))]

mod builder;
mod config;
mod snapshot;
mod source;
mod watch;
mod writer;

pub use builder::FileSourceBuilder;
#[allow(deprecated)]
pub use config::{BuildError, DEFAULT_MAX_SIZE};
pub use config::{ConfigError, DEFAULT_DEBOUNCE, DEFAULT_DELETE_SETTLE, DEFAULT_MAX_PAYLOAD_BYTES};
pub use source::FileSource;

// The names the crate documentation links to.
#[cfg(doc)]
use sentinel_core::datasource::{RawPayload, ReadableDataSource, SourceError};
pub use writer::FileRuleWriter;
