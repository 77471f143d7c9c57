//! Sentinel for Rust: flow control, circuit breaking and adaptive system protection, with
//! rules that hot-update from etcd, Redis, Nacos, NATS or a local file.
//!
//! This crate is the engine and the rule pipeline of a Rust [Sentinel]: it counts the calls
//! of each *resource* (an endpoint, a downstream, any name) in sliding windows, checks each
//! call against the rules in force (flow limits, circuit breakers, system protection,
//! origin white/black lists, hot-parameter limits, in Sentinel 1.8's slot order), and
//! replaces those rules while calls run, without a lock on the hot path. Rules are
//! Sentinel's own, read from Sentinel (Java) JSON as its dashboard writes them, from
//! sentinel-golang's JSON, or from Kubernetes resources. The stores themselves (etcd, Redis,
//! Nacos, NATS, a file) are separate crates (`sentinel-datasource-*`); this one has no
//! backend dependency.
//!
//! [Sentinel]: https://github.com/alibaba/Sentinel
//!
//! # Guarding a call
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
//!
//! A [`Sentinel`] is a cheap handle: clones share one engine. An [`Entry`] counts the call
//! until it is dropped (mark a failure with [`Entry::set_error`] for the circuit breakers);
//! a [`BlockError`] says which rule blocked it and why.
//!
//! # Rules from a store: one path
//!
//! Every payload, from any source, takes one path: **read → convert → validate → compile
//! → swap**. A [`datasource::ReadableDataSource`] reads the bytes; a
//! [`datasource::Converter`] turns them into a [`RuleSet`] (typed rules); each rule is
//! validated, naming the rule's index, resource and field of every problem
//! ([`RuleIssue`]); the families the payload carries are compiled into rule tables; and the
//! tables are published in one atomic swap, so a call sees either the old rules or the new
//! ones, never a mix. A bad payload is rejected whole: the last good rules stay, and the
//! source's [`status`](datasource::DataSource::status) and a [`SentinelEvent`] say why.
//! [`RuleManager::load_rules`] (rules from code) takes the same path from its second step.
//!
//! ```
//! use sentinel_core::datasource::{DataSource, FlowJson, MemoryStore};
//! use sentinel_core::Sentinel;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let store = MemoryStore::new();
//! store.put("flow", r#"[{"resource": "GET:/order", "count": 5}]"#);
//! let sentinel = Sentinel::new();
//! let source = DataSource::builder(store.source("flow"), FlowJson::new())
//!     .start(&sentinel)
//!     .await
//!     .expect("started");
//! assert_eq!(sentinel.flow_rules().rules().len(), 1);
//!
//! store.put("flow", r#"[{"resource": "GET:/order", "cuont": 9}]"#); // a typo: rejected
//! # for _ in 0..500 {
//! #     if source.status().rejected_count > 0 { break }
//! #     tokio::time::sleep(std::time::Duration::from_millis(10)).await;
//! # }
//! assert_eq!(source.status().rejected_count, 1);
//! assert_eq!(sentinel.flow_rules().rules()[0].count, 5.0); // the last good rules stay
//! source.close().await;
//! # }
//! ```
//!
//! # Modules
//!
//! | module | what it holds |
//! |---|---|
//! | [`flow`] | flow rules: QPS and concurrency limits; reject, warm-up, rate limiter; direct, relate and chain strategies; per-origin limits |
//! | [`circuit_breaker`] | degrade rules and the breakers: slow-call ratio, error ratio, error count; one half-open probe |
//! | [`system`] | system adaptive protection: load (with BBR), CPU usage, average RT, concurrency, inbound QPS |
//! | [`authority`] | origin white and black lists |
//! | [`param_flow`] | hot-parameter rules: a limit per argument value, in a bounded table |
//! | [`cluster`] | cluster flow control: the backend trait a shared limit (`sentinel-cluster-redis`) implements |
//! | [`shadow`] | shadow rules: checked beside the enforced ones, counting what they would block |
//! | [`datasource`] | the pipeline: the source trait, converters, the driver ([`DataSource`](datasource::DataSource)), status, writers' checks, the schemas (feature `schema`), the conformance kit (feature `testkit`) |
//! | [`series`] | per-second statistics kept longer than the engine's minute |
//! | `telemetry` | the `metrics` facade's metric names (feature `metrics`) |
//!
//! The crate root holds the engine ([`Sentinel`], [`SentinelBuilder`], [`RuleManager`]),
//! entries ([`Entry`], [`EntryBuilder`]), rule sets and errors ([`RuleSet`], [`RuleError`],
//! [`RuleFamily`]), events ([`SentinelEvent`]), clocks ([`Clock`], [`FakeClock`] for tests)
//! and statistics ([`NodeStats`]). Where each file lives and why: `docs/modules.md` in the
//! repository.
//!
//! # Features
//!
//! | feature | what it adds |
//! |---|---|
//! | `metrics` | passes, blocks by reason, errors, concurrency, response times, breaker states and rule updates, through the `metrics` facade (the names: `telemetry`) |
//! | `yaml` | `KubernetesYaml`: sentinel-golang's Kubernetes CRDs and OpenSergo's fault-tolerance CRDs |
//! | `schema` | JSON Schemas of every rule format (`datasource::schema`), generated from the wire types |
//! | `testkit` | the data-source conformance kit (`datasource::testkit`) and the in-memory source, for backends' tests |
//!
//! None is on by default. The crate only links the `tracing` and `metrics` facades: it
//! never installs a subscriber, a recorder or an exporter.
//!
//! # Where to start
//!
//! - Guard calls: [`Sentinel::entry`] (or [`Sentinel::resource`] for a handle to reuse).
//! - Rules from code: [`Sentinel::flow_rules`] and its siblings, or
//!   [`Sentinel::load_rule_set`] for several families at once.
//! - Rules from a store: [`datasource::DataSource::builder`] with a backend crate's source
//!   and a converter ([`datasource::FlowJson`], [`datasource::CombinedJson`],
//!   [`datasource::GoFlowJson`]...).
//! - Tests: [`SentinelBuilder::clock`] with a [`FakeClock`] that the test advances.
//! - Watching: [`Sentinel::add_listener`] for [`SentinelEvent`]s, [`Sentinel::resource_stats`]
//!   and [`Sentinel::active_rules`] to read the state.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The rule families, in one list, for the repetitive plumbing only: the per-family
/// methods of [`RuleSet`] and [`ActiveRules`] (their types are written out, with their
/// docs), the engine's rule tables and source parts, the pipeline's per-family loops and the
/// managers' impls are generated from it. [`RuleFamily`] is written out in `rules.rs`; a
/// const check there refuses a list that does not name each variant once. Adding a family:
/// docs/adding-a-family.md.
///
/// Each entry: the `RuleFamily` variant, the field name in `RuleSet` and the engine's
/// tables, the rule type.
macro_rules! for_each_family {
    ($m:ident) => {
        $m! {
            Flow, flow, crate::flow::FlowRule;
            Degrade, degrade, crate::circuit_breaker::DegradeRule;
            System, system, crate::system::SystemRule;
            Authority, authority, crate::authority::AuthorityRule;
            ParamFlow, param_flow, crate::param_flow::ParamFlowRule;
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
mod pattern;
mod rule_ref;
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
pub use rule_ref::RuleRef;
pub use rule_set::RuleSet;
pub use rules::{KeyPolicy, LoadReport, RuleError, RuleFamily, RuleIssue, Validation};
/// The guard attribute (feature `macros`), `@SentinelResource` for Rust: see the
/// `sentinel-macros` crate for its options.
///
/// ```
/// use sentinel_core::{sentinel, BlockError};
///
/// #[sentinel(resource = "db.query")]
/// fn query(id: u64) -> Result<u64, BlockError> {
///     Ok(id * 2)
/// }
///
/// assert_eq!(query(21).unwrap(), 42); // no rule for "db.query": it passes
/// ```
#[cfg(feature = "macros")]
pub use sentinel_macros::sentinel;
pub use shadow::ShadowRuleStats;
pub use stat::{NodeStats, SecondStats};
