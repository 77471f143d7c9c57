//! Where a configuration points: a host and port, and the deployment (one server, Redis
//! Sentinel, a cluster).

use std::fmt;

use super::error::ConfigError;

/// A host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Address {
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl Address {
    /// Parses `host:port`, `host`, `[v6]:port` or `[v6]`, with an optional `redis://` prefix.
    pub(crate) fn parse(text: &str, default_port: u16) -> Result<Self, ConfigError> {
        let invalid = |reason| ConfigError::InvalidAddress {
            address: text.to_owned(),
            reason,
        };
        let rest = text.trim();
        let rest = rest.strip_prefix("redis://").unwrap_or(rest);
        let rest = rest.trim_end_matches('/');
        if rest.contains('@') {
            return Err(invalid(
                "credentials belong in the builder (credentials or password), not in the address",
            ));
        }
        if rest.contains("://") {
            return Err(invalid("only host:port or redis://host:port is accepted"));
        }
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (host, tail) = v6.split_once(']').ok_or_else(|| invalid("unclosed '['"))?;
            match tail.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None if tail.is_empty() => (host, None),
                None => return Err(invalid("unexpected text after ']'")),
            }
        } else {
            match rest.rsplit_once(':') {
                Some((_, _)) if rest.matches(':').count() > 1 => {
                    return Err(invalid("write an IPv6 address as [addr]:port"))
                }
                Some((host, port)) => (host, Some(port)),
                None => (rest, None),
            }
        };
        if host.is_empty() {
            return Err(invalid("empty host"));
        }
        let port = match port {
            Some(p) => p.parse::<u16>().map_err(|_| invalid("bad port"))?,
            None => default_port,
        };
        if port == 0 {
            return Err(invalid("port 0"));
        }
        Ok(Self {
            host: host.to_owned(),
            port,
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
