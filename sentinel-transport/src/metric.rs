//! The `metric` command: the per-second series as Sentinel's metric-log lines, on the
//! dashboard's epoch clock.
//!
//! Sentinel Java stamps each row with the start of the second it counts: its windows are
//! aligned on epoch seconds, and `MetricTimerListener` writes each ended one-second bucket
//! at its `windowStart` (`StatisticNode.metrics()`), which `MetricSearcher` finds by that
//! stamp (`startTime <= stamp <= endTime`). The dashboard adds up the rows of one app's
//! machines by stamp.
//!
//! The engine's clock counts milliseconds from an arbitrary origin (the process's first
//! [`SystemClock`](sentinel_core::SystemClock)), not from the epoch, so its seconds start
//! `offset mod 1000` ms after the epoch's. The transport takes one offset when it starts
//! (epoch now minus engine now) and stamps each row with the whole epoch second nearest to
//! the start of the engine second it counts: `round((second_ms + offset) / 1000) * 1000`.
//! The stamp is then at most 500 ms from the start of the interval counted, the epoch
//! second it names holds most of that interval, and it is exactly the start when the
//! engine's seconds are aligned on the epoch's (as Java's are). Consecutive engine seconds
//! get consecutive stamps, and a range asked twice gives the same rows. (Stamping the
//! epoch second the interval starts in, as before, put rows up to 999 ms before the
//! interval they count, so one app's machines were summed a second apart.)

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use sentinel_core::series::{MetricRow, MetricSeries};
use sentinel_core::{SecondStats, Sentinel};

/// Java's name of the global inbound node's rows.
pub(crate) const TOTAL_INBOUND: &str = "__total_inbound_traffic__";
/// Java's name of the CPU usage row.
pub(crate) const CPU_USAGE: &str = "__cpu_usage__";
/// Java's name of the load average row.
pub(crate) const SYSTEM_LOAD: &str = "__system_load__";
/// Java's default and largest `maxLines`.
const DEFAULT_MAX_LINES: usize = 6000;
const MAX_LINES: usize = 12_000;

/// The offset from the engine's clock to epoch milliseconds, taken once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EpochClock {
    offset_ms: i64,
}

impl EpochClock {
    pub(crate) fn of(sentinel: &Sentinel) -> Self {
        let engine = i64::try_from(sentinel.clock().now_ms()).unwrap_or(i64::MAX);
        Self::with_offset(epoch_now_ms().saturating_sub(engine))
    }

    /// The clock whose epoch milliseconds are the engine's plus `offset_ms`.
    pub(crate) fn with_offset(offset_ms: i64) -> Self {
        Self { offset_ms }
    }

    /// The whole epoch second a row of the engine second starting at `engine_ms` is
    /// stamped with: the one nearest to its start (see the module docs).
    pub(crate) fn epoch_second(&self, engine_ms: u64) -> i64 {
        let epoch = i64::try_from(engine_ms)
            .unwrap_or(i64::MAX)
            .saturating_add(self.offset_ms);
        epoch.saturating_add(500).div_euclid(1000) * 1000
    }

    /// The engine milliseconds of the epoch instant `epoch_ms` (0 before the origin).
    fn engine_ms(&self, epoch_ms: i64) -> u64 {
        u64::try_from(epoch_ms.saturating_sub(self.offset_ms)).unwrap_or(0)
    }
}

/// Epoch milliseconds now.
pub(crate) fn epoch_now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The per-second rows the command reads: the shared resource series and the inbound
/// node's seconds, collected together once a second.
#[derive(Debug)]
pub(crate) struct Metrics {
    pub(crate) series: std::sync::Arc<MetricSeries>,
    inbound: Mutex<Inbound>,
    pub(crate) epoch: EpochClock,
}

#[derive(Debug, Default)]
struct Inbound {
    seconds: VecDeque<SecondStats>,
    next: Option<u64>,
}

/// The inbound seconds kept: as long as the series' default retention.
const INBOUND_SECONDS: usize = 300;

/// What the dashboard asks: `startTime`, `endTime`, `maxLines`, `identity`.
#[derive(Debug, Default)]
pub(crate) struct MetricQuery {
    pub(crate) start: Option<i64>,
    pub(crate) end: Option<i64>,
    pub(crate) max_lines: Option<usize>,
    pub(crate) identity: Option<String>,
}

