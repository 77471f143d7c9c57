//! The limiter: an exact reservation on one atomic word (calls in flight in the low half, the
//! limit in the high half), latency samples into a lock-free histogram, and the limit
//! recomputed once per window by [`AdaptiveLimiter::tick`], off the hot path.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::algorithm::{next_limit, Window};
use crate::histogram::{AtomicHistogram, Counts};
use crate::probe::{
    Phase, ProbeSchedule, FEWEST_PROBE_SAMPLES, MAX_MEASURING_WINDOWS, MIN_PROBE_SAMPLES,
    PROBE_FLOOR,
};
use crate::rule::{AdaptiveRule, AdaptiveRuleError};

const IN_FLIGHT: u64 = u32::MAX as u64;

/// How a call admitted by the limiter ended, as the limit algorithms read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The call completed; its latency is a sample.
    Success,
    /// The dependency dropped the call (a timeout, an overload answer): a congestion signal
    /// for Vegas and AIMD. The latency is not sampled.
    Dropped,
    /// The call says nothing about the dependency (cancelled, a client error): no sample.
    Ignored,
}

/// What the limiter learned, to carry over a reload that keeps the rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Learned {
    /// The limit, before rounding.
    pub limit: f64,
    /// The minimum RTT last measured.
    pub min_rtt: Duration,
}

/// Where the limiter is in its minimum-RTT measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProbeState {
    /// No minimum RTT yet: the limit is held at `min(initialLimit, 3)` until one is measured.
    Startup,
    /// The algorithm moves the limit once per window.
    Adapting,
    /// A probe holds the limit at half (never under 3) while the dependency's queue drains.
    Draining,
    /// A probe measures the minimum RTT.
    Measuring,
}

/// A point-in-time view of a limiter, for status pages and metrics.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct LimiterStatus {
    /// The limit in force now (lowered during a probe).
    pub limit: u32,
    /// The limit the algorithm learned (what a probe returns to).
    pub learned_limit: u32,
    /// Calls in flight now.
    pub in_flight: u32,
    /// The last window's sampled latency (the rule's percentile), if one had samples.
    pub sampled_rtt: Option<Duration>,
    /// The minimum RTT, once measured.
    pub min_rtt: Option<Duration>,
    /// Where the probe is.
    pub probe: ProbeState,
    /// Calls rejected since the limiter was built.
    pub rejected: u64,
    /// Of those, calls a probe rejected that the learned limit would have admitted.
    pub rejected_by_probes: u64,
    /// Probes completed.
    pub probes: u64,
}

#[repr(align(128))]
struct Hot {
    /// Low 32 bits: calls in flight. High 32 bits: the limit in force.
    word: AtomicU64,
}

/// The state a probe shares with the reject path.
struct ProbeGate {
    active: AtomicBool,
    /// The learned limit while a probe holds the limit lower.
    ceiling: AtomicU64,
    /// Rejections the probe may still cause beyond the learned limit.
    budget: AtomicI64,
    /// Calls admitted over the probe's limit because the budget ran out.
    overflow: AtomicU64,
}

/// An adaptive concurrency limiter for one resource.
///
/// The hot path ([`try_acquire`](Self::try_acquire) and the permit's release) is one atomic
/// add each way plus one relaxed add into the latency histogram; it never locks, allocates
/// or awaits. [`tick`](Self::tick) recomputes the limit once a window has passed; call it
/// from a timer, or from exits (it is one atomic load until a window is due). The limiter
/// never reads a clock: the caller passes times in, so tests drive it with a fake clock.
pub struct AdaptiveLimiter {
    hot: Hot,
    histogram: AtomicHistogram,
    drops: AtomicU64,
    rejected: AtomicU64,
    rejected_by_probes: AtomicU64,
    gate: ProbeGate,
    /// The time (ms) of the next due window: `tick` returns after this one load until then.
    next_tick_ms: AtomicU64,
    control: Mutex<Control>,
}

