//! The resources table: each resource's newest collected second, searched, sorted and cut
//! to the top rows, with 60-second sparklines (`GET api/resources`).

use std::collections::HashMap;
use std::sync::Arc;

use sentinel_core::series::MetricRow;
use sentinel_core::BlockReasons;
use serde::{Deserialize, Serialize};

use crate::state::State;

/// The seconds a sparkline covers.
pub const SPARK_SECONDS: usize = 60;

/// A column the resources table sorts by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SortKey {
    /// The resource name.
    Resource,
    /// Passed calls in the last second.
    #[default]
    Pass,
    /// Blocked calls in the last second.
    Block,
    /// Completed calls in the last second.
    Success,
    /// Calls that failed (exceptions) in the last second.
    Error,
    /// Average response time in the last second.
    Rt,
    /// Calls in flight.
    Concurrency,
    /// Blocks since the resource was first entered.
    Blocked,
}

/// The resources table's query: `GET api/resources?q=order&sort=pass&desc=true&limit=50`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct ResourceQuery {
    /// Only resources whose name contains this (case-insensitive).
    pub q: String,
    /// The column to sort by.
    pub sort: SortKey,
    /// Descending (the default) or ascending.
    pub desc: bool,
    /// How many rows to return (top-N, at most the console's cap).
    pub limit: usize,
}

impl Default for ResourceQuery {
    fn default() -> Self {
        Self {
            q: String::new(),
            sort: SortKey::Pass,
            desc: true,
            limit: 50,
        }
    }
}

/// Block counts by family: the engine's [`BlockReasons`], serialized with its field names.
pub type Blocks = BlockReasons;

/// One row of the resources table: the newest collected second of one resource.
#[derive(Debug, Clone, Serialize)]
pub struct ResourceRow {
    /// The resource.
    pub resource: String,
    /// Passed calls in the second (QPS).
    pub pass: u64,
    /// Blocked calls in the second.
    pub block: u64,
    /// Completed calls in the second.
    pub success: u64,
    /// Failed calls (exceptions) in the second.
    pub error: u64,
    /// Average response time of the second's completed calls, in ms.
    pub avg_rt_ms: f64,
    /// Calls in flight when the second was collected.
    pub concurrency: u64,
    /// The second's blocks by family.
    pub blocks: Blocks,
    /// Blocks by family since the resource was first entered.
    pub blocks_total: Blocks,
    /// Passed calls per second over the last 60 seconds, oldest first.
    pub spark_pass: Vec<u64>,
    /// Blocked calls per second over the same seconds.
    pub spark_block: Vec<u64>,
}

/// The resources table.
#[derive(Debug, Clone, Serialize)]
pub struct Resources {
    /// The second the rows show (Unix epoch ms of its start), if one was collected.
    pub second_ms: Option<u64>,
    /// The same second on the engine's clock (what `Sentinel::resource_seconds` takes).
    pub engine_second_ms: Option<u64>,
    /// Resources with statistics.
    pub total: usize,
    /// Resources matching the search.
    pub matched: usize,
    /// The query answered (with the limit as capped).
    pub query: ResourceQuery,
    /// The top rows.
    pub rows: Vec<ResourceRow>,
}

impl State {
    /// The resources table for `query`: every resource's newest collected second, filtered,
    /// sorted, the top `limit` with their sparklines.
    pub(crate) fn resources(&self, query: &ResourceQuery) -> Resources {
        let mut query = query.clone();
        query.limit = query.limit.clamp(1, self.max_rows);
        let newest = self.series.newest_second();
        let names = self.sentinel.resources();
        let total = names.len();
        let rows: HashMap<Arc<str>, MetricRow> = match newest {
            Some(second) => self
                .series
                .rows(second, second + 1000, None)
                .into_iter()
                .map(|r| (r.resource.clone(), r))
                .collect(),
            None => HashMap::new(),
        };
        let needle = query.q.to_lowercase();
        let mut matched: Vec<(String, Option<&MetricRow>, u64)> = names
            .into_iter()
            .filter(|n| needle.is_empty() || n.to_lowercase().contains(&needle))
            .map(|n| {
                let row = rows.get(n.as_str());
                let blocked = if query.sort == SortKey::Blocked {
                    self.sentinel.block_reasons(&n).map_or(0, |b| b.total())
                } else {
                    0
                };
                (n, row, blocked)
            })
            .collect();
        let count = matched.len();
        let key = query.sort;
        let value = |row: Option<&MetricRow>, blocked: u64| -> f64 {
            let Some(r) = row else {
                return if key == SortKey::Blocked {
                    blocked as f64
                } else {
                    0.0
                };
            };
            match key {
                SortKey::Pass => r.stats.pass as f64,
                SortKey::Block => r.stats.block as f64,
                SortKey::Success => r.stats.success as f64,
                SortKey::Error => r.stats.error as f64,
                SortKey::Rt => r.stats.avg_rt_ms(),
                SortKey::Concurrency => r.concurrency as f64,
                SortKey::Blocked => blocked as f64,
                SortKey::Resource => 0.0,
            }
        };
        matched.sort_by(|a, b| {
            let order = if key == SortKey::Resource {
                a.0.cmp(&b.0)
            } else {
                value(a.1, a.2).total_cmp(&value(b.1, b.2))
            };
            let order = if query.desc { order.reverse() } else { order };
            // Ties in name order, whichever the direction.
            order.then_with(|| a.0.cmp(&b.0))
        });
        let rows = matched
            .into_iter()
            .take(query.limit)
            .map(|(name, row, _)| self.row(name, row, newest))
            .collect();
        Resources {
            second_ms: newest.map(|s| self.recorder.to_epoch(s)),
            engine_second_ms: newest,
            total,
            matched: count,
            query,
            rows,
        }
    }

    fn row(&self, name: String, row: Option<&MetricRow>, newest: Option<u64>) -> ResourceRow {
        let mut spark_pass = vec![0; SPARK_SECONDS];
        let mut spark_block = vec![0; SPARK_SECONDS];
        if let Some(newest) = newest {
            let from = newest.saturating_sub(1000 * (SPARK_SECONDS as u64 - 1));
            for s in self.sentinel.resource_seconds(&name, from, newest + 1000) {
                // The newest second is the last point, whatever the clock's origin.
                let ago = (newest.saturating_sub(s.second_ms) / 1000) as usize;
                if let Some(i) = (SPARK_SECONDS - 1).checked_sub(ago) {
                    spark_pass[i] = s.pass;
                    spark_block[i] = s.block;
                }
            }
        }
        let blocks_total = self.sentinel.block_reasons(&name).unwrap_or_default();
        let (pass, block, success, error, avg_rt_ms, concurrency, blocks) = match row {
            Some(r) => (
                r.stats.pass,
                r.stats.block,
                r.stats.success,
                r.stats.error,
                r.stats.avg_rt_ms(),
                r.concurrency,
                r.blocks,
            ),
            None => (0, 0, 0, 0, 0.0, 0, Blocks::default()),
        };
        ResourceRow {
            resource: name,
            pass,
            block,
            success,
            error,
            avg_rt_ms,
            concurrency,
            blocks,
            blocks_total,
            spark_pass,
            spark_block,
        }
    }
}
