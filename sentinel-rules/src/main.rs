//! `sentinel-rules`: validate rule files, and read, push, diff, delete and watch the rules kept
//! in a file, etcd, Redis (a server, a Sentinel master or a cluster), Nacos or NATS, with or
//! without TLS, as the services guarded by sentinel-core read them.
//!
//! ```text
//! sentinel-rules validate rules.json --format combined
//! sentinel-rules get  --from etcds://etcd.internal/sentinel/rules --ca-file ca.pem
//! sentinel-rules push rules.json --to etcd://127.0.0.1:2379/sentinel/rules
//! sentinel-rules diff rules.json --from redis://127.0.0.1:6379/rules:flow --family flow
//! sentinel-rules watch --from nats://127.0.0.1:4222/sentinel/flow --family flow
//! sentinel-rules delete --from nacos://127.0.0.1:8848/?app=orders
//! sentinel-rules promote --at etcd://127.0.0.1:2379/sentinel/rules --family flow --resource GET:/order --replace
//! sentinel-rules demote --at redis://127.0.0.1:6379/rules --family flow --index 0
//! ```
//!
//! Credentials come from `SENTINEL_RULES_USER` and `SENTINEL_RULES_PASSWORD`, never from the
//! command line; `--ask-password` asks for the password on the terminal, and
//! `--password-stdin` reads it from standard input (only once a command opens a store that
//! takes one). Every command prints for a person, or JSON with `--json`. Exit codes: 0
//! success (for `diff`: no change), 1 invalid rules, 2 a usage error (bad arguments or URL),
//! 3 `diff` found changes, 4 the store failed (unreachable, refused, timed out), 5 a `push`,
//! `promote` or `demote` lost a race (someone else wrote between the read and the write).
//!
//! `push` compares and sets by default where the store keeps revisions (etcd, Redis, NATS):
//! it reads the revision, then writes only if it is unchanged, so a push never silently
//! replaces a newer one. `--no-cas` overwrites instead.

/// Prints a line to stdout; a closed pipe (`| head`) is not an error worth a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod format;
mod shadow;
mod store;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};
use sentinel_core::datasource::{
    DataSource, Encoding, Expected, RawPayload, ReadableDataSource, WriteError,
};
use sentinel_core::{
    KeyPolicy, RuleError, RuleIssue, RuleSet, Sentinel, SentinelEvent, Validation,
};
use serde_json::{json, Value};

use format::{Family, Format, Rules};
use store::{Access, Login, Nacos, Store};

const AFTER_HELP: &str = "\
Store URLs:
  rules.json, file:///etc/sentinel/rules.json    a file
  etcd://host:2379/key                           one etcd key (etcds:// for TLS)
  etcd://host:2379/sentinel/?prefix              every key under a prefix (get, diff, watch, delete)
  redis://host:6379/key?channel=...&db=0         a Redis key (rediss:// for TLS)
  redis://sentinel:26379/key?master=mymaster&sentinels=h2:26379   a Sentinel master
  redis://node:6379/key?cluster&nodes=h2:6379,h3:6379              a Redis Cluster
  nacos://host:8848/dataId?group=...&namespace=...                 one Nacos dataId
  nacos://host:8848/?app=orders                  the dashboard dataIds of an app, as one document
  nats://host:4222/bucket/key                    a NATS KV key (natss:// for TLS; * and > watch many)
  Ports default to 2379, 6379 (26379 for sentinels), 8848 and 4222. Keys are percent-decoded:
  rules:%7Borders%7D:flow is rules:{orders}:flow.

Examples:
  sentinel-rules validate rules.json
  sentinel-rules diff rules.json --from etcd://127.0.0.1:2379/sentinel/rules || [ $? = 3 ]
  sentinel-rules push rules.json --to etcd://127.0.0.1:2379/sentinel/rules
  SENTINEL_RULES_PASSWORD=... sentinel-rules get --from rediss://redis.internal/rules:orders --ca-file ca.pem
  sentinel-rules watch --from nats://127.0.0.1:4222/sentinel/flow --family flow
  sentinel-rules completions bash > /etc/bash_completion.d/sentinel-rules