struct Control {
    rule: AdaptiveRule,
    limit: f64,
    min_rtt: Option<f64>,
    sampled_rtt: Option<f64>,
    window_start_ms: u64,
    phase: Phase,
    schedule: ProbeSchedule,
    /// The probe's samples, accumulated over its measuring windows.
    probe_counts: Counts,
    /// This window's samples.
    window_counts: Counts,
    /// Calls seen (admitted with an outcome, or rejected) since the last probe ended.
    attempts_since_probe: u64,
    /// The limit and sampled latency of the first window after the last measurement: when
    /// the limit has since halved and the latency has not fallen, the dependency is slower
    /// (not queueing) and the minimum is stale, so a probe runs at once.
    after_probe: Option<(f64, f64)>,
    rejected_seen: u64,
    probes: u64,
}

/// Builds an [`AdaptiveLimiter`] from a rule.
#[derive(Debug, Clone)]
pub struct AdaptiveLimiterBuilder {
    rule: AdaptiveRule,
    seed: Option<u64>,
    learned: Option<Learned>,
}

impl AdaptiveLimiterBuilder {
    /// The seed of this replica's probe jitter. Replicas with different seeds probe at
    /// different times. By default a seed is drawn from the process's random hash keys.
    pub fn replica_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Starts from what an earlier limiter learned (a reload that keeps the rule): no
    /// start-up measurement, the limit clamped to the rule's bounds.
    pub fn learned(mut self, learned: Learned) -> Self {
        self.learned = Some(learned);
        self
    }

    /// Validates the rule and builds the limiter; its first window starts at `now_ms`.
    pub fn build(self, now_ms: u64) -> Result<AdaptiveLimiter, AdaptiveRuleError> {
        self.rule.validate()?;
        let seed = self.seed.unwrap_or_else(random_seed);
        let rule = self.rule;
        let mut schedule = ProbeSchedule::new(&rule, seed);
        let (limit, min_rtt, phase, in_force) = match self.learned {
            Some(l) if l.limit.is_finite() && !l.min_rtt.is_zero() => {
                let limit = l.limit.clamp(rule.min_limit as f64, rule.max_limit as f64);
                schedule.schedule_after(now_ms);
                (
                    limit,
                    Some(l.min_rtt.as_secs_f64() * 1e6),
                    Phase::Adapting,
                    round(limit),
                )
            }
            _ => {
                let limit = rule.initial_limit as f64;
                let startup = rule.initial_limit.min(PROBE_FLOOR.max(rule.min_limit));
                (limit, None, Phase::Startup, startup)
            }
        };
        let next_tick = now_ms.saturating_add(rule.window_ms);
        Ok(AdaptiveLimiter {
            hot: Hot {
                word: AtomicU64::new((in_force as u64) << 32),
            },
            histogram: AtomicHistogram::new(),
            drops: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            rejected_by_probes: AtomicU64::new(0),
            gate: ProbeGate {
                active: AtomicBool::new(false),
                ceiling: AtomicU64::new(0),
                budget: AtomicI64::new(0),
                overflow: AtomicU64::new(0),
            },
            next_tick_ms: AtomicU64::new(next_tick),
            control: Mutex::new(Control {
                rule,
                limit,
                min_rtt,
                sampled_rtt: None,
                window_start_ms: now_ms,
                phase,
                schedule,
                probe_counts: Counts::new(),
                window_counts: Counts::new(),
                attempts_since_probe: 0,
                after_probe: None,
                rejected_seen: 0,
                probes: 0,
            }),
        })
    }
}

fn round(limit: f64) -> u32 {
    limit.round().clamp(1.0, u32::MAX as f64) as u32
}

/// A seed from std's per-process random hash keys (no extra dependency).
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x5eed);
    h.finish()
}

