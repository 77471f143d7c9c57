//! [`FileRuleWriter`]: writes rules to a local file atomically.

use std::io::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use sentinel_core::datasource::{Expected, SourceError, WritableDataSource, WriteError};

/// Writes rules to a local file, as a [`WritableDataSource`]: validated and encoded (see
/// [`encode_rules`](sentinel_core::datasource::encode_rules)), written to a temporary file in the same directory, flushed to disk,
/// then renamed over the rules file, and the directory flushed too. A [`FileSource`]
/// watching the file (or anything else reading it) sees the old content or the new, never a
/// partial file, and a crash leaves one of the two.
///
/// A file keeps no revisions: [`write_if`](WritableDataSource::write_if) answers
/// [`WriteError::NoRevisions`].
///
/// ```
/// use sentinel_core::datasource::{FlowJson, Converter, WritableDataSource};
/// use sentinel_core::{flow::FlowRule, RuleSet};
/// use sentinel_datasource_file::FileRuleWriter;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("flow-rules.json");
/// let writer = FileRuleWriter::new(&path);
/// let rules = RuleSet::new().with_flow(vec![FlowRule::qps("GET:/order", 20.0)]);
/// writer.write(&rules).await?;
/// assert_eq!(FlowJson::new().convert(&std::fs::read(&path)?)?, rules);
/// # Ok(())
/// # }
/// ```
///
/// [`FileSource`]: crate::FileSource
#[derive(Debug, Clone)]
pub struct FileRuleWriter {
    path: PathBuf,
}

impl FileRuleWriter {
    /// A writer of the rules file at `path` (its directory must exist).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The rules file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stores `bytes` atomically (see the type's docs), unchecked.
    pub async fn write_bytes(&self, bytes: Vec<u8>) -> Result<(), SourceError> {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || replace(&path, &bytes))
            .await
            .map_err(|e| SourceError::Backend {
                message: format!("writing {}: the writer task failed", self.path.display()),
                source: Some(Box::new(e)),
            })?
            .map_err(|e| SourceError::Backend {
                message: format!("writing {}", self.path.display()),
                source: Some(Box::new(e)),
            })
    }
}

/// Temporary file in the same directory, fsync, rename over `path`, fsync the directory.
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|e| e.error)?;
    // The rename itself is durable once the directory is flushed (where that is possible).
    if let Ok(dir) = std::fs::File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

#[async_trait]
impl WritableDataSource for FileRuleWriter {
    fn describe(&self) -> String {
        format!("file {}", self.path.display())
    }

    async fn store(&self, bytes: Vec<u8>, expected: Expected) -> Result<Option<u64>, WriteError> {
        if expected != Expected::Anything {
            return Err(WriteError::NoRevisions {
                target: self.describe(),
            });
        }
        self.write_bytes(bytes).await?;
        Ok(None)
    }
}