Environment:
  SENTINEL_RULES_USER       the user to log in as (etcd, Redis ACL, Nacos, NATS)
  SENTINEL_RULES_PASSWORD   its password (or --ask-password, --password-stdin); never in the URL
  SENTINEL_RULES_CA_FILE    the CA certificate of TLS stores (--ca-file)

Exit codes:
  0 success (diff: no change)    1 invalid rules    2 usage error (arguments, URL)
  3 diff: the store differs      4 the store failed (unreachable, refused, timed out)
  5 push lost a compare-and-set race (someone else wrote first; --no-cas overwrites)";

/// Validate Sentinel rules, and read, push, diff, delete and watch them in a config store.
#[derive(Debug, Parser)]
#[command(name = "sentinel-rules", version, after_help = AFTER_HELP)]
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
    /// How long to wait for the store: each connect and request, and the whole command
    /// (`500ms`, `5s`, `1m`); `watch` waits for updates as long as it runs.
    #[arg(long, global = true, default_value = "10s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// The CA certificate (PEM) that a TLS store's certificate is checked against; the
    /// system's roots without it.
    #[arg(long, global = true, env = "SENTINEL_RULES_CA_FILE")]
    ca_file: Option<PathBuf>,
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
        /// Make a key that is no field of its rule an error (exit 1), not a warning. The keys
        /// stores add (`id`, `app`, `ip`, `port`, `gmtCreate`, `gmtModified`...) stay ignored;
        /// a key close to a field (`cuont`) is an error either way.
        #[arg(long)]
        strict_keys: bool,
        #[command(flatten)]
        shape: Shape,
    },
    /// Print the rules stored at a URL.
    Get {
        /// The store URL (`sentinel-rules --help` lists them).
        #[arg(long)]
        from: String,
    },
    /// Validate a rules file, then write it to a store.
    Push {
        /// The rules file.
        file: PathBuf,
        /// The store URL (`sentinel-rules --help` lists them).
        #[arg(long)]
        to: String,
        /// Write only if the stored revision is still the one just read, and fail (exit 2) on a
        /// store that keeps no revisions. Without `--cas` or `--no-cas`, a push to etcd, Redis
        /// or NATS compares and sets anyway (exit 5 if someone else wrote in between), and a
        /// push to a file or Nacos overwrites.
        #[arg(long, conflicts_with = "no_cas")]
        cas: bool,
        /// Overwrite whatever is stored, even where the store keeps revisions: a late write
        /// can then replace a newer one (see the writers' docs).
        #[arg(long, conflicts_with = "if_revision")]
        no_cas: bool,
        /// Write only if the stored revision is still this one (the `revision` an earlier
        /// `push --json` printed): fails with exit 5 if someone wrote since. Implies `--cas`.
        #[arg(long, value_name = "REVISION")]
        if_revision: Option<u64>,
        #[command(flatten)]
        shape: Shape,
    },
    /// Show what pushing a rules file would change in a store, field by field, in every
    /// family the store or the file holds. Exit 0: no change; 3: changes.
    Diff {
        /// The rules file.
        file: PathBuf,
        /// The store URL (`sentinel-rules --help` lists them).
        #[arg(long)]
        from: String,
        #[command(flatten)]
        shape: Shape,
    },
    /// Delete the rules stored at a URL (every key of a prefix or wildcard, every dataId of
    /// an app). Deleting what is not there succeeds.
    Delete {
        /// The store URL (`sentinel-rules --help` lists them).
        #[arg(long)]
        from: String,
    },
    /// Follow a store: print every applied or rejected update with its time, what changed
    /// and the source's status, and the store going away and coming back.
    Watch {
        /// The store URL (`sentinel-rules --help` lists them).
        #[arg(long)]
        from: String,
        /// Stop after this many updates (applied or rejected); default: until Ctrl-C.
        #[arg(long)]
        updates: Option<u64>,
        #[command(flatten)]
        shape: Shape,
    },
    /// Move shadow rules into the enforced set of the combined document a key holds
    /// (`--resource`, `--index` narrow the family), with compare-and-set: exit 5, and nothing
    /// written, if someone else wrote in between.
    Promote {
        #[command(flatten)]
        what: shadow::Move,
        /// Drop the enforced rules of the family on the promoted rules' resources first: the
        /// tried limit replaces the current one.
        #[arg(long)]
        replace: bool,
    },
    /// Move enforced rules into the shadow section (they then only count would-blocks),
    /// with compare-and-set like `promote`.
    Demote {
        #[command(flatten)]
        what: shadow::Move,
    },
    /// Print the JSON Schema of a rule format (the combined document without `--format` and
    /// `--family`), for an editor to complete fields and flag misspelt keys.
    Schema {
        #[command(flatten)]
        shape: Shape,
    },
    /// Print a shell completion script: `sentinel-rules completions bash`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Why a command failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Bad arguments or URL: exit 2.
    Usage(String),
    /// The store failed: exit 4.
    Store(String),
    /// `push --cas` lost a race: exit 5.
    Conflict(String),
    /// Invalid rules: exit 1, already printed.
    Rules,
    /// `diff` found changes: exit 3, already printed.
    Differs,
}