impl fmt::Debug for AdaptiveLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = self.hot.word.load(Ordering::Relaxed);
        f.debug_struct("AdaptiveLimiter")
            .field("limit", &(word >> 32))
            .field("in_flight", &(word & IN_FLIGHT))
            .finish_non_exhaustive()
    }
}

/// A place reserved in the limiter. Give it back with [`release`](Self::release) and the
/// call's latency; dropping it releases the place without a sample ([`Outcome::Ignored`]).
#[must_use = "dropping a permit releases its place at once"]
pub struct Permit<'a> {
    limiter: &'a AdaptiveLimiter,
}

impl Permit<'_> {
    /// Releases the place and records the call's latency and outcome.
    #[inline]
    pub fn release(self, rtt: Duration, outcome: Outcome) {
        let limiter = self.limiter;
        std::mem::forget(self);
        limiter.exit(rtt, outcome);
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.limiter.exit(Duration::ZERO, Outcome::Ignored);
    }
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit").finish_non_exhaustive()
    }
}

/// A [`Permit`] that owns a handle on its limiter, for futures and tasks.
#[must_use = "dropping a permit releases its place at once"]
pub struct OwnedPermit {
    limiter: Option<Arc<AdaptiveLimiter>>,
}

impl OwnedPermit {
    /// Releases the place and records the call's latency and outcome.
    pub fn release(mut self, rtt: Duration, outcome: Outcome) {
        if let Some(limiter) = self.limiter.take() {
            limiter.exit(rtt, outcome);
        }
    }
}

impl Drop for OwnedPermit {
    fn drop(&mut self) {
        if let Some(limiter) = self.limiter.take() {
            limiter.exit(Duration::ZERO, Outcome::Ignored);
        }
    }
}

impl fmt::Debug for OwnedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit").finish_non_exhaustive()
    }
}

impl AdaptiveLimiter {
    /// A builder for a limiter enforcing `rule`.
    pub fn builder(rule: AdaptiveRule) -> AdaptiveLimiterBuilder {
        AdaptiveLimiterBuilder {
            rule,
            seed: None,
            learned: None,
        }
    }

