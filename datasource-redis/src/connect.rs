//! Opening connections: a multiplexed connection for commands and a dedicated subscription
//! connection, to one server, to the master Redis Sentinel names, or to a cluster.

use std::future::Future;

use futures_util::StreamExt;
use redis::aio::{MultiplexedConnection, PubSub, PubSubSink, PubSubStream};
use redis::{
    AsyncConnectionConfig, Client, ConnectionAddr, FromRedisValue, IntoConnectionInfo,
    RedisConnectionInfo, RedisResult,
};
use sentinel_core::datasource::SourceError;

use crate::config::{Address, Deployment, RedisConfig};
use crate::error::{map_error, timed_out};

#[cfg(feature = "cluster")]
mod cluster;

/// The connection commands go through: one multiplexed connection to a server, or a cluster
/// connection that routes each command to the key's shard.
#[derive(Clone)]
pub(crate) enum Commands {
    Server(MultiplexedConnection),
    #[cfg(feature = "cluster")]
    Cluster(redis::cluster_async::ClusterConnection),
}

impl Commands {
    /// Runs `cmd`.
    pub(crate) async fn query<T: FromRedisValue>(&mut self, cmd: &redis::Cmd) -> RedisResult<T> {
        match self {
            Commands::Server(c) => cmd.query_async(c).await,
            #[cfg(feature = "cluster")]
            Commands::Cluster(c) => cmd.query_async(c).await,
        }
    }

    /// Runs `cmd` on the server at `node` (a cluster's shard), or where it is routed when
    /// `node` is `None`.
    pub(crate) async fn query_at<T: FromRedisValue>(
        &mut self,
        node: Option<&Address>,
        cmd: &redis::Cmd,
    ) -> RedisResult<T> {
        match (self, node) {
            #[cfg(feature = "cluster")]
            (Commands::Cluster(c), Some(node)) => {
                use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: node.host.clone(),
                    port: node.port,
                });
                let value = c.route_command(cmd.clone(), routing).await?;
                T::from_redis_value(value).map_err(Into::into)
            }
            (this, _) => this.query(cmd).await,
        }
    }

    /// Runs the `MULTI ... EXEC` transaction `pipe` of `commands` commands on the server that
    /// holds `key`, and returns EXEC's replies. In a cluster the transaction goes to `key`'s
    /// shard as one unit: the client would refuse it as cross-slot, because it takes a
    /// `PUBLISH` channel for a key.
    pub(crate) async fn transaction(
        &mut self,
        key: &str,
        pipe: &redis::Pipeline,
        commands: usize,
    ) -> RedisResult<Vec<redis::Value>> {
        #[cfg(not(feature = "cluster"))]
        let _ = (key, commands);
        match self {
            Commands::Server(c) => pipe.query_async(c).await,
            #[cfg(feature = "cluster")]
            Commands::Cluster(c) => {
                use redis::cluster_routing::{Route, SingleNodeRoutingInfo, SlotAddr};
                let slot: u16 = redis::cmd("CLUSTER")
                    .arg("KEYSLOT")
                    .arg(key)
                    .query_async(c)
                    .await?;
                let route = SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
                // The replies of MULTI and the QUEUED ones come first; EXEC's is the last.
                let mut replies = c
                    .route_pipeline(pipe.clone(), commands + 1, 1, route)
                    .await?;
                match replies.pop() {
                    Some(redis::Value::Array(exec)) => Ok(exec),
                    other => Err(redis::RedisError::from((
                        redis::ErrorKind::UnexpectedReturnType,
                        "EXEC did not answer with an array",
                        format!("{other:?}"),
                    ))),
                }
            }
        }
    }
}

/// What a source holds while it watches: both connections reach the server that holds the
/// key.
pub(crate) struct Connected {
    pub(crate) commands: Commands,
    pub(crate) pubsub: PubSub,
    /// In a cluster, the shard that holds the key (where its keyspace notifications are sent).
    pub(crate) shard: Option<Address>,
}

/// A subscription to a Redis Sentinel's `+switch-master` channel: the sentinel publishes
/// `<master> <old-ip> <old-port> <new-ip> <new-port>` there the moment a failover ends.
pub(crate) struct Failovers {
    /// Kept so the subscription connection stays open.
    _sink: PubSubSink,
    stream: PubSubStream,
    master: String,
    /// The sentinel subscribed to.
    pub(crate) at: Address,
}

impl Failovers {
    /// Waits for the next `+switch-master` message about this master and returns it; `None`
    /// when the sentinel closed the connection.
    pub(crate) async fn next(&mut self) -> Option<String> {
        loop {
            let message = self.stream.next().await?;
            let text: String = message.get_payload().unwrap_or_default();
            if text.split_whitespace().next() == Some(self.master.as_str()) {
                return Some(text);
            }
        }
    }
}

/// The channel a Redis Sentinel announces a completed failover on.
const SWITCH_MASTER: &str = "+switch-master";

