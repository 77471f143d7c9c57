//! `sentinel-rules`: validate rule files, and read, push, diff and watch the rules kept in a
//! file, etcd, Redis, Nacos or NATS, as the services guarded by sentinel-core read them.
//!
//! ```text
//! sentinel-rules validate rules.json --format combined
//! sentinel-rules get  --from etcd://127.0.0.1:2379/sentinel/rules
//! sentinel-rules push rules.json --to etcd://127.0.0.1:2379/sentinel/rules --cas
//! sentinel-rules diff rules.json --from redis://127.0.0.1:6379/rules:flow --family flow
//! sentinel-rules watch --from nats://127.0.0.1:4222/sentinel/flow --family flow
//! ```
//!
//! Credentials come from `SENTINEL_RULES_USER` and `SENTINEL_RULES_PASSWORD`, never from the
//! command line; `--ask-password` asks for the password on the terminal, and
//! `--password-stdin` reads it from standard input (only once a command opens a store that
//! takes one). Every command prints for a person, or JSON with `--json`. The exit code is 0
//! on success, 1 when rules are invalid (or differ, for `diff`), 2 on a usage or store error.

/// Prints a line to stdout; a closed pipe (`| head`) is not an error worth a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod format;
mod store;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sentinel_core::datasource::{DataSource, Encoding, Expected, ReadableDataSource};
use sentinel_core::{RuleError, RuleSet, Sentinel, SentinelEvent};
use serde_json::{json, Value};

use format::{Family, Format, Rules};
use store::{Login, Store};

/// Validate Sentinel rules, and read, push, diff and watch them in a config store.
#[derive(Debug, Parser)]
#[command(name = "sentinel-rules", version)]
struct Cli {
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Ask for the store's password on the terminal, without echo (instead of
    /// `SENTINEL_RULES_PASSWORD`).
    #[arg(long, global = true, conflicts_with = "password_stdin")]
    ask_password: bool,
    /// Read the store's password from the first line of standard input (for scripts).
    #[arg(long, global = true)]
    password_stdin: bool,
    #[command(subcommand)]
    command: Command,
}

/// How the rules are written: the format and (for a per-family list) the family.
#[derive(Debug, Clone, clap::Args)]
struct Shape {
    /// The payload format: Sentinel (Java) JSON of one family, sentinel-golang JSON of one
    /// family, or the combined document `{"flow": [...], ...}`. Default: `java` with a
    /// `--family`, `combined` without.
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// The rule family of a per-family list.
    #[arg(long, value_enum)]
    family: Option<Family>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a rules file: every problem, with its rule index, resource and field.
    Validate {
        /// The rules file.
        file: PathBuf,
        #[command(flatten)]
        shape: Shape,
    },
    /// Print the rules stored at a URL.
    Get {
        /// The store: file:///path, etcd://host:port/key, redis://host:port/key?channel=...,
        /// nacos://host:port/dataId?group=...&namespace=..., nats://host:port/bucket/key.
        #[arg(long)]
        from: String,
    },
    /// Validate a rules file, then write it to a store.
    Push {
        /// The rules file.
        file: PathBuf,
        /// The store URL (see `get`).
        #[arg(long)]
        to: String,
        /// Write only if the stored revision is still the one just read (etcd, Redis, NATS).
        #[arg(long)]
        cas: bool,
        #[command(flatten)]
        shape: Shape,
    },
    /// Show what pushing a rules file would change in a store.
    Diff {
        /// The rules file.
        file: PathBuf,
        /// The store URL (see `get`).
        #[arg(long)]
        from: String,
        #[command(flatten)]
        shape: Shape,
    },
    /// Follow a store: print every applied or rejected update, with the source's status, and
    /// the store going away and coming back.
    Watch {
        /// The store URL (see `get`).
        #[arg(long)]
        from: String,
        /// Stop after this many updates (applied or rejected); default: until Ctrl-C.
        #[arg(long)]
        updates: Option<u64>,
        #[command(flatten)]
        shape: Shape,
    },
}

/// Why a command failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Bad arguments or URL: exit 2.
    Usage(String),
    /// The store failed: exit 2.
    Store(String),
    /// Invalid rules (or a difference, for `diff`): exit 1, already printed.
    Rules,
}