impl Metrics {
    pub(crate) fn new(series: std::sync::Arc<MetricSeries>, epoch: EpochClock) -> Self {
        Self {
            series,
            inbound: Mutex::new(Inbound::default()),
            epoch,
        }
    }

    /// Collects the seconds that ended since the previous call. Returns the rows added.
    pub(crate) fn collect(&self, sentinel: &Sentinel) -> usize {
        let added = self.series.collect(sentinel);
        let now = sentinel.clock().now_ms();
        let this_second = now - now % 1000;
        let mut inbound = self.inbound.lock().unwrap_or_else(PoisonError::into_inner);
        let from = inbound
            .next
            .unwrap_or_else(|| this_second.saturating_sub(60_000));
        if from < this_second {
            let seconds = sentinel.inbound_seconds(from, this_second);
            inbound.seconds.extend(seconds);
            inbound.next = Some(this_second);
            while inbound.seconds.len() > INBOUND_SECONDS {
                inbound.seconds.pop_front();
            }
        }
        added
    }

    /// The command's body: one line per row, then (for every resource) the load and CPU
    /// rows.
    pub(crate) fn lines(&self, sentinel: &Sentinel, query: &MetricQuery) -> String {
        let mut out = String::new();
        let Some(start) = query.start else {
            // Java answers an empty body without a start.
            return out;
        };
        let first = start.div_euclid(1000) * 1000;
        // The engine seconds whose stamps can fall in the range: a second is stamped up to
        // 500 ms from its start, so one more second each side; the stamps decide below.
        let (from, to, limit) = match query.end {
            Some(end) => {
                let last = end.div_euclid(1000) * 1000;
                (
                    self.epoch.engine_ms(first.saturating_sub(1000)),
                    self.epoch.engine_ms(last.saturating_add(2000)),
                    usize::MAX,
                )
            }
            None => (
                self.epoch.engine_ms(first.saturating_sub(1000)),
                u64::MAX,
                query.max_lines.unwrap_or(DEFAULT_MAX_LINES).min(MAX_LINES),
            ),
        };
        let last = query.end.map(|end| end.div_euclid(1000) * 1000);
        let identity = query.identity.as_deref().filter(|i| !i.trim().is_empty());
        let rows = if identity != Some(TOTAL_INBOUND) {
            self.series.rows(from, to, identity)
        } else {
            Vec::new()
        };
        let inbound: Vec<SecondStats> = if identity.is_none_or(|i| i == TOTAL_INBOUND) {
            let ring = self.inbound.lock().unwrap_or_else(PoisonError::into_inner);
            ring.seconds
                .iter()
                .filter(|s| s.second_ms >= from && s.second_ms < to)
                .copied()
                .collect()
        } else {
            Vec::new()
        };
        let in_range = |ts: i64| ts >= first && last.is_none_or(|l| ts <= l);
        let mut written = 0usize;
        let mut inbound = inbound.into_iter().peekable();
        let mut rows = rows.into_iter().peekable();
        // By second; within a second the resources, then the inbound node, as Java writes.
        loop {
            let next_row = rows.peek().map(|r| r.stats.second_ms);
            let next_in = inbound.peek().map(|s| s.second_ms);
            let line = match (next_row, next_in) {
                (Some(r), Some(i)) if r <= i => rows.next().map(|r| row_line(&self.epoch, &r)),
                (Some(_), None) => rows.next().map(|r| row_line(&self.epoch, &r)),
                (_, Some(_)) => inbound
                    .next()
                    .map(|s| stats_line(&self.epoch, TOTAL_INBOUND, &s, 0)),
                (None, None) => None,
            };
            let Some((ts, line)) = line else { break };
            if !in_range(ts) {
                continue;
            }
            if written >= limit {
                break;
            }
            out.push_str(&line);
            out.push('\n');
            written += 1;
        }
        if identity.is_none() {
            let now = epoch_now_ms().div_euclid(1000) * 1000;
            let (load, cpu) = sentinel.system_load_and_cpu();
            for (value, name) in [(load, SYSTEM_LOAD), (cpu, CPU_USAGE)] {
                if value > 0.0 {
                    let _ = writeln!(
                        out,
                        "{now}|{name}|{}|0|0|0|0|0|0|0",
                        (value * 10_000.0) as i64
                    );
                }
            }
        }
        out
    }
}

