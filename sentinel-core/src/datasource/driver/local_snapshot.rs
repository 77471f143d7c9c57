//! The driver's local snapshot: written after each applied payload, applied when the first
//! read fails (or is rejected) with `StartMode::Snapshot`.

use std::path::Path;

use super::task::Driver;
use crate::datasource::snapshot;
use crate::engine::Incoming;
use crate::rule_set::RuleSet;
use crate::rules::rules_in;

impl Driver {
    /// Writes the applied set to `path`, noting a failure in the status.
    pub(super) async fn write_snapshot(&mut self, path: &Path, set: &RuleSet) {
        let result = match snapshot::encode(set) {
            Ok(bytes) => snapshot::write_atomic(path, bytes).await,
            Err(error) => Err(std::io::Error::other(error)),
        };
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
