//! [`TransportConfig`] and its builder: where the command center listens, who may call it,
//! which dashboards hear the heartbeat, and where rule edits go.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use sentinel_core::datasource::WritableDataSource;
use sentinel_core::series::MetricSeries;
use sentinel_core::RuleFamily;

use crate::commands::{CommandHandler, Registered};
use crate::error::TransportError;

/// What the command center lets the dashboard change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Access {
    /// Every read command; `setRules`, `setParamFlowRules` and `setSwitch` are refused with
    /// a message saying so. The default.
    #[default]
    ReadOnly,
    /// Reads and edits: rule edits go to the family's rule store (or to memory, only when
    /// memory-only edits are chosen), and `setSwitch` turns the engine's checks on and off.
    ReadWrite,
}

/// The transport's settings. Build with [`TransportConfig::builder`].
#[derive(Clone)]
pub struct TransportConfig {
    pub(crate) app: String,
    pub(crate) bind_ip: IpAddr,
    pub(crate) port: u16,
    pub(crate) port_attempts: u16,
    pub(crate) advertise_ip: Option<IpAddr>,
    pub(crate) hostname: Option<String>,
    pub(crate) allowed_clients: Vec<IpAddr>,
    pub(crate) allow_dashboards: bool,
    pub(crate) access: Access,
    pub(crate) dashboards: Vec<String>,
    pub(crate) heartbeat_path: String,
    pub(crate) heartbeat_interval: Duration,
    pub(crate) collect_interval: Duration,
    pub(crate) apply_wait: Duration,
    pub(crate) series: Option<Arc<MetricSeries>>,
    pub(crate) stores: BTreeMap<FamilyKey, Arc<dyn WritableDataSource>>,
    pub(crate) memory_only_edits: bool,
    pub(crate) commands: Vec<Registered>,
}

/// [`RuleFamily`] as an ordered map key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct FamilyKey(pub(crate) &'static str);

impl FamilyKey {
    pub(crate) fn of(family: RuleFamily) -> Self {
        Self(family.as_str())
    }
}

