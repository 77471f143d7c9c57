//! The statistics a reader gets, as numbers: a node's current [`NodeStats`] and one
//! second's [`SecondStats`] (what Sentinel's metric log writes).

/// The counts of one second of a resource, as Sentinel's metric log writes them (read with
/// [`Sentinel::resource_seconds`](crate::Sentinel::resource_seconds)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SecondStats {
    /// When the second starts, in ms of the engine's clock (a multiple of 1000).
    pub second_ms: u64,
    /// Calls that passed (prioritized calls count in the second whose slot they took).
    pub pass: u64,
    /// Calls that were blocked.
    pub block: u64,
    /// Calls that completed.
    pub success: u64,
    /// Completed calls that recorded an error.
    pub error: u64,
    /// Sum of the response times of the completed calls, in ms.
    pub rt_sum_ms: u64,
    /// Prioritized calls that passed on a slot borrowed from a later second.
    pub occupied_pass: u64,
}

impl SecondStats {
    /// Average response time of the second's completed calls, in ms (0 if none completed).
    pub fn avg_rt_ms(&self) -> f64 {
        if self.success == 0 {
            0.0
        } else {
            self.rt_sum_ms as f64 / self.success as f64
        }
    }

    /// Whether nothing happened in the second.
    pub fn is_empty(&self) -> bool {
        self.pass == 0
            && self.block == 0
            && self.success == 0
            && self.error == 0
            && self.occupied_pass == 0
    }
}

/// The current statistics of a node, as numbers.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct NodeStats {
    /// Passed calls per second, over the last second.
    pub pass_qps: f64,
    /// Blocked calls per second.
    pub block_qps: f64,
    /// Prioritized calls per second that passed on a slot borrowed from a future bucket.
    pub occupied_pass_qps: f64,
    /// Completed calls per second.
    pub success_qps: f64,
    /// Calls that recorded an error, per second.
    pub error_qps: f64,
    /// Average response time of completed calls, in ms.
    pub avg_rt_ms: f64,
    /// Smallest response time in the last second, in ms.
    pub min_rt_ms: Option<u64>,
    /// Calls in flight now.
    pub concurrency: u64,
    /// Passed calls in the last complete second (as Sentinel's metric log reports them). The
    /// sliding `pass_qps` depends on where in the second it is read; this does not.
    pub pass_last_second: u64,
    /// Blocked calls in the last complete second.
    pub block_last_second: u64,
    /// Completed calls in the last complete second.
    pub success_last_second: u64,
    /// Errors in the last complete second.
    pub error_last_second: u64,
    /// Passed calls over the last minute.
    pub pass_minute: u64,
    /// Blocked calls over the last minute.
    pub block_minute: u64,
    /// Completed calls over the last minute.
    pub success_minute: u64,
    /// Errors over the last minute.
    pub error_minute: u64,
}
