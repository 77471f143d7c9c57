//! Where system rules read load and CPU usage.

use std::fmt;
use std::fs;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The source of the machine's load average and CPU usage for system rules.
///
/// The default, [`ProcSystemStatus`], samples `/proc` once a second in a background thread.
/// Tests inject their own.
pub trait SystemStatus: Send + Sync + fmt::Debug + 'static {
    /// The one-minute load average.
    fn load_average(&self) -> f64;
    /// CPU usage in [0, 1].
    fn cpu_usage(&self) -> f64;
}

/// A system status whose values a test sets.
#[derive(Debug, Default, Clone)]
pub struct ManualSystemStatus {
    load: Arc<AtomicU64>,
    cpu: Arc<AtomicU64>,
}

impl ManualSystemStatus {
    /// Load 0, CPU 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the load average.
    pub fn set_load(&self, load: f64) {
        self.load.store(load.to_bits(), Ordering::Relaxed);
    }

    /// Sets the CPU usage.
    pub fn set_cpu_usage(&self, usage: f64) {
        self.cpu.store(usage.to_bits(), Ordering::Relaxed);
    }
}

impl SystemStatus for ManualSystemStatus {
    fn load_average(&self) -> f64 {
        f64::from_bits(self.load.load(Ordering::Relaxed))
    }

    fn cpu_usage(&self) -> f64 {
        f64::from_bits(self.cpu.load(Ordering::Relaxed))
    }
}

#[derive(Debug, Default)]
struct Sampled {
    load: AtomicU64,
    cpu: AtomicU64,
}

/// Samples `/proc/loadavg`, `/proc/stat` and `/proc/self/stat` once a second.
///
/// CPU usage is the larger of the machine's usage and this process's usage. The process's
/// usage is relative to its CPU quota when cgroup v2 `cpu.max` sets one (containers), and to
/// the number of CPUs otherwise. On systems without `/proc`, both values stay 0, so load and
/// CPU thresholds never trigger. The sampling thread stops when the last clone is dropped.
#[derive(Clone)]
pub struct ProcSystemStatus {
    sampled: Arc<Sampled>,
}

impl fmt::Debug for ProcSystemStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcSystemStatus")
            .field("load", &self.load_average())
            .field("cpu", &self.cpu_usage())
            .finish()
    }
}

impl ProcSystemStatus {
    /// Takes a first sample and starts the sampling thread.
    pub fn start() -> Self {
        let sampled = Arc::new(Sampled::default());
        let mut sampler = Sampler::new();
        sampler.sample_into(&sampled);
        let weak: Weak<Sampled> = Arc::downgrade(&sampled);
        let spawned = std::thread::Builder::new()
            .name("sentinel-system-status".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_secs(1));
                let Some(target) = weak.upgrade() else {
                    return;
                };
                sampler.sample_into(&target);
            });
        if let Err(error) = spawned {
            tracing::warn!(%error, "cannot start the system status sampler; load and CPU stay at their first sample");
        }
        Self { sampled }
    }
}

impl SystemStatus for ProcSystemStatus {
    fn load_average(&self) -> f64 {
        f64::from_bits(self.sampled.load.load(Ordering::Relaxed))
    }

    fn cpu_usage(&self) -> f64 {
        f64::from_bits(self.sampled.cpu.load(Ordering::Relaxed))
    }
}

struct Sampler {
    last_system: Option<(u64, u64)>,
    last_process: Option<(f64, Instant)>,
    cpus: f64,
    ticks_per_sec: f64,
}

impl Sampler {
    fn new() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64);
        Self {
            last_system: None,
            last_process: None,
            cpus: cgroup_cpu_limit().map_or(cpus, |limit| limit.min(cpus)),
            // USER_HZ is 100 on every mainstream Linux build.
            ticks_per_sec: 100.0,
        }
    }

    fn sample_into(&mut self, target: &Sampled) {
        if let Some(load) = read_load() {
            target.load.store(load.to_bits(), Ordering::Relaxed);
        }
        let system = self.system_usage().unwrap_or(0.0);
        let process = self.process_usage().unwrap_or(0.0);
        let usage = system.max(process).clamp(0.0, 1.0);
        target.cpu.store(usage.to_bits(), Ordering::Relaxed);
    }

    fn system_usage(&mut self) -> Option<f64> {
        let now = cpu_times(&fs::read_to_string("/proc/stat").ok()?)?;
        let previous = self.last_system.replace(now)?;
        busy_between(previous, now)
    }

    fn process_usage(&mut self) -> Option<f64> {
        let ticks = process_ticks(&fs::read_to_string("/proc/self/stat").ok()?)?;
        let cpu_secs = ticks / self.ticks_per_sec;
        let now = Instant::now();
        let (last_secs, last_at) = self.last_process.replace((cpu_secs, now))?;
        let wall = now.duration_since(last_at).as_secs_f64();
        if wall <= 0.0 {
            return None;
        }
        Some((cpu_secs - last_secs) / wall / self.cpus)
    }
}

