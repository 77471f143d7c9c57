//! The write side of a store: [`WritableDataSource`], what every backend's writer shares
//! (validating and encoding a [`RuleSet`] before it is stored), and the error of a refused
//! write.

use async_trait::async_trait;

use crate::rule_set::RuleSet;
use crate::rules::{RuleError, RuleIssue};

use super::SourceError;

/// Why a rule writer (`put_rules` of a backend's writer) stored nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The set carries no rule family, so there is nothing to store. (An empty list of one
    /// family is a valid set: it clears that family.)
    #[error("put {key}: the rule set carries no rule family")]
    Empty {
        /// The key that was to be written.
        key: String,
    },
    /// One or more rules are invalid; [`RuleError::issues`] lists every problem.
    #[error("put {key}: the rules are invalid")]
    Invalid {
        /// The key that was to be written.
        key: String,
        /// The validation error ([`RuleError::Invalid`]).
        #[source]
        source: RuleError,
    },
    /// The rules could not be encoded as JSON (a non-finite number, for example).
    #[error("put {key}: cannot encode the rules as JSON")]
    Encode {
        /// The key that was to be written.
        key: String,
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// A compare-and-set write found another revision than the one expected: someone else
    /// wrote in between. Read again, merge, and retry.
    #[error("put {key}: the stored revision is not {expected} any more (someone else wrote)")]
    Conflict {
        /// The key that was to be written.
        key: String,
        /// The revision the write expected.
        expected: u64,
    },
    /// A compare-and-set write to a store that keeps no revisions (a file, a Nacos config).
    #[error("{target}: the store keeps no revisions, so it cannot compare-and-set")]
    NoRevisions {
        /// What was to be written ([`WritableDataSource::describe`]).
        target: String,
    },
    /// The store refused the write or could not be reached.
    #[error(transparent)]
    Store(#[from] SourceError),
}

impl WriteError {
    /// The validation issues, if the set was refused as invalid.
    pub fn issues(&self) -> &[RuleIssue] {
        match self {
            WriteError::Invalid { source, .. } => source.issues(),
            _ => &[],
        }
    }
}

/// How [`WritableDataSource::write_as`] encodes a rule set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Encoding {
    /// A set of one family as that family's Sentinel JSON list (what
    /// [`FlowJson`](super::FlowJson) and its siblings read), several as the combined document
    /// (what [`CombinedJson`](super::CombinedJson) reads): [`encode_rules`].
    #[default]
    Auto,
    /// Always the combined document `{"flow": [...], ...}`, for a key read with
    /// [`CombinedJson`](super::CombinedJson).
    Combined,
}

/// What a store write expects to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// Anything: the write replaces what is stored.
    Anything,
    /// This revision (`None`: nothing stored), or the write is a [`WriteError::Conflict`].
    Revision(Option<u64>),
}

/// The write side of a store: the key (or file) that a [`ReadableDataSource`] reads, written.
///
/// Implemented by every backend: `FileRuleWriter` (a temporary file, fsync, then a rename,
/// so a watcher never reads a partial file), and a target of the etcd, Redis, Nacos and NATS
/// writers (`EtcdRuleWriter::at(key)` and so on). Tools (the `sentinel-rules` CLI, a
/// dashboard) write through it without knowing the store.
///
/// A backend implements [`store`](Self::store) (bytes, with an optional compare-and-set) and
/// [`revision`](Self::revision); the trait's [`write`](Self::write),
/// [`write_as`](Self::write_as) and [`write_if`](Self::write_if) validate first (an invalid
/// set is refused whole, [`WriteError::Invalid`] naming every bad rule, and nothing is
/// stored) and encode the set as the converters read it.
///
/// [`ReadableDataSource`]: super::ReadableDataSource
#[async_trait]
pub trait WritableDataSource: Send + Sync {
    /// What this writes to, for messages: the store and the key, never a secret.
    fn describe(&self) -> String;

    /// Stores `bytes` as given, unchecked, if the store holds what `expected` says. Returns
    /// the store's revision after the write, for a store that keeps revisions. A store
    /// without revisions answers [`WriteError::NoRevisions`] to [`Expected::Revision`].
    async fn store(&self, bytes: Vec<u8>, expected: Expected) -> Result<Option<u64>, WriteError>;

    /// The revision stored now, which [`write_if`](Self::write_if) compares: `None` when
    /// nothing is stored or the store keeps no revisions.
    async fn revision(&self) -> Result<Option<u64>, SourceError> {
        Ok(None)
    }

    /// Validates and stores `rules` ([`Encoding::Auto`]).
    async fn write(&self, rules: &RuleSet) -> Result<Option<u64>, WriteError> {
        self.write_as(rules, Encoding::Auto, Expected::Anything)
            .await
    }

