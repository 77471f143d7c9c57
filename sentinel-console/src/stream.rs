//! The page's event stream (`GET api/stream`): one full `snapshot`, then `update` events that
//! carry only what changed since the last one a viewer received, and the end of the stream
//! when the application begins to shut down.
//!
//! An `update` has `now_ms` and only the parts of a [`Snapshot`](crate::Snapshot) that
//! changed: `resources` once per collected second (a row the viewer already has carries
//! only the sparkline points it lacks, and only `resource` and those points when nothing
//! else in it changed; a row's `blocks` and `blocks_total` carry only their non-zero
//! families), `breakers`, `sources`, `system`, `cluster`, `shadow`, `editing` and
//! `rules_version` when they differ from what was sent, and `timeline`, `rule_events` and
//! `commands_refused` with the events newer than the last sent (newest first). Engine events
//! (a breaker transition, a rule apply or rejection, a refused command) send an update at
//! once, at most one every
//! [`EVENT_GAP`]: a flapping breaker costs a few small updates a second, never a snapshot
//! per transition.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::convert::Infallible;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::Stream;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::model::{ResourceQuery, Snapshot, SPARK_SECONDS};
use crate::state::State;

/// How long an engine event waits for the events that come with it (a transition's
/// neighbours, a rule apply after a rejection) before an update is sent.
const EVENT_DEBOUNCE: Duration = Duration::from_millis(20);

/// The shortest time between two updates sent for engine events.
pub(crate) const EVENT_GAP: Duration = Duration::from_millis(250);

/// What one viewer has received.
#[derive(Default)]
struct Sent {
    /// A hash of each part's JSON as last sent.
    parts: HashMap<&'static str, u64>,
    /// The newest transition, rule event and refused command sent.
    transition_seq: u64,
    rule_seq: u64,
    refused_seq: u64,
    /// The second the resources were last sent for.
    second: Option<u64>,
    /// The rows last sent: resource -> the second their sparkline ends at, and a hash of
    /// the row's other fields.
    rows: HashMap<String, (u64, u64)>,
}

struct Viewer {
    state: Arc<State>,
    query: ResourceQuery,
    changed: watch::Receiver<u64>,
    closing: watch::Receiver<bool>,
    sent: Option<Sent>,
    /// No event-driven update before this.
    quiet_until: Instant,
}

fn hash_of(json: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    json.hash(&mut hasher);
    hasher.finish()
}

fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// An object without its zero numbers (`{"flow": 3}` for a row blocked only by flow rules).
fn non_zero(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| v.as_f64() != Some(0.0))
                .collect(),
        ),
        other => other,
    }
}

/// The events of `events` (newest first) after `last`, which becomes the newest sent.
fn newer<T: Serialize>(events: &[T], seq: impl Fn(&T) -> u64, last: &mut u64) -> Option<Value> {
    let new: Vec<&T> = events.iter().filter(|e| seq(e) > *last).collect();
    *last = seq(new.first()?);
    Some(to_value(&new))
}

/// A row's fields but its sparkline, as JSON.
fn row_fields(row: &Value) -> String {
    match row {
        Value::Object(map) => map
            .iter()
            .filter(|(k, _)| !k.starts_with("spark_"))
            .map(|(k, v)| format!("{k}={v};"))
            .collect(),
        other => other.to_string(),
    }
}

