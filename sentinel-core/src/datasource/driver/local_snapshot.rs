//! The driver's local snapshot: written after each applied payload, applied when the first
//! payload is rejected (unless `StartMode::FailFast`) or, with `StartMode::Snapshot`, when
//! the first read fails. Kept by default in a documented place
//! ([`default_snapshot_dir`]), one file per source.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::hash::hex;
use super::task::Driver;
use crate::datasource::snapshot;
use crate::engine::Incoming;
use crate::rule_set::RuleSet;
use crate::rules::rules_in;

/// The environment variable that names the folder of the default snapshots.
pub const SNAPSHOT_DIR_ENV: &str = "SENTINEL_SNAPSHOT_DIR";

/// The folder where a source keeps its snapshot when none is named: `$SENTINEL_SNAPSHOT_DIR`
/// when set, else `$HOME/.sentinel/snapshots`, else `sentinel-snapshots` in the system's
/// temporary folder. Each source has its own file there
/// ([`SourceStatus::snapshot_file`](crate::datasource::SourceStatus::snapshot_file) names it).
pub fn default_snapshot_dir() -> PathBuf {
    snapshot_dir_from(std::env::var_os(SNAPSHOT_DIR_ENV), std::env::var_os("HOME"))
}

/// [`default_snapshot_dir`] for the values of the two variables.
fn snapshot_dir_from(dir: Option<OsString>, home: Option<OsString>) -> PathBuf {
    match (
        dir.filter(|d| !d.is_empty()),
        home.filter(|h| !h.is_empty()),
    ) {
        (Some(dir), _) => PathBuf::from(dir),
        (None, Some(home)) => PathBuf::from(home).join(".sentinel").join("snapshots"),
        (None, None) => std::env::temp_dir().join("sentinel-snapshots"),
    }
}

/// The default snapshot file of a source named `name` reading `backend` (its
/// `describe()`, which holds no secret) in `dir`: the name, made safe for a file name and
/// cut to 64 characters, then 16 hex digits of a hash of both, so two sources of one name on
/// different stores or keys never share a file.
pub(super) fn snapshot_path_in(dir: &Path, name: &str, backend: &str) -> PathBuf {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let mut hasher = Sha256::new();
    hasher.update(name.as_bytes());
    hasher.update([0]);
    hasher.update(backend.as_bytes());
    let digest: [u8; 32] = hasher.finalize().into();
    dir.join(format!("{safe}-{}.json", hex(&digest[..8])))
}

impl Driver {
    /// Writes the applied set to `path`, noting a failure in the status.
    pub(super) async fn write_snapshot(&mut self, path: &Path, set: &RuleSet) {
        let result = async {
            let bytes = snapshot::encode(set).map_err(std::io::Error::other)?;
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                tokio::fs::create_dir_all(dir).await?;
            }
            snapshot::write_atomic(path, bytes).await
        }
        .await;
        let error = result
            .err()
            .map(|e| format!("writing {}: {e}", path.display()));
        if let Some(error) = &error {
            tracing::warn!(source = %self.name, %error, "snapshot not written");
        }
        self.status.send_if_modified(|s| {
            let changed = s.snapshot_error != error;
            s.snapshot_error = error;
            changed
        });
    }

    /// Applies the local snapshot, if there is one.
    pub(super) async fn load_snapshot(&mut self) {
        let Some(path) = self.snapshot_file.clone() else {
            tracing::warn!(source = %self.name, "no snapshot file configured; starting without rules from this source");
            return;
        };
        let bytes = match snapshot::read(&path).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                tracing::warn!(source = %self.name, path = %path.display(), "no snapshot yet; starting without rules from this source");
                return;
            }
            Err(error) => {
                let error = format!("reading {}: {error}", path.display());
                tracing::warn!(source = %self.name, %error, "snapshot not read");
                self.status.send_modify(|s| s.snapshot_error = Some(error));
                return;
            }
        };
        let applied = snapshot::decode(&bytes, self.validation).and_then(|(set, skipped)| {
            let skipped_rules = rules_in(&skipped);
            let incoming = Incoming::checked(set, skipped, skipped_rules).replacing_source();
            self.sentinel
                .apply(&self.name, &path.display().to_string(), incoming)
        });
        match applied {
            Ok(report) => {
                tracing::info!(source = %self.name, path = %path.display(), "rules applied from the local snapshot");
                let owned = self.owned_families();
                self.status.send_modify(|s| {
                    s.from_snapshot = true;
                    s.rules_version = Some(report.version);
                    s.shadow_rules = report.shadow_rules;
                    s.families = owned;
                    s.snapshot_error = None;
                });
            }
            Err(error) => {
                let error = format!("{}: {error}", path.display());
                tracing::warn!(source = %self.name, %error, "snapshot not applied");
                self.status.send_modify(|s| s.snapshot_error = Some(error));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_folder_is_the_variable_then_home_then_temp() {
        let dir = snapshot_dir_from(Some("/srv/snapshots".into()), Some("/home/app".into()));
        assert_eq!(dir, PathBuf::from("/srv/snapshots"));
        let home = snapshot_dir_from(Some("".into()), Some("/home/app".into()));
        assert_eq!(home, PathBuf::from("/home/app/.sentinel/snapshots"));
        let temp = snapshot_dir_from(None, None);
        assert_eq!(temp, std::env::temp_dir().join("sentinel-snapshots"));
    }

    #[test]
    fn each_source_and_store_has_its_own_file() {
        let dir = Path::new("/snapshots");
        let a = snapshot_path_in(dir, "flow rules", "etcd key /rules/flow at http://a:2379");
        let b = snapshot_path_in(dir, "flow rules", "etcd key /rules/flow at http://b:2379");
        assert_ne!(a, b);
        let name = a.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        assert!(
            name.starts_with("flow_rules-") && name.ends_with(".json"),
            "{name}"
        );
        let long = snapshot_path_in(dir, &"x/".repeat(100), "memory key k");
        let name = long
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        assert_eq!(name.len(), 64 + 1 + 16 + 5, "{name}");
        assert!(!name.contains('/'));
    }
}
