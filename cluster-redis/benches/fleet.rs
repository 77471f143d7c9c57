//! Accuracy, Redis calls per replica and shares with replicas as separate processes (the
//! crate's `sentinel-cluster-load` binary) against `redis-main` (`scripts/services.sh start
//! redis`): what the tests only bound from above, measured on whatever machine runs it.
//!
//! ```text
//! cargo bench -p sentinel-cluster-redis --bench fleet -- [replicas] [secs] [rate per replica]
//! ```
//!
//! With no argument it runs 4 and 16 replicas at 3 x a global limit of 1 000/s (even), the
//! skewed shares (1 500/s + 3 x 150/s), and 64 replicas at 100/s each on a limit of 3 200/s;
//! with arguments, that one even run. It prints each second's admitted calls summed over the
//! replicas, each replica's (admitted, offered) per second, and Redis calls per replica per
//! second (heartbeats included).

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Duration;

use support::{finish, prefix, redis_addr, series, start_second, Replica};

fn run(name: &str, limit: f64, rates: &[f64], secs: u64) {
    let prefix = prefix(name);
    let list: Vec<Replica> = rates
        .iter()
        .map(|rate| Replica::new(&redis_addr(), &prefix, 49, limit, *rate, secs as f64))
        .collect();
    // Many processes need time to start and connect.
    let start = start_second(3 + rates.len() as u64 / 16);
    let children: Vec<_> = list.iter().map(|r| r.spawn(start)).collect();
    let reports: Vec<_> = children
        .into_iter()
        .map(|c| finish(c, Duration::from_secs(120 + secs)))
        .collect();
    let total = series(&reports, start, secs);
    let sum: u64 = total.iter().sum();
    let calls: Vec<f64> = reports
        .iter()
        .map(|r| r.stats[0] as f64 / secs as f64)
        .collect();
    let mean = calls.iter().sum::<f64>() / calls.len() as f64;
    let busiest = calls.iter().copied().fold(0.0, f64::max);
    println!(
        "{name}: {} replicas, limit {limit}/s: per-second admitted {total:?} ({:.4} x the limit \
         over the run, worst second {:.4} x); Redis calls per replica per second {mean:.1} \
         (busiest {busiest:.1})",
        rates.len(),
        sum as f64 / (limit * secs as f64),
        total.iter().copied().max().unwrap_or(0) as f64 / limit,
    );
    if rates.len() <= 4 {
        for (i, r) in reports.iter().enumerate() {
            let own: Vec<(u64, u64)> = (start..start + secs)
                .map(|s| {
                    (
                        r.seconds.get(&s).copied().unwrap_or(0),
                        r.offered.get(&s).copied().unwrap_or(0),
                    )
                })
                .collect();
            println!(
                "  replica {i} offering {}/s: (admitted, offered) {own:?}",
                rates[i]
            );
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; the numbers are ours.
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    match args[..] {
        [replicas, secs, rate, ..] => {
            let n = usize::try_from(replicas).unwrap_or(1).max(1);
            run(
                "even",
                rate as f64 * n as f64 / 3.0,
                &vec![rate as f64; n],
                secs,
            );
        }
        _ => {
            run("4-even", 1000.0, &[750.0; 4], 5);
            run("16-even", 1000.0, &[187.5; 16], 5);
            run("skewed", 1000.0, &[1500.0, 150.0, 150.0, 150.0], 5);
            run("64-even", 3200.0, &[100.0; 64], 5);
        }
    }
}