impl Failure {
    pub(crate) fn store(error: impl std::error::Error) -> Self {
        let mut text = error.to_string();
        let mut cause = error.source();
        while let Some(e) = cause {
            text.push_str(": ");
            text.push_str(&e.to_string());
            cause = e.source();
        }
        Failure::Store(text)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.json;
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Rules) => ExitCode::from(1),
        Err(Failure::Usage(message) | Failure::Store(message)) => {
            if json {
                say!("{}", json!({ "ok": false, "error": message }));
            } else {
                use std::io::Write as _;
                let _ = writeln!(std::io::stderr(), "sentinel-rules: {message}");
            }
            ExitCode::from(2)
        }
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    let ask = AskPassword {
        terminal: cli.ask_password,
        stdin: cli.password_stdin,
    };
    let json = cli.json;
    match cli.command {
        Command::Validate { file, shape } => {
            let rules = read_file(&file, &shape, json)?;
            report(json, json!({ "ok": true, "rules": rules.counts() }), || {
                format!("ok: {}", rules.summary())
            });
            Ok(())
        }
        Command::Get { from } => {
            let store = Store::parse(&from)?;
            let mut source = store.source(&ask.login(&store)?)?;
            let payload = source.read().await.map_err(Failure::store);
            source.close().await;
            let payload = payload?;
            let entries: Vec<Value> = payload
                .entries
                .iter()
                .map(|e| json!({ "key": e.key, "value": as_json(&e.value) }))
                .collect();
            if json {
                say!(
                    "{}",
                    json!({ "ok": true, "revision": payload.revision, "entries": entries })
                );
            } else if payload.entries.is_empty() {
                say!("(nothing stored at {from})");
            } else {
                for entry in &payload.entries {
                    say!("# {}", entry.key);
                    say!("{}", pretty(&entry.value));
                }
            }
            Ok(())
        }
        Command::Push {
            file,
            to,
            cas,
            shape,
        } => {
            let rules = read_file(&file, &shape, json)?;
            let store = Store::parse(&to)?;
            let writer = store.writer(&ask.login(&store)?).await?;
            let expected = if cas {
                Expected::Revision(writer.revision().await.map_err(Failure::store)?)
            } else {
                Expected::Anything
            };
            // Stored as it was written: a combined document stays one, for CombinedJson.
            let encoding = if shape.is_combined() {
                Encoding::Combined
            } else {
                Encoding::Auto
            };
            let revision = writer
                .write_as(&rules.set, encoding, expected)
                .await
                .map_err(Failure::store)?;
            report(
                json,
                json!({ "ok": true, "to": writer.describe(), "revision": revision, "rules": rules.counts() }),
                || {
                    let at = revision
                        .map(|r| format!(" (revision {r})"))
                        .unwrap_or_default();
                    format!("pushed {} to {}{at}", rules.summary(), writer.describe())
                },
            );
            Ok(())
        }
        Command::Diff { file, from, shape } => {
            let wanted = read_file(&file, &shape, json)?;
            let store = Store::parse(&from)?;
            let mut source = store.source(&ask.login(&store)?)?;
            let payload = source.read().await.map_err(Failure::store);
            source.close().await;
            let payload = payload?;
            let stored = match payload.entries.first() {
                Some(entry) => shape
                    .converter()?
                    .convert(&entry.value)
                    .map_err(|e| Failure::Store(format!("the stored rules: {e}")))?,
                None => RuleSet::cleared(&wanted.set.families()),
            };
            let changes = format::diff(&stored, &wanted.set);
            if json {
                say!(
                    "{}",
                    json!({ "ok": true, "changed": !changes.is_empty(), "changes": changes })
                );
            } else if changes.is_empty() {
                say!("no change: {from} already holds these rules");
            } else {
                for change in &changes {
                    say!(
                        "{} {} {}",
                        change["op"].as_str().unwrap_or("?"),
                        change["family"].as_str().unwrap_or("?"),
                        change["rule"]
                    );
                }
            }
            if changes.is_empty() {
                Ok(())
            } else {
                Err(Failure::Rules)
            }
        }
        Command::Watch {
            from,
            updates,
            shape,
        } => watch(&from, updates, &shape, &ask, json).await,
    }
}

/// Where the password comes from, besides `SENTINEL_RULES_PASSWORD`: asked only once a
/// command opens a store that takes one (not for `validate` or a file).
#[derive(Debug, Clone, Copy)]
struct AskPassword {
    terminal: bool,
    stdin: bool,
}

