//! The limiter on a fake clock against a simulated dependency: a semaphore of `C` places
//! with a 10 ms service time (optionally jittered), loaded open-loop at a fixed rate. Time is
//! simulated (a discrete-event loop in microseconds); nothing sleeps.

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use sentinel_adaptive::{AdaptiveLimiter, AdaptiveRule, Algorithm, Outcome, Permit, ProbeState};

/// One phase of a run: how long, the dependency's concurrency and service time, the load.
#[derive(Clone, Copy)]
struct Phase {
    secs: u64,
    capacity: usize,
    service_ms: f64,
    /// Arrivals per second.
    rate: f64,
}

fn phase(secs: u64, capacity: usize, rate: f64) -> Phase {
    Phase {
        secs,
        capacity,
        service_ms: 10.0,
        rate,
    }
}

/// The rate at `load` times the capacity of a dependency of `c` places and 10 ms.
fn load(c: usize, load: f64) -> f64 {
    c as f64 * 100.0 * load
}

/// What one window (100 ms) looked like.
#[derive(Debug, Clone, Copy)]
struct Sample {
    t_ms: u64,
    limit: u32,
    learned: u32,
    in_flight: u32,
    min_rtt_ms: Option<f64>,
    probe: ProbeState,
    /// Calls offered and rejected so far.
    attempts: u64,
    rejected: u64,
}

/// What one second looked like, for goodput and latency.
#[derive(Debug, Default, Clone)]
struct Second {
    completed: u64,
    latencies_us: Vec<u64>,
}

impl Second {
    fn p99_ms(&mut self) -> f64 {
        if self.latencies_us.is_empty() {
            return 0.0;
        }
        self.latencies_us.sort_unstable();
        let i = ((self.latencies_us.len() as f64) * 0.99).ceil() as usize - 1;
        self.latencies_us[i.min(self.latencies_us.len() - 1)] as f64 / 1_000.0
    }
}

struct Run {
    windows: Vec<Sample>,
    seconds: Vec<Second>,
    attempts: u64,
    admitted: u64,
    min_limit_in_force: u32,
    rejected: u64,
    rejected_by_probes: u64,
    probes: u64,
}

struct InService<'a> {
    end_us: u64,
    seq: u64,
    start_us: u64,
    permit: Permit<'a>,
}

impl PartialEq for InService<'_> {
    fn eq(&self, o: &Self) -> bool {
        (self.end_us, self.seq) == (o.end_us, o.seq)
    }
}
impl Eq for InService<'_> {}
impl PartialOrd for InService<'_> {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl Ord for InService<'_> {
    // Reversed: the heap pops the earliest end first.
    fn cmp(&self, o: &Self) -> CmpOrdering {
        (o.end_us, o.seq).cmp(&(self.end_us, self.seq))
    }
}