impl Failure {
    /// A store error without a store to name (the store's own message names it).
    pub(crate) fn store(error: impl std::error::Error) -> Self {
        Failure::Store(chain(&error))
    }
}

/// An error and its root cause, each said once: the message, then the innermost cause when
/// the message does not already hold its text. The causes in between are wrappers that
/// repeat the root (a gRPC status around a transport error around an I/O error) and, for
/// some clients, print it in `Debug` form.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut root = None;
    let mut cause = error.source();
    while let Some(e) = cause {
        root = Some(e);
        cause = e.source();
    }
    if let Some(root) = root {
        let root = root.to_string();
        if !root.is_empty() && !text.contains(&root) {
            text.push_str(": ");
            text.push_str(&root);
        }
    }
    text
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.json;
    let (code, message) = match run(cli).await {
        Ok(()) => return ExitCode::SUCCESS,
        Err(Failure::Rules) => return ExitCode::from(1),
        Err(Failure::Differs) => return ExitCode::from(3),
        Err(Failure::Usage(message)) => (2, message),
        Err(Failure::Store(message)) => (4, message),
        Err(Failure::Conflict(message)) => (5, message),
    };
    if json {
        say!("{}", json!({ "ok": false, "error": message }));
    } else {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "sentinel-rules: {message}");
    }
    ExitCode::from(code)
}

