//! Why a configuration was refused.

use sentinel_core::datasource::backend;

/// A configuration that [`RedisConfigBuilder::build`](super::RedisConfigBuilder::build) refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No server, sentinel or cluster node was given.
    #[error("a Redis server, Redis Sentinel or cluster address is required")]
    NoAddress,
    /// Addresses of two deployments were given (a server and sentinels, for example).
    #[error("choose one deployment: a server, Redis Sentinel or a cluster")]
    SeveralDeployments,
    /// An address is malformed.
    #[error("invalid Redis address {address:?}: {reason}")]
    InvalidAddress {
        /// The address as given.
        address: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The Redis Sentinel master name is empty.
    #[error("the Redis Sentinel master name is empty")]
    EmptyMasterName,
    /// The ACL user name is empty.
    #[error("the Redis user name is empty")]
    EmptyUser,
    /// A cluster has only database 0.
    #[error("Redis Cluster has only database 0, not {db}")]
    ClusterDatabase {
        /// The database that was asked for.
        db: i64,
    },
    /// The database index is negative.
    #[error("the Redis database index {db} is negative")]
    NegativeDatabase {
        /// The database that was asked for.
        db: i64,
    },
    /// A timeout or size limit is zero.
    #[error("{field} must be greater than zero")]
    Zero {
        /// The setting that is zero.
        field: &'static str,
    },
    /// Another shared setting is refused: half a login in the environment, a TLS PEM or
    /// file.
    #[error(transparent)]
    Settings(backend::ConfigError),
}

impl From<backend::ConfigError> for ConfigError {
    fn from(error: backend::ConfigError) -> Self {
        use backend::ConfigError as Shared;
        match error {
            Shared::NoAddress { .. } => Self::NoAddress,
            Shared::InvalidAddress {
                address, reason, ..
            } => Self::InvalidAddress { address, reason },
            Shared::EmptyUser => Self::EmptyUser,
            Shared::Zero { field } => Self::Zero { field },
            other => Self::Settings(other),
        }
    }
}
