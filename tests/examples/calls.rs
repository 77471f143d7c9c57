//! N calls through a handle on a `FakeClock` engine, for instruction counts under callgrind:
//! `valgrind --tool=callgrind target/release/examples/calls <case> <n>` at two values of n;
//! (count at 300 000 - count at 100 000) / 200 000 is the cost of one call. Cases: `blocked`
//! (a QPS rule of 0: every call refused), `passing` (a QPS rule no call reaches: entry + exit).

use sentinel_core::flow::FlowRule;
use sentinel_core::{FakeClock, Sentinel};

fn main() {
    let mut args = std::env::args().skip(1);
    let case = args.next().unwrap_or_else(|| "blocked".to_owned());
    let n: u64 = args.next().and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let count = match case.as_str() {
        "blocked" => 0.0,
        "passing" => 1e9,
        other => {
            eprintln!("unknown case {other:?}: blocked or passing");
            std::process::exit(2);
        }
    };
    let sentinel = Sentinel::builder().clock(FakeClock::at_ms(10_000)).build();
    if let Err(e) = sentinel
        .flow_rules()
        .load_rules(vec![FlowRule::qps("r", count)])
    {
        eprintln!("the rule does not load: {e}");
        std::process::exit(1);
    }
    let handle = sentinel.resource("r");
    let mut passed = 0u64;
    for _ in 0..n {
        passed += u64::from(std::hint::black_box(handle.entry().enter()).is_ok());
    }
    println!("{case}: {passed} of {n} passed");
}
