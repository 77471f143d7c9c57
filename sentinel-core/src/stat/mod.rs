//! Sliding-window statistics: per resource, per (resource, origin), per (context, resource)
//! and one global inbound node.

mod node;
mod registry;
mod stripe;
mod window;

pub use node::NodeStats;
pub(crate) use node::StatNode;
pub use registry::Limits;
pub(crate) use registry::{Registry, ResourceNode};
pub(crate) use stripe::{my_stripe, StripedWindow};
pub(crate) use window::Event;
