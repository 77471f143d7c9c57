//! System adaptive protection: global thresholds on inbound traffic (QPS, concurrency,
//! average RT, load with the BBR check, CPU usage).
//!
//! Several rules merge by minimum; -1 (any negative) is off; an empty list turns the check
//! off. Only calls entered with [`EntryBuilder::inbound`](crate::EntryBuilder::inbound) are
//! checked, against the global inbound statistics.

mod golang;
mod manager;
mod rule;
mod status;

pub(crate) use golang::{into_go_system_rule, GoSystemRuleWire};
pub use manager::SystemMetric;
pub(crate) use manager::{bbr_capacity, SystemTable};
pub use rule::SystemRule;
pub(crate) use rule::SystemRuleWire;
pub use status::{ManualSystemStatus, ProcSystemStatus, SystemStatus};

#[cfg(test)]
mod tests;
