//! Sliding-window statistics: per resource, per (resource, origin), per (context, resource)
//! and one global inbound node.

mod fold;
mod folded;
mod hot;
mod minute;
mod node;
mod others;
mod spread;
mod stats;
mod stripe;
mod window;

pub(crate) use fold::Trial;
pub(crate) use node::StatNode;
pub use stats::{NodeStats, SecondStats};
pub(crate) use stripe::{my_stripe, StripedWindow, STRIPES};
pub(crate) use window::Event;

/// Something that owns a statistics node and keeps it alive: the engine's resource node.
/// A compiled rule holds another resource's statistics through it (a relate rule) without
/// knowing the engine.
pub(crate) trait OwnsStat: Send + Sync + std::fmt::Debug {
    /// The statistics.
    fn stat(&self) -> &StatNode;

    /// Whether a call ever entered it. A relate rule passes every call until its related
    /// resource has been entered: Sentinel has no node for a resource never entered
    /// (`FlowRuleChecker` passes a rule whose node it does not find).
    fn entered(&self) -> bool;
}
