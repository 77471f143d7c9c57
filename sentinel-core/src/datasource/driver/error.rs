//! Why a data source could not start.

use crate::datasource::source::SourceError;
use crate::rules::RuleError;

/// Why a data source could not start. `Display` names the data source and the cause (what
/// the backend or the converter said: `permission denied: ...`, a missing
/// `notify-keyspace-events`, `no credentials`...); the cause is also
/// [`source`](std::error::Error::source), for code that walks the chain.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataSourceError {
    /// The backend failed (unreachable, denied, payload too large...).
    #[error("data source {name}: the store could not be read: {source}")]
    Source {
        /// The data source.
        name: String,
        /// The backend's error.
        #[source]
        source: SourceError,
    },
    /// The stored payload was not applied.
    #[error("data source {name}: the stored rules were rejected: {source}")]
    Rejected {
        /// The data source.
        name: String,
        /// Why the rules were rejected.
        #[source]
        source: RuleError,
    },
    /// `start` was called outside a Tokio runtime.
    #[error("data source {name}: must be started inside a Tokio runtime")]
    NoRuntime {
        /// The data source.
        name: String,
    },
    /// Another running source of this engine has the same name: the two would replace each
    /// other's rules. Give one a distinct [`name`](crate::datasource::DataSourceBuilder::name), or close the
    /// other first.
    #[error("data source {name}: another running source of this engine has this name")]
    DuplicateName {
        /// The data source.
        name: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cause is in `Display`, for every backend (they all report through these).
    #[test]
    fn the_cause_of_a_start_error_is_displayed() {
        let denied = DataSourceError::Source {
            name: "rules".into(),
            source: SourceError::PermissionDenied {
                message: "NoPerm for key rules".into(),
            },
        };
        let text = denied.to_string();
        assert!(
            text.contains("data source rules") && text.contains("NoPerm"),
            "{text}"
        );
        let rejected = DataSourceError::Rejected {
            name: "rules".into(),
            source: crate::wire::format_error("JSON", "expected value".into()),
        };
        assert!(
            rejected.to_string().contains("expected value"),
            "{rejected}"
        );
    }
}