async fn run(cli: Cli) -> Result<(), Failure> {
    let ask = AskPassword {
        terminal: cli.ask_password,
        stdin: cli.password_stdin,
        timeout: cli.timeout,
        ca_file: cli.ca_file.clone(),
    };
    let json = cli.json;
    let timeout = cli.timeout;
    // Every command but `watch` gives up after the timeout, whatever the store does.
    let bounded = |what: String| {
        move |_| {
            Failure::Store(format!(
                "{what}: no answer within {}",
                humantime::format_duration(timeout)
            ))
        }
    };
    match cli.command {
        Command::Validate {
            file,
            strict_keys,
            shape,
        } => {
            let keys = if strict_keys {
                KeyPolicy::Deny
            } else {
                KeyPolicy::Warn
            };
            let rules = read_file_with(&file, &shape, json, keys)?;
            let warnings: Vec<Value> = rules.warnings.iter().map(issue_json).collect();
            report(
                json,
                json!({ "ok": true, "rules": rules.counts(), "warnings": warnings }),
                || {
                    let mut text = String::new();
                    for warning in &rules.warnings {
                        text.push_str(&format!("warning: {warning}\n"));
                    }
                    text.push_str(&format!("ok: {}", rules.summary()));
                    text
                },
            );
            Ok(())
        }
        Command::Schema { shape } => {
            let name = shape.schema_name()?;
            let schemas = sentinel_core::datasource::schema::rule_schemas();
            let schema = schemas
                .into_iter()
                .find(|(n, _)| *n == name)
                .map(|(_, schema)| schema)
                .ok_or_else(|| Failure::Usage(format!("no schema named {name}")))?;
            say!(
                "{}",
                serde_json::to_string_pretty(&schema).unwrap_or_default()
            );
            Ok(())
        }
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "sentinel-rules", &mut script);
            let mut script = String::from_utf8_lossy(&script).into_owned();
            if shell == clap_complete::Shell::Bash {
                // clap_complete's bash script names a subcommand's case arm differently from
                // the value it matches when the binary's name has a `-`
                // (`sentinel__subcmd__rules__subcmd__push` against
                // `sentinel__rules__subcmd__push`): every subcommand's options would go
                // uncompleted.
                script = script.replace("sentinel__subcmd__rules__", "sentinel__rules__");
            }
            use std::io::Write as _;
            let _ = std::io::stdout().write_all(script.as_bytes());
            Ok(())
        }
        Command::Get { from } => {
            let store = Store::parse(&from)?;
            let access = ask.access(&store)?;
            let payload = tokio::time::timeout(timeout, read(&store, &access))
                .await
                .map_err(bounded(store.to_string()))??;
            let entries: Vec<Value> = payload
                .entries
                .iter()
                .map(|e| json!({ "key": e.key, "value": as_json(&e.value) }))
                .collect();
            // An app's dataIds, read as one combined document.
            let document = match &store {
                Store::Nacos {
                    target: Nacos::App(_),
                    ..
                } if !payload.entries.is_empty() => {
                    let set = convert_payload(&store, &Shape::combined(), &payload)?;
                    let bytes = set.to_combined_json().map_err(|e| {
                        Failure::Store(format!("the rules in {store} do not encode: {e}"))
                    })?;
                    Some(as_json(&bytes))
                }
                _ => None,
            };
            if json {
                let mut doc =
                    json!({ "ok": true, "revision": payload.revision, "entries": entries });
                if let Some(document) = &document {
                    doc["document"] = document.clone();
                }
                say!("{doc}");
            } else if let Some(document) = &document {
                say!("# {store}, as one document");
                say!(
                    "{}",
                    serde_json::to_string_pretty(document).unwrap_or_default()
                );
            } else if payload.entries.is_empty() {
                say!("(nothing stored at {store})");
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
            no_cas,
            if_revision,
            shape,
        } => {
            let rules = read_file(&file, &shape, json)?;
            let store = Store::parse(&to)?;
            let cas = match (cas, no_cas, if_revision) {
                (_, _, Some(revision)) => Cas::At(revision),
                (true, _, None) => Cas::Read,
                (false, true, None) => Cas::Off,
                // The default: compare and set wherever the store keeps revisions.
                (false, false, None) if store.keeps_revisions() => Cas::Read,
                (false, false, None) => Cas::Off,
            };
            let access = ask.access(&store)?;
            let (target, revision) =
                tokio::time::timeout(timeout, push(&store, &access, &rules, &shape, cas))
                    .await
                    .map_err(bounded(store.to_string()))??;
            report(
                json,
                json!({
                    "ok": true,
                    "to": target,
                    "revision": revision,
                    "rules": rules.counts(),
                    "compare_and_set": !matches!(cas, Cas::Off),
                }),
                || {
                    let at = revision
                        .map(|r| format!(" (revision {r})"))
                        .unwrap_or_default();
                    format!("pushed {} to {target}{at}", rules.summary())
                },
            );
            Ok(())
        }
        Command::Diff { file, from, shape } => {
            let wanted = read_file(&file, &shape, json)?;
            let store = Store::parse(&from)?;
            let access = ask.access(&store)?;
            let payload = tokio::time::timeout(timeout, read(&store, &access))
                .await
                .map_err(bounded(store.to_string()))??;
            let stored = convert_payload(&store, &shape, &payload)?;
            let changes = format::diff(&stored, &wanted.set);
            let summary = format::summary_lines(&changes);
            if json {
                say!(
                    "{}",
                    json!({ "ok": true, "changed": !changes.is_empty(), "changes": changes, "summary": summary })
                );
            } else if changes.is_empty() {
                say!("no change: {store} already holds these rules");
            } else {
                for change in &changes {
                    say!("{}", format::change_line(change));
                }
                for line in &summary {
                    say!("{line}");
                }
            }
            if changes.is_empty() {
                Ok(())
            } else {
                Err(Failure::Differs)
            }
        }
        Command::Delete { from } => {
            let store = Store::parse(&from)?;
            let access = ask.access(&store)?;
            let keys = tokio::time::timeout(timeout, store.delete(&access))
                .await
                .map_err(bounded(store.to_string()))??;
            report(json, json!({ "ok": true, "deleted": keys }), || {
                if keys.is_empty() {
                    format!("nothing to delete at {store}")
                } else {
                    format!("deleted {} from {store}", keys.join(", "))
                }
            });
            Ok(())
        }
        Command::Watch {
            from,
            updates,
            shape,
        } => watch(&from, updates, &shape, &ask, json).await,
        Command::Promote { what, replace } => {
            let how = if replace {
                sentinel_core::shadow::ShadowMove::PromoteReplacing
            } else {
                sentinel_core::shadow::ShadowMove::Promote
            };
            shadow::run(what, how, &ask, json).await
        }
        Command::Demote { what } => {
            shadow::run(what, sentinel_core::shadow::ShadowMove::Demote, &ask, json).await
        }
    }
}

