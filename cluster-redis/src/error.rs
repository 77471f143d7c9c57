//! Why a backend cannot start.

/// Why the backend cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// `start` was called outside a tokio runtime.
    #[error("the Redis cluster backend must be started inside a tokio runtime")]
    NoRuntime,
    /// A setting is out of range.
    #[error("invalid cluster backend setting {field}: {message}")]
    Config {
        /// The setting.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
}
