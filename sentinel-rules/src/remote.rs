//! The commands that read or write a store once, each within `--timeout`: `get`, `push`,
//! `diff` and `delete`.

use std::future::Future;
use std::path::Path;

use sentinel_core::datasource::{Encoding, Expected, RawPayload, WriteError};
use sentinel_core::RuleSet;
use serde_json::{json, Value};

use crate::failure::{chain, Failure};
use crate::format::{self, Rules, Shape};
use crate::local::read_file;
use crate::output::{as_json, pretty, report};
use crate::store::{Access, AskPassword, Nacos, Store};

/// Which revision a push compares with.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cas {
    /// None: the push overwrites whatever is stored.
    Off,
    /// The one read just before the write.
    Read,
    /// This one.
    At(u64),
}

/// Runs `work` within `--timeout`, whatever the store does; a store failure says which
/// scheme the server speaks when the URL asked for the other one.
async fn bounded<T>(
    store: &Store,
    ask: &AskPassword,
    work: impl Future<Output = Result<T, Failure>>,
) -> Result<T, Failure> {
    let timeout = ask.timeout;
    let result = tokio::time::timeout(timeout, work)
        .await
        .unwrap_or_else(|_| {
            Err(Failure::Store(format!(
                "{store}: no answer within {}",
                humantime::format_duration(timeout)
            )))
        });
    match result {
        Err(failure @ Failure::Store(_)) => Err(store.explain(failure).await),
        other => other,
    }
}

/// `get`: prints what the store holds, and checks it as the services read it (with
/// `shape`; without one, anything but a bare rule list is read as the combined document):
/// rules they reject are printed all the same, with the reason, and exit 6.
pub(crate) async fn get(
    from: &str,
    shape: &Shape,
    ask: &AskPassword,
    json: bool,
) -> Result<(), Failure> {
    let store = Store::parse(from)?;
    let access = ask.access(&store)?;
    let payload = bounded(&store, ask, read(&store, &access)).await?;
    let entries: Vec<Value> = payload
        .entries
        .iter()
        .map(|e| json!({ "key": e.key, "value": as_json(&e.value) }))
        .collect();
    // An app's dataIds name their families; a bare list elsewhere is one family's, which
    // the URL does not name.
    let app = matches!(
        store,
        Store::Nacos {
            target: Nacos::App(_),
            ..
        }
    );
    let checked = if app || shape.is_given() || !payload.entries.iter().all(|e| is_list(&e.value)) {
        Some(convert_payload(&store, shape, &payload))
    } else {
        None
    };
    let rejected = match &checked {
        Some(Err(Failure::Rejected { message, .. })) => Some(message.clone()),
        Some(Err(other)) => return Err(other.clone()),
        _ => None,
    };
    // An app's dataIds, read as one combined document.
    let document = match (&store, &checked) {
        (
            Store::Nacos {
                target: Nacos::App(_),
                ..
            },
            Some(Ok(set)),
        ) if !payload.entries.is_empty() => {
            let bytes = set
                .to_combined_json()
                .map_err(|e| Failure::Store(format!("the rules in {store} do not encode: {e}")))?;
            Some(as_json(&bytes))
        }
        _ => None,
    };
    if json {
        let mut doc = json!({
            "ok": rejected.is_none(),
            "revision": payload.revision,
            "entries": entries,
        });
        if let Some(document) = &document {
            doc["document"] = document.clone();
        }
        if let Some(message) = &rejected {
            doc["error"] = json!(message);
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
        if checked.is_none() {
            warn(&format!(
                "not checked: {store} holds one family's rule list; give its --family to \
                 check it as the services read it"
            ));
        }
    }
    match rejected {
        Some(message) => Err(Failure::Rejected {
            message,
            printed: json,
        }),
        None => Ok(()),
    }
}

/// Whether a stored value is a JSON list (one family's rules).
fn is_list(value: &[u8]) -> bool {
    matches!(serde_json::from_slice(value), Ok(Value::Array(_)))
}

/// A warning on stderr.
fn warn(message: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "sentinel-rules: warning: {message}");
}