impl Sent {
    /// The update that brings a viewer who has `self` to `snapshot`; `None` when nothing
    /// changed.
    fn update(&mut self, snapshot: &Snapshot) -> Option<Map<String, Value>> {
        let first = self.parts.is_empty();
        let mut out = Map::new();
        let parts: [(&'static str, Value); 8] = [
            ("rules_version", to_value(&snapshot.rules_version)),
            ("editing", to_value(&snapshot.editing)),
            ("breakers", to_value(&snapshot.breakers)),
            ("sources", to_value(&snapshot.sources)),
            ("system", to_value(&snapshot.system)),
            ("cluster", to_value(&snapshot.cluster)),
            ("shadow", to_value(&snapshot.shadow)),
            ("transport", to_value(&snapshot.transport)),
        ];
        for (name, value) in parts {
            let hash = hash_of(&value.to_string());
            if self.parts.insert(name, hash) != Some(hash) {
                out.insert(name.to_owned(), value);
            }
        }
        if let Some(new) = newer(&snapshot.timeline, |t| t.seq, &mut self.transition_seq) {
            out.insert("timeline".to_owned(), new);
        }
        if let Some(new) = newer(&snapshot.rule_events, |e| e.seq, &mut self.rule_seq) {
            out.insert("rule_events".to_owned(), new);
        }
        if let Some(new) = newer(&snapshot.commands_refused, |e| e.seq, &mut self.refused_seq) {
            out.insert("commands_refused".to_owned(), new);
        }
        let second = snapshot.resources.engine_second_ms;
        if first || second != self.second {
            out.insert("resources".to_owned(), self.resources(snapshot));
            self.second = second;
        }
        if out.is_empty() {
            return None;
        }
        out.insert("now_ms".to_owned(), to_value(&snapshot.now_ms));
        Some(out)
    }

    /// The resources table with each row's sparkline cut to the points the viewer lacks.
    fn resources(&mut self, snapshot: &Snapshot) -> Value {
        let resources = &snapshot.resources;
        let newest = resources.engine_second_ms.unwrap_or(0);
        let mut rows = Vec::with_capacity(resources.rows.len());
        let mut known = HashMap::with_capacity(resources.rows.len());
        for row in &resources.rows {
            let mut value = to_value(row);
            let previous = self.rows.get(&row.resource).copied();
            let lacking = match previous {
                Some((until, _)) if until <= newest => usize::try_from((newest - until) / 1000)
                    .map_or(SPARK_SECONDS, |n| n.min(SPARK_SECONDS)),
                _ => SPARK_SECONDS,
            };
            if let Value::Object(map) = &mut value {
                for key in ["spark_pass", "spark_block"] {
                    if let Some(Value::Array(points)) = map.get_mut(key) {
                        let cut = points.len().saturating_sub(lacking);
                        points.drain(..cut);
                    }
                }
                for key in ["blocks", "blocks_total"] {
                    if let Some(blocks) = map.remove(key) {
                        map.insert(key.to_owned(), non_zero(blocks));
                    }
                }
            }
            let fields = hash_of(&row_fields(&value));
            if let (Some((_, same)), Value::Object(map)) = (previous, &mut value) {
                if same == fields && lacking < SPARK_SECONDS {
                    // Only the sparkline moved: the viewer keeps the other fields it has.
                    map.retain(|k, _| {
                        matches!(k.as_str(), "resource" | "spark_pass" | "spark_block")
                    });
                }
            }
            known.insert(row.resource.clone(), (newest, fields));
            rows.push(value);
        }
        self.rows = known;
        let mut table = to_value(resources);
        if let Value::Object(map) = &mut table {
            map.insert("rows".to_owned(), Value::Array(rows));
        }
        table
    }
}

impl Viewer {
    /// Waits for the next second or an engine event (coalesced), then builds what changed;
    /// `None` once the application is shutting down.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if *self.closing.borrow() {
                return None;
            }
            let Some(sent) = self.sent.as_mut() else {
                let snapshot = self.state.snapshot(&self.query);
                let mut sent = Sent::default();
                let data = sent.update(&snapshot).map(Value::Object);
                self.sent = Some(sent);
                let data = serde_json::to_string(&data).unwrap_or_else(|_| "{}".to_owned());
                return Some(Event::default().event("snapshot").data(data));
            };
            let next_second = tokio::time::sleep(crate::until_next_second(&self.state.sentinel));
            let event = tokio::select! {
                () = next_second => false,
                changed = self.changed.changed() => changed.is_ok(),
                _ = self.closing.wait_for(|c| *c) => return None,
            };
            if event {
                let at = (Instant::now() + EVENT_DEBOUNCE).max(self.quiet_until);
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    _ = self.closing.wait_for(|c| *c) => return None,
                }
                self.quiet_until = Instant::now() + EVENT_GAP;
            }
            self.changed.borrow_and_update();
            let snapshot = self.state.snapshot_after(&self.query, sent.second);
            if let Some(update) = sent.update(&snapshot) {
                let data = Value::Object(update).to_string();
                return Some(Event::default().event("update").data(data));
            }
        }
    }
}