    /// Like [`write`](Self::write), but only if the stored revision is still `expected`
    /// (`None`: only if nothing is stored): someone else's write in between makes it
    /// [`WriteError::Conflict`].
    async fn write_if(
        &self,
        rules: &RuleSet,
        expected: Option<u64>,
    ) -> Result<Option<u64>, WriteError> {
        self.write_as(rules, Encoding::Auto, Expected::Revision(expected))
            .await
    }

    /// Validates `rules`, encodes them as `encoding` says and stores them if the store holds
    /// what `expected` says.
    async fn write_as(
        &self,
        rules: &RuleSet,
        encoding: Encoding,
        expected: Expected,
    ) -> Result<Option<u64>, WriteError> {
        let bytes = encode_rules_as(&self.describe(), rules, encoding)?;
        self.store(bytes, expected).await
    }
}

/// [`encode_rules`], or always the combined document with [`Encoding::Combined`].
pub fn encode_rules_as(
    key: &str,
    rules: &RuleSet,
    encoding: Encoding,
) -> Result<Vec<u8>, WriteError> {
    let auto = encode_rules(key, rules)?;
    if encoding == Encoding::Auto || rules.families().len() > 1 {
        return Ok(auto);
    }
    rules
        .to_combined_json()
        .map_err(|source| WriteError::Encode {
            key: key.to_owned(),
            source,
        })
}

/// Validates `rules` and encodes them as every backend's `put_rules` stores them: a set of one
/// family as that family's Sentinel JSON list (what [`FlowJson`](super::FlowJson) and its
/// siblings read), a set of several as the combined document `{"flow":[...],...}` (what
/// [`CombinedJson`](super::CombinedJson) reads). `key` only names the payload in errors.
///
/// An invalid set is refused whole with [`WriteError::Invalid`], naming every bad rule.
pub fn encode_rules(key: &str, rules: &RuleSet) -> Result<Vec<u8>, WriteError> {
    if rules.families().is_empty() {
        return Err(WriteError::Empty {
            key: key.to_owned(),
        });
    }
    let issues = rules.validate();
    if !issues.is_empty() {
        return Err(WriteError::Invalid {
            key: key.to_owned(),
            source: RuleError::Invalid {
                payload: key.to_owned(),
                issues,
            },
        });
    }
    rules.to_json().map_err(|source| WriteError::Encode {
        key: key.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::{CombinedJson, Converter, FlowJson};
    use crate::flow::FlowRule;
    use crate::system::SystemRule;
    use serde_json::Value;

    #[test]
    fn one_family_is_a_plain_list_that_flow_json_reads_back() {
        let set = RuleSet::new().with_flow(vec![FlowRule::qps("GET:/order", 5.0)]);
        let bytes = encode_rules("/k", &set).expect("valid");
        assert!(
            bytes.starts_with(b"["),
            "{}",
            String::from_utf8_lossy(&bytes)
        );
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains(r#""resource":"GET:/order""#), "{text}");
        assert!(text.contains(r#""controlBehavior""#), "camelCase: {text}");
        let back = FlowJson::new().convert(&bytes).expect("reads back");
        assert_eq!(back, set);
    }

    #[test]
    fn several_families_are_a_combined_document() {
        let set = RuleSet::new()
            .with_flow(vec![FlowRule::qps("a", 1.0)])
            .with_system(Vec::<SystemRule>::new());
        let bytes = encode_rules("/k", &set).expect("valid");
        let doc: Value = serde_json::from_slice(&bytes).expect("json");
        assert!(
            doc.get("flow").is_some() && doc.get("system").is_some(),
            "{doc}"
        );
        let back = CombinedJson::new().convert(&bytes).expect("reads back");
        assert_eq!(back, set);
    }

    #[test]
    fn invalid_rules_are_refused_with_every_issue() {
        let set = RuleSet::new().with_flow(vec![
            FlowRule::qps("ok", 1.0),
            FlowRule::qps("", 1.0),
            FlowRule::qps("neg", -1.0),
        ]);
        let err = encode_rules("/k", &set).expect_err("invalid");
        assert!(matches!(err, WriteError::Invalid { .. }), "{err:?}");
        let issues = err.issues();
        assert_eq!(issues.len(), 2, "{issues:?}");
        assert_eq!((issues[0].index, issues[0].field.as_str()), (1, "resource"));
        assert_eq!((issues[1].index, issues[1].field.as_str()), (2, "count"));
        assert!(err.to_string().contains("/k"), "{err}");
    }

    #[test]
    fn a_set_without_families_is_refused() {
        let err = encode_rules("/k", &RuleSet::new()).expect_err("empty");
        assert!(matches!(err, WriteError::Empty { .. }), "{err:?}");
    }
}