/// Opens connections for one configuration. With Redis Sentinel it asks the sentinels for
/// the current master on every call, so a reconnect after a failover reaches the new master.
pub(crate) struct Connector {
    config: RedisConfig,
    /// With Redis Sentinel, a connection to the sentinel that answered last, and its index.
    sentinel: Option<(usize, MultiplexedConnection)>,
    /// With Redis Sentinel, the master the last connection reached.
    master: Option<Address>,
}

impl Connector {
    pub(crate) fn new(config: RedisConfig) -> Self {
        Self {
            config,
            sentinel: None,
            master: None,
        }
    }

    pub(crate) fn config(&self) -> &RedisConfig {
        &self.config
    }

    /// With Redis Sentinel: true when the sentinels now name another master than the one the
    /// last connection reached, after a failover. A demoted master goes on serving as a
    /// master for several seconds (until the sentinels reconfigure it), so asking it its
    /// `ROLE` is not enough. An unreachable sentinel answers `false`: the connection in hand
    /// still works.
    pub(crate) async fn master_moved(&mut self) -> bool {
        let Some(connected) = self.master.clone() else {
            return false;
        };
        match self.master_address().await {
            Ok(now) if now != connected => {
                tracing::info!(from = %connected, to = %now, "Redis Sentinel names a new master");
                true
            }
            Ok(_) => false,
            Err(e) => {
                tracing::debug!(
                    error = %e,
                    "cannot ask the sentinels for the master; keeping the connection"
                );
                false
            }
        }
    }

    /// With Redis Sentinel, a subscription to `+switch-master` on the first sentinel that
    /// accepts it (from the one that answered last); `Ok(None)` for the other deployments.
    /// Made before the master is looked up, so a failover between the lookup and the
    /// subscription cannot be missed.
    pub(crate) async fn failovers(&mut self) -> Result<Option<Failovers>, SourceError> {
        let Deployment::Sentinel { sentinels, master } = &self.config.deployment else {
            return Ok(None);
        };
        let (sentinels, master) = (sentinels.clone(), master.clone());
        let first = self.sentinel.as_ref().map_or(0, |(i, _)| *i);
        let mut failure = None;
        for step in 0..sentinels.len() {
            let at = &sentinels[(first + step) % sentinels.len()];
            let subscribed = async {
                let client = self.sentinel_client(at)?;
                let pubsub = self.pubsub(&client).await?;
                let (mut sink, stream) = pubsub.split();
                let op = format!("subscribe {SWITCH_MASTER} on sentinel {at}");
                self.bounded(
                    &op,
                    self.config.request_timeout(),
                    sink.subscribe(SWITCH_MASTER),
                )
                .await?;
                Ok::<_, SourceError>((sink, stream))
            };
            match subscribed.await {
                Ok((sink, stream)) => {
                    return Ok(Some(Failovers {
                        _sink: sink,
                        stream,
                        master,
                        at: at.clone(),
                    }))
                }
                Err(e) => failure = Some(e),
            }
        }
        Err(failure.unwrap_or(SourceError::Closed))
    }

