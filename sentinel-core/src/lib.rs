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

pub mod authority;
mod block;
pub mod circuit_breaker;
mod clock;
mod codes;
pub mod datasource;
mod engine;
mod entry;
mod events;
pub mod flow;
mod hash;
mod rules;
mod stat;
pub mod system;
mod wire;

pub use block::BlockError;
pub use clock::{Clock, FakeClock, SystemClock};
pub use engine::{
    ActiveRules, FamilyRule, RuleManager, RuleSet, Sentinel, SentinelBuilder, WeakSentinel,
    API_SOURCE,
};
pub use entry::{Entry, EntryBuilder, EntryType, ResourceHandle};
pub use events::{EventListener, SentinelEvent};
pub use rules::{LoadReport, RuleError, RuleFamily, RuleIssue, Validation};
pub use stat::{Limits, NodeStats};
