//! A token server that speaks Sentinel 1.8's cluster protocol, with its budget kept in Redis.
//!
//! Java services with `sentinel-cluster-client-default` (token client mode) connect to it as
//! to Sentinel's own token server. Every decision comes from the Redis budget of
//! [`sentinel_cluster_redis`]: any number of token servers behind one address share one limit
//! per `flowId`, and Rust replicas that use `sentinel-cluster-redis` directly share it too.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use sentinel_cluster_redis::{RedisClusterBackend, RedisClusterConfig, RedisTarget};
//! use sentinel_core::flow::{ClusterFlowConfig, FlowRule};
//! use sentinel_core::Sentinel;
//! use sentinel_token_server::{RedisTokenService, TokenServer};
//!
//! let config = RedisClusterConfig::builder(RedisTarget::Server("127.0.0.1:6379".into())).build()?;
//! let service = Arc::new(RedisTokenService::new(RedisClusterBackend::start(config)?));
//! // The rules: an engine that any data source feeds (here, loaded directly).
//! let rules = Sentinel::builder().build();
//! service.follow(&rules);
//! rules.flow_rules().load_rules(vec![
//!     FlowRule::qps("GET:/order", 1000.0).cluster(ClusterFlowConfig::new(7).global(true)),
//! ])?;
//! let server = TokenServer::builder().start(service).await?;
//! println!("token server on {}", server.local_addr());
//! server.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! In the Sentinel dashboard: [`TokenServer::dashboard_commands`] registered on a
//! `sentinel-transport` command center answer the dashboard's cluster pages (mode 1, the
//! port, namespaces, connected clients, `flowId`s and their last second's decisions; see
//! [`DashboardCommands`]).
//!
//! See [`protocol`] for the wire format and how bad input is treated (as Sentinel's server
//! treats it), [`RedisTokenService`] for the decisions, and `docs/token-server.md` for moving
//! a Java shop from Sentinel's token server.
//!
//! Metrics, through the `metrics` facade (the library installs no recorder):
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `sentinel_token_server_requests_total` | counter | `type` | requests answered (`ping`, `flow`, `param_flow`) |
//! | `sentinel_token_server_decisions_total` | counter | `type`, `status` | token answers by status (`ok`, `blocked`, `no_rule_exists`, `fail`, ...) |
//! | `sentinel_token_server_decision_seconds` | histogram | | time to decide a token request |
//! | `sentinel_token_server_rejected_frames_total` | counter | `reason` | frames not answered (`oversized`, `short_header`, `unknown_type`, `bad_data`) |
//! | `sentinel_token_server_connections` | gauge | | open connections |
//! | `sentinel_token_server_connected_clients` | gauge | `namespace` | clients per namespace (from their `PING`) |

mod dashboard;
mod health;
pub mod protocol;
mod server;
mod service;
mod stats;

pub use dashboard::DashboardCommands;
pub use server::{ServerError, TokenServer, TokenServerBuilder, DEFAULT_PORT};
pub use service::{Health, RedisTokenService, RulesApplied, ServedFlow, TokenResult, TokenService};
