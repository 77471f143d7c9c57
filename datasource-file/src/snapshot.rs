//! Reading the file once: its bytes and their SHA-256, within the size cap.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use sentinel_core::datasource::SourceError;
use sha2::{Digest, Sha256};

/// What the file held at one moment.
#[derive(Debug)]
pub(crate) enum Snapshot {
    /// The path does not exist (or a symlink on it points nowhere).
    Missing,
    /// The file's bytes and their SHA-256.
    Content { bytes: Vec<u8>, hash: [u8; 32] },
}

/// What the source last reported, kept to report only changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    Missing,
    Content([u8; 32]),
    /// Over the size cap, at this size: reported once, not again until it changes.
    Oversized(usize),
}

impl Snapshot {
    /// True when the file is missing or empty: states a save passes through, which are
    /// reported only once they last past the settle delay.
    pub(crate) fn is_vacant(&self) -> bool {
        match self {
            Snapshot::Missing => true,
            Snapshot::Content { bytes, .. } => bytes.is_empty(),
        }
    }

    pub(crate) fn seen(&self) -> Seen {
        match self {
            Snapshot::Missing => Seen::Missing,
            Snapshot::Content { hash, .. } => Seen::Content(*hash),
        }
    }
}

/// Reads the file on the blocking pool.
pub(crate) async fn take(path: PathBuf, max_size: usize) -> Result<Snapshot, SourceError> {
    tokio::task::spawn_blocking(move || take_blocking(&path, max_size))
        .await
        .map_err(|e| SourceError::backend("the file read task failed", e))?
}

fn take_blocking(path: &Path, max_size: usize) -> Result<Snapshot, SourceError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Snapshot::Missing),
        Err(e) => return Err(io_error(path, "open", e)),
    };
    // The size of the opened file, not of the path: a rename after the open does not matter.
    let meta = file.metadata().map_err(|e| io_error(path, "stat", e))?;
    if !meta.is_file() {
        return Err(SourceError::Backend {
            message: format!("{} is not a regular file", path.display()),
            source: None,
        });
    }
    let limit = max_size;
    if meta.len() > limit as u64 {
        return Err(SourceError::TooLarge {
            size: usize::try_from(meta.len()).unwrap_or(usize::MAX),
            limit,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // One byte past the cap tells a file that grew since the stat.
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(path, "read", e))?;
    if bytes.len() > limit {
        return Err(SourceError::TooLarge {
            size: bytes.len(),
            limit,
        });
    }
    let hash = Sha256::digest(&bytes).into();
    Ok(Snapshot::Content { bytes, hash })
}

fn io_error(path: &Path, action: &str, error: io::Error) -> SourceError {
    let message = format!("cannot {action} {}: {error}", path.display());
    if error.kind() == io::ErrorKind::PermissionDenied {
        SourceError::PermissionDenied { message }
    } else {
        SourceError::backend(message, error)
    }
}

/// Lower-case hex of a hash, used as the payload revision.
pub(crate) fn hex(hash: &[u8; 32]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(64);
    for byte in hash {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_of_sha256() {
        let hash: [u8; 32] = Sha256::digest(b"abc").into();
        assert_eq!(
            hex(&hash),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn reads_within_the_cap_and_refuses_past_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("rules.json");
        assert!(matches!(take_blocking(&path, 8), Ok(Snapshot::Missing)));

        std::fs::write(&path, b"12345678").expect("write");
        match take_blocking(&path, 8) {
            Ok(Snapshot::Content { bytes, .. }) => assert_eq!(bytes, b"12345678"),
            other => panic!("expected content, got {other:?}"),
        }
        assert!(matches!(
            take_blocking(&path, 7),
            Err(SourceError::TooLarge { size: 8, limit: 7 })
        ));
        assert!(matches!(
            take_blocking(dir.path(), 8),
            Err(SourceError::Backend { .. })
        ));
    }
}