/// `(total, idle)` jiffies of all CPUs from `/proc/stat`'s first line (`cpu user nice system
/// idle iowait irq softirq steal ...`; idle counts `idle` and `iowait`).
fn cpu_times(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().next()?;
    let mut words = line.split_whitespace();
    if words.next()? != "cpu" {
        return None;
    }
    let fields: Vec<u64> = words.filter_map(|f| f.parse().ok()).collect();
    if fields.len() < 4 {
        return None;
    }
    let idle = fields[3] + fields.get(4).copied().unwrap_or(0);
    let total: u64 = fields.iter().take(8).sum();
    Some((total, idle))
}

/// The busy share of CPU time between two `cpu_times` samples.
fn busy_between(before: (u64, u64), after: (u64, u64)) -> Option<f64> {
    let dt = after.0.checked_sub(before.0).filter(|dt| *dt > 0)?;
    let idle = after.1.saturating_sub(before.1);
    Some(1.0 - idle as f64 / dt as f64)
}

/// The process's user + system CPU ticks from `/proc/self/stat` (fields 14 and 15, counted
/// after the parenthesised command name, which may itself hold spaces and parentheses).
fn process_ticks(stat: &str) -> Option<f64> {
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

fn read_load() -> Option<f64> {
    load_of(&fs::read_to_string("/proc/loadavg").ok()?)
}

/// The one-minute load from `/proc/loadavg`.
fn load_of(loadavg: &str) -> Option<f64> {
    loadavg.split_whitespace().next()?.parse().ok()
}

/// CPUs allowed by a cgroup v2 quota (`/sys/fs/cgroup/cpu.max`: `quota period`).
fn cgroup_cpu_limit() -> Option<f64> {
    cpu_limit_of(&fs::read_to_string("/sys/fs/cgroup/cpu.max").ok()?)
}

/// `quota / period` from a `cpu.max` file; `None` for `max` (no quota).
fn cpu_limit_of(cpu_max: &str) -> Option<f64> {
    let mut parts = cpu_max.split_whitespace();
    let quota: f64 = parts.next()?.parse().ok()?;
    let period: f64 = parts.next()?.parse().ok()?;
    (period > 0.0 && quota > 0.0).then(|| quota / period)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_read_as_the_kernel_writes_them() {
        let before = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\n";
        let after = "cpu  160 0 90 900 50 0 0 0 0 0\ncpu0 80 0 45 450 25 0 0 0 0 0\n";
        assert_eq!(cpu_times(before), Some((1000, 850)));
        assert_eq!(cpu_times(after), Some((1200, 950)));
        // 200 jiffies passed, 100 of them idle: half busy.
        assert_eq!(busy_between((1000, 850), (1200, 950)), Some(0.5));
        assert_eq!(
            busy_between((1000, 850), (1000, 850)),
            None,
            "no time passed"
        );
        assert_eq!(cpu_times("intr 1 2 3"), None);

        // A command name with spaces and parentheses: fields count from the last `)`.
        let stat = "4242 (my (odd) app) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0";
        assert_eq!(process_ticks(stat), Some(325.0));
        assert_eq!(process_ticks("4242 (truncated"), None);

        assert_eq!(load_of("1.25 0.80 0.50 2/345 6789\n"), Some(1.25));
        assert_eq!(load_of(""), None);
    }

    #[test]
    fn a_cgroup_v2_quota_sets_the_cpus() {
        assert_eq!(cpu_limit_of("150000 100000\n"), Some(1.5));
        assert_eq!(cpu_limit_of("max 100000\n"), None, "no quota");
        assert_eq!(cpu_limit_of("50000 0"), None);
        assert_eq!(cpu_limit_of(""), None);
    }

    #[test]
    fn proc_sampler_settles_on_values_in_range() {
        let status = ProcSystemStatus::start();
        let load = status.load_average();
        assert!(load >= 0.0 && load.is_finite());
        let cpu = status.cpu_usage();
        assert!((0.0..=1.0).contains(&cpu));
    }
}
