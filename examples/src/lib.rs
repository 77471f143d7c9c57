//! Shared pieces of the example programs: a simulated workload and a per-second report.
//!
//! The repository README's code is compiled as this crate's doctests (see [`readme`]), so
//! it cannot go stale.
//!
//! Each program is a binary behind the feature of the same name (`quickstart`, `memory` and
//! `custom_converter` need none): `etcd`, `redis`, `nacos`, `nats`, `zookeeper` (a rule
//! source and a simulated workload), `service` (axum behind `sentinel-tower`), `transport` (the dashboard),
//! `otel`, `cluster` and `console`. Run one with, for example,
//! `cargo run -p examples --features etcd --bin etcd -- --help`; the README gives the
//! commands, the servers come from `scripts/services.sh`. The pieces here:
//!
//! - [`Load`] and [`report`]: the workload's arguments and its one-line report per second;
//! - [`Login`]: a store's user and password from the environment, or asked on the terminal;
//! - [`main`]: a live example's `main` (logging, arguments, runtime, exit status);
//! - [`rules_source`]: a store's source read as a combined document or a flow list;
//! - [`init_tracing`], [`exit_on_error`], [`exit_with`] and [`error_chain`]: a program's
//!   logging, exit status and error message.

#[cfg(feature = "console")]
pub mod console_service;
#[cfg(feature = "axum")]
pub mod service_routes;

use std::error::Error;
use std::time::Duration;

use sentinel_core::datasource::{
    CombinedJson, DataSource, DataSourceBuilder, FlowJson, ReadableDataSource, Secret,
};
use sentinel_core::Sentinel;