/// `GET api/stream`.
pub(crate) fn stream(
    state: Arc<State>,
    query: ResourceQuery,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    // A page is open: have the engine read load and CPU (a thread samples `/proc` once a
    // second from now on), unless a system rule already did.
    let _ = state.sentinel.system_load_and_cpu();
    let viewer = Viewer {
        changed: state.recorder.subscribe(),
        closing: state.closing.subscribe(),
        state,
        query,
        sent: None,
        quiet_until: Instant::now(),
    };
    let events = futures_util::stream::unfold(viewer, |mut viewer| async move {
        let event = viewer.next().await?;
        Some((Ok(event), viewer))
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}

#[cfg(test)]
mod tests {
    use sentinel_core::circuit_breaker::DegradeRule;
    use sentinel_core::series::MetricSeries;
    use sentinel_core::{FakeClock, Sentinel};

    use super::*;
    use crate::Console;

    fn calls(sentinel: &Sentinel, failing: bool) {
        for i in 0..12 {
            for _ in 0..5 {
                if let Ok(mut entry) = sentinel.entry(&format!("res-{i:02}")).enter() {
                    if failing && i == 0 {
                        entry.set_error();
                    }
                }
            }
        }
    }

    #[test]
    fn after_the_first_snapshot_a_viewer_gets_only_what_changed() {
        let clock = FakeClock::at_ms(1_000_000);
        let sentinel = Sentinel::builder().clock(clock.clone()).build();
        sentinel
            .degrade_rules()
            .load_rules(vec![DegradeRule::error_count("res-00", 3.0, 1)])
            .expect("rules");
        let console = Console::builder(&sentinel)
            .series(Arc::new(MetricSeries::new()))
            .build()
            .expect("a console");
        let query = ResourceQuery::default();
        calls(&sentinel, false);
        clock.advance_ms(1000);
        let mut sent = Sent::default();
        let first = sent.update(&console.snapshot(&query)).expect("everything");
        let rows = first["resources"]["rows"].as_array().expect("rows");
        assert_eq!(rows.len(), 12);
        assert_eq!(
            rows[0]["spark_pass"].as_array().map(Vec::len),
            Some(SPARK_SECONDS)
        );
        assert_eq!(
            rows[0]["blocks"],
            serde_json::json!({}),
            "zero families left out"
        );
        for part in [
            "breakers", "sources", "system", "cluster", "shadow", "editing",
        ] {
            assert!(first.contains_key(part), "{part}");
        }

        assert_eq!(sent.update(&console.snapshot(&query)), None, "nothing new");

        // The breaker trips within the same second: the transition and the breakers only.
        calls(&sentinel, true);
        let trip = sent.update(&console.snapshot(&query)).expect("the trip");
        let keys: Vec<&str> = trip.keys().map(String::as_str).collect();
        assert_eq!(keys, ["breakers", "now_ms", "timeline"], "{trip:?}");
        assert_eq!(trip["timeline"].as_array().map(Vec::len), Some(1));

        // The next second: the resources, each row with the one sparkline point it lacks,
        // and the half-open transition alone (the trip was sent).
        clock.advance_ms(1000);
        drop(sentinel.entry("res-00").enter());
        let next = sent.update(&console.snapshot(&query)).expect("a second");
        let rows = next["resources"]["rows"].as_array().expect("rows");
        assert!(rows
            .iter()
            .all(|r| r["spark_pass"].as_array().map(Vec::len) == Some(1)));
        let timeline: Vec<&str> = next["timeline"]
            .as_array()
            .expect("new transitions")
            .iter()
            .filter_map(|t| t["to"].as_str())
            .collect();
        assert_eq!(
            timeline,
            ["CLOSED", "HALF_OPEN"],
            "newest first, only the new ones"
        );

        // A quiet second like the last: each row is its name and its new sparkline point.
        clock.advance_ms(1000);
        assert!(
            sent.update(&console.snapshot(&query)).is_some(),
            "the first quiet second"
        );
        clock.advance_ms(1000);
        let quiet = sent.update(&console.snapshot(&query)).expect("a second");
        let row = &quiet["resources"]["rows"][11];
        let keys: Vec<&str> = row
            .as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(keys, ["resource", "spark_block", "spark_pass"], "{row}");
    }
}