impl fmt::Debug for TransportConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stores: Vec<String> = self
            .stores
            .iter()
            .map(|(family, store)| format!("{}: {}", family.0, store.describe()))
            .collect();
        f.debug_struct("TransportConfig")
            .field("app", &self.app)
            .field("bind_ip", &self.bind_ip)
            .field("port", &self.port)
            .field("access", &self.access)
            .field("allowed_clients", &self.allowed_clients)
            .field("dashboards", &self.dashboards)
            .field("stores", &stores)
            .field("memory_only_edits", &self.memory_only_edits)
            .field(
                "commands",
                &self.commands.iter().map(|c| &c.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl TransportConfig {
    /// Sentinel Java's default command port.
    pub const DEFAULT_PORT: u16 = 8719;
    /// The dashboard's heartbeat path (`MachineRegistryController`).
    pub const DEFAULT_HEARTBEAT_PATH: &'static str = "/registry/machine";
    /// How long a rule edit may take before it is answered, by default: within 3 s with
    /// the request's own time (the dashboard gives up at 5 s).
    pub const DEFAULT_APPLY_WAIT: Duration = Duration::from_millis(2500);
    /// How often a heartbeat is sent by default, as Sentinel Java does.
    pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);

    /// A builder for the application `app` (the name the dashboard lists it under).
    pub fn builder(app: impl Into<String>) -> TransportConfigBuilder {
        TransportConfigBuilder {
            config: TransportConfig {
                app: app.into(),
                bind_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
                port: Self::DEFAULT_PORT,
                port_attempts: 64,
                advertise_ip: None,
                hostname: None,
                allowed_clients: Vec::new(),
                allow_dashboards: true,
                access: Access::ReadOnly,
                dashboards: Vec::new(),
                heartbeat_path: Self::DEFAULT_HEARTBEAT_PATH.to_owned(),
                heartbeat_interval: Self::DEFAULT_HEARTBEAT_INTERVAL,
                collect_interval: Duration::from_secs(1),
                apply_wait: Self::DEFAULT_APPLY_WAIT,
                series: None,
                stores: BTreeMap::new(),
                memory_only_edits: false,
                commands: Vec::new(),
            },
        }
    }

    /// The application name.
    pub fn app(&self) -> &str {
        &self.app
    }

    /// What the dashboard may change.
    pub fn access(&self) -> Access {
        self.access
    }
}

/// Builds a [`TransportConfig`]; see each setting's default.
#[derive(Debug, Clone)]
pub struct TransportConfigBuilder {
    config: TransportConfig,
}

impl TransportConfigBuilder {
    /// The address the command center binds: `127.0.0.1` by default, so only processes on
    /// this machine reach it. Bind `0.0.0.0` (or one interface) for a dashboard on another
    /// machine, and list that dashboard in [`allow_clients`](Self::allow_clients).
    pub fn bind_ip(mut self, ip: IpAddr) -> Self {
        self.config.bind_ip = ip;
        self
    }

    /// The first port tried: 8719 by default; `0` lets the system choose one.
    pub fn port(mut self, port: u16) -> Self {
        self.config.port = port;
        self
    }

    /// How many consecutive ports are tried when the first is busy (64 by default), as Java
    /// moves on to the next port.
    pub fn port_attempts(mut self, attempts: u16) -> Self {
        self.config.port_attempts = attempts.max(1);
        self
    }

    /// The address the heartbeat tells the dashboard to call back. Default: the bind
    /// address, or for an unspecified bind (`0.0.0.0`) the address this machine reaches
    /// other hosts from.
    pub fn advertise_ip(mut self, ip: IpAddr) -> Self {
        self.config.advertise_ip = Some(ip);
        self
    }

    /// The host name sent in heartbeats and `basicInfo`. Default: the system's.
    pub fn hostname(mut self, hostname: impl Into<String>) -> Self {
        self.config.hostname = Some(hostname.into());
        self
    }

    /// Also accepts commands from these addresses. Always accepted: loopback, this host
    /// (a caller whose address is the one it connected to, such as a dashboard on this
    /// host calling back the address a `0.0.0.0` bind advertises) and, unless
    /// [`allow_dashboards`](Self::allow_dashboards) is off, the addresses the configured
    /// [`dashboard`](Self::dashboard)s resolve to. Every other caller is refused with 403,
    /// logged once per address with this setting's name.
    pub fn allow_clients(mut self, ips: impl IntoIterator<Item = IpAddr>) -> Self {
        self.config.allowed_clients.extend(ips);
        self
    }

    /// Whether the addresses the configured [`dashboard`](Self::dashboard)s resolve to
    /// (looked up again before each heartbeat) may call: on by default, since each must
    /// call back to show this service. Off: only loopback, this host and
    /// [`allow_clients`](Self::allow_clients).
    pub fn allow_dashboards(mut self, on: bool) -> Self {
        self.config.allow_dashboards = on;
        self
    }

    /// What the dashboard may change ([`Access::ReadOnly`] by default).
    pub fn access(mut self, access: Access) -> Self {
        self.config.access = access;
        self
    }

    /// A dashboard to send heartbeats to: `host:port` (as Java's
    /// `csp.sentinel.dashboard.server`), `http://host:port` or `https://host:port` (https
    /// needs the `tls` feature). Call again for several dashboards: each gets every
    /// heartbeat.
    pub fn dashboard(mut self, address: impl Into<String>) -> Self {
        self.config.dashboards.push(address.into());
        self
    }

    /// The heartbeat path (`/registry/machine` by default; Java's
    /// `csp.sentinel.heartbeat.api.path`).
    pub fn heartbeat_path(mut self, path: impl Into<String>) -> Self {
        self.config.heartbeat_path = path.into();
        self
    }

    /// How often heartbeats are sent (10 s by default).
    pub fn heartbeat_interval(mut self, every: Duration) -> Self {
        self.config.heartbeat_interval = every;
        self
    }

    /// How often the per-second series is collected (1 s by default; a late collection
    /// catches up, so a longer interval loses nothing within the engine's minute).
    pub fn collect_interval(mut self, every: Duration) -> Self {
        self.config.collect_interval = every;
        self
    }

    /// How long a rule edit may take before it is answered (2.5 s by default, so that the
    /// answer comes within 3 s; the dashboard gives up at 5 s): reading the store's
    /// revision, the compare-and-set write, and the wait until this engine applied the
    /// edit from the store (so that the dashboard's next `getRules` shows it). An edit not
    /// done in time answers a failure that says what is known: nothing written, maybe
    /// written, or written and not applied yet.
    pub fn apply_wait(mut self, wait: Duration) -> Self {
        self.config.apply_wait = wait;
        self
    }

    /// The per-second series the `metric` command reads: share the process's one series
    /// with other readers (a console). Default: a series of its own, 5 minutes.
    pub fn series(mut self, series: Arc<MetricSeries>) -> Self {
        self.config.series = Some(series);
        self
    }

    /// Writes the dashboard's edits of `family` to `store` (the key the engine's data
    /// source for that family reads), compare-and-set; see the crate docs. Only with
    /// [`Access::ReadWrite`]. The key must hold this family alone (a Sentinel JSON list,
    /// read with the family's converter such as `FlowJson`): the edit replaces the key's
    /// value with that list. The store must keep revisions (etcd, Redis); a file or a Nacos
    /// config cannot compare-and-set, and edits to it are refused saying so.
    pub fn rule_store(mut self, family: RuleFamily, store: Arc<dyn WritableDataSource>) -> Self {
        self.config.stores.insert(FamilyKey::of(family), store);
        self
    }

    /// Applies the dashboard's edits of families without a rule store to this engine's
    /// memory only (Java's default): they are lost on restart and other instances do not
    /// see them. Off by default; only with [`Access::ReadWrite`].
    pub fn memory_only_edits(mut self, on: bool) -> Self {
        self.config.memory_only_edits = on;
        self
    }

    /// Serves the read command `name` (a path such as `cluster/server/info`) with
    /// `handler`, listed by `api` with `description`: answered whatever the
    /// [`access`](Self::access). A component beside the engine (the token server) answers
    /// the dashboard's commands for it this way. `name` must not be a built-in command
    /// (except `getClusterMode`, which a token server answers as Sentinel's mode 1), nor
    /// registered twice: [`build`](Self::build) says so.
    pub fn command(
        self,
        name: impl Into<String>,
        description: impl Into<String>,
        handler: impl CommandHandler,
    ) -> Self {
        self.register(name.into(), description.into(), false, Arc::new(handler))
    }

    /// Serves the command `name` that changes state: as [`command`](Self::command), but
    /// refused (400 "read-only", counted in [`Transport::status`](crate::Transport::status)
    /// and sent to the engine's listeners) unless the access is [`Access::ReadWrite`].
    pub fn write_command(
        self,
        name: impl Into<String>,
        description: impl Into<String>,
        handler: impl CommandHandler,
    ) -> Self {
        self.register(name.into(), description.into(), true, Arc::new(handler))
    }

    fn register(
        mut self,
        name: String,
        description: String,
        writes: bool,
        handler: Arc<dyn CommandHandler>,
    ) -> Self {
        self.config.commands.push(Registered {
            name,
            description,
            writes,
            handler,
        });
        self
    }

    /// Checks and returns the config.
    pub fn build(self) -> Result<TransportConfig, TransportError> {
        let config = self.config;
        for (i, command) in config.commands.iter().enumerate() {
            let duplicate = config.commands[..i]
                .iter()
                .any(|earlier| earlier.name == command.name);
            let problem = if duplicate {
                Err(format!("{:?} is registered twice", command.name))
            } else {
                crate::commands::check_name(&command.name)
            };
            if let Err(message) = problem {
                return Err(TransportError::Config {
                    setting: "command",
                    message,
                });
            }
        }
        if config.app.trim().is_empty() || config.app.len() > 256 {
            return Err(TransportError::Config {
                setting: "builder",
                message: "the application name must be 1 to 256 characters (the dashboard's limit)"
                    .into(),
            });
        }
        if !config.heartbeat_path.starts_with('/') {
            return Err(TransportError::Config {
                setting: "heartbeat_path",
                message: format!("{:?} does not start with `/`", config.heartbeat_path),
            });
        }
        for (setting, every) in [
            ("heartbeat_interval", config.heartbeat_interval),
            ("collect_interval", config.collect_interval),
        ] {
            if every.is_zero() {
                return Err(TransportError::Config {
                    setting,
                    message: "must be longer than zero".into(),
                });
            }
        }
        for address in &config.dashboards {
            crate::heartbeat::dashboard_url(address, &config.heartbeat_path)?;
        }
        Ok(config)
    }
}
