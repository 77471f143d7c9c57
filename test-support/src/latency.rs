//! Latency samples for the propagation benchmarks.

use std::time::Duration;

/// The propagation benches' run, as the notify-floor tool's (`../shared/tools/notify-floor`)
/// whose numbers they compare with: [`WARMUP`](floor::WARMUP) untimed updates, then
/// [`SAMPLES`](floor::SAMPLES) timed ones, [`GAP`](floor::GAP) of idle before each (rule
/// changes arrive into an idle process).
pub mod floor {
    use std::time::Duration;

    /// Updates written before the timed ones.
    pub const WARMUP: usize = 20;
    /// Timed updates.
    pub const SAMPLES: usize = 200;
    /// Idle before each update.
    pub const GAP: Duration = Duration::from_millis(10);
}

/// Latency samples: record, then read percentiles.
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    samples: Vec<Duration>,
    sorted: bool,
}

impl Latencies {
    /// No samples yet, with room for `capacity`.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            samples: Vec::with_capacity(capacity),
            sorted: true,
        }
    }

    /// Records one sample.
    pub fn record(&mut self, sample: Duration) {
        self.samples.push(sample);
        self.sorted = false;
    }

    /// The `p`th percentile (nearest rank; `p` in 0..=100), zero with no samples.
    pub fn percentile(&mut self, p: f64) -> Duration {
        if self.samples.is_empty() {
            return Duration::ZERO;
        }
        if !self.sorted {
            self.samples.sort_unstable();
            self.sorted = true;
        }
        let rank = ((p / 100.0) * self.samples.len() as f64).ceil() as usize;
        self.samples[rank.clamp(1, self.samples.len()) - 1]
    }

    /// Prints `{label}: {summary} (budget p99 <= {budget} ms)`, then `OVER BUDGET` when the
    /// 99th percentile is over `budget`: a bench's verdict. True when within the budget.
    pub fn report_against(&mut self, label: &str, budget: Duration) -> bool {
        println!(
            "{label}: {} (budget p99 <= {} ms)",
            self.summary(),
            budget.as_millis()
        );
        if self.percentile(99.0) > budget {
            println!("OVER BUDGET");
            return false;
        }
        true
    }

    /// `p50 {..} ms, p99 {..} ms, max {..} ms`.
    pub fn summary(&mut self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        format!(
            "p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            ms(self.percentile(50.0)),
            ms(self.percentile(99.0)),
            ms(self.percentile(100.0))
        )
    }
}

/// A Sentinel flow rule list of at least `size` bytes whose rule on `bench` has `count` =
/// `seq`, padded with other rules: the propagation benches' payload (the notify-floor tool
/// sends 2 KiB documents).
pub fn padded_flow_payload(seq: usize, size: usize) -> String {
    let mut rules = vec![format!(r#"{{"resource":"bench","count":{seq}}}"#)];
    let mut len = rules[0].len() + 2;
    let mut n = 0;
    while len < size {
        let rule = format!(
            r#"{{"resource":"bench-padding-{n}","count":100,"grade":1,"limitApp":"default"}}"#
        );
        len += rule.len() + 1;
        rules.push(rule);
        n += 1;
    }
    format!("[{}]", rules.join(","))
}

/// Writes `warmup + samples` updates through `write` (given the sequence number, from 1),
/// `gap` apart, and times each from the write's start until `source` reports a new apply.
/// Returns the write -> applied latencies and the write calls' own, over the samples.
///
/// # Errors
///
/// A failed write, or an update not applied within 10 s.
pub async fn measure_propagation<F, Fut, T, E>(
    source: &sentinel_core::datasource::DataSource,
    warmup: usize,
    samples: usize,
    gap: Duration,
    mut write: F,
) -> Result<(Latencies, Latencies), String>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    let wait = Duration::from_secs(10);
    let mut status = source.status_watch();
    let mut applied = Latencies::with_capacity(samples);
    let mut writes = Latencies::with_capacity(samples);
    for seq in 1..=warmup + samples {
        tokio::time::sleep(gap).await;
        let before = status.borrow().applied_count;
        let started = std::time::Instant::now();
        write(seq).await.map_err(|e| format!("update {seq}: {e}"))?;
        let written = started.elapsed();
        let done = tokio::time::timeout(
            wait,
            status.wait_for(|s| s.applied_count > before && s.last_error.is_none()),
        )
        .await;
        if !matches!(done, Ok(Ok(_))) {
            return Err(format!("update {seq} not applied within {wait:?}"));
        }
        if seq > warmup {
            applied.record(started.elapsed());
            writes.record(written);
        }
    }
    Ok((applied, writes))
}

/// A propagation bench's exit status: success when `outcome` is within its budget, failure
/// past it, and on an error, failure with `{bench}: {error} ({start_hint})` on stderr (the
/// hint names the services-script command that starts the server).
pub fn bench_exit(
    bench: &str,
    outcome: Result<bool, Box<dyn std::error::Error>>,
    start_hint: &str,
) -> std::process::ExitCode {
    match outcome {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::FAILURE,
        Err(error) => {
            eprintln!("{bench}: {error} ({start_hint})");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut l = Latencies::with_capacity(100);
        for ms in (1..=100).rev() {
            l.record(Duration::from_millis(ms));
        }
        assert_eq!(l.percentile(50.0), Duration::from_millis(50));
        assert_eq!(l.percentile(99.0), Duration::from_millis(99));
        assert_eq!(l.percentile(100.0), Duration::from_millis(100));
        assert_eq!(Latencies::default().percentile(50.0), Duration::ZERO);
    }

    #[test]
    fn padded_payloads_reach_the_size_and_carry_the_sequence() {
        let payload = padded_flow_payload(7, 2048);
        assert!(payload.len() >= 2048, "{}", payload.len());
        assert!(payload.starts_with(r#"[{"resource":"bench","count":7}"#));
        let parsed: serde_json::Value = serde_json::from_str(&payload).expect("json");
        assert!(parsed.as_array().is_some_and(|a| a.len() > 10));
    }
}
