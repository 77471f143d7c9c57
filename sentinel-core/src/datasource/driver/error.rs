//! Why a data source could not start.

use crate::datasource::source::SourceError;
use crate::rules::RuleError;

/// Why a data source could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataSourceError {
    /// The backend failed (unreachable, denied, payload too large...).
    #[error("data source {name}: the store could not be read")]
    Source {
        /// The data source.
        name: String,
        /// The backend's error.
        #[source]
        source: SourceError,
    },
    /// The stored payload was not applied.
    #[error("data source {name}: the stored rules were rejected")]
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
