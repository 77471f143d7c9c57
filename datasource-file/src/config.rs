//! Settings of a file source: their defaults, the checked set a source runs with, and why
//! the builder refuses one.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// Default quiet period after the last file-system event before the file is read: 50 ms.
///
/// Editors save in a burst of events within a few milliseconds (write a temporary file,
/// rename it over, fix permissions), and a Kubernetes ConfigMap update is a burst of four or
/// five directory entries. 50 ms covers those bursts and leaves most of a 150 ms
/// write-to-applied budget to the driver.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(50);

/// Default time a vanished or emptied file gets to come back before it counts as deleted:
/// 500 ms.
///
/// A save that deletes and then re-creates the file, or truncates and then writes it, leaves
/// it missing or empty for a moment. That is not a deletion, and clearing the rules for it
/// would drop protection in the middle of a routine edit.
pub const DEFAULT_DELETE_SETTLE: Duration = Duration::from_millis(500);

/// Default size cap: the data-source framework's cap, 4 MiB, the largest file Java
/// Sentinel's file source accepts.
pub use sentinel_core::datasource::DEFAULT_MAX_PAYLOAD_BYTES;
/// The former name of [`DEFAULT_MAX_PAYLOAD_BYTES`].
#[deprecated(since = "0.1.1", note = "use DEFAULT_MAX_PAYLOAD_BYTES")]
pub const DEFAULT_MAX_SIZE: usize = DEFAULT_MAX_PAYLOAD_BYTES;

/// How often a source whose directory is missing checks for it again: 1 s.
pub(crate) const MISSING_DIR_RETRY: Duration = Duration::from_secs(1);

/// Why [`FileSourceBuilder::build`](crate::FileSourceBuilder::build) refused its settings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The path does not end in a file name (for example `/`, `..` or an empty path).
    #[error("path {path:?} does not name a file")]
    NoFileName {
        /// The path as given.
        path: PathBuf,
    },
    /// The polling interval is zero, which would read the file in a busy loop.
    #[error("the polling interval must be greater than zero")]
    ZeroPollInterval,
    /// The size cap is zero, so no file could ever be read.
    #[error("the size cap must be greater than zero")]
    ZeroMaxSize,
}

/// The former name of [`ConfigError`].
#[deprecated(since = "0.1.1", note = "use ConfigError")]
pub type BuildError = ConfigError;

/// The checked settings of a [`FileSource`](crate::FileSource).
#[derive(Debug, Clone)]
pub(crate) struct FileConfig {
    /// The file as configured; used for the entry key and for reads.
    pub(crate) path: PathBuf,
    /// The directory that is watched.
    pub(crate) dir: PathBuf,
    /// The file's name inside `dir`.
    pub(crate) file_name: OsString,
    pub(crate) debounce: Duration,
    pub(crate) delete_settle: Duration,
    pub(crate) poll: Option<Duration>,
    pub(crate) max_payload_bytes: usize,
}

impl FileConfig {
    /// The key of the single entry the source reports.
    pub(crate) fn key(&self) -> String {
        self.path.display().to_string()
    }

    /// The longest a burst of events can postpone a read: four quiet periods.
    pub(crate) fn max_debounce(&self) -> Duration {
        self.debounce.saturating_mul(4)
    }
}
