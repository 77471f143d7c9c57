//! The local snapshot: the last rules a source applied, kept in a file so that a restart with
//! the server down can start from them.
//!
//! The file holds a combined document (see [`CombinedJson`](super::CombinedJson)) carrying
//! every family the source owns, so it is readable by hand and by the same converter. It is
//! written atomically: to a temporary file in the same directory, flushed, then renamed over
//! the old one, so a crash never leaves half a file.

use std::io;
use std::path::{Path, PathBuf};

use crate::rule_set::RuleSet;
use crate::rules::{RuleError, RuleIssue, Validation};

/// Encodes a rule set as a combined document.
pub(crate) fn encode(set: &RuleSet) -> Result<Vec<u8>, serde_json::Error> {
    set.to_combined_json()
}

/// Decodes a snapshot file's content, validated; lenient mode returns what it skipped.
pub(crate) fn decode(
    bytes: &[u8],
    validation: Validation,
) -> Result<(RuleSet, Vec<RuleIssue>), RuleError> {
    // A snapshot is this crate's own output: unknown keys are not worth a warning.
    RuleSet::from_combined_json(bytes, validation, crate::rules::KeyPolicy::Warn)
        .map(|loaded| (loaded.set, loaded.skipped))
}

/// Writes `bytes` to `path` atomically (temporary file in the same directory, then rename).
pub(crate) async fn write_atomic(path: &Path, bytes: Vec<u8>) -> io::Result<()> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || write_atomic_blocking(&path, &bytes))
        .await
        .map_err(io::Error::other)?
}

fn write_atomic_blocking(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "snapshot path has no file name",
        )
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    tmp_name.push(format!(
        ".{}.{:08x}.tmp",
        std::process::id(),
        rand::random::<u32>()
    ));
    let tmp = dir.join(tmp_name);
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Reads a snapshot file. `Ok(None)` when there is none.
pub(crate) async fn read(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match tokio::fs::read(path).await {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::FlowRule;

    #[tokio::test]
    async fn round_trip() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("rules.json");
        let set = RuleSet::new().with_flow(vec![FlowRule::qps("a", 3.0).relate("b")]);
        let bytes = encode(&set).expect("encodes");
        write_atomic(&path, bytes).await.expect("written");
        write_atomic(&path, encode(&set).expect("encodes"))
            .await
            .expect("rewritten");
        let read_back = read(&path).await.expect("read").expect("present");
        assert_eq!(
            decode(&read_back, Validation::Strict).ok().map(|(s, _)| s),
            Some(set)
        );
        let leftovers = std::fs::read_dir(dir.path())
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(leftovers, 1, "no temporary files left behind");
        assert!(read(&dir.path().join("none")).await.expect("ok").is_none());
    }
}