/// Runs a simulated resource under steady load: `rate` calls per second, each taking
/// `work` of pretend work, until the task is dropped.
pub async fn simulate(sentinel: Sentinel, resource: &'static str, rate: u32, work: Duration) {
    let mut tick = tokio::time::interval(Duration::from_secs(1) / rate.max(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        let sentinel = sentinel.clone();
        tokio::spawn(async move {
            let _ = sentinel
                .entry(resource)
                .inbound()
                .run(tokio::time::sleep(work))
                .await;
        });
    }
}

/// One line per resource: passes and blocks in the last complete second.
pub fn report(sentinel: &Sentinel, resources: &[&str]) -> String {
    resources
        .iter()
        .map(|r| match sentinel.resource_stats(r) {
            Some(s) => format!(
                "{r}: pass {:>4} block {:>4}",
                s.pass_last_second, s.block_last_second
            ),
            None => format!("{r}: no traffic yet"),
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// An error and its causes, one after the other: `a: b: c`.
pub fn error_chain(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

/// The simulated load of the live examples.
#[derive(Debug, Clone, clap::Args)]
pub struct Load {
    /// Calls per second to the guarded resource.
    #[arg(long, default_value_t = 50)]
    pub rate: u32,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    pub seconds: Option<u64>,
}

/// The environment variable an example reads a store's user from (as `sentinel-rules`).
pub const USER_VAR: &str = "SENTINEL_RULES_USER";
/// The environment variable an example reads a store's password from (as `sentinel-rules`):
/// never from arguments, which shell history and process lists show.
pub const PASSWORD_VAR: &str = "SENTINEL_RULES_PASSWORD";

/// A user and password for a store with auth on, from `SENTINEL_RULES_USER` and
/// `SENTINEL_RULES_PASSWORD` (both or neither). `Debug` shows the password as `<redacted>`.
#[derive(Clone, Debug, Default)]
pub struct Login {
    user: Option<String>,
    password: Option<Secret>,
}

impl Login {
    /// The login in the environment; an error if only one of the two is set (a half login
    /// is refused, not dropped).
    pub fn from_env() -> Result<Self, String> {
        let read = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
        let login = Self {
            user: read(USER_VAR),
            password: read(PASSWORD_VAR).map(Secret::from),
        };
        match (&login.user, &login.password) {
            (Some(_), None) => Err(format!("{USER_VAR} is set but {PASSWORD_VAR} is not")),
            _ => Ok(login),
        }
    }

    /// The user and password, when both are given; an error for a password without a user
    /// (etcd, Nacos and NATS log in with both).
    pub fn pair(&self) -> Result<Option<(&str, &str)>, String> {
        match (self.user.as_deref(), self.password()) {
            (None, Some(_)) => Err(format!("{PASSWORD_VAR} is set but {USER_VAR} is not")),
            (user, password) => Ok(user.zip(password)),
        }
    }

    /// The password alone, when one is set.
    pub fn password(&self) -> Option<&str> {
        self.password.as_ref().map(Secret::expose)
    }

    /// The user alone, when one is set.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }
}

/// The store clients' own logs the examples keep quiet unless `RUST_LOG` asks for them.
const QUIET_CLIENTS: &str =
    "async_nats=warn,h2=warn,hyper=warn,hyper_util=warn,reqwest=warn,tonic=warn,tower=warn,redis=warn,rustls=warn,zookeeper_client=warn";

/// Logs to stderr through `tracing-subscriber`, at `RUST_LOG` or else `default` with the
/// store clients' chatter turned down; colours only when stderr is a terminal (an example
/// is a program, so it may install a subscriber; the libraries never do).
pub fn init_tracing(default: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("{default},{QUIET_CLIENTS}"))
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// Ends a program: on an error, prints it with its causes (`Display`, not `Debug`) to
/// stderr and exits with status 1.
pub fn exit_on_error(result: Result<(), Box<dyn Error>>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", error_chain(&*error));
            std::process::ExitCode::FAILURE
        }
    }
}

/// Ends the program at once: prints `context` and the error with its causes
/// (`context: a: b`) to stderr and exits with status 1. For the programs that stop at their
/// first error rather than return it.
pub fn exit_with(context: &str, error: &dyn Error) -> ! {
    eprintln!("{context}: {}", error_chain(error));
    std::process::exit(1)
}

/// A live example's `main`: logs at `info` ([`init_tracing`]), parses the arguments `A`,
/// runs `run` with them on a multi-threaded tokio runtime (as `#[tokio::main]` does) and
/// ends as [`exit_on_error`] says.
///
/// ```no_run
/// #[derive(clap::Parser)]
/// struct Args {
///     #[arg(long, default_value = "127.0.0.1:2379")]
///     server: String,
/// }
///
/// fn main() -> std::process::ExitCode {
///     examples::main(async |args: Args| {
///         println!("would watch {}", args.server);
///         Ok(())
///     })
/// }
/// ```
pub fn main<A: clap::Parser>(
    run: impl AsyncFnOnce(A) -> Result<(), Box<dyn Error>>,
) -> std::process::ExitCode {
    init_tracing("info");
    let args = A::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("Failed building the Runtime");
    exit_on_error(runtime.block_on(run(args)))
}

/// A data source over `backend` whose payload is a combined document `{"flow":[...],...}`
/// (`combined`) or Sentinel's flow rule list, as the store examples' `--combined` chooses.
pub fn rules_source(backend: impl ReadableDataSource, combined: bool) -> DataSourceBuilder {
    if combined {
        DataSource::builder(backend, CombinedJson::new())
    } else {
        DataSource::builder(backend, FlowJson::new())
    }
}

/// Guards `resource` with the simulated `load` and prints, once a second, the passes and
/// blocks, the active rules and the source's state (a rejected payload, a lost connection),
/// until Ctrl-C or after `load.seconds`.
pub async fn live(sentinel: &Sentinel, source: &DataSource, resource: &'static str, load: &Load) {
    let (rate, seconds) = (load.rate, load.seconds);
    let load = tokio::spawn(simulate(
        sentinel.clone(),
        resource,
        rate,
        Duration::from_millis(5),
    ));

    // The engine counts "the last second" in two 500 ms buckets. Report just before a
    // bucket ends, so that both buckets are (nearly) full and the numbers cover a whole second.
    let into_bucket = sentinel.clock().now_ms() % 500;
    let first = tokio::time::Instant::now() + Duration::from_millis(1480 - into_bucket);
    let mut tick = tokio::time::interval_at(first, Duration::from_secs(1));
    let started = tokio::time::Instant::now();
    let mut last_rejected = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
        }
        println!("{}", report(sentinel, &[resource]));
        let rules: Vec<String> = sentinel
            .flow_rules()
            .rules()
            .iter()
            .map(|r| format!("{} count={} grade={:?}", r.resource, r.count, r.grade))
            .collect();
        let status = source.status();
        println!(
            "  flow rules: [{}]  (degrade {}, system {}, authority {}, param-flow {}) applied={} connected={}",
            rules.join("; "),
            sentinel.degrade_rules().rules().len(),
            sentinel.system_rules().rules().len(),
            sentinel.authority_rules().rules().len(),
            sentinel.param_flow_rules().rules().len(),
            status.applied_count,
            status.connected,
        );
        if status.rejected_count > last_rejected {
            last_rejected = status.rejected_count;
            println!(
                "  REJECTED (rules kept): {}",
                status.last_error.as_deref().unwrap_or("?")
            );
        } else if let (false, Some(error)) = (status.connected, &status.last_error) {
            println!("  disconnected: {error}");
        }
        if seconds.is_some_and(|s| started.elapsed() >= Duration::from_secs(s)) {
            break;
        }
    }
    load.abort();
}

#[doc = include_str!("../../README.md")]
pub mod readme {}

/// The snippets of `docs/`, compiled as doctests like the README's.
pub mod docs {
    #[doc = include_str!("../../docs/stores.md")]
    pub mod stores {}
    #[doc = include_str!("../../docs/extending.md")]
    pub mod extending {}
}
