//! The resources table: each resource's newest collected second, searched, sorted and cut
//! to the top rows, with 60-second sparklines (`GET api/resources`).

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};

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

/// Every resource with its row of the newest collected second (`None` for one not called
/// in it), in name order: built once per collected second and shared by every viewer and
/// query of that second (reading the engine's resource list and the series' rows costs
/// more than one viewer's top-N of them).
#[derive(Debug, Default)]
pub(crate) struct Table {
    second: Option<u64>,
    entries: Vec<(String, Option<MetricRow>)>,
}

impl State {
    /// The table of the newest collected second: the one built for it, or a new one. A
    /// resource first entered after that second was collected is in the next second's.
    fn table(&self) -> Arc<Table> {
        let newest = self.series.newest_second();
        let mut shared = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(table) = shared
            .as_ref()
            .filter(|t| newest.is_some() && t.second == newest)
        {
            return table.clone();
        }
        let mut rows: HashMap<Arc<str>, MetricRow> = match newest {
            Some(second) => self
                .series
                .rows(second, second + 1000, None)
                .into_iter()
                .map(|r| (r.resource.clone(), r))
                .collect(),
            None => HashMap::new(),
        };
        let entries = self
            .sentinel
            .resources()
            .into_iter()
            .map(|name| {
                let row = rows.remove(name.as_str());
                (name, row)
            })
            .collect();
        let table = Arc::new(Table {
            second: newest,
            entries,
        });
        *shared = Some(table.clone());
        table
    }

