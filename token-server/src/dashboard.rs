//! The commands the Sentinel dashboard's cluster pages call on a token server, answered as
//! `sentinel-cluster-server-default` 1.8.9's handlers answer them, from this server's state.
//!
//! The dashboard asks every machine `getClusterMode`; for one whose `serverAvailable` is
//! true it asks `cluster/server/info`, and lists it as a token server (mode 1) with its
//! port, namespaces and connected clients. Served here:
//!
//! | command | answer |
//! |---|---|
//! | `getClusterMode` | mode 1 (server), `serverAvailable: true`, `clientAvailable: false`, `lastModified` the server's start |
//! | `cluster/server/info` | `port`, `transport` (`port`, `idleSeconds`), `flow`, `namespaceSet`, `connection` (per namespace: each client's `address` and `host`, `connectedCount`), `requestLimitData` (empty: no per-namespace request limiter), `embedded: false`, `appName` |
//! | `cluster/server/fetchConfig` | `transport`, `flow`, `namespaceSet`; with `namespace`, its `flow` |
//! | `cluster/server/metricList?namespace=` | per resource, each served `flowId`'s `passQps` and `blockQps` of the last whole second |
//! | `cluster/server/flowRules` | the cluster flow rules served (Sentinel JSON) |
//! | `cluster/server/paramRules` | `[]`: cluster param-flow rules are not served yet |
//!
//! What differs from Sentinel's server, and why:
//!
//! - the rules are served to every namespace (they come from one data source, not one per
//!   namespace), so `namespaceSet` lists the namespaces of the connected clients, and
//!   `metricList` answers every `flowId` for any namespace;
//! - `flow` says what this server does: `exceedCount` 1 (never over the limit),
//!   `maxOccupyRatio` 0 (a prioritized request does not borrow from the next window),
//!   `intervalMs` 1000 and `sampleCount` 1 (the last whole second's counts); there is no
//!   `maxAllowedQps` (no request limiter);
//! - `port` is the port this server listens on; behind a load balancer, clients use its;
//! - the modify commands (`cluster/server/modifyFlowConfig`, `modifyTransportConfig`,
//!   `modifyNamespaceSet`, `modifyFlowRules`, `setClusterMode`) are not served (400 unknown
//!   command): the settings are the server's arguments and the rules come from their store.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use sentinel_core::RuleSet;
use sentinel_transport::{CommandRequest, CommandResponse, TransportConfigBuilder};
use serde_json::{json, Value};

use crate::server::Clients;
use crate::service::TokenService;

/// The dashboard's token-server commands for one [`TokenServer`](crate::TokenServer), from
/// [`TokenServer::dashboard_commands`](crate::TokenServer::dashboard_commands).
#[derive(Clone)]
pub struct DashboardCommands {
    pub(crate) port: u16,
    pub(crate) idle_seconds: u64,
    pub(crate) started_ms: i64,
    pub(crate) clients: Arc<Clients>,
    pub(crate) service: Arc<dyn TokenService>,
}

impl fmt::Debug for DashboardCommands {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DashboardCommands")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl DashboardCommands {
    /// Adds the commands (all of them reads) to a transport's config: start that transport
    /// on the engine that holds the token server's rules.
    pub fn register(self, builder: TransportConfigBuilder) -> TransportConfigBuilder {
        type Handler = fn(&DashboardCommands, &CommandRequest<'_>) -> CommandResponse;
        const COMMANDS: [(&str, &str, Handler); 6] = [
            (
                "getClusterMode",
                "get cluster mode status",
                DashboardCommands::cluster_mode,
            ),
            (
                "cluster/server/info",
                "get cluster server info",
                DashboardCommands::info,
            ),
            (
                "cluster/server/fetchConfig",
                "get cluster server config",
                DashboardCommands::fetch_config,
            ),
            (
                "cluster/server/metricList",
                "get cluster server metrics",
                DashboardCommands::metric_list,
            ),
            (
                "cluster/server/flowRules",
                "get cluster flow rules",
                DashboardCommands::flow_rules,
            ),
            (
                "cluster/server/paramRules",
                "get cluster server param flow rules",
                |_, _| CommandResponse::success("[]"),
            ),
        ];
        let this = Arc::new(self);
        COMMANDS
            .into_iter()
            .fold(builder, |builder, (name, description, handler)| {
                let this = this.clone();
                builder.command(name, description, move |request: &CommandRequest<'_>| {
                    handler(&this, request)
                })
            })
    }

