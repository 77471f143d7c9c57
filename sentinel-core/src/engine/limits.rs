//! The caps on the statistics' names and the memory a resource is budgeted at ([`Limits`]).

use std::time::Duration;

/// Caps on the number of distinct names the statistics keep, so that hostile or unbounded
/// names cannot exhaust memory, and when idle statistics are freed.
///
/// # What a resource costs
///
/// Measured with `cargo run --release -p examples --bin memory` (one QPS rule per resource,
/// x86-64, resident memory): about **2.2 KB** for a resource entered from one thread, its
/// rule included; **+1.4 KB** once its traffic lasts past two seconds (the minute window,
/// made at the first roll-up); **+0.5 KB** for each further thread that enters it (its own
/// stripe of the counters; at most 9). [`RESOURCE_BYTES`](Self::RESOURCE_BYTES), 4 KiB, is a
/// resource with steady traffic from two threads, and what
/// [`memory_budget`](Self::memory_budget) divides by.
///
/// # Caps
///
/// Past a cap, calls still run: past `max_resources` an entry passes with no checks and no
/// statistics (as Sentinel does past its 6 000 slot chains); past `max_contexts_per_resource`
/// the call is checked and counted on the resource, but not on the extra context. Origins past
/// `max_origins_per_resource` share one overflow node per resource, so origin-scoped rules
/// still apply to them, as a group: a `limitApp: other` rule limits all of them together (a
/// caller cannot escape it by sending fresh origin names). Each cap logs one warning the first
/// time it is hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Distinct resources. Default 16 384: a memory budget of 64 MiB at
    /// [`RESOURCE_BYTES`](Self::RESOURCE_BYTES) each (Sentinel's cap is 6 000 slot chains).
    pub max_resources: usize,
    /// Distinct origins per resource. Default 1 000.
    pub max_origins_per_resource: usize,
    /// Distinct context names per resource. Default 2 000, as Sentinel's
    /// `MAX_CONTEXT_NAME_SIZE`.
    pub max_contexts_per_resource: usize,
    /// Frees the statistics of a resource that has no rules and has not been entered for
    /// this long (see [`Sentinel::free_idle_resources`](crate::Sentinel::free_idle_resources)).
    /// Default `None`: never, as in Sentinel.
    ///
    /// Without it the engine keeps every resource it made, and an entry by name borrows its
    /// resource from the engine. With it, an entry by name holds a reference to its resource
    /// (so that a resource in use is never freed): two atomic read-modify-writes more per
    /// call, about 10-25 ns on a 2-core VM. A [`ResourceHandle`](crate::ResourceHandle)
    /// costs the same either way.
    pub free_idle_after: Option<Duration>,
}

/// The default memory budget for resources: 64 MiB.
const DEFAULT_BUDGET: usize = 64 << 20;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_resources: DEFAULT_BUDGET / Self::RESOURCE_BYTES,
            max_origins_per_resource: 1_000,
            max_contexts_per_resource: 2_000,
            free_idle_after: None,
        }
    }
}

impl Limits {
    /// The memory a resource is budgeted at: one with steady traffic from two threads, its
    /// minute window and one rule (see [what a resource costs](Self#what-a-resource-costs)).
    pub const RESOURCE_BYTES: usize = 4096;

    /// Sets `max_resources` from a memory budget in bytes, at
    /// [`RESOURCE_BYTES`](Self::RESOURCE_BYTES) per resource.
    ///
    /// ```
    /// use sentinel_core::Limits;
    ///
    /// let limits = Limits::default().memory_budget(400 << 20); // 400 MiB
    /// assert_eq!(limits.max_resources, 102_400);
    /// ```
    pub fn memory_budget(self, bytes: usize) -> Self {
        self.max_resources(bytes / Self::RESOURCE_BYTES)
    }

    /// Sets `free_idle_after`.
    pub fn free_idle_after(mut self, idle: Duration) -> Self {
        self.free_idle_after = Some(idle);
        self
    }

    /// Sets `max_resources`.
    pub fn max_resources(mut self, n: usize) -> Self {
        self.max_resources = n;
        self
    }

    /// Sets `max_origins_per_resource`.
    pub fn max_origins_per_resource(mut self, n: usize) -> Self {
        self.max_origins_per_resource = n;
        self
    }

    /// Sets `max_contexts_per_resource`.
    pub fn max_contexts_per_resource(mut self, n: usize) -> Self {
        self.max_contexts_per_resource = n;
        self
    }
}
