//! Sentinel for Rust: flow control, circuit breaking and adaptive system protection, with
//! rules that hot-update from etcd, Redis, Nacos, NATS or a local file.
//!
//! ```
//! use sentinel_core::{flow::FlowRule, Sentinel};
//!
//! let sentinel = Sentinel::new();
//! sentinel
//!     .flow_rules()
//!     .load_rules(vec![FlowRule::qps("GET:/order", 10.0)])
//!     .expect("valid rules");
//!
//! match sentinel.entry("GET:/order").origin("web").enter() {
//!     Ok(_entry) => { /* serve the call; dropping the entry exits it */ }
//!     Err(blocked) => eprintln!("blocked: {blocked}"),
//! };
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The rule families, in one list. Every place that holds or handles one value per family
/// (the [`RuleFamily`] enum, [`RuleSet`], the engine's rule tables and source parts,
/// [`ActiveRules`], the combined document and the converter of each family) is generated
/// from it, and [`family::Family`] is implemented once per entry. Adding a family is one line
/// here and one `Family` impl (see docs/adding-a-family.md).
///
/// Each entry: the `RuleFamily` variant, the field name, the family's name in combined
/// documents, the rule type and the family's Sentinel (Java) JSON converter.
macro_rules! for_each_family {
    ($m:ident) => {
        $m! {
            /// Flow rules ([`FlowRule`](crate::flow::FlowRule)).
            Flow, flow, "flow", crate::flow::FlowRule, crate::datasource::FlowJson;
            /// Circuit-breaker (degrade) rules
            /// ([`DegradeRule`](crate::circuit_breaker::DegradeRule)).
            Degrade, degrade, "degrade", crate::circuit_breaker::DegradeRule, crate::datasource::DegradeJson;
            /// System adaptive protection rules ([`SystemRule`](crate::system::SystemRule)).
            System, system, "system", crate::system::SystemRule, crate::datasource::SystemJson;
            /// Authority (origin white/black list) rules
            /// ([`AuthorityRule`](crate::authority::AuthorityRule)).
            Authority, authority, "authority", crate::authority::AuthorityRule, crate::datasource::AuthorityJson;
            /// Hot-parameter (param-flow) rules
            /// ([`ParamFlowRule`](crate::param_flow::ParamFlowRule)).
            ParamFlow, param_flow, "paramFlow", crate::param_flow::ParamFlowRule, crate::datasource::ParamFlowJson;
        }
    };
}

pub mod authority;
mod block;
pub mod circuit_breaker;
mod clock;
pub mod cluster;
mod codes;
pub mod datasource;
mod engine;
mod entry;
mod events;
mod family;
pub mod flow;
mod hash;
pub mod param_flow;
mod rule_set;
mod rules;
pub mod series;
pub mod shadow;
mod stat;
pub mod system;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod telemetry;
#[cfg(test)]
mod test_support;
mod wire;

pub use block::{BlockError, BlockReasons};
pub use clock::{Clock, FakeClock, SystemClock};
pub use engine::{
    ActiveRules, FamilyRule, Limits, RuleManager, Sentinel, SentinelBuilder, WeakSentinel,
    API_SOURCE,
};
pub use entry::{Admission, Entry, EntryBuilder, EntryType, Queued, ResourceHandle};
pub use events::{EventListener, SentinelEvent};
pub use rule_set::RuleSet;
pub use rules::{KeyPolicy, LoadReport, RuleError, RuleFamily, RuleIssue, Validation};
pub use shadow::ShadowRuleStats;
pub use stat::{NodeStats, SecondStats};