    /// Reserves a place if fewer calls than the limit are in flight: the exact bulkhead
    /// check, one atomic add (and one more to give the place back when over the limit).
    #[inline]
    pub fn try_acquire(&self) -> Option<Permit<'_>> {
        if self.reserve() {
            Some(Permit { limiter: self })
        } else {
            None
        }
    }

    /// [`try_acquire`](Self::try_acquire) returning a permit that holds an `Arc` of the
    /// limiter.
    pub fn try_acquire_owned(self: &Arc<Self>) -> Option<OwnedPermit> {
        if self.reserve() {
            Some(OwnedPermit {
                limiter: Some(Arc::clone(self)),
            })
        } else {
            None
        }
    }

    #[inline]
    fn reserve(&self) -> bool {
        let before = self.hot.word.fetch_add(1, Ordering::Acquire);
        if (before & IN_FLIGHT) < (before >> 32) {
            return true;
        }
        self.over_limit(before & IN_FLIGHT)
    }

    /// The reject path: during a probe, a call the learned limit would admit is rejected
    /// only while the probe's drop budget lasts.
    #[cold]
    #[inline(never)]
    fn over_limit(&self, in_flight: u64) -> bool {
        if self.gate.active.load(Ordering::Acquire)
            && in_flight < self.gate.ceiling.load(Ordering::Relaxed)
        {
            if self.gate.budget.fetch_sub(1, Ordering::AcqRel) <= 0 {
                self.gate.overflow.fetch_add(1, Ordering::Relaxed);
                return true;
            }
            self.rejected_by_probes.fetch_add(1, Ordering::Relaxed);
        }
        self.hot.word.fetch_sub(1, Ordering::Release);
        self.rejected.fetch_add(1, Ordering::Relaxed);
        false
    }

    #[inline]
    fn exit(&self, rtt: Duration, outcome: Outcome) {
        self.hot.word.fetch_sub(1, Ordering::Release);
        match outcome {
            Outcome::Success => {
                let micros = u64::try_from(rtt.as_micros()).unwrap_or(u64::MAX);
                self.histogram.record(micros);
            }
            Outcome::Dropped => {
                self.drops.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Ignored => {}
        }
    }

    /// Calls in flight now.
    pub fn in_flight(&self) -> u32 {
        (self.hot.word.load(Ordering::Relaxed) & IN_FLIGHT) as u32
    }

    /// The limit in force now.
    pub fn limit(&self) -> u32 {
        (self.hot.word.load(Ordering::Relaxed) >> 32) as u32
    }

    fn set_limit(&self, limit: u32) {
        let high = (limit as u64) << 32;
        let _ = self
            .hot
            .word
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |w| {
                Some((w & IN_FLIGHT) | high)
            });
    }

    /// What the limiter learned, once it has a minimum RTT.
    pub fn learned(&self) -> Option<Learned> {
        let c = self.lock();
        c.min_rtt.map(|min| Learned {
            limit: c.limit,
            min_rtt: Duration::from_nanos((min * 1_000.0) as u64),
        })
    }

    /// A point-in-time view.
    pub fn status(&self) -> LimiterStatus {
        let c = self.lock();
        let word = self.hot.word.load(Ordering::Relaxed);
        let micros = |us: f64| Duration::from_nanos((us * 1_000.0) as u64);
        LimiterStatus {
            limit: (word >> 32) as u32,
            learned_limit: round(c.limit),
            in_flight: (word & IN_FLIGHT) as u32,
            sampled_rtt: c.sampled_rtt.map(micros),
            min_rtt: c.min_rtt.map(micros),
            probe: match c.phase {
                Phase::Startup => ProbeState::Startup,
                Phase::Adapting => ProbeState::Adapting,
                Phase::Draining => ProbeState::Draining,
                Phase::Measuring { .. } => ProbeState::Measuring,
            },
            rejected: self.rejected.load(Ordering::Relaxed),
            rejected_by_probes: self.rejected_by_probes.load(Ordering::Relaxed),
            probes: c.probes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Control> {
        // The control state stays consistent across a panic in another tick (there is none
        // on any input), so a poisoned lock is still usable.
        self.control
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Closes the window if one has passed by `now_ms` and recomputes the limit. Cheap
    /// (one atomic load) when no window is due; a concurrent tick returns at once.
    pub fn tick(&self, now_ms: u64) {
        if now_ms < self.next_tick_ms.load(Ordering::Acquire) {
            return;
        }
        let mut c = match self.control.try_lock() {
            Ok(c) => c,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        if now_ms < c.window_start_ms.saturating_add(c.rule.window_ms) {
            return;
        }
        self.close_window(&mut c, now_ms);
        self.next_tick_ms
            .store(now_ms.saturating_add(c.rule.window_ms), Ordering::Release);
    }

    fn close_window(&self, c: &mut Control, now_ms: u64) {
        let elapsed_ms = now_ms.saturating_sub(c.window_start_ms).max(1);
        c.window_start_ms = now_ms;
        c.window_counts.clear();
        self.histogram.drain_into(&mut c.window_counts);
        let samples = c.window_counts.total();
        let drops = self.drops.swap(0, Ordering::Relaxed);
        let rejected = self.rejected.load(Ordering::Relaxed);
        let newly_rejected = rejected.saturating_sub(c.rejected_seen);
        c.rejected_seen = rejected;
        let rtt = c.window_counts.percentile(c.rule.percentile);
        if rtt.is_some() {
            c.sampled_rtt = rtt;
        }
        match c.phase {
            Phase::Startup => {
                self.measure(c, now_ms);
            }
            Phase::Draining => {
                // Samples of calls admitted before the drain hold the old queue: not used.
                c.probe_counts.clear();
                c.phase = Phase::Measuring { windows: 0 };
            }
            Phase::Measuring { .. } => {
                self.measure(c, now_ms);
            }
            Phase::Adapting => {
                c.attempts_since_probe += samples + drops + newly_rejected;
                if let (Some(rtt), Some(min_rtt)) = (rtt, c.min_rtt) {
                    let window = Window {
                        samples,
                        drops,
                        rtt,
                        min_rtt,
                        in_flight: c.window_counts.sum_micros() / (elapsed_ms as f64 * 1_000.0),
                    };
                    self.adapt(c, &window);
                } else if let (Some(min_rtt), true) = (c.min_rtt, drops > 0) {
                    let window = Window {
                        samples: 0,
                        drops,
                        rtt: 0.0,
                        min_rtt,
                        in_flight: 0.0,
                    };
                    self.adapt(c, &window);
                }
                let stale = match (c.after_probe, rtt) {
                    (None, Some(rtt)) => {
                        c.after_probe = Some((c.limit, rtt));
                        false
                    }
                    (Some((limit, before)), Some(rtt)) => c.limit < limit / 2.0 && rtt >= before,
                    _ => false,
                };
                if c.min_rtt.is_some() && (stale || now_ms >= c.schedule.next_probe_ms()) {
                    self.start_probe(c);
                }
            }
        }
    }

    fn adapt(&self, c: &mut Control, window: &Window) {
        if let Some(next) = next_limit(&c.rule, c.limit, window) {
            if next.is_finite() {
                c.limit = next.clamp(c.rule.min_limit as f64, c.rule.max_limit as f64);
                self.set_limit(round(c.limit));
            }
        }
    }

    fn start_probe(&self, c: &mut Control) {
        let learned = round(c.limit);
        let probe_limit = (learned / 2).max(PROBE_FLOOR).min(learned);
        // At most 1 % of the calls seen since the last probe may be rejected by this one.
        let budget = (c.attempts_since_probe / 100).min(i64::MAX as u64) as i64;
        self.gate.ceiling.store(learned as u64, Ordering::Relaxed);
        self.gate.budget.store(budget, Ordering::Relaxed);
        self.gate.overflow.store(0, Ordering::Relaxed);
        self.gate.active.store(true, Ordering::Release);
        self.set_limit(probe_limit);
        c.phase = Phase::Draining;
    }

    /// A start-up or probe measuring window: accumulate samples until there are enough,
    /// then take the rule's percentile as the minimum RTT.
    fn measure(&self, c: &mut Control, now_ms: u64) {
        c.probe_counts.add(&c.window_counts);
        let windows = match c.phase {
            Phase::Measuring { windows } => windows + 1,
            _ => 0,
        };
        let enough = c.probe_counts.total() >= MIN_PROBE_SAMPLES;
        if c.phase == Phase::Startup {
            if enough {
                c.min_rtt = c.probe_counts.percentile(c.rule.percentile);
                c.probe_counts.clear();
                c.phase = Phase::Adapting;
                self.set_limit(round(c.limit));
                c.schedule.schedule_after(now_ms);
            }
            return;
        }
        if !enough && windows < MAX_MEASURING_WINDOWS {
            c.phase = Phase::Measuring { windows };
            return;
        }
        let enough = c.probe_counts.total() >= FEWEST_PROBE_SAMPLES;
        // A probe whose budget ran out admitted calls over its limit: the queue may not have
        // drained, so its measurement is not trusted and the old minimum stays.
        let clean = self.gate.overflow.load(Ordering::Relaxed) == 0;
        if enough && clean {
            c.min_rtt = c.probe_counts.percentile(c.rule.percentile).or(c.min_rtt);
        }
        c.probe_counts.clear();
        c.probes += 1;
        self.gate.active.store(false, Ordering::Release);
        self.set_limit(round(c.limit));
        c.attempts_since_probe = 0;
        c.after_probe = None;
        c.phase = Phase::Adapting;
        c.schedule.schedule_after(now_ms);
    }
}
