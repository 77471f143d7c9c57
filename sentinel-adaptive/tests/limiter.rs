//! The limiter's contract on a fake clock: the exact reservation, start-up, carry-over of
//! what was learned, drops, and ticks.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sentinel_adaptive::{AdaptiveLimiter, AdaptiveRule, Algorithm, Learned, Outcome, ProbeState};

fn build(rule: AdaptiveRule, learned: Option<Learned>) -> AdaptiveLimiter {
    let mut b = AdaptiveLimiter::builder(rule).replica_seed(3);
    if let Some(l) = learned {
        b = b.learned(l);
    }
    match b.build(0) {
        Ok(l) => l,
        Err(e) => panic!("{e}"),
    }
}

fn learned(limit: f64) -> Option<Learned> {
    Some(Learned {
        limit,
        min_rtt: Duration::from_millis(10),
    })
}

#[test]
fn an_invalid_rule_is_refused_with_its_field() {
    let err = AdaptiveLimiter::builder(AdaptiveRule {
        window_ms: 1,
        ..AdaptiveRule::new("r")
    })
    .build(0)
    .err();
    assert_eq!(err.map(|e| e.field()), Some("windowMs"));
}

#[test]
fn the_reservation_is_exact_under_two_threads() {
    let limiter = Arc::new(build(AdaptiveRule::new("r"), learned(4.0)));
    assert_eq!(limiter.limit(), 4);
    let inside = Arc::new(AtomicU32::new(0));
    let most = Arc::new(AtomicU32::new(0));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (limiter, inside, most) = (limiter.clone(), inside.clone(), most.clone());
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for i in 0..20_000u32 {
                    if let Some(p) = limiter.try_acquire_owned() {
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        held.push(p);
                    }
                    if i % 8 == 0 {
                        for p in held.drain(..) {
                            inside.fetch_sub(1, Ordering::SeqCst);
                            p.release(Duration::from_millis(10), Outcome::Success);
                        }
                    }
                }
                for p in held.drain(..) {
                    inside.fetch_sub(1, Ordering::SeqCst);
                    drop(p);
                }
            })
        })
        .collect();
    for t in threads {
        assert!(t.join().is_ok());
    }
    assert!(most.load(Ordering::SeqCst) <= 4, "{most:?} inside at once");
    assert_eq!(limiter.in_flight(), 0);
    assert!(limiter.status().rejected > 0);
}

#[test]
fn a_fifth_call_over_a_limit_of_four_is_rejected_and_a_release_frees_its_place() {
    let limiter = build(AdaptiveRule::new("r"), learned(4.0));
    let permits: Vec<_> = (0..4).filter_map(|_| limiter.try_acquire()).collect();
    assert_eq!(permits.len(), 4);
    assert!(limiter.try_acquire().is_none());
    assert_eq!(limiter.in_flight(), 4);
    drop(permits);
    assert_eq!(limiter.in_flight(), 0);
    assert!(limiter.try_acquire().is_some());
    assert_eq!(limiter.status().rejected, 1);
}

#[test]
fn start_up_holds_the_limit_at_3_until_the_minimum_is_measured() {
    let limiter = build(AdaptiveRule::new("r"), None);
    let s = limiter.status();
    assert_eq!(
        (s.limit, s.learned_limit, s.probe),
        (3, 20, ProbeState::Startup)
    );
    // No traffic: windows pass, nothing is learned, nothing changes.
    for t in 1..=100 {
        limiter.tick(t * 100);
    }
    let s = limiter.status();
    assert_eq!(
        (s.limit, s.min_rtt, s.probe),
        (3, None, ProbeState::Startup)
    );
    // 60 calls of 8 ms: the minimum is 8 ms and the initial limit applies.
    for _ in 0..60 {
        if let Some(p) = limiter.try_acquire() {
            p.release(Duration::from_millis(8), Outcome::Success);
        }
    }
    limiter.tick(10_100);
    let s = limiter.status();
    assert_eq!((s.limit, s.probe), (20, ProbeState::Adapting));
    let min = s.min_rtt.map(|d| d.as_secs_f64() * 1e3).unwrap_or_default();
    assert!((7.6..=8.4).contains(&min), "{min}");
}

#[test]
fn a_reload_that_keeps_the_rule_carries_the_learned_limit_over() {
    let old = build(AdaptiveRule::new("r"), learned(57.4));
    let carried = old.learned();
    assert_eq!(carried.map(|l| l.limit), Some(57.4));
    let new = build(
        AdaptiveRule {
            max_limit: 50,
            ..AdaptiveRule::new("r")
        },
        carried,
    );
    let s = new.status();
    assert_eq!(
        (s.limit, s.probe),
        (50, ProbeState::Adapting),
        "clamped to maxLimit"
    );
    assert_eq!(s.min_rtt, Some(Duration::from_millis(10)));
}

#[test]
fn aimd_backs_off_on_drops_and_a_tick_before_the_window_changes_nothing() {
    let limiter = build(
        AdaptiveRule {
            algorithm: Algorithm::Aimd,
            ..AdaptiveRule::new("r")
        },
        learned(50.0),
    );
    let permits: Vec<_> = (0..40).filter_map(|_| limiter.try_acquire()).collect();
    for p in permits {
        p.release(Duration::from_millis(10), Outcome::Dropped);
    }
    limiter.tick(99);
    assert_eq!(limiter.limit(), 50, "the window has not passed");
    limiter.tick(100);
    assert_eq!(limiter.limit(), 45);
    // Ignored outcomes are no signal: an empty window.
    let permits: Vec<_> = (0..40).filter_map(|_| limiter.try_acquire()).collect();
    for p in permits {
        p.release(Duration::from_millis(10), Outcome::Ignored);
    }
    limiter.tick(200);
    assert_eq!(limiter.limit(), 45);
}
