//! Where a configuration points: a host and port, and the deployment (one server, Redis
//! Sentinel, a cluster).

use std::fmt;

use sentinel_core::datasource::backend::{parse_address, AddressRules};

use super::error::ConfigError;

/// The port when neither the address nor its rules give one (the rules always do).
const DEFAULT_PORT: u16 = 6379;

/// A host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Address {
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl Address {
    /// Parses `host:port`, `host`, `[v6]:port` or `[v6]`, with an optional `redis://` prefix,
    /// under `rules` (which give the default port).
    pub(crate) fn parse(text: &str, rules: &AddressRules) -> Result<Self, ConfigError> {
        let address = parse_address(text.trim(), rules)?;
        Ok(Self {
            host: address.host,
            port: address.port.unwrap_or(DEFAULT_PORT),
        })
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Where the rules live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Deployment {
    /// One server (or a proxy in front of several).
    Server(Address),
    /// The master that these Redis Sentinels name, looked up again on every reconnect.
    Sentinel {
        sentinels: Vec<Address>,
        master: String,
    },
    /// A Redis Cluster reached through any of these nodes.
    #[cfg(feature = "cluster")]
    Cluster(Vec<Address>),
}

impl fmt::Display for Deployment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |list: &[Address]| {
            list.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        match self {
            Deployment::Server(a) => write!(f, "{a}"),
            Deployment::Sentinel { sentinels, master } => {
                write!(f, "master {master} of sentinels {}", join(sentinels))
            }
            #[cfg(feature = "cluster")]
            Deployment::Cluster(nodes) => write!(f, "cluster {}", join(nodes)),
        }
    }
}
