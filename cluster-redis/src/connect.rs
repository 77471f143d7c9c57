//! One multiplexed connection (or a cluster connection) per backend, opened in the
//! background under a time budget.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use redis::{Client, RedisError, RedisResult, Script};

use crate::config::RedisTarget;

/// The connection script calls go through. Cloning it shares the connection: concurrent
/// calls are pipelined on it.
#[derive(Clone)]
pub(crate) enum Conn {
    Server(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl Conn {
    /// Runs `script` (`EVALSHA`, `EVAL` on `NOSCRIPT`) with `keys` and `args`.
    pub(crate) async fn run(
        &mut self,
        script: &Script,
        keys: &[&str],
        args: &[String],
    ) -> RedisResult<Vec<i64>> {
        let mut invocation = script.prepare_invoke();
        for k in keys {
            invocation.key(*k);
        }
        for a in args {
            invocation.arg(a.as_str());
        }
        match self {
            Conn::Server(c) => invocation.invoke_async(c).await,
            Conn::Cluster(c) => invocation.invoke_async(c).await,
        }
    }
}

fn url(addr: &str) -> String {
    if addr.contains("://") {
        addr.to_owned()
    } else {
        format!("redis://{addr}")
    }
}

fn timed_out(what: &str) -> RedisError {
    RedisError::from((redis::ErrorKind::Io, "timed out", what.to_owned()))
}

async fn bounded<T>(
    budget: Duration,
    what: &str,
    fut: impl std::future::Future<Output = RedisResult<T>>,
) -> RedisResult<T> {
    tokio::time::timeout(budget, fut)
        .await
        .unwrap_or_else(|_| Err(timed_out(what)))
}

async fn server(addr: &str, budget: Duration) -> RedisResult<MultiplexedConnection> {
    let client = Client::open(url(addr))?;
    bounded(budget, "connect", client.get_multiplexed_async_connection()).await
}

/// Opens a connection to `target` within `budget` per step.
pub(crate) async fn connect(target: &RedisTarget, budget: Duration) -> RedisResult<Conn> {
    match target {
        RedisTarget::Server(addr) => Ok(Conn::Server(server(addr, budget).await?)),
        RedisTarget::Cluster(nodes) => {
            let client = redis::cluster::ClusterClient::new(nodes.iter().map(|n| url(n)))?;
            let conn = bounded(budget, "cluster connect", client.get_async_connection()).await?;
            Ok(Conn::Cluster(conn))
        }
        RedisTarget::Sentinel { sentinels, master } => {
            let mut last = timed_out("no sentinel answered");
            for sentinel in sentinels {
                match master_of(sentinel, master, budget).await {
                    Ok(addr) => match server(&addr, budget).await {
                        Ok(mut conn) => {
                            // A demoted master may still answer: only a master will do.
                            let role: RedisResult<Vec<redis::Value>> =
                                bounded(budget, "ROLE", redis::cmd("ROLE").query_async(&mut conn))
                                    .await;
                            match role.as_deref() {
                                Ok([redis::Value::BulkString(r), ..]) if r == b"master" => {
                                    return Ok(Conn::Server(conn));
                                }
                                Ok(_) => last = timed_out("the named master is not a master"),
                                Err(_) => last = timed_out("ROLE"),
                            }
                        }
                        Err(e) => last = e,
                    },
                    Err(e) => last = e,
                }
            }
            Err(last)
        }
    }
}

async fn master_of(sentinel: &str, master: &str, budget: Duration) -> RedisResult<String> {
    let mut conn = server(sentinel, budget).await?;
    let (host, port): (String, u16) = bounded(
        budget,
        "SENTINEL get-master-addr-by-name",
        redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(master)
            .query_async(&mut conn),
    )
    .await?;
    Ok(format!("{host}:{port}"))
}
