//! Settings of a file source and the builder that checks them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::FileSource;

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

/// Why [`FileSourceBuilder::build`] refused its settings.
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

/// The checked settings of a [`FileSource`].
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

/// Builds a [`FileSource`]. Start one with [`FileSource::builder`].
///
/// ```
/// use std::time::Duration;
/// use sentinel_datasource_file::FileSource;
///
/// let source = FileSource::builder("/etc/sentinel/rules.json")
///     .debounce(Duration::from_millis(20))
///     .delete_settle(Duration::from_secs(1))
///     .max_payload_bytes(1024 * 1024)
///     .build()?;
/// # Ok::<(), sentinel_datasource_file::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build() is called"]
pub struct FileSourceBuilder {
    path: PathBuf,
    debounce: Duration,
    delete_settle: Duration,
    poll: Option<Duration>,
    max_payload_bytes: usize,
}

impl FileSourceBuilder {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            debounce: DEFAULT_DEBOUNCE,
            delete_settle: DEFAULT_DELETE_SETTLE,
            poll: None,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
        }
    }

    /// Sets the quiet period: after a file-system event the source waits until no further
    /// event has arrived for this long, then reads the file. A steady stream of events
    /// delays a read by at most four quiet periods. Zero reads on every event.
    ///
    /// Default [`DEFAULT_DEBOUNCE`] (50 ms). Not used in polling mode.
    pub fn debounce(mut self, quiet: Duration) -> Self {
        self.debounce = quiet;
        self
    }

    /// Sets how long a missing or empty file may stay so before the source reports it: a
    /// missing file as an absent value, an empty file as an empty one. If the file comes back
    /// with content within this time, the source reports that content instead.
    ///
    /// Default [`DEFAULT_DELETE_SETTLE`] (500 ms). Zero reports a deletion at once.
    pub fn delete_settle(mut self, settle: Duration) -> Self {
        self.delete_settle = settle;
        self
    }

    /// Polls the file every `interval` instead of watching its directory, for network
    /// filesystems (NFS, SMB, some FUSE mounts) that deliver no change notifications. Each
    /// poll reads the file and compares its content hash with the last one reported.
    pub fn poll(mut self, interval: Duration) -> Self {
        self.poll = Some(interval);
        self
    }

    /// Sets the size cap in bytes. A larger file is not read: the source returns
    /// [`SourceError::TooLarge`](sentinel_core::datasource::SourceError::TooLarge).
    ///
    /// Default [`DEFAULT_MAX_PAYLOAD_BYTES`] (4 MiB).
    pub fn max_payload_bytes(mut self, bytes: usize) -> Self {
        self.max_payload_bytes = bytes;
        self
    }

    /// The former name of [`max_payload_bytes`](Self::max_payload_bytes).
    #[deprecated(since = "0.1.1", note = "use max_payload_bytes")]
    pub fn max_size(self, bytes: usize) -> Self {
        self.max_payload_bytes(bytes)
    }

    /// Checks the settings and creates the source. Nothing is read or watched until the
    /// first [`read`](sentinel_core::datasource::ReadableDataSource::read).
    pub fn build(self) -> Result<FileSource, ConfigError> {
        if self.poll == Some(Duration::ZERO) {
            return Err(ConfigError::ZeroPollInterval);
        }
        if self.max_payload_bytes == 0 {
            return Err(ConfigError::ZeroMaxSize);
        }
        let (dir, file_name) = split(&self.path).ok_or_else(|| ConfigError::NoFileName {
            path: self.path.clone(),
        })?;
        Ok(FileSource::from_config(FileConfig {
            path: self.path,
            dir,
            file_name,
            debounce: self.debounce,
            delete_settle: self.delete_settle,
            poll: self.poll,
            max_payload_bytes: self.max_payload_bytes,
        }))
    }
}

/// Splits a path into the directory to watch and the file name in it. A bare file name lives
/// in the current directory.
fn split(path: &Path) -> Option<(PathBuf, OsString)> {
    let file_name = path.file_name()?.to_os_string();
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Some((dir, file_name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_directory_and_name() {
        let (dir, name) = split(Path::new("/etc/sentinel/rules.json")).expect("has a name");
        assert_eq!(dir, Path::new("/etc/sentinel"));
        assert_eq!(name, "rules.json");

        let (dir, name) = split(Path::new("rules.json")).expect("has a name");
        assert_eq!(dir, Path::new("."));
        assert_eq!(name, "rules.json");

        assert!(split(Path::new("/")).is_none());
        assert!(split(Path::new("")).is_none());
        assert!(split(Path::new("a/..")).is_none());
    }

    #[test]
    fn rejects_unusable_settings() {
        assert!(matches!(
            FileSource::builder("/").build(),
            Err(ConfigError::NoFileName { .. })
        ));
        assert!(matches!(
            FileSource::builder("r.json").poll(Duration::ZERO).build(),
            Err(ConfigError::ZeroPollInterval)
        ));
        assert!(matches!(
            FileSource::builder("r.json").max_payload_bytes(0).build(),
            Err(ConfigError::ZeroMaxSize)
        ));
    }
}
