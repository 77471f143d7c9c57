//! `sentinel-rules`: validate rule files, and read, push, diff, delete and watch the rules kept
//! in a file, etcd, Redis (a server, a Sentinel master or a cluster), Nacos, NATS (with or
//! without TLS) or ZooKeeper, as the services guarded by sentinel-core read them.
//!
//! ```text
//! sentinel-rules validate rules.json --format combined
//! sentinel-rules get  --from etcds://etcd.internal/sentinel/rules --ca-file ca.pem
//! sentinel-rules push rules.json --to etcd://127.0.0.1:2379/sentinel/rules
//! sentinel-rules diff rules.json --from redis://127.0.0.1:6379/rules:flow --family flow
//! sentinel-rules watch --from nats://127.0.0.1:4222/sentinel/flow --family flow
//! sentinel-rules delete --from nacos://127.0.0.1:8848/?app=orders
//! sentinel-rules get  --from zk://10.0.0.1:2181,10.0.0.2:2181/sentinel_rule_config/orders/?children
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
//! `promote` or `demote` lost a race (someone else wrote between the read and the write), 6
//! the store holds rules the services reject (`get`, `diff`, `watch`: the store answered, and
//! services reading it keep their last good rules).
//!
//! `push` compares and sets by default where the store keeps revisions (etcd, Redis, NATS,
//! ZooKeeper):
//! it reads the revision, then writes only if it is unchanged, so a push never silently
//! replaces a newer one. `--no-cas` overwrites instead.

/// Prints a line to stdout; a closed pipe (`| head`) is not an error worth a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod edit;
mod failure;
mod format;
mod local;
mod output;
mod remote;
mod shadow;
mod store;
mod watch;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};
use serde_json::json;

use failure::Failure;
use format::Shape;
use remote::Cas;
use store::AskPassword;

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
  zk://host:2181,host2:2181/path/to/znode        a ZooKeeper znode (?chroot=/x; ?acl=creator for
                                                 the znodes push creates)
  zk://host:2181/path/to/znode?children          every child of a znode (get, diff, watch)
  Ports default to 2379, 6379 (26379 for sentinels), 8848, 4222 and 2181. Keys are percent-decoded:
  rules:%7Borders%7D:flow is rules:{orders}:flow.

Examples:
  sentinel-rules validate rules.json
  sentinel-rules diff rules.json --from etcd://127.0.0.1:2379/sentinel/rules || [ $? = 3 ]
  sentinel-rules push rules.json --to etcd://127.0.0.1:2379/sentinel/rules
  SENTINEL_RULES_PASSWORD=... sentinel-rules get --from rediss://redis.internal/rules:orders --ca-file ca.pem
  sentinel-rules watch --from nats://127.0.0.1:4222/sentinel/flow --family flow
  sentinel-rules completions bash > /etc/bash_completion.d/sentinel-rules

Environment:
  SENTINEL_RULES_USER       the user to log in as (etcd, Redis ACL, Nacos, NATS, ZooKeeper digest)
  SENTINEL_RULES_PASSWORD   its password (or --ask-password, --password-stdin); never in the URL
  SENTINEL_RULES_CA_FILE    the CA certificate of TLS stores (--ca-file)

Exit codes:
  0 success (diff: no change)    1 invalid rules    2 usage error (arguments, URL)
  3 diff: the store differs      4 the store failed (unreachable, refused, timed out)
  5 push lost a compare-and-set race (someone else wrote first; --no-cas overwrites)
  6 get, diff, watch: the store holds rules the services reject (they keep their last good rules)";

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
    /// Print the rules stored at a URL, checked as the services read them: rules they
    /// reject are printed with the reason, and exit 6. A stored rule list is checked with
    /// its `--family`; without `--format` and `--family`, any other value is read as the
    /// combined document.
    Get {
        /// The store URL (`sentinel-rules --help` lists them).
        #[arg(long)]
        from: String,
        #[command(flatten)]
        shape: Shape,
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
    /// an app). Deleting what is not there succeeds. Services reading the key then drop
    /// every rule it gave them (the default delete policy, as Sentinel does), unless they
    /// were built to keep them (`DeletePolicy::Keep`): to stop enforcing one family, push a
    /// document without it instead.
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
        Err(Failure::Rejected { printed: true, .. }) => return ExitCode::from(6),
        Err(Failure::Rejected { message, .. }) => (6, message),
    };
    if json {
        say!("{}", json!({ "ok": false, "error": message }));
    } else {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "sentinel-rules: {message}");
    }
    ExitCode::from(code)
}

/// Runs the command the arguments name.
async fn run(cli: Cli) -> Result<(), Failure> {
    let ask = AskPassword {
        terminal: cli.ask_password,
        stdin: cli.password_stdin,
        timeout: cli.timeout,
        ca_file: cli.ca_file.clone(),
    };
    let json = cli.json;
    // Every command but `watch` gives up after the timeout, whatever the store does
    // (`remote`).
    match cli.command {
        Command::Validate {
            file,
            strict_keys,
            shape,
        } => local::validate(&file, strict_keys, &shape, json),
        Command::Schema { shape } => local::schema(&shape),
        Command::Completions { shell } => {
            completions(shell);
            Ok(())
        }
        Command::Get { from, shape } => remote::get(&from, &shape, &ask, json).await,
        Command::Push {
            file,
            to,
            cas,
            no_cas,
            if_revision,
            shape,
        } => {
            let cas = match (cas, no_cas, if_revision) {
                (_, _, Some(revision)) => Some(Cas::At(revision)),
                (true, _, None) => Some(Cas::Read),
                (false, true, None) => Some(Cas::Off),
                // The default: compare and set wherever the store keeps revisions.
                (false, false, None) => None,
            };
            remote::push(&file, &to, cas, &shape, &ask, json).await
        }
        Command::Diff { file, from, shape } => remote::diff(&file, &from, &shape, &ask, json).await,
        Command::Delete { from } => remote::delete(&from, &ask, json).await,
        Command::Watch {
            from,
            updates,
            shape,
        } => watch::watch(&from, updates, &shape, &ask, json).await,
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

/// Prints a shell completion script.
fn completions(shell: clap_complete::Shell) {
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
}
