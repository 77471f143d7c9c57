//! The adaptive limiter's reservation against a plain atomic bulkhead, in the same run:
//! acquire + release on one thread, without and with a latency sample, and on two threads.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sentinel_adaptive::{AdaptiveLimiter, AdaptiveRule, Learned, Outcome};

/// The thread-grade bulkhead: one add to reserve, one to give back.
struct Bulkhead {
    in_flight: AtomicU64,
    limit: u64,
}

impl Bulkhead {
    #[inline]
    fn try_acquire(&self) -> bool {
        if self.in_flight.fetch_add(1, Ordering::Acquire) < self.limit {
            true
        } else {
            self.in_flight.fetch_sub(1, Ordering::Release);
            false
        }
    }

    #[inline]
    fn release(&self) {
        self.in_flight.fetch_sub(1, Ordering::Release);
    }
}

fn limiter() -> Arc<AdaptiveLimiter> {
    let built = AdaptiveLimiter::builder(AdaptiveRule::new("bench"))
        .replica_seed(1)
        .learned(Learned {
            limit: 1_000.0,
            min_rtt: Duration::from_millis(10),
        })
        .build(0);
    match built {
        Ok(l) => Arc::new(l),
        Err(e) => panic!("{e}"),
    }
}

fn single_thread(c: &mut Criterion) {
    let mut g = c.benchmark_group("reservation");
    g.throughput(Throughput::Elements(1));
    let bulkhead = Bulkhead {
        in_flight: AtomicU64::new(0),
        limit: 1_000,
    };
    g.bench_function("bulkhead", |b| {
        b.iter(|| {
            if black_box(&bulkhead).try_acquire() {
                bulkhead.release();
            }
        })
    });
    let adaptive = limiter();
    g.bench_function("adaptive_no_sample", |b| {
        b.iter(|| {
            if let Some(p) = black_box(&*adaptive).try_acquire() {
                p.release(Duration::ZERO, Outcome::Ignored);
            }
        })
    });
    let rtt = Duration::from_micros(10_250);
    g.bench_function("adaptive_with_sample", |b| {
        b.iter(|| {
            if let Some(p) = black_box(&*adaptive).try_acquire() {
                p.release(black_box(rtt), Outcome::Success);
            }
        })
    });
    g.finish();
}

/// Two threads on one limiter: the second thread loops until the measured one is done.
fn two_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("reservation_2_threads");
    g.throughput(Throughput::Elements(1));
    let bulkhead = Arc::new(Bulkhead {
        in_flight: AtomicU64::new(0),
        limit: 1_000,
    });
    let adaptive = limiter();
    let rtt = Duration::from_micros(10_250);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let background = {
        let (bulkhead, adaptive, stop) = (bulkhead.clone(), adaptive.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if bulkhead.try_acquire() {
                    bulkhead.release();
                }
                if let Some(p) = adaptive.try_acquire() {
                    p.release(rtt, Outcome::Success);
                }
            }
        })
    };
    g.bench_function("bulkhead", |b| {
        b.iter(|| {
            if black_box(&*bulkhead).try_acquire() {
                bulkhead.release();
            }
        })
    });
    g.bench_function("adaptive_with_sample", |b| {
        b.iter(|| {
            if let Some(p) = black_box(&*adaptive).try_acquire() {
                p.release(black_box(rtt), Outcome::Success);
            }
        })
    });
    g.finish();
    stop.store(true, Ordering::Relaxed);
    let _ = background.join();
}

criterion_group!(benches, single_thread, two_threads);
criterion_main!(benches);