    /// The resources table for `query`: every resource's newest collected second, filtered,
    /// sorted, the top `limit` with their sparklines.
    pub(crate) fn resources(&self, query: &ResourceQuery) -> Resources {
        let mut query = query.clone();
        query.limit = query.limit.clamp(1, self.max_rows);
        let table = self.table();
        let newest = table.second;
        let total = table.entries.len();
        let needle = query.q.to_lowercase();
        let key = query.sort;
        // Each match with the value it sorts by, read once (not in every comparison).
        let mut matched: Vec<(f64, &str, Option<&MetricRow>)> = table
            .entries
            .iter()
            .filter(|(n, _)| needle.is_empty() || n.to_lowercase().contains(&needle))
            .map(|(n, row)| {
                let row = row.as_ref();
                let value = match (key, row) {
                    (SortKey::Blocked, _) => {
                        self.sentinel.block_reasons(n).map_or(0, |b| b.total()) as f64
                    }
                    (SortKey::Resource, _) | (_, None) => 0.0,
                    (SortKey::Pass, Some(r)) => r.stats.pass as f64,
                    (SortKey::Block, Some(r)) => r.stats.block as f64,
                    (SortKey::Success, Some(r)) => r.stats.success as f64,
                    (SortKey::Error, Some(r)) => r.stats.error as f64,
                    (SortKey::Rt, Some(r)) => r.stats.avg_rt_ms(),
                    (SortKey::Concurrency, Some(r)) => r.concurrency as f64,
                };
                (value, n.as_str(), row)
            })
            .collect();
        let count = matched.len();
        let order = |a: &(f64, &str, Option<&MetricRow>), b: &(f64, &str, Option<&MetricRow>)| {
            let order = if key == SortKey::Resource {
                a.1.cmp(b.1)
            } else {
                a.0.total_cmp(&b.0)
            };
            let order = if query.desc { order.reverse() } else { order };
            // Ties in name order, whichever the direction: a total order (names are unique).
            order.then_with(|| a.1.cmp(b.1))
        };
        // Top-N: the first `limit` found in linear time, then only those sorted. The order
        // is total, so the rows are those a full sort would put first, in the same order.
        if query.limit < count {
            matched.select_nth_unstable_by(query.limit - 1, order);
            matched.truncate(query.limit);
        }
        matched.sort_unstable_by(order);
        let rows = matched
            .into_iter()
            .map(|(_, name, row)| self.row(name, row, newest))
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

    fn row(&self, name: &str, row: Option<&MetricRow>, newest: Option<u64>) -> ResourceRow {
        let mut spark_pass = vec![0; SPARK_SECONDS];
        let mut spark_block = vec![0; SPARK_SECONDS];
        if let Some(newest) = newest {
            let from = newest.saturating_sub(1000 * (SPARK_SECONDS as u64 - 1));
            for s in self.sentinel.resource_seconds(name, from, newest + 1000) {
                // The newest second is the last point, whatever the clock's origin.
                let ago = (newest.saturating_sub(s.second_ms) / 1000) as usize;
                if let Some(i) = (SPARK_SECONDS - 1).checked_sub(ago) {
                    spark_pass[i] = s.pass;
                    spark_block[i] = s.block;
                }
            }
        }
        let blocks_total = self.sentinel.block_reasons(name).unwrap_or_default();
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
            resource: name.to_owned(),
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

#[cfg(test)]
mod tests {
    use sentinel_core::series::MetricSeries;
    use sentinel_core::{FakeClock, Sentinel};

    use super::*;
    use crate::Console;

    /// `n` resources, resource i called i % 4 times (many ties), one second collected.
    fn console(n: usize) -> (Sentinel, FakeClock, Console) {
        let clock = FakeClock::at_ms(1_000_000);
        let sentinel = Sentinel::builder().clock(clock.clone()).build();
        let console = Console::builder(&sentinel)
            .series(Arc::new(MetricSeries::new()))
            .build()
            .expect("a console");
        for i in 0..n {
            let name = format!("r/{:03}", (i * 37) % n);
            drop(sentinel.entry(&name).enter());
            for _ in 0..i % 4 {
                drop(sentinel.entry(&name).enter());
            }
        }
        clock.advance_ms(1000);
        console.series().collect(&sentinel);
        (sentinel, clock, console)
    }

    fn names(resources: &Resources) -> Vec<&str> {
        resources.rows.iter().map(|r| r.resource.as_str()).collect()
    }

    #[test]
    fn the_top_n_is_the_head_of_the_full_sort_for_every_key_and_direction() {
        let (_sentinel, _clock, console) = console(300);
        let state = &console.state;
        for sort in [
            SortKey::Resource,
            SortKey::Pass,
            SortKey::Block,
            SortKey::Success,
            SortKey::Error,
            SortKey::Rt,
            SortKey::Concurrency,
            SortKey::Blocked,
        ] {
            for desc in [true, false] {
                let query = |limit| ResourceQuery {
                    q: String::new(),
                    sort,
                    desc,
                    limit,
                };
                let all = state.resources(&query(300));
                let top = state.resources(&query(10));
                assert_eq!(all.rows.len(), 300);
                assert_eq!(names(&top), names(&all)[..10], "{sort:?} desc={desc}");
                assert_eq!(top.matched, 300);
            }
        }
        // Pass descending: the 4-call resources first, ties in name order.
        let top = state.resources(&ResourceQuery {
            limit: 3,
            ..ResourceQuery::default()
        });
        assert!(top.rows.iter().all(|r| r.pass == 4), "{:?}", names(&top));
        assert!(names(&top).windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn the_table_is_built_once_per_collected_second_and_shared() {
        let (sentinel, clock, console) = console(20);
        let state = &console.state;
        let first = state.table();
        assert_eq!(first.entries.len(), 20);
        assert!(
            Arc::ptr_eq(&first, &state.table()),
            "the same second: the same table"
        );
        // A resource entered for the first time shows with the next second.
        drop(sentinel.entry("r/new").enter());
        assert!(Arc::ptr_eq(&first, &state.table()));
        clock.advance_ms(1000);
        console.series().collect(&sentinel);
        let next = state.table();
        assert!(!Arc::ptr_eq(&first, &next), "a new second: a new table");
        assert_eq!(next.entries.len(), 21);
    }

    #[test]
    fn an_update_within_the_shown_second_does_not_build_the_table_again() {
        let (sentinel, clock, console) = console(20);
        let state = &console.state;
        let query = ResourceQuery::default();
        let full = state.snapshot_after(&query, None);
        let second = full.resources.engine_second_ms;
        assert_eq!(full.resources.rows.len(), 20);
        let update = state.snapshot_after(&query, second);
        assert!(update.resources.rows.is_empty(), "the viewer has them");
        assert_eq!(update.resources.engine_second_ms, second);
        clock.advance_ms(1000);
        console.series().collect(&sentinel);
        let next = state.snapshot_after(&query, second);
        assert_eq!(next.resources.rows.len(), 20, "a new second: the table");
        assert_ne!(next.resources.engine_second_ms, second);
    }
}