fn row_line(epoch: &EpochClock, row: &MetricRow) -> (i64, String) {
    stats_line(epoch, &row.resource, &row.stats, row.concurrency)
}

/// `timestamp|resource|passQps|blockQps|successQps|exceptionQps|rt|occupiedPassQps|concurrency|classification`,
/// as Java's `MetricNode.toThinString`: `|` in a name becomes `_` (and so do line breaks,
/// which would split the line), `rt` is the second's average in whole ms, and the
/// classification is 0 (Java's resource type "common": the engine keeps no type).
fn stats_line(
    epoch: &EpochClock,
    resource: &str,
    stats: &SecondStats,
    concurrency: u64,
) -> (i64, String) {
    let ts = epoch.epoch_second(stats.second_ms);
    // Java: the sum over the completed calls, the sum itself when none completed.
    let rt = stats
        .rt_sum_ms
        .checked_div(stats.success)
        .unwrap_or(stats.rt_sum_ms);
    let line = format!(
        "{ts}|{}|{}|{}|{}|{}|{rt}|{}|{concurrency}|0",
        escape(resource),
        stats.pass,
        stats.block,
        stats.success,
        stats.error,
        stats.occupied_pass,
    );
    (ts, line)
}

/// A resource name as it can stand in a line.
pub(crate) fn escape(resource: &str) -> String {
    resource.replace(['|', '\n', '\r'], "_")
}

#[cfg(test)]
mod tests {
    use super::*;
    use sentinel_core::FakeClock;
    use std::sync::Arc;

    #[test]
    fn names_lose_their_bars_as_in_java() {
        assert_eq!(escape("GET|/a|b"), "GET_/a_b");
        assert_eq!(escape("plain"), "plain");
    }

    #[test]
    fn rows_land_on_whole_epoch_seconds_and_a_range_reads_the_same_twice() {
        let clock = FakeClock::at_ms(10_500);
        let sentinel = Sentinel::builder().clock(clock.clone()).build();
        let metrics = Metrics::new(Arc::new(MetricSeries::new()), EpochClock::of(&sentinel));
        for _ in 0..3 {
            drop(sentinel.entry("a|b").enter());
        }
        clock.advance_ms(1000);
        drop(sentinel.entry("a|b").enter());
        clock.advance_ms(1000);
        metrics.collect(&sentinel);
        let query = MetricQuery {
            start: Some(0),
            end: Some(i64::MAX / 2),
            identity: Some("a|b".into()),
            ..MetricQuery::default()
        };
        let body = metrics.lines(&sentinel, &query);
        assert_eq!(body, metrics.lines(&sentinel, &query));
        let lines: Vec<&str> = body.lines().collect();
        assert_eq!(lines.len(), 2, "{body}");
        let fields: Vec<&str> = lines[0].split('|').collect();
        assert_eq!(fields.len(), 10, "{}", lines[0]);
        assert_eq!(&fields[1..6], ["a_b", "3", "0", "3", "0"]);
        let ts: i64 = fields[0].parse().expect("a number");
        assert_eq!(ts % 1000, 0);
        let next: i64 = lines[1]
            .split('|')
            .next()
            .unwrap_or("")
            .parse()
            .expect("a number");
        assert_eq!(next - ts, 1000);
        // The range of the first row's second alone gives that row alone.
        let one = metrics.lines(
            &sentinel,
            &MetricQuery {
                start: Some(ts),
                end: Some(ts + 999),
                identity: Some("a|b".into()),
                ..MetricQuery::default()
            },
        );
        assert_eq!(one.lines().count(), 1, "{one}");
    }

