//! Converting a payload's entries: each with its converter (by entry key), validated unless
//! the converter did, merged into one rule set; and what a rejected payload leaves in the
//! source's status.

use std::time::SystemTime;

use super::error::DataSourceError;
use super::task::Driver;
use crate::datasource::converter::Converter;
use crate::datasource::source::RawPayload;
use crate::rule_set::RuleSet;
use crate::rules::{rules_in, RuleError, RuleIssue};

/// What converting a payload's entries gave: the rules, the issues of the rules lenient
/// mode skipped, how many rules those are, and the warnings.
pub(super) type ConvertedEntries = (RuleSet, Vec<RuleIssue>, usize, Vec<RuleIssue>);

impl Driver {
    /// Converts each entry and validates it (unless its converter did), naming errors after
    /// the entry's key, and merges the entries into one set.
    pub(super) fn convert(&self, payload: &RawPayload) -> Result<ConvertedEntries, RuleError> {
        let mut set = RuleSet::new();
        let mut skipped = Vec::new();
        let mut warnings = Vec::new();
        // Counted per entry: indexes restart in each.
        let mut skipped_rules = 0;
        for entry in &payload.entries {
            let label = if entry.key.is_empty() {
                self.name.as_str()
            } else {
                entry.key.as_str()
            };
            let converter = self
                .keyed
                .iter()
                .find(|(key, _)| *key == entry.key)
                .map_or(&self.converter, |(_, converter)| converter);
            let converted = converter
                .convert_with(&entry.value, self.validation)
                .map_err(|error| error.with_payload(label))?;
            let mut entry_skipped = converted.skipped;
            warnings.extend(converted.warnings);
            let value = if converted.validated {
                converted.value
            } else {
                let (value, mut found) =
                    converted.value.checked(self.validation).map_err(|issues| {
                        RuleError::Invalid {
                            payload: label.to_owned(),
                            issues,
                        }
                    })?;
                entry_skipped.append(&mut found);
                value
            };
            skipped_rules += rules_in(&entry_skipped);
            skipped.append(&mut entry_skipped);
            set.merge(value);
        }
        Ok((set, skipped, skipped_rules, warnings))
    }

    /// A payload the conversion or the engine refused: counted and reported in the
    /// status; the rules in force stay.
    pub(super) fn rejected(
        &self,
        error: RuleError,
        payload: &RawPayload,
        hash_hex: String,
    ) -> DataSourceError {
        tracing::error!(source = %self.name, %error, "the stored payload is rejected; the rules in force stay");
        self.status.send_modify(|s| {
            s.rejected_count += 1;
            s.store_rejected = true;
            s.last_error = Some(error.to_string());
            s.last_rejected_at = Some(SystemTime::now());
            s.rejected_hash = Some(hash_hex.clone());
            s.rejected_revision = payload.revision.clone();
            s.last_hash = Some(hash_hex);
            s.last_revision = payload.revision.clone();
        });
        DataSourceError::Rejected {
            name: self.name.clone(),
            source: error,
        }
    }
}
