//! A payload's content hash: what tells an unchanged payload from a new one (and is shown
//! in the status as `last_hash`).

use sha2::{Digest, Sha256};

use crate::datasource::source::RawPayload;

/// SHA-256 over every entry's key and value, length-prefixed so that entry boundaries count.
pub(super) fn content_hash(payload: &RawPayload) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update((payload.entries.len() as u64).to_le_bytes());
    for entry in &payload.entries {
        hasher.update((entry.key.len() as u64).to_le_bytes());
        hasher.update(entry.key.as_bytes());
        hasher.update((entry.value.len() as u64).to_le_bytes());
        hasher.update(&entry.value);
    }
    hasher.finalize().into()
}

/// Lower-case hexadecimal.
pub(super) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::RawEntry;

    #[test]
    fn hash_sees_entry_boundaries() {
        let a = RawPayload {
            entries: vec![RawEntry::new("k", "ab"), RawEntry::new("l", "c")],
            revision: None,
        };
        let b = RawPayload {
            entries: vec![RawEntry::new("k", "a"), RawEntry::new("l", "bc")],
            revision: None,
        };
        assert_ne!(content_hash(&a), content_hash(&b));
        assert_ne!(
            content_hash(&RawPayload::absent()),
            content_hash(&RawPayload::single("", ""))
        );
        assert_eq!(hex(&[0, 255, 16]), "00ff10");
    }

    #[test]
    fn hash_sees_keys() {
        // A renamed key with the same bytes may mean another family (keyed converters).
        let renamed = |key: &str| content_hash(&RawPayload::single(key, "[]"));
        assert_ne!(renamed("app-flow-rules"), renamed("app-degrade-rules"));
        assert_eq!(renamed("app-flow-rules"), renamed("app-flow-rules"));
    }
}
