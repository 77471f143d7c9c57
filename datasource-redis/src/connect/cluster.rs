//! Redis Cluster (feature `cluster`): the cluster client, and the shard that serves a key.

use redis::{IntoConnectionInfo, RedisResult};
use sentinel_core::datasource::SourceError;

use super::{Commands, Connector};
use crate::config::Address;
use crate::error::map_error;

impl Connector {
    pub(super) fn cluster_client(
        &self,
        nodes: &[Address],
    ) -> Result<redis::cluster::ClusterClient, SourceError> {
        let op = format!("connect {}", self.config.deployment);
        let infos = nodes
            .iter()
            .map(|a| self.addr(a).into_connection_info())
            .collect::<RedisResult<Vec<_>>>()
            .map_err(|e| map_error(&op, e, self.config.password()))?;
        let mut builder = redis::cluster::ClusterClientBuilder::new(infos)
            .connection_timeout(self.config.connect_timeout())
            .response_timeout(self.config.request_timeout());
        if let Some(creds) = self.config.credentials() {
            builder = builder.password(creds.password().expose());
            if let Some(user) = creds.user() {
                builder = builder.username(user);
            }
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = self.config.tls() {
            builder = builder
                .tls(redis::TlsMode::Secure)
                .certs(crate::config::certificates(tls));
        }
        builder
            .build()
            .map_err(|e| map_error(&op, e, self.config.password()))
    }

    /// The master that serves `key`'s hash slot: keyspace notifications are only sent there.
    /// (Channel messages reach every node of a cluster, so any node would do for them.)
    pub(super) async fn shard_of(
        &self,
        commands: &mut Commands,
        key: &str,
    ) -> Result<Address, SourceError> {
        let timeout = self.config.request_timeout();
        let slot: i64 = self
            .bounded(
                &format!("cluster keyslot {key}"),
                timeout,
                commands.query(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key)),
            )
            .await?;
        let slots: redis::Value = self
            .bounded(
                "cluster slots",
                timeout,
                commands.query(redis::cmd("CLUSTER").arg("SLOTS")),
            )
            .await?;
        master_of_slot(&slots, slot).ok_or_else(|| SourceError::Connection {
            message: format!("cluster slots: no master serves slot {slot} of {key}"),
            source: None,
        })
    }
}

/// Finds the master of `slot` in a `CLUSTER SLOTS` reply:
/// `[[start, end, [host, port, id, ...], replicas...], ...]`.
fn master_of_slot(reply: &redis::Value, slot: i64) -> Option<Address> {
    use redis::Value;
    let Value::Array(ranges) = reply else {
        return None;
    };
    ranges.iter().find_map(|range| {
        let Value::Array(fields) = range else {
            return None;
        };
        let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(master))) =
            (fields.first(), fields.get(1), fields.get(2))
        else {
            return None;
        };
        if !(*start..=*end).contains(&slot) {
            return None;
        }
        let host = match master.first()? {
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            Value::SimpleString(s) => s.clone(),
            _ => return None,
        };
        let Some(Value::Int(port)) = master.get(1) else {
            return None;
        };
        Some(Address {
            host,
            port: u16::try_from(*port).ok()?,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    fn range(start: i64, end: i64, host: &str, port: i64) -> Value {
        Value::Array(vec![
            Value::Int(start),
            Value::Int(end),
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ]),
        ])
    }

    #[test]
    fn the_master_of_a_slot_is_found_in_cluster_slots() {
        let reply = Value::Array(vec![
            range(0, 5460, "127.0.0.1", 7001),
            range(5461, 10922, "127.0.0.1", 7002),
            range(10923, 16383, "127.0.0.1", 7003),
        ]);
        let node = master_of_slot(&reply, 6000).expect("found");
        assert_eq!(node.port, 7002);
        assert_eq!(master_of_slot(&reply, 16383).map(|a| a.port), Some(7003));
        assert!(master_of_slot(&Value::Nil, 1).is_none());
        assert!(master_of_slot(&Value::Array(vec![Value::Int(1)]), 1).is_none());
    }
}