    fn cluster_mode(&self, _: &CommandRequest<'_>) -> CommandResponse {
        CommandResponse::success(
            json!({
                // ClusterStateManager.CLUSTER_SERVER
                "mode": 1,
                "lastModified": self.started_ms,
                "clientAvailable": false,
                "serverAvailable": true,
            })
            .to_string(),
        )
    }

    fn transport(&self) -> Value {
        json!({ "port": self.port, "idleSeconds": self.idle_seconds })
    }

    fn flow() -> Value {
        json!({
            "exceedCount": 1.0,
            "maxOccupyRatio": 0.0,
            "intervalMs": 1000,
            "sampleCount": 1,
        })
    }

    fn namespaces(&self) -> Vec<String> {
        self.clients
            .snapshot()
            .into_iter()
            .map(|(ns, _)| ns)
            .collect()
    }

    fn info(&self, request: &CommandRequest<'_>) -> CommandResponse {
        let connection: Vec<Value> = self
            .clients
            .groups()
            .into_iter()
            .map(|(namespace, peers)| {
                json!({
                    "namespace": namespace,
                    "connectionSet": peers.iter().map(descriptor).collect::<Vec<_>>(),
                    "connectedCount": peers.len(),
                })
            })
            .collect();
        CommandResponse::success(
            json!({
                "port": self.port,
                "connection": connection,
                "requestLimitData": [],
                "transport": self.transport(),
                "flow": Self::flow(),
                "namespaceSet": self.namespaces(),
                "embedded": false,
                "appName": request.app(),
            })
            .to_string(),
        )
    }

    fn fetch_config(&self, request: &CommandRequest<'_>) -> CommandResponse {
        let config = match request.param("namespace") {
            Some(_) => json!({ "flow": Self::flow() }),
            None => json!({
                "transport": self.transport(),
                "flow": Self::flow(),
                "namespaceSet": self.namespaces(),
            }),
        };
        CommandResponse::success(config.to_string())
    }

    fn metric_list(&self, request: &CommandRequest<'_>) -> CommandResponse {
        if request.param("namespace").is_none() {
            return CommandResponse::failure("failed: namespace cannot be empty");
        }
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let mut by_resource = serde_json::Map::new();
        for flow in self.service.served_flows() {
            let node = json!({
                "timestamp": now_ms,
                "resourceName": flow.rule.resource,
                "flowId": flow.flow_id,
                "passQps": flow.pass_qps as f64,
                "blockQps": flow.block_qps as f64,
                "rt": 0,
            });
            if let Value::Array(nodes) = by_resource
                .entry(flow.rule.resource.clone())
                .or_insert_with(|| Value::Array(Vec::new()))
            {
                nodes.push(node);
            }
        }
        CommandResponse::success(Value::Object(by_resource).to_string())
    }

    fn flow_rules(&self, _: &CommandRequest<'_>) -> CommandResponse {
        let rules = self
            .service
            .served_flows()
            .into_iter()
            .map(|f| f.rule)
            .collect();
        match RuleSet::new().with_flow(rules).to_json() {
            Ok(bytes) => CommandResponse::success(String::from_utf8_lossy(&bytes).into_owned()),
            Err(error) => CommandResponse::failure(format!("cannot write the rules: {error}")),
        }
    }
}

/// Sentinel's `ConnectionDescriptor`: the client's `ip:port` and its host.
fn descriptor(peer: &SocketAddr) -> Value {
    json!({ "address": format!("{}:{}", peer.ip(), peer.port()), "host": peer.ip().to_string() })
}