/// `push`: validates a rules file and writes it; `cas` is `None` where no flag chose, and
/// then the push compares and sets wherever the store keeps revisions.
pub(crate) async fn push(
    file: &Path,
    to: &str,
    cas: Option<Cas>,
    shape: &Shape,
    ask: &AskPassword,
    json: bool,
) -> Result<(), Failure> {
    let rules = read_file(file, shape, json)?;
    let store = Store::parse(to)?;
    let cas = match cas {
        Some(cas) => cas,
        None if store.keeps_revisions() => Cas::Read,
        None => Cas::Off,
    };
    let access = ask.access(&store)?;
    let (target, revision) =
        bounded(&store, ask, write(&store, &access, &rules, shape, cas)).await?;
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

/// `diff`: prints what pushing a rules file would change; [`Failure::Differs`] when it
/// would change anything.
pub(crate) async fn diff(
    file: &Path,
    from: &str,
    shape: &Shape,
    ask: &AskPassword,
    json: bool,
) -> Result<(), Failure> {
    let wanted = read_file(file, shape, json)?;
    let store = Store::parse(from)?;
    let access = ask.access(&store)?;
    let payload = bounded(&store, ask, read(&store, &access)).await?;
    let stored = convert_payload(&store, shape, &payload)?;
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

/// `delete`: deletes what the URL names.
pub(crate) async fn delete(from: &str, ask: &AskPassword, json: bool) -> Result<(), Failure> {
    let store = Store::parse(from)?;
    let access = ask.access(&store)?;
    let keys = bounded(&store, ask, store.delete(&access)).await?;
    report(json, json!({ "ok": true, "deleted": keys }), || {
        if keys.is_empty() {
            format!("nothing to delete at {store}")
        } else {
            format!("deleted {} from {store}", keys.join(", "))
        }
    });
    Ok(())
}

/// Reads what the store holds now.
async fn read(store: &Store, access: &Access) -> Result<RawPayload, Failure> {
    let mut source = store.source(access)?;
    let payload = source.read().await.map_err(|e| store.failed(e));
    source.close().await;
    payload
}

/// Writes the rules; returns what was written and the store's revision after it.
async fn write(
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
        #[cfg(feature = "nacos")]
        {
            let written = store.push_app(access, &rules.set).await?;
            return Ok((format!("{store} ({})", written.join(", ")), None));
        }
        #[cfg(not(feature = "nacos"))]
        return Err(store.not_built());
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
    let written = writer.write_as(&rules.set, encoding, expected).await;
    // ZooKeeper refuses to create a znode whose parent is missing, which only a chroot
    // leaves missing (the writer makes the parents under it): the write then looks like a
    // lost race, but nobody wrote, and nothing is there still.
    if let (
        Err(WriteError::Conflict { .. }),
        Store::ZooKeeper {
            chroot: Some(chroot),
            ..
        },
        Expected::Revision(None),
    ) = (&written, store, expected)
    {
        if matches!(writer.revision().await, Ok(None)) {
            return Err(Failure::Store(format!(
                "{store}: cannot create it: is there a znode {chroot}? ZooKeeper creates nothing \
                 above a chroot: create {chroot} first (push to a URL without ?chroot=)"
            )));
        }
    }
    let revision = written.map_err(|e| match e {
        WriteError::Conflict { .. } => Failure::Conflict(chain(&e)),
        // Asking a file or Nacos for a compare-and-set is a usage error.
        WriteError::NoRevisions { .. } => Failure::Usage(format!(
            "{}: --cas and --if-revision need etcd, Redis, NATS or ZooKeeper",
            chain(&e)
        )),
        other => store.failed(other),
    })?;
    Ok((writer.describe(), revision))
}

/// The services reject the rules stored at `key`.
pub(crate) fn rejected(key: &str, error: &dyn std::error::Error) -> Failure {
    Failure::Rejected {
        message: format!(
            "the rules stored at {key} are rejected by the services (they keep their last \
             good rules): {}",
            chain(error)
        ),
        printed: false,
    }
}

/// The rules a payload holds: each entry converted (an app's dataIds each with its family's
/// converter) and merged.
fn convert_payload(store: &Store, shape: &Shape, payload: &RawPayload) -> Result<RuleSet, Failure> {
    let mut set = RuleSet::new();
    for entry in &payload.entries {
        let Some(converter) = store.entry_converter(shape, &entry.key)? else {
            continue;
        };
        let rules = converter
            .convert(&entry.value)
            .map_err(|e| rejected(&entry.key, &e))?;
        set.merge(rules);
    }
    Ok(set)
}
