//! [`EtcdRuleWriter`]: writes rule payloads to etcd, for tools, dashboards and tests.

use std::fmt;

use etcd_client::Client;
use sentinel_core::datasource::SourceError;
use sentinel_core::{RuleError, RuleIssue, RuleSet};

use crate::config::EtcdConfig;
use crate::error::{map_error, timed_out};

/// Why [`EtcdRuleWriter::put_rules`] stored nothing.
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
    /// etcd refused the write or could not be reached.
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

/// Writes rule payloads to etcd.
///
/// - [`put_rules`](Self::put_rules) validates a [`RuleSet`] and stores it in the format the
///   converters read: a single-family set as that family's Sentinel JSON list (for
///   [`FlowJson`](sentinel_core::datasource::FlowJson) and its siblings), a set of several
///   families as the combined document `{"flow":[...],"degrade":[...]}` (for
///   [`CombinedJson`](sentinel_core::datasource::CombinedJson)).
/// - [`put_bytes`](Self::put_bytes) stores bytes as given, unchecked.
#[derive(Clone)]
pub struct EtcdRuleWriter {
    config: EtcdConfig,
    client: Client,
}

impl fmt::Debug for EtcdRuleWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdRuleWriter")
            .field("endpoints", &self.config.endpoints)
            .finish_non_exhaustive()
    }
}

impl EtcdRuleWriter {
    /// Connects (and authenticates, with credentials).
    pub async fn connect(config: EtcdConfig) -> Result<Self, SourceError> {
        let timeout = config.connect_timeout + config.request_timeout;
        let client = match tokio::time::timeout(timeout, config.connect()).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return Err(map_error("connect", e).0),
            Err(_) => return Err(timed_out("connect", timeout)),
        };
        Ok(Self { config, client })
    }

    /// Validates every rule of `rules`, encodes the set (see [`encode_rules`]) and stores it
    /// under `key`. Returns the new store revision.
    ///
    /// An invalid set is refused whole with [`WriteError::Invalid`], naming every bad rule;
    /// nothing is written then.
    pub async fn put_rules(
        &self,
        key: impl Into<String>,
        rules: &RuleSet,
    ) -> Result<i64, WriteError> {
        let key = key.into();
        let bytes = encode_rules(&key, rules)?;
        Ok(self.put_bytes(key, bytes).await?)
    }

    /// Stores `value` under `key`, unchecked, and returns the new store revision.
    pub async fn put_bytes(
        &self,
        key: impl Into<String>,
        value: impl Into<Vec<u8>>,
    ) -> Result<i64, SourceError> {
        let key = key.into();
        let op = format!("put {key}");
        let mut kv = self
            .client
            .kv_client()
            .max_encoding_message_size(self.config.max_message_bytes());
        let resp = self.bounded(&op, kv.put(key, value, None)).await?;
        Ok(resp.header().map_or(0, |h| h.revision()))
    }

    /// Deletes `key` and returns the new store revision (unchanged when the key did not exist).
    pub async fn delete(&self, key: impl Into<String>) -> Result<i64, SourceError> {
        let key = key.into();
        let op = format!("delete {key}");
        let mut kv = self.client.kv_client();
        let resp = self.bounded(&op, kv.delete(key, None)).await?;
        Ok(resp.header().map_or(0, |h| h.revision()))
    }

    /// Compacts the store's history up to `revision`: watches that start at or before it are
    /// cancelled by etcd. Returns the store revision.
    pub async fn compact(&self, revision: i64) -> Result<i64, SourceError> {
        let op = format!("compact {revision}");
        let mut kv = self.client.kv_client();
        let resp = self.bounded(&op, kv.compact(revision, None)).await?;
        Ok(resp.header().map_or(0, |h| h.revision()))
    }

    async fn bounded<T>(
        &self,
        op: &str,
        fut: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, SourceError> {
        let timeout = self.config.request_timeout;
        match tokio::time::timeout(timeout, fut).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(map_error(op, e).0),
            Err(_) => Err(timed_out(op, timeout)),
        }
    }
}

/// Validates `rules` and encodes them as [`EtcdRuleWriter::put_rules`] stores them: a set of
/// one family as that family's Sentinel JSON list, a set of several as the combined document.
/// `key` only names the payload in errors.
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
    use sentinel_core::datasource::{CombinedJson, Converter, FlowJson};
    use sentinel_core::flow::FlowRule;
    use sentinel_core::system::SystemRule;
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