    /// Runs `fut` within `timeout`, mapping its error.
    pub(crate) async fn bounded<T>(
        &self,
        op: &str,
        timeout: std::time::Duration,
        fut: impl Future<Output = RedisResult<T>>,
    ) -> Result<T, SourceError> {
        match tokio::time::timeout(timeout, fut).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(map_error(op, e, self.config.password())),
            Err(_) => Err(timed_out(op, timeout)),
        }
    }

    /// A connection for commands.
    pub(crate) async fn commands(&mut self) -> Result<Commands, SourceError> {
        #[cfg(feature = "cluster")]
        if let Deployment::Cluster(nodes) = &self.config.deployment {
            let client = self.cluster_client(nodes)?;
            let timeout = self.config.connect_timeout();
            let conn = self
                .bounded("connect", timeout, client.get_async_connection())
                .await?;
            return Ok(Commands::Cluster(conn));
        }
        let client = self.server_client().await?;
        Ok(Commands::Server(self.multiplexed(&client).await?))
    }

    /// A connection for commands and a subscription connection, both to the server that holds
    /// `key` (the same master, with Redis Sentinel; the key's shard, in a cluster).
    pub(crate) async fn subscribe_ready(&mut self, key: &str) -> Result<Connected, SourceError> {
        #[cfg(feature = "cluster")]
        if let Deployment::Cluster(_) = &self.config.deployment {
            let mut commands = self.commands().await?;
            let node = self.shard_of(&mut commands, key).await?;
            let client = self.client_for(&node)?;
            let pubsub = self.pubsub(&client).await?;
            return Ok(Connected {
                commands,
                pubsub,
                shard: Some(node),
            });
        }
        let _ = key;
        let client = self.server_client().await?;
        let commands = Commands::Server(self.multiplexed(&client).await?);
        let pubsub = self.pubsub(&client).await?;
        Ok(Connected {
            commands,
            pubsub,
            shard: None,
        })
    }

    async fn multiplexed(&self, client: &Client) -> Result<MultiplexedConnection, SourceError> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.config.connect_timeout()))
            .set_response_timeout(Some(self.config.request_timeout()));
        self.bounded(
            "connect",
            self.config.connect_timeout() + self.config.request_timeout(),
            client.get_multiplexed_async_connection_with_config(&config),
        )
        .await
    }

    async fn pubsub(&self, client: &Client) -> Result<PubSub, SourceError> {
        self.bounded(
            "connect (subscription)",
            self.config.connect_timeout() + self.config.request_timeout(),
            client.get_async_pubsub(),
        )
        .await
    }

    /// The server to talk to: the configured one, or the master the sentinels name now.
    async fn server_client(&mut self) -> Result<Client, SourceError> {
        match &self.config.deployment {
            Deployment::Server(address) => self.client_for(address),
            Deployment::Sentinel { .. } => {
                let master = self.master_address().await?;
                let client = self.client_for(&master)?;
                self.master = Some(master);
                Ok(client)
            }
            #[cfg(feature = "cluster")]
            Deployment::Cluster(_) => Err(SourceError::Backend {
                message: "a cluster has no single server".to_owned(),
                source: None,
            }),
        }
    }

    /// Asks the sentinels, in turn from the one that answered last, for the address of the
    /// master they name now (`SENTINEL get-master-addr-by-name`, which names a promoted replica
    /// as soon as the failover promotes it; `SENTINEL MASTERS` names the old master until the
    /// failover ends).
    async fn master_address(&mut self) -> Result<Address, SourceError> {
        let Deployment::Sentinel { sentinels, master } = &self.config.deployment else {
            return Err(SourceError::Backend {
                message: "not a Redis Sentinel deployment".to_owned(),
                source: None,
            });
        };
        let (sentinels, master) = (sentinels.clone(), master.clone());
        let first = self.sentinel.as_ref().map_or(0, |(i, _)| *i);
        let mut failure = None;
        for step in 0..sentinels.len() {
            let index = (first + step) % sentinels.len();
            let at = &sentinels[index];
            let op = format!("ask sentinel {at} for master {master}");
            let mut conn = match self.sentinel.take() {
                Some((i, conn)) if i == index => conn,
                _ => match self.sentinel_connection(at).await {
                    Ok(conn) => conn,
                    Err(e) => {
                        failure = Some(e);
                        continue;
                    }
                },
            };
            let cmd = redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(&master)
                .clone();
            let timeout = self.config.request_timeout();
            let reply: Result<Option<(String, u16)>, _> =
                self.bounded(&op, timeout, cmd.query_async(&mut conn)).await;
            match reply {
                Ok(Some((host, port))) => {
                    self.sentinel = Some((index, conn));
                    return Ok(Address { host, port });
                }
                Ok(None) => {
                    self.sentinel = Some((index, conn));
                    failure = Some(SourceError::Backend {
                        message: format!("{op}: the sentinel does not know this master"),
                        source: None,
                    });
                }
                Err(e) => failure = Some(e),
            }
        }
        Err(failure.unwrap_or(SourceError::Closed))
    }

    /// A connection to one sentinel.
    async fn sentinel_connection(
        &self,
        at: &Address,
    ) -> Result<MultiplexedConnection, SourceError> {
        let client = self.sentinel_client(at)?;
        self.multiplexed(&client).await
    }

    /// A client for one sentinel. Sentinels are reached without the servers' credentials.
    fn sentinel_client(&self, at: &Address) -> Result<Client, SourceError> {
        let op = format!("connect sentinel {at}");
        let info = self
            .addr(at)
            .into_connection_info()
            .map_err(|e| map_error(&op, e, None))?;
        #[cfg(feature = "tls")]
        let client = match self.config.tls() {
            Some(tls) => Client::build_with_tls(info, crate::config::certificates(tls)),
            None => Client::open(info),
        };
        #[cfg(not(feature = "tls"))]
        let client = Client::open(info);
        client.map_err(|e| map_error(&op, e, None))
    }

    fn settings(&self) -> RedisConnectionInfo {
        let mut settings = RedisConnectionInfo::default().set_db(self.config.db);
        if let Some(creds) = self.config.credentials() {
            settings = settings.set_password(creds.password().expose());
            if let Some(user) = creds.user() {
                settings = settings.set_username(user);
            }
        }
        settings
    }

    fn addr(&self, address: &Address) -> ConnectionAddr {
        if self.config.tls_enabled() {
            ConnectionAddr::TcpTls {
                host: address.host.clone(),
                port: address.port,
                insecure: false,
                tls_params: None,
            }
        } else {
            ConnectionAddr::Tcp(address.host.clone(), address.port)
        }
    }

    /// A client for one server.
    fn client_for(&self, address: &Address) -> Result<Client, SourceError> {
        let op = format!("connect {address}");
        let info = self
            .addr(address)
            .into_connection_info()
            .map(|info| info.set_redis_settings(self.settings()))
            .map_err(|e| map_error(&op, e, self.config.password()))?;
        #[cfg(feature = "tls")]
        if let Some(tls) = self.config.tls() {
            return Client::build_with_tls(info, crate::config::certificates(tls))
                .map_err(|e| map_error(&op, e, self.config.password()));
        }
        Client::open(info).map_err(|e| map_error(&op, e, self.config.password()))
    }
}
