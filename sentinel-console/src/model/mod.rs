//! The JSON the API serves and the page renders, built from what the engine exposes: the
//! resources table (`resources`), the sources and their rules (`sources`), the breakers,
//! system and cluster readings (`readings`), and the snapshot of all of it here.

mod readings;
mod refusals;
mod resources;
mod sources;

use serde::Serialize;

pub use readings::{Breaker, Cluster, ClusterFlow, System};
#[cfg(feature = "transport")]
pub(crate) use refusals::watch as watch_refusals;
pub(crate) use refusals::ReadRefusals;
pub use refusals::{DashboardRefusals, RefusedCommand};
pub(crate) use resources::Table;
pub use resources::{Blocks, ResourceQuery, ResourceRow, Resources, SortKey, SPARK_SECONDS};
pub(crate) use sources::store_has_rules;
pub use sources::{Rules, Source, SourceRules};

use crate::record::{CommandRefusal, RuleEvent, Transition};
use crate::state::State;

/// Everything the page shows, as one document: `GET api/snapshot` and each server-sent
/// `snapshot` event.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// When this was built (Unix epoch ms).
    pub now_ms: u64,
    /// The rule-table version (the page asks `api/rules` again when it changes).
    pub rules_version: u64,
    /// Whether editing is on.
    pub editing: bool,
    /// The resources table.
    pub resources: Resources,
    /// Every circuit breaker.
    pub breakers: Vec<Breaker>,
    /// Breaker transitions, newest first.
    pub timeline: Vec<Transition>,
    /// The data sources.
    pub sources: Vec<Source>,
    /// Rule applies and rejections, newest first.
    pub rule_events: Vec<RuleEvent>,
    /// Commands refused by a command port (the engine's `CommandRefused` events: the
    /// dashboard transport's, or any component's), newest first.
    pub commands_refused: Vec<CommandRefusal>,
    /// System readings.
    pub system: System,
    /// Cluster flow control.
    pub cluster: Cluster,
    /// Shadow rules and their would-blocks.
    pub shadow: Vec<crate::shadow::ShadowRow>,
    /// What the dashboard transport refused, when the console was given one
    /// (`ConsoleBuilder::transport`, with the `transport` feature).
    pub transport: Option<DashboardRefusals>,
}

/// How many transitions, rule events and refused commands a snapshot carries.
const EVENTS_IN_SNAPSHOT: usize = 50;

impl State {
    /// Everything, for one refresh of the page.
    pub(crate) fn snapshot(&self, query: &ResourceQuery) -> Snapshot {
        self.snapshot_after(query, None)
    }

    /// Everything, for a viewer who has the resources table of second `shown` (engine
    /// clock): while that is still the newest second collected, the table is not built
    /// again (the update for a breaker transition or a rule apply does not carry it), and
    /// the snapshot's table is empty but for its second.
    pub(crate) fn snapshot_after(&self, query: &ResourceQuery, shown: Option<u64>) -> Snapshot {
        self.series.collect(&self.sentinel);
        let newest = self.series.newest_second();
        let resources = match shown {
            Some(second) if newest == Some(second) => Resources {
                second_ms: Some(self.recorder.to_epoch(second)),
                engine_second_ms: Some(second),
                total: 0,
                matched: 0,
                query: query.clone(),
                rows: Vec::new(),
            },
            _ => self.resources(query),
        };
        Snapshot {
            now_ms: crate::record::epoch_ms(),
            rules_version: self.sentinel.rules_version(),
            editing: self.editing.is_some(),
            resources,
            breakers: self.breakers(),
            timeline: self.recorder.transitions(EVENTS_IN_SNAPSHOT),
            sources: self.sources(),
            rule_events: self.recorder.rule_events(EVENTS_IN_SNAPSHOT),
            commands_refused: self.recorder.commands_refused(EVENTS_IN_SNAPSHOT),
            system: self.system(),
            cluster: self.cluster(),
            shadow: self.shadow(),
            transport: self.refusals.as_ref().map(|read| read()),
        }
    }
}
