//! `watch`: run a data source on a store and print every applied or rejected update, and
//! the store going away and coming back. Stored rules the services reject are reported and
//! followed; `watch` ends with exit 6 if the last update it printed was such a rejection.

use sentinel_core::datasource::{DataSource, StartMode};
use sentinel_core::{RuleSet, Sentinel, SentinelEvent};
use serde_json::{json, Value};

use crate::failure::Failure;
use crate::format::{self, Shape};
use crate::store::{AskPassword, Store};

/// Runs a data source on `from` and prints every applied or rejected update.
pub(crate) async fn watch(
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
    for (key, converter) in store.entry_converters() {
        builder = builder.converter_for(key, converter);
    }
    // Stored rules the services reject are an update to report (and follow until they are
    // fixed), not a reason to stop: start from no rules whatever the store holds, and stop
    // only when the store could not be read at all. The CLI keeps no snapshot: it reports
    // the store, not what an earlier run saw.
    let ds = match builder
        .start_mode(StartMode::Snapshot)
        .without_snapshot()
        .start(&sentinel)
        .await
    {
        Ok(ds) => ds,
        Err(e) => return Err(store.explain(store.failed(e)).await),
    };
    let status = ds.status();
    if !status.connected {
        ds.close().await;
        let why = status.last_error.unwrap_or_else(|| "no answer".to_owned());
        return Err(store.explain(store.failed(Unreachable(why))).await);
    }
    let mut statuses = ds.status_watch();
    let mut connected = status.connected;
    let mut seen = 0u64;
    // Whether the last update was rejected: the store then holds rules the services reject.
    let mut rejected = false;
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
            rejected = line["event"] == "rejected";
            seen += 1;
            if updates.is_some_and(|n| seen >= n) {
                break;
            }
        }
    }
    ds.close().await;
    if rejected {
        return Err(Failure::Rejected {
            message: format!(
                "{store} holds rules the services reject (they keep their last good rules)"
            ),
            printed: false,
        });
    }
    Ok(())
}

/// Why the first read of a store failed, as its status says it.
#[derive(Debug)]
struct Unreachable(String);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unreachable {}
