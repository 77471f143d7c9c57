//! The Sentinel dashboard protocol for [`sentinel_core`]: a Rust service appears in the stock
//! Sentinel dashboard (1.8.x) beside the Java ones, with its live per-second metrics, its
//! resources and its rules; and the dashboard's rule edits go to the rule store the service
//! reads, not just to memory.
//!
//! [`Transport::start`] binds the **command center** (Sentinel Java's
//! `sentinel-transport-simple-http`: `127.0.0.1:8719` by default, the next ports when busy),
//! starts the task that collects the per-second series once a second (off the hot path:
//! calls only write the engine's windows, as without the transport), and once the port is
//! bound, sends the **heartbeat** to each dashboard every 10 s.
//!
//! ```no_run
//! use std::sync::Arc;
//! use sentinel_core::{RuleFamily, Sentinel};
//! use sentinel_transport::{Access, Transport, TransportConfig};
//!
//! # async fn run(store: Arc<dyn sentinel_core::datasource::WritableDataSource>) -> Result<(), Box<dyn std::error::Error>> {
//! let sentinel = Sentinel::new();
//! let config = TransportConfig::builder("order-service")
//!     .dashboard("127.0.0.1:8080")
//!     .access(Access::ReadWrite)
//!     // the key this service's data source reads its flow rules from
//!     .rule_store(RuleFamily::Flow, store)
//!     .build()?;
//! let transport = Transport::start(sentinel.clone(), config).await?;
//! println!("command center on port {}", transport.port());
//! # Ok(()) }
//! ```
//!
//! # Commands
//! `version`, `api`, `basicInfo`, `metric`, `jsonTree`, `clusterNode`, `clusterNodeById`,
//! `systemStatus`, `getRules` / `setRules` (`flow`, `degrade`, `system`, `authority`),
//! `getParamFlowRules` / `setParamFlowRules`, `getClusterMode`, `getSwitch` / `setSwitch`,
//! with Java's parameters, status codes and bodies; any other path answers 400
//! ``Unknown command `name` `` as Java does. `metric` lines are Java's
//! `timestamp|resource|passQps|blockQps|successQps|exceptionQps|rt|occupiedPassQps|concurrency|classification`
//! (see [`metric`](crate#metric-timestamps) below), followed by the `__system_load__` and
//! `__cpu_usage__` rows, and the inbound node's rows are `__total_inbound_traffic__`.
//!
//! A component beside the engine adds its own commands with
//! [`TransportConfigBuilder::command`] (a read, answered whatever the access) and
//! [`TransportConfigBuilder::write_command`] (refused as read-only unless
//! [`Access::ReadWrite`]), each a [`CommandHandler`] (any
//! `Fn(&CommandRequest) -> CommandResponse`); `api` lists them. The token server
//! (`sentinel-token-server`) registers Sentinel's cluster server commands
//! (`cluster/server/info`...) and replaces `getClusterMode`, the one built-in command that
//! can be replaced, to say it is a token server.
//!
//! # Rule edits
//! With [`Access::ReadWrite`] and a [`rule_store`](TransportConfigBuilder::rule_store) for a
//! family, `setRules` reads the dashboard's list with the family's Sentinel JSON converter
//! (ignoring the dashboard's own keys) and validates it whole. The dashboard posts its copy
//! of the rules it last read (`getRules`) with one change, so the transport remembers, per
//! caller address, which rules it showed and at which store revision: an edit must be one
//! change (a rule added, edited or deleted) away from a view its caller was shown at the
//! store's current revision. An edit derived from an older view (someone wrote the store,
//! or another dashboard edited, since the page loaded; or this service restarted since)
//! answers 400 "the rules changed since the page loaded; reload the page", whoever read the
//! rules in between, and changes nothing. A list that holds the rules in force (a no-op,
//! or a rule added twice by a double click, which the engine collapses) answers `success`
//! at once and writes nothing. Otherwise the list is written with
//! [`WritableDataSource::write_if`](sentinel_core::datasource::WritableDataSource::write_if),
//! compare-and-set on that revision, and `success` comes once this engine applied it from
//! the store, as every other instance reading the key does. Every edit is answered within
//! [`apply_wait`](TransportConfigBuilder::apply_wait) (2.5 s; the dashboard gives up at
//! 5 s): a store that does not answer, or an apply that does not come, answers a failure
//! saying what is known (nothing written, maybe written, or written at revision N and not
//! applied yet). An invalid rule answers 400 naming the rule's index and field. Two
//! dashboards calling from one address are one caller to the transport: give them
//! different addresses. Memory-only edits, Java's default (lost on restart, seen by this
//! instance alone), happen only with
//! [`memory_only_edits`](TransportConfigBuilder::memory_only_edits). One deviation: Java's
//! handler URL-decodes `data` a second time after the form decoding, which turns a `+` in a
//! rule into a space; this decodes once.
//!
//! # Refusals
//! The stock dashboard shows "success" for degrade, system and authority edits the machine
//! refused. So every refused edit command (and every caller refused with 403) is counted in
//! [`Transport::status`] (per [`RefusalReason`], with the latest [`Refusal`]), sent to the
//! engine's listeners as
//! [`SentinelEvent::CommandRefused`](sentinel_core::SentinelEvent::CommandRefused)
//! (component `transport`, the command, the reason's label and the answer's message, never
//! a rule payload), logged as the engine's `tracing` warning inside a `transport` span
//! naming the caller, and counted in the `metrics` facade's
//! `sentinel_transport_refused_total` (labels `app`, `command`, `reason`). A caller refused
//! with 403 is an event and a warning once per address, and counted every time. The latest 50
//! refusals (command, reason, message, caller, time) are in the status too, and
//! [`Transport::status_watch`] tells a page of each as it happens: sentinel-console (with
//! its `transport` feature) shows them in its "Dashboard commands refused" card.
//!
//! # Security
//! The stock protocol has no authentication: whoever reaches the port can read every rule
//! and statistic, and in read-write mode replace the rules or switch Sentinel off. So the
//! defaults are closed: the port binds `127.0.0.1`; callers other than loopback, this host
//! (a caller whose address is the one it connected to, such as a dashboard on this host
//! calling back the address a `0.0.0.0` bind advertises) and the configured dashboards'
//! own addresses ([`allow_dashboards`](TransportConfigBuilder::allow_dashboards)) are
//! refused (403, logged once per address with the setting that admits it) unless listed in
//! [`allow_clients`](TransportConfigBuilder::allow_clients); the command center is
//! read-only ([`Access::ReadOnly`]: `setRules`, `setParamFlowRules` and `setSwitch` answer
//! 400 saying so); request bodies (rule payloads) are never logged. To deploy with a
//! dashboard on another host: bind the interface the dashboard reaches, configure that
//! dashboard (or allow exactly its address), keep the port off the public network (a
//! firewall rule or a network policy), and prefer read-only with edits made in the store
//! itself.
//!
//! # Metric timestamps
//! The engine's clock counts from the process's start, not from the epoch; the dashboard
//! speaks epoch milliseconds and adds up one app's machines by a row's stamp. Sentinel Java
//! stamps each row with the start of the (epoch-aligned) second it counts; the engine's
//! seconds start `offset mod 1000` ms into the epoch's, so the transport stamps each row
//! with the whole epoch second nearest to the start of the engine second it counts (at most
//! 500 ms away, the second that holds most of the interval; exact when the seconds are
//! aligned). See the `metric` module source for the details.
//!
//! # Memory
//! The series holds one [`MetricRow`](sentinel_core::series::MetricRow)
//! ([`MetricSeries::ROW_BYTES`](sentinel_core::series::MetricSeries::ROW_BYTES), 128 bytes)
//! per resource per second in which it was called, five minutes by default: 38 KiB per
//! resource called every second; plus 300 inbound seconds (17 KiB) for the transport. The
//! series' default cap of 100 000 rows (12.2 MiB) holds five minutes for about 330
//! resources called every second; for more, pass a series with a larger
//! [`max_rows`](sentinel_core::series::MetricSeries::max_rows) through
//! [`series`](TransportConfigBuilder::series) (10 000 such resources: 3 000 000 rows, 366 MiB).
//! Collecting one second costs about 1.3 ms for 1 000 resources and 23 ms for 10 000 (the
//! `transport` bench), on the transport's task, never on the calls.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod commands;
mod config;
mod error;
mod heartbeat;
mod metric;
mod nodes;
mod rules;
mod server;
mod status;
mod views;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use sentinel_core::series::MetricSeries;
use sentinel_core::Sentinel;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use commands::{CommandHandler, CommandRequest, CommandResponse};
pub use config::{Access, TransportConfig, TransportConfigBuilder};
pub use error::{EditError, TransportError, Written};
pub use heartbeat::PROTOCOL_VERSION;
pub use status::{Refusal, RefusalReason, TransportStatus};

