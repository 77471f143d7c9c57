//! [`FileSourceBuilder`]: how a [`FileSource`] is made, and the checks its settings pass.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{
    ConfigError, FileConfig, DEFAULT_DEBOUNCE, DEFAULT_DELETE_SETTLE, DEFAULT_MAX_PAYLOAD_BYTES,
};
use crate::source::FileSource;

impl FileSource {
    /// A source for `path` with default settings. Same as `FileSource::builder(path).build()`.
    pub fn new(path: impl Into<PathBuf>) -> Result<Self, ConfigError> {
        Self::builder(path).build()
    }

    /// A builder for a source reading `path`.
    pub fn builder(path: impl Into<PathBuf>) -> FileSourceBuilder {
        FileSourceBuilder::new(path.into())
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
