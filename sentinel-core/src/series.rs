//! A longer memory of per-second statistics than the engine's minute: the rows Sentinel's
//! metric log holds, kept in a bounded ring in memory, for the dashboard transport, the
//! console and scripts.
//!
//! The engine keeps each resource's last 60 seconds in its windows
//! ([`Sentinel::resource_seconds`]). A [`MetricSeries`] copies the seconds that have ended
//! into a ring when [`collect`](MetricSeries::collect) is called, once a second from a timer
//! of the caller's choice; a late or skipped call catches up on every second the windows
//! still hold, and a second is collected once. Nothing here touches the hot path: calls
//! write the windows as they always do, and collecting only reads them.
//!
//! Memory: one [`MetricRow`] (128 bytes) per resource per second in which it was entered
//! or blocked; seconds without calls take nothing. Five minutes of one resource called
//! every second is 300 rows, 38 KiB. The ring is bounded both by age
//! ([`retain`](MetricSeries::retain), 5 minutes by default) and by rows
//! ([`max_rows`](MetricSeries::max_rows), 100 000 by default: 12.2 MiB), oldest first.
//!
//! ```
//! use sentinel_core::series::MetricSeries;
//! use sentinel_core::{FakeClock, Sentinel};
//!
//! let clock = FakeClock::new();
//! let sentinel = Sentinel::builder().clock(clock.clone()).build();
//! let series = MetricSeries::new();
//! drop(sentinel.entry("db.query").enter());
//! clock.advance_ms(1000);
//! series.collect(&sentinel);
//! let rows = series.rows(0, u64::MAX, Some("db.query"));
//! assert_eq!(rows.len(), 1);
//! assert_eq!(rows[0].stats.pass, 1);
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::block::BlockReasons;
use crate::engine::seconds_of;
use crate::engine::Sentinel;
use crate::stat::SecondStats;

/// One resource's second, as a row of Sentinel's metric log.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct MetricRow {
    /// The resource.
    pub resource: Arc<str>,
    /// The second's counts; `stats.second_ms` is when it starts.
    pub stats: SecondStats,
    /// Calls of the resource in flight when the row was collected.
    pub concurrency: u64,
    /// The second's blocks by reason. The engine counts reasons as running totals, so the
    /// blocks since the previous collection are given to the newest second collected.
    pub blocks: BlockReasons,
}

/// A bounded ring of [`MetricRow`]s, filled by [`collect`](Self::collect). See the
/// [module docs](self).
#[derive(Debug)]
pub struct MetricSeries {
    retain_ms: u64,
    max_rows: usize,
    inner: Mutex<Ring>,
}

#[derive(Debug, Default)]
struct Ring {
    /// Ordered by second, then resource.
    rows: VecDeque<MetricRow>,
    /// The first second not yet collected.
    next: Option<u64>,
    /// Each resource's running block reasons at the previous collection.
    blocks: HashMap<Arc<str>, BlockReasons>,
}

impl Default for MetricSeries {
    fn default() -> Self {
        Self::new()
    }
}

impl MetricSeries {
    /// How long rows are kept by default: 5 minutes.
    pub const DEFAULT_RETAIN: Duration = Duration::from_secs(300);
    /// The most rows kept by default.
    pub const DEFAULT_MAX_ROWS: usize = 100_000;
    /// The bytes one row takes in the ring.
    pub const ROW_BYTES: usize = std::mem::size_of::<MetricRow>();

    /// An empty series with the default bounds.
    pub fn new() -> Self {
        Self {
            retain_ms: Self::DEFAULT_RETAIN.as_millis() as u64,
            max_rows: Self::DEFAULT_MAX_ROWS,
            inner: Mutex::new(Ring::default()),
        }
    }

    /// Keeps rows this long (at least one second).
    pub fn retain(mut self, age: Duration) -> Self {
        self.retain_ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX).max(1000);
        self
    }

    /// Keeps at most this many rows (at least one).
    pub fn max_rows(mut self, rows: usize) -> Self {
        self.max_rows = rows.max(1);
        self
    }

    fn ring(&self) -> MutexGuard<'_, Ring> {
        // A panic while holding the lock leaves whole rows; the ring stays usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Copies every second of `sentinel`'s resources that has ended since the previous call
    /// (on the first call, every second the engine still holds) into the ring, and drops
    /// rows past the bounds. Returns the rows added. Call it about once a second; calling
    /// more often adds nothing twice.
    pub fn collect(&self, sentinel: &Sentinel) -> usize {
        let now = sentinel.clock().now_ms();
        let this_second = now - now % 1000;
        let mut ring = self.ring();
        let from = ring
            .next
            .unwrap_or_else(|| this_second.saturating_sub(60_000));
        if from >= this_second {
            return 0;
        }
        let nodes = sentinel.inner.registry.all();
        let mut batch = Vec::new();
        let mut seen = HashMap::with_capacity(nodes.len());
        for node in &nodes {
            let reasons = node.blocks.read();
            let earlier = ring.blocks.get(&node.name).copied().unwrap_or_default();
            seen.insert(node.name.clone(), reasons);
            let seconds = seconds_of(&node.stat, now, from, this_second);
            let concurrency = node.stat.concurrency().max(0) as u64;
            let newest = seconds.len().saturating_sub(1);
            batch.extend(seconds.into_iter().enumerate().map(|(i, stats)| MetricRow {
                resource: node.name.clone(),
                stats,
                concurrency,
                blocks: if i == newest {
                    reasons.since(&earlier)
                } else {
                    BlockReasons::default()
                },
            }));
        }
        // Resources freed by the engine are forgotten with their running totals.
        ring.blocks = seen;
        ring.next = Some(this_second);
        batch.sort_by(|a, b| {
            (a.stats.second_ms, &a.resource).cmp(&(b.stats.second_ms, &b.resource))
        });
        let added = batch.len();
        ring.rows.extend(batch);
        let oldest = this_second.saturating_sub(self.retain_ms);
        while ring
            .rows
            .front()
            .is_some_and(|r| r.stats.second_ms < oldest)
            || ring.rows.len() > self.max_rows
        {
            ring.rows.pop_front();
        }
        added
    }

    /// The rows of seconds starting in `[from_ms, to_ms)`, of one resource or of all, by
    /// second then resource. Asked twice, a range gives the same rows while they are kept.
    pub fn rows(&self, from_ms: u64, to_ms: u64, resource: Option<&str>) -> Vec<MetricRow> {
        let ring = self.ring();
        let start = ring.rows.partition_point(|r| r.stats.second_ms < from_ms);
        ring.rows
            .range(start..)
            .take_while(|r| r.stats.second_ms < to_ms)
            .filter(|r| resource.is_none_or(|name| *r.resource == *name))
            .cloned()
            .collect()
    }

    /// The start of the newest second collected, if any was.
    pub fn newest_second(&self) -> Option<u64> {
        self.ring().next.map(|next| next - 1000)
    }

    /// Rows held now.
    pub fn len(&self) -> usize {
        self.ring().rows.len()
    }

    /// Whether no row is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests;