/// A running transport: the command center, the series collector and the heartbeat.
/// Dropping it (or [`shutdown`](Self::shutdown)) stops all three.
pub struct Transport {
    addr: SocketAddr,
    series: Arc<MetricSeries>,
    refusals: Arc<status::Refusals>,
    tasks: Vec<JoinHandle<()>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// Binds the command center (the configured port, else the next free one of
    /// `port_attempts`), starts collecting the per-second series and then the heartbeat.
    /// Needs a tokio runtime.
    pub async fn start(
        sentinel: Sentinel,
        config: TransportConfig,
    ) -> Result<Self, TransportError> {
        let listener = bind(&config).await?;
        let addr = listener
            .local_addr()
            .map_err(|source| TransportError::Bind {
                first: SocketAddr::new(config.bind_ip, config.port),
                attempts: config.port_attempts,
                source,
            })?;
        let series = config
            .series
            .clone()
            .unwrap_or_else(|| Arc::new(MetricSeries::new()));
        let metrics = Arc::new(metric::Metrics::new(
            series.clone(),
            metric::EpochClock::of(&sentinel),
        ));
        let hostname = config
            .hostname
            .clone()
            .unwrap_or_else(heartbeat::system_hostname);
        let ip = config
            .advertise_ip
            .unwrap_or(if config.bind_ip.is_unspecified() {
                heartbeat::outward_ip()
            } else {
                config.bind_ip
            });
        let admission = server::Admission {
            allowed: config
                .allowed_clients
                .iter()
                .map(|ip| ip.to_canonical())
                .collect(),
            dashboards: Arc::default(),
        };
        let dashboards = config
            .allow_dashboards
            .then(|| admission.dashboards.clone());
        let refusals = Arc::new(status::Refusals::new(&config.app, sentinel.clone()));
        let center = Arc::new(server::Center {
            sentinel: sentinel.clone(),
            metrics: metrics.clone(),
            edits: rules::Edits::new(&config),
            admission,
            refusals: refusals.clone(),
            hostname: hostname.clone(),
            ip,
            app: config.app.clone(),
            commands: config
                .commands
                .iter()
                .map(|c| (c.name.clone(), c.clone()))
                .collect(),
        });
        let mut tasks = Vec::new();
        let collector = {
            let sentinel = sentinel.downgrade();
            let every = config.collect_interval;
            tokio::spawn(async move {
                let mut ticks = tokio::time::interval(every);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    ticks.tick().await;
                    let Some(sentinel) = sentinel.upgrade() else {
                        return;
                    };
                    metrics.collect(&sentinel);
                }
            })
        };
        tasks.push(collector);
        let router = Router::new().fallback(server::handle).with_state(center);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serve = axum::serve(
            listener,
            router.into_make_service_with_connect_info::<server::Peer>(),
        )
        .with_graceful_shutdown(async move {
            let _ = stopped.await;
        });
        tasks.push(tokio::spawn(async move {
            if let Err(error) = serve.await {
                tracing::warn!(%error, "the command center stopped");
            }
        }));
        tracing::info!(%addr, app = %config.app, "Sentinel command center listening");
        if !config.dashboards.is_empty() {
            let urls = config
                .dashboards
                .iter()
                .map(|d| heartbeat::dashboard_url(d, &config.heartbeat_path))
                .collect::<Result<Vec<_>, _>>()?;
            let client = reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(3))
                .build()
                .map_err(TransportError::Client)?;
            let beat = heartbeat::Heartbeat {
                app: config.app.clone(),
                hostname,
                ip,
                port: addr.port(),
            };
            tasks.push(tokio::spawn(heartbeat::run(
                client,
                urls,
                beat,
                config.heartbeat_interval,
                dashboards,
            )));
        }
        Ok(Self {
            addr,
            series,
            refusals,
            tasks,
            stop: Some(stop),
        })
    }

    /// The port the command center is bound to.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The address the command center is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The per-second series the `metric` command reads.
    pub fn series(&self) -> &Arc<MetricSeries> {
        &self.series
    }

    /// What the command center refused since it started: counts per reason, the latest
    /// refusal and the addresses refused with 403. Every refusal is also a `tracing`
    /// warning and counts in `sentinel_transport_refused_total` (`app`, `command`,
    /// `reason` labels) of the `metrics` facade.
    pub fn status(&self) -> TransportStatus {
        self.refusals.status()
    }

    /// [`status`](Self::status) as a watch that changes with every refusal: for a page that
    /// shows refusals as they happen (sentinel-console's `ConsoleBuilder::transport`). It
    /// outlives the transport (it then keeps the last status).
    pub fn status_watch(&self) -> tokio::sync::watch::Receiver<TransportStatus> {
        self.refusals.subscribe()
    }

    /// Stops the heartbeat and the collector, and lets the command center finish the
    /// requests in flight.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let mut tasks = std::mem::take(&mut self.tasks);
        // The command center (the second task) finishes on its own; the loops are stopped.
        let server = (tasks.len() > 1).then(|| tasks.remove(1));
        for task in tasks {
            task.abort();
            let _ = task.await;
        }
        if let Some(server) = server {
            let _ = server.await;
        }
    }
}

impl Drop for Transport {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// The listener on the first free port from the configured one.
async fn bind(config: &TransportConfig) -> Result<TcpListener, TransportError> {
    let first = SocketAddr::new(config.bind_ip, config.port);
    let mut last = None;
    for i in 0..config.port_attempts {
        let Some(port) = config.port.checked_add(i) else {
            break;
        };
        match TcpListener::bind(SocketAddr::new(config.bind_ip, port)).await {
            Ok(listener) => return Ok(listener),
            Err(error) => {
                tracing::debug!(port, %error, "command port busy, trying the next");
                last = Some(error);
                if config.port == 0 {
                    break;
                }
            }
        }
    }
    Err(TransportError::Bind {
        first,
        attempts: config.port_attempts,
        source: last.unwrap_or_else(|| std::io::Error::other("no port to try")),
    })
}