    /// The engine's seconds start `offset mod 1000` ms into the epoch's: each row is
    /// stamped with the whole epoch second nearest to the start of the second it counts.
    #[test]
    fn rows_are_stamped_with_the_epoch_second_they_count_on_a_fake_clock() {
        const EPOCH: i64 = 1_700_000_000_000;
        for (frac, stamp_after_start) in [(0, 0), (150, -150), (499, -499), (500, 500), (850, 150)]
        {
            let clock = FakeClock::at_ms(20_000);
            let sentinel = Sentinel::builder().clock(clock.clone()).build();
            // Engine ms 20 000 is epoch EPOCH + 20 000 + frac.
            let epoch = EpochClock::with_offset(EPOCH + frac);
            let metrics = Metrics::new(Arc::new(MetricSeries::new()), epoch);
            for _ in 0..2 {
                drop(sentinel.entry("r").enter());
            }
            clock.advance_ms(1000);
            drop(sentinel.entry("r").enter());
            clock.advance_ms(1000);
            metrics.collect(&sentinel);
            let start = EPOCH + 20_000 + frac;
            let body = metrics.lines(
                &sentinel,
                &MetricQuery {
                    start: Some(start - 5_000),
                    end: Some(start + 5_000),
                    identity: Some("r".into()),
                    ..MetricQuery::default()
                },
            );
            let rows: Vec<(i64, String)> = body
                .lines()
                .map(|l| {
                    let mut f = l.split('|');
                    let ts = f.next().and_then(|t| t.parse().ok()).expect("a stamp");
                    (ts, f.nth(1).unwrap_or_default().to_owned())
                })
                .collect();
            assert_eq!(
                rows,
                [
                    (start + stamp_after_start, "2".to_owned()),
                    (start + stamp_after_start + 1000, "1".to_owned())
                ],
                "offset {frac} ms into the epoch second: {body}"
            );
            assert!(stamp_after_start.abs() <= 500);
            // Asking exactly the stamp's second finds the row; the second before, nothing.
            let at = |ts: i64| {
                metrics
                    .lines(
                        &sentinel,
                        &MetricQuery {
                            start: Some(ts),
                            end: Some(ts),
                            identity: Some("r".into()),
                            ..MetricQuery::default()
                        },
                    )
                    .lines()
                    .count()
            };
            assert_eq!(at(start + stamp_after_start), 1);
            assert_eq!(at(start + stamp_after_start - 1000), 0);
        }
    }

    #[test]
    fn inbound_calls_have_java_total_inbound_rows() {
        let clock = FakeClock::at_ms(5_000);
        let sentinel = Sentinel::builder().clock(clock.clone()).build();
        let metrics = Metrics::new(Arc::new(MetricSeries::new()), EpochClock::of(&sentinel));
        for _ in 0..2 {
            drop(sentinel.entry("GET:/in").inbound().enter());
        }
        drop(sentinel.entry("db").enter());
        clock.advance_ms(1000);
        metrics.collect(&sentinel);
        let all = MetricQuery {
            start: Some(0),
            end: Some(i64::MAX / 2),
            ..MetricQuery::default()
        };
        let body = metrics.lines(&sentinel, &all);
        let inbound: Vec<&str> = body.lines().filter(|l| l.contains(TOTAL_INBOUND)).collect();
        assert_eq!(inbound.len(), 1, "{body}");
        assert_eq!(
            inbound[0].split('|').nth(2),
            Some("2"),
            "outbound calls are not inbound"
        );
        // Within the second: the resources first, then the inbound node.
        let names: Vec<&str> = body
            .lines()
            .filter_map(|l| l.split('|').nth(1))
            .filter(|n| !n.starts_with("__") || *n == TOTAL_INBOUND)
            .collect();
        assert_eq!(names, ["GET:/in", "db", TOTAL_INBOUND]);
        let only = MetricQuery {
            identity: Some(TOTAL_INBOUND.into()),
            ..all
        };
        assert_eq!(metrics.lines(&sentinel, &only).lines().count(), 1);
    }

    #[test]
    fn max_lines_caps_a_query_without_an_end() {
        let clock = FakeClock::at_ms(5_000);
        let sentinel = Sentinel::builder().clock(clock.clone()).build();
        let metrics = Metrics::new(Arc::new(MetricSeries::new()), EpochClock::of(&sentinel));
        for _ in 0..4 {
            drop(sentinel.entry("r").enter());
            clock.advance_ms(1000);
        }
        metrics.collect(&sentinel);
        let query = MetricQuery {
            start: Some(0),
            max_lines: Some(2),
            identity: Some("r".into()),
            ..MetricQuery::default()
        };
        assert_eq!(metrics.lines(&sentinel, &query).lines().count(), 2);
    }

    #[test]
    fn no_start_time_is_an_empty_answer() {
        let sentinel = Sentinel::builder().clock(FakeClock::new()).build();
        let metrics = Metrics::new(Arc::new(MetricSeries::new()), EpochClock::of(&sentinel));
        assert_eq!(metrics.lines(&sentinel, &MetricQuery::default()), "");
    }
}