/// Reads what the store holds now.
async fn read(store: &Store, access: &Access) -> Result<RawPayload, Failure> {
    let mut source = store.source(access)?;
    let payload = source.read().await.map_err(|e| store.failed(e));
    source.close().await;
    payload
}

/// Which revision a push compares with.
#[derive(Debug, Clone, Copy)]
enum Cas {
    /// None: the push overwrites whatever is stored.
    Off,
    /// The one read just before the write.
    Read,
    /// This one.
    At(u64),
}

/// Writes the rules; returns what was written and the store's revision after it.
async fn push(
    store: &Store,
    access: &Access,
    rules: &Rules,
    shape: &Shape,
    cas: Cas,
) -> Result<(String, Option<u64>), Failure> {
    if let Store::Nacos {
        target: Nacos::App(_),
        ..
    } = store
    {
        if !shape.is_combined() {
            return Err(Failure::Usage(
                "an app's dataIds take the combined document (no --family)".into(),
            ));
        }
        if !matches!(cas, Cas::Off) {
            return Err(Failure::Usage(
                "Nacos keeps no revisions: no --cas or --if-revision".into(),
            ));
        }
        let written = store.push_app(access, &rules.set).await?;
        return Ok((format!("{store} ({})", written.join(", ")), None));
    }
    let writer = store.writer(access).await?;
    let expected = match cas {
        Cas::Off => Expected::Anything,
        Cas::Read => Expected::Revision(writer.revision().await.map_err(|e| store.failed(e))?),
        Cas::At(revision) => Expected::Revision(Some(revision)),
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
        .map_err(|e| match e {
            WriteError::Conflict { .. } => Failure::Conflict(chain(&e)),
            // Asking a file or Nacos for a compare-and-set is a usage error.
            WriteError::NoRevisions { .. } => Failure::Usage(format!(
                "{}: --cas and --if-revision need etcd, Redis or NATS",
                chain(&e)
            )),
            other => store.failed(other),
        })?;
    Ok((writer.describe(), revision))
}

/// The rules a payload holds: each entry converted (an app's dataIds each with its family's
/// converter) and merged.
fn convert_payload(store: &Store, shape: &Shape, payload: &RawPayload) -> Result<RuleSet, Failure> {
    let mut set = RuleSet::new();
    for entry in &payload.entries {
        let converter = match store {
            Store::Nacos {
                target: Nacos::App(app),
                ..
            } => match store::dashboard_family(app, &entry.key) {
                Some(family) => format::java(family),
                None => continue,
            },
            _ => shape.converter()?,
        };
        let rules = converter
            .convert(&entry.value)
            .map_err(|e| Failure::Store(format!("the rules stored at {}: {e}", entry.key)))?;
        set.merge(rules);
    }
    Ok(set)
}

/// Where the password comes from, besides `SENTINEL_RULES_PASSWORD`: asked only once a
/// command opens a store that takes one (not for `validate` or a file).
#[derive(Debug, Clone)]
pub(crate) struct AskPassword {
    terminal: bool,
    stdin: bool,
    timeout: Duration,
    ca_file: Option<PathBuf>,
}

impl AskPassword {
    /// The login, timeout and CA for `store`.
    pub(crate) fn access(&self, store: &Store) -> Result<Access, Failure> {
        let mut access = Access {
            login: Login::default(),
            timeout: self.timeout,
            ca_file: self.ca_file.clone(),
        };
        if matches!(store, Store::File(_)) {
            return Ok(access);
        }
        if self.timeout.is_zero() {
            return Err(Failure::Usage("--timeout must be more than 0".into()));
        }
        let mut login = Login::from_env();
        if self.terminal {
            login.password = Some(login.ask_password()?);
        } else if self.stdin {
            login.password = Some(Login::password_from(std::io::stdin().lock())?);
        }
        access.login = login;
        Ok(access)
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
    let source = store.source(&ask.access(&store)?)?;
    let sentinel = Sentinel::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let engine = sentinel.downgrade();
    // What the engine held before each update, to say what the update changed.
    let before = std::sync::Mutex::new(RuleSet::new());
    sentinel.add_listener(move |event: &SentinelEvent| {
        let line = match event {
            SentinelEvent::RulesApplied {
                families, version, ..
            } => {
                // Read here, as the update lands: the rules of exactly this version.
                let engine = engine.upgrade();
                let after = engine.as_ref().map(format::active).unwrap_or_default();
                // The shadow rules the store holds now, per family (they only count
                // would-blocks; the services' own consoles show those).
                let shadow: serde_json::Map<String, Value> = sentinel_core::RuleFamily::ALL
                    .iter()
                    .filter_map(|f| {
                        let n = engine.as_ref().map_or(0, |s| s.shadow_rule_count(*f));
                        (n > 0).then(|| (f.to_string(), json!(n)))
                    })
                    .collect();
                let mut before = before.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let changes = format::diff(&before, &after);
                *before = after;
                json!({
                    "event": "applied",
                    "version": version,
                    "rules": families.iter().map(|(f, n)| (f.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
                    "changed": format::watch_text(&changes),
                    "changes": changes,
                    "shadow": shadow,
                })
            }
            SentinelEvent::RulesRejected { error, .. } => {
                json!({ "event": "rejected", "error": error.to_string() })
            }
            _ => return,
        };
        let _ = tx.send(line);
    });
    let mut builder = DataSource::builder(source, shape.converter()?).name("sentinel-rules watch");
    if let Store::Nacos {
        target: Nacos::App(app),
        ..
    } = &store
    {
        for (family, key) in store::DASHBOARD_FAMILIES
            .iter()
            .zip(sentinel_datasource_nacos::dashboard_keys(app))
        {
            builder = builder.converter_for(key.entry_key(), format::java(*family));
        }
    }
    let ds = builder
        .start(&sentinel)
        .await
        .map_err(|e| store.failed(e))?;
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
        let time = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
        line["time"] = json!(time);
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
                Some("applied") => {
                    let shadow = match line["shadow"].as_object() {
                        Some(map) if !map.is_empty() => format!(" shadow {}", line["shadow"]),
                        _ => String::new(),
                    };
                    format!(
                        "{}{shadow}: {}",
                        line["rules"],
                        line["changed"].as_str().unwrap_or("")
                    )
                }
                Some("connected") => String::new(),
                _ => line["error"].to_string(),
            };
            say!(
                "{time} {} {detail} (connected {}, {} applied, {} rejected, {} disconnects)",
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
    read_file_with(path, shape, json, KeyPolicy::Warn)
}

/// [`read_file`], with what an unknown key is.
fn read_file_with(
    path: &PathBuf,
    shape: &Shape,
    json: bool,
    keys: KeyPolicy,
) -> Result<Rules, Failure> {
    let bytes = std::fs::read(path)
        .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?;
    match shape
        .converter_with(keys)?
        .convert_with(&bytes, Validation::Strict)
    {
        Ok(converted) => Ok(Rules {
            set: converted.value,
            warnings: converted.warnings,
        }),
        Err(error) => {
            let error = error.with_payload(&path.display().to_string());
            print_invalid(&error, json);
            Err(Failure::Rules)
        }
    }
}

fn print_invalid(error: &RuleError, json: bool) {
    if json {
        let issues: Vec<Value> = error.issues().iter().map(issue_json).collect();
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

/// One rule's problem, as `--json` prints it.
fn issue_json(issue: &RuleIssue) -> Value {
    json!({
        "family": issue.family.to_string(),
        "index": issue.index,
        "resource": issue.resource,
        "field": issue.field,
        "message": issue.message,
    })
}

pub(crate) fn report(json: bool, value: Value, text: impl FnOnce() -> String) {
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