impl AskPassword {
    fn login(&self, store: &Store) -> Result<Login, Failure> {
        if matches!(store, Store::File(_)) {
            return Ok(Login::default());
        }
        let mut login = Login::from_env();
        if self.terminal {
            login.password = Some(login.ask_password()?);
        } else if self.stdin {
            login.password = Some(Login::password_from(std::io::stdin().lock())?);
        }
        Ok(login)
    }
}

/// Runs a data source on `from` and prints every applied or rejected update.
async fn watch(
    from: &str,
    updates: Option<u64>,
    shape: &Shape,
    ask: &AskPassword,
    json: bool,
) -> Result<(), Failure> {
    let store = Store::parse(from)?;
    let source = store.source(&ask.login(&store)?)?;
    let sentinel = Sentinel::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    sentinel.add_listener(move |event: &SentinelEvent| {
        let line = match event {
            SentinelEvent::RulesApplied {
                families, version, ..
            } => json!({
                "event": "applied",
                "version": version,
                "rules": families.iter().map(|(f, n)| (f.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
            }),
            SentinelEvent::RulesRejected { error, .. } => {
                json!({ "event": "rejected", "error": error.to_string() })
            }
            _ => return,
        };
        let _ = tx.send(line);
    });
    let converter = shape.converter()?;
    let ds = DataSource::builder(source, converter)
        .name("sentinel-rules watch")
        .start(&sentinel)
        .await
        .map_err(Failure::store)?;
    let mut statuses = ds.status_watch();
    let mut connected = ds.status().connected;
    let mut seen = 0u64;
    loop {
        let (mut line, update) = tokio::select! {
            line = rx.recv() => match line {
                Some(line) => (line, true),
                None => break,
            },
            // The store going away and coming back, as it happens (not an update).
            changed = statuses.changed() => {
                if changed.is_err() {
                    break;
                }
                let status = statuses.borrow_and_update().clone();
                if status.connected == connected {
                    continue;
                }
                connected = status.connected;
                if connected {
                    (json!({ "event": "connected" }), false)
                } else {
                    (json!({ "event": "disconnected", "error": status.last_error }), false)
                }
            }
            _ = tokio::signal::ctrl_c() => break,
        };
        let status = ds.status();
        line["status"] = json!({
            "connected": status.connected,
            "applied": status.applied_count,
            "rejected": status.rejected_count,
            "disconnects": status.disconnects,
            "revision": status.last_revision,
        });
        if json {
            say!("{line}");
        } else {
            let detail = match line["event"].as_str() {
                Some("applied") => line["rules"].to_string(),
                Some("connected") => String::new(),
                _ => line["error"].to_string(),
            };
            say!(
                "{} {detail} (connected {}, {} applied, {} rejected, {} disconnects)",
                line["event"].as_str().unwrap_or("?"),
                status.connected,
                status.applied_count,
                status.rejected_count,
                status.disconnects
            );
        }
        if update {
            seen += 1;
            if updates.is_some_and(|n| seen >= n) {
                break;
            }
        }
    }
    ds.close().await;
    Ok(())
}

/// Reads and converts a rules file; prints its problems (and fails) when it is invalid.
fn read_file(path: &PathBuf, shape: &Shape, json: bool) -> Result<Rules, Failure> {
    let bytes = std::fs::read(path)
        .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?;
    match shape.converter()?.convert(&bytes) {
        Ok(set) => Ok(Rules { set }),
        Err(error) => {
            let error = error.with_payload(&path.display().to_string());
            print_invalid(&error, json);
            Err(Failure::Rules)
        }
    }
}

fn print_invalid(error: &RuleError, json: bool) {
    if json {
        let issues: Vec<Value> = error
            .issues()
            .iter()
            .map(|i| {
                json!({
                    "family": i.family.to_string(),
                    "index": i.index,
                    "resource": i.resource,
                    "field": i.field,
                    "message": i.message,
                })
            })
            .collect();
        say!(
            "{}",
            json!({ "ok": false, "error": error.to_string(), "issues": issues })
        );
    } else if error.issues().is_empty() {
        say!("invalid: {error}");
    } else {
        for issue in error.issues() {
            say!("invalid: {issue}");
        }
    }
}

fn report(json: bool, value: Value, text: impl FnOnce() -> String) {
    if json {
        say!("{value}");
    } else {
        say!("{}", text());
    }
}

/// A stored value as JSON when it is JSON, as a string otherwise.
fn as_json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

fn pretty(bytes: &[u8]) -> String {
    serde_json::to_string_pretty(&as_json(bytes))
        .unwrap_or_else(|_| String::from_utf8_lossy(bytes).into_owned())
}
