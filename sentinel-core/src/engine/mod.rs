//! The engine: the [`Sentinel`] handle, its resources, its rule tables and how rules get
//! into them.
//!
//! - `sentinel`: the handle, its builder, its statistics and rules;
//! - `views`: a node's ended seconds, and the read-only views the dashboard and console read;
//! - `shared`: what resource nodes and entries share with the engine, and the hot path's
//!   cached access to the rule table;
//! - `snapshot`: the published rule table (every family's compiled table, per-resource slots);
//! - `regex`: regular-expression resources, resolved per resource and table version;
//! - `resources`: the resource registry and its caps;
//! - `apply`: the pipeline's validate, compile and swap stages;
//! - `manager`: the per-family rule managers;
//! - `sources`: the names of running data sources;
//! - `shadow_table`: the published shadow rule table (compiled beside the enforced rules,
//!   swapped with them), and `shadow_counter` its per-rule would-block counters.

mod apply;
mod capped_map;
mod limits;
mod manager;
mod regex;
mod resources;
mod sentinel;
mod shadow_counter;
mod shadow_table;
mod shared;
mod snapshot;
mod sources;
mod views;

pub(crate) use apply::{compile_tables, replace_parts, Incoming};
pub use limits::Limits;
pub use manager::{FamilyRule, RuleManager, API_SOURCE};
pub(crate) use resources::{NodeRef, ResourceNode};
pub use sentinel::{ActiveRules, Sentinel, SentinelBuilder, WeakSentinel};
pub(crate) use shadow_table::ShadowSnapshot;
pub(crate) use shared::with_rules;
pub(crate) use snapshot::{ResourceRules, RuleSnapshot, SourceRules, Tables};
pub(crate) use sources::SourceNameClaim;
pub(crate) use views::seconds_of;

#[cfg(test)]
mod tests;