/// SplitMix64 for the dependency's jitter (the simulation's own, seeded).
struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Runs `phases` back to back against a limiter built from `rule`; `jitter` spreads the
/// service time uniformly over `±jitter`.
fn simulate(rule: AdaptiveRule, phases: &[Phase], jitter: f64) -> Run {
    let limiter = match AdaptiveLimiter::builder(rule).replica_seed(42).build(0) {
        Ok(l) => l,
        Err(e) => panic!("{e}"),
    };
    let mut rng = Rng(7);
    let mut in_service: BinaryHeap<InService<'_>> = BinaryHeap::new();
    let mut waiting: VecDeque<(u64, Permit<'_>)> = VecDeque::new();
    let mut run = Run {
        windows: Vec::new(),
        seconds: Vec::new(),
        attempts: 0,
        admitted: 0,
        min_limit_in_force: u32::MAX,
        rejected: 0,
        rejected_by_probes: 0,
        probes: 0,
    };
    let mut seq = 0u64;
    let mut now_us = 0u64;
    let mut next_tick_us = 10_000u64;
    let mut next_arrival_us = 0f64;
    let mut phase_end_us = 0u64;
    for p in phases {
        phase_end_us += p.secs * 1_000_000;
        let interval_us = 1e6 / p.rate;
        if p.rate <= 0.0 {
            next_arrival_us = f64::MAX;
        } else if next_arrival_us == f64::MAX {
            next_arrival_us = now_us as f64;
        }
        loop {
            let next_end = in_service.peek().map_or(u64::MAX, |s| s.end_us);
            let arrival = next_arrival_us as u64;
            now_us = next_end.min(arrival).min(next_tick_us);
            if now_us >= phase_end_us {
                now_us = phase_end_us;
                break;
            }
            let service_us = |rng: &mut Rng| {
                let f = 1.0 + jitter * (2.0 * rng.unit() - 1.0);
                (p.service_ms * 1_000.0 * f) as u64
            };
            if now_us == next_end {
                if let Some(done) = in_service.pop() {
                    let rtt = now_us - done.start_us;
                    done.permit
                        .release(Duration::from_micros(rtt), Outcome::Success);
                    let second = (now_us / 1_000_000) as usize;
                    if run.seconds.len() <= second {
                        run.seconds.resize(second + 1, Second::default());
                    }
                    run.seconds[second].completed += 1;
                    run.seconds[second].latencies_us.push(rtt);
                }
            } else if now_us == arrival {
                // Poisson arrivals at the phase's rate (open loop).
                next_arrival_us += -interval_us * (1.0 - rng.unit()).ln();
                run.attempts += 1;
                if let Some(permit) = limiter.try_acquire() {
                    run.admitted += 1;
                    waiting.push_back((now_us, permit));
                }
            } else {
                next_tick_us += 10_000;
                limiter.tick(now_us / 1_000);
                if now_us.is_multiple_of(100_000) {
                    let s = limiter.status();
                    run.windows.push(Sample {
                        t_ms: now_us / 1_000,
                        limit: s.limit,
                        learned: s.learned_limit,
                        in_flight: s.in_flight,
                        min_rtt_ms: s.min_rtt.map(|d| d.as_secs_f64() * 1e3),
                        probe: s.probe,
                        attempts: run.attempts,
                        rejected: s.rejected,
                    });
                }
            }
            // The semaphore: start waiting calls while places are free.
            while in_service.len() < p.capacity {
                let Some((start_us, permit)) = waiting.pop_front() else {
                    break;
                };
                seq += 1;
                in_service.push(InService {
                    end_us: now_us + service_us(&mut rng),
                    seq,
                    start_us,
                    permit,
                });
            }
            run.min_limit_in_force = run.min_limit_in_force.min(limiter.limit());
        }
    }
    let _ = now_us;
    let s = limiter.status();
    run.rejected = s.rejected;
    run.rejected_by_probes = s.rejected_by_probes;
    run.probes = s.probes;
    drop(waiting);
    drop(in_service);
    run
}

fn rule(algorithm: Algorithm) -> AdaptiveRule {
    AdaptiveRule {
        algorithm,
        max_limit: 1_000,
        ..AdaptiveRule::new("dependency")
    }
}

impl Run {
    fn between(&self, from_s: f64, to_s: f64) -> impl Iterator<Item = &Sample> {
        self.windows
            .iter()
            .filter(move |w| w.t_ms as f64 >= from_s * 1e3 && (w.t_ms as f64) < to_s * 1e3)
    }

    /// Every learned limit in `[from_s, to_s)` is within ±25 % of `c`.
    fn assert_settled(&self, from_s: f64, to_s: f64, c: usize, what: &str) {
        let (lo, hi) = (c as f64 * 0.75, c as f64 * 1.25);
        let mut n = 0;
        for w in self.between(from_s, to_s) {
            n += 1;
            assert!(
                (lo..=hi).contains(&(w.learned as f64)),
                "{what}: at {} ms the limit is {} (C = {c}): {:?}",
                w.t_ms,
                w.learned,
                self.series(from_s - 10.0, to_s)
            );
        }
        assert!(n > 0, "{what}: no windows in [{from_s}, {to_s})");
    }

    /// The learned limit once a second, for failure messages.
    fn series(&self, from_s: f64, to_s: f64) -> Vec<(u64, u32)> {
        self.between(from_s, to_s)
            .filter(|w| w.t_ms.is_multiple_of(1_000))
            .map(|w| (w.t_ms / 1_000, w.learned))
            .collect()
    }

    /// Completions per second over `[from_s, to_s)`, and the worst per-second p99 (ms).
    fn goodput_and_p99(&mut self, from_s: usize, to_s: usize) -> (f64, f64) {
        let seconds = &mut self.seconds[from_s..to_s];
        let done: u64 = seconds.iter().map(|s| s.completed).sum();
        let p99 = seconds.iter_mut().map(Second::p99_ms).fold(0.0, f64::max);
        (done as f64 / (to_s - from_s) as f64, p99)
    }
}

/// The limit settles within ±25 % of C in 10 s, again within 10 s after C halves and
/// after it doubles back, under 2.5 x overload; goodput stays >= 90 % of capacity and the
/// p99 of admitted calls <= 2 x the unloaded 10 ms.
fn settles_halves_and_doubles(algorithm: Algorithm, c: usize, jitter: f64) {
    let rate = load(c, 2.5);
    let mut run = simulate(
        rule(algorithm),
        &[
            phase(15, c, rate),
            phase(15, c / 2, rate),
            phase(15, c, rate),
        ],
        jitter,
    );
    let what = format!("{algorithm:?} C={c} jitter={jitter}");
    run.assert_settled(10.0, 15.0, c, &format!("{what} start"));
    run.assert_settled(25.0, 30.0, c / 2, &format!("{what} halved"));
    run.assert_settled(40.0, 45.0, c, &format!("{what} doubled"));
    let unloaded_p99 = 10.0 * (1.0 + jitter);
    for (from, to, cap) in [(10, 15, c), (25, 30, c / 2), (40, 45, c)] {
        let (goodput, p99) = run.goodput_and_p99(from, to);
        let capacity = load(cap, 1.0) / (1.0 + jitter * jitter / 3.0).max(1.0);
        assert!(
            goodput >= 0.9 * capacity,
            "{what} [{from}, {to}) s: goodput {goodput:.0}/s of {capacity:.0}/s"
        );
        assert!(
            p99 <= 2.0 * unloaded_p99,
            "{what} [{from}, {to}) s: p99 {p99:.1} ms against {unloaded_p99:.1} unloaded"
        );
    }
    assert!(
        run.rejected_by_probes * 100 <= run.attempts,
        "{what}: probes rejected {} of {}",
        run.rejected_by_probes,
        run.attempts
    );
}

#[test]
fn gradient_settles_halves_and_doubles_at_c_64() {
    settles_halves_and_doubles(Algorithm::Gradient, 64, 0.0);
}

#[test]
fn gradient_settles_halves_and_doubles_at_c_8() {
    settles_halves_and_doubles(Algorithm::Gradient, 8, 0.0);
}

#[test]
fn gradient_settles_with_latency_jittered_by_half() {
    settles_halves_and_doubles(Algorithm::Gradient, 64, 0.5);
    settles_halves_and_doubles(Algorithm::Gradient, 8, 0.5);
}

/// Vegas and AIMD on a dependency with ±5 % noise: with exactly 10 ms every time, calls
/// march in lock-step waves in which the median latency hides the queue (the gradient
/// passes either way, above).
#[test]
fn vegas_settles_halves_and_doubles_at_c_64() {
    settles_halves_and_doubles(Algorithm::Vegas, 64, 0.05);
}

#[test]
fn aimd_settles_halves_and_doubles_at_c_64() {
    settles_halves_and_doubles(Algorithm::Aimd, 64, 0.05);
}

fn hygiene_rule() -> AdaptiveRule {
    AdaptiveRule {
        min_limit: 1,
        initial_limit: 4,
        probe_interval_ms: 15_000,
        ..rule(Algorithm::Gradient)
    }
}

/// A probe never lowers the limit below 3 (here minLimit is 1 and C is 4, so half the
/// limit would be 2) and rejects at most 1 % of the calls, overloaded or not.
#[test]
fn probes_never_go_below_3_nor_reject_more_than_1_percent() {
    for (c, overload) in [(4, 2.5), (64, 5.0), (64, 0.8)] {
        let run = simulate(hygiene_rule(), &[phase(120, c, load(c, overload))], 0.0);
        let what = format!("C={c} load={overload}");
        assert!(run.probes >= 6, "{what}: {} probes", run.probes);
        assert!(
            run.min_limit_in_force >= 3,
            "{what}: {}",
            run.min_limit_in_force
        );
        assert!(
            run.rejected_by_probes * 100 <= run.attempts,
            "{what}: probes rejected {} of {}",
            run.rejected_by_probes,
            run.attempts
        );
        assert!(
            run.windows
                .iter()
                .any(|w| w.probe == ProbeState::Draining && w.limit < w.learned)
                || c == 4,
            "{what}: no probe lowered the limit"
        );
        if overload < 1.0 {
            // Under capacity, once the limit has grown from its initial 4, nearly everything
            // passes, probes included.
            let (from, to) = (run.between(20.0, 21.0).next(), run.windows.last());
            if let (Some(from), Some(to)) = (from, to) {
                let (attempts, rejected) =
                    (to.attempts - from.attempts, to.rejected - from.rejected);
                assert!(
                    rejected * 100 <= attempts,
                    "{what}: rejected {rejected} of {attempts}"
                );
            }
        }
    }
}

/// The minimum RTT is re-measured by probes: it follows the dependency up when it slows
/// (10 -> 20 ms) and back down, and under sustained overload it never creeps above the
/// true minimum; the limit settles around C in every phase.
#[test]
fn min_rtt_is_remeasured_and_does_not_ratchet_under_load() {
    let c = 16;
    let rate = load(c, 2.5);
    let slow = Phase {
        service_ms: 20.0,
        ..phase(50, c, rate)
    };
    let run = simulate(
        hygiene_rule(),
        &[phase(50, c, rate), slow, phase(50, c, rate)],
        0.0,
    );
    let min_rtt_in = |from: f64, to: f64| -> Vec<f64> {
        run.between(from, to).filter_map(|w| w.min_rtt_ms).collect()
    };
    for m in min_rtt_in(0.0, 50.0) {
        assert!((9.0..=11.0).contains(&m), "ratcheted to {m} ms under load");
    }
    for m in min_rtt_in(40.0, 50.0) {
        assert!((9.0..=11.0).contains(&m), "{m}");
    }
    for m in min_rtt_in(90.0, 100.0) {
        assert!((18.0..=22.0).contains(&m), "not re-measured up: {m}");
    }
    for m in min_rtt_in(140.0, 150.0) {
        assert!((9.0..=11.0).contains(&m), "not re-measured down: {m}");
    }
    for (from, to) in [(40.0, 50.0), (90.0, 100.0), (140.0, 150.0)] {
        let adapting: Vec<u32> = run
            .between(from, to)
            .filter(|w| w.probe == ProbeState::Adapting)
            .map(|w| w.learned)
            .collect();
        let median = {
            let mut v = adapting.clone();
            v.sort_unstable();
            v.get(v.len() / 2).copied().unwrap_or(0)
        };
        assert!(
            (12..=20).contains(&median),
            "[{from}, {to}) s: median limit {median}: {adapting:?}"
        );
    }
}

/// Windows without samples change nothing: not the limit, not the minimum RTT (a probe
/// over an idle resource keeps the old one); traffic coming back finds the learned limit.
#[test]
fn an_empty_window_changes_nothing() {
    let c = 16;
    let run = simulate(
        hygiene_rule(),
        &[
            phase(15, c, load(c, 2.5)),
            phase(40, c, 0.0),
            phase(5, c, load(c, 2.5)),
        ],
        0.0,
    );
    let before = run
        .between(14.9, 15.0)
        .last()
        .copied()
        .unwrap_or_else(|| panic!("no window at 15 s"));
    let idle: Vec<&Sample> = run.between(15.5, 55.0).collect();
    assert!(
        idle.iter().any(|w| w.probe != ProbeState::Adapting),
        "no probe while idle"
    );
    for w in idle {
        assert_eq!(w.learned, before.learned, "at {} ms", w.t_ms);
        assert_eq!(w.min_rtt_ms, before.min_rtt_ms, "at {} ms", w.t_ms);
        assert_eq!(w.in_flight, 0);
    }
    run.assert_settled(55.0, 60.0, c, "after idle");
}

/// Gradient2 grows without bound under modest overload through its queue term and a
/// baseline that follows the samples; here, at 1.2 x capacity for two minutes, the limit
/// stays under 1.4 C and does not drift.
#[test]
fn the_limit_does_not_grow_under_modest_overload() {
    let c = 32;
    let run = simulate(
        rule(Algorithm::Gradient),
        &[phase(120, c, load(c, 1.2))],
        0.0,
    );
    let mean = |from, to| {
        let v: Vec<f64> = run.between(from, to).map(|w| w.learned as f64).collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    for w in run.between(10.0, 120.0) {
        assert!(
            (w.learned as f64) < 1.4 * c as f64,
            "at {} ms: {}: {:?}",
            w.t_ms,
            w.learned,
            run.series(10.0, 120.0)
        );
    }
    let (early, late) = (mean(10.0, 30.0), mean(100.0, 120.0));
    assert!(late <= early + 1.0, "drifted from {early:.1} to {late:.1}");
}
