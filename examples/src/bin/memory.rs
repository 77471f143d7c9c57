//! What a resource costs in memory: N resources, each with one QPS rule, entered once from
//! each of T threads, measured as resident memory (RSS) and as heap bytes in use.
//!
//! ```text
//! cargo run --release -p examples --bin memory                    # 10 000 resources; 1, 8, 16 threads
//! cargo run --release -p examples --bin memory -- --resources 100000 --threads 1
//! ```
//!
//! Each measurement runs in a fresh child process (this program started again), so one run's
//! freed memory does not hide the next run's cost.
#![allow(unsafe_code)] // a counting GlobalAlloc is unsafe by definition

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use sentinel_core::flow::FlowRule;
use sentinel_core::{Limits, Sentinel};

/// Counts the heap bytes in use.
struct Counting;

static IN_USE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        IN_USE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        IN_USE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        IN_USE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// What a resource costs in memory.
#[derive(Debug, clap::Parser)]
struct Args {
    /// Resources, each with one QPS rule.
    #[arg(long, default_value_t = 10_000)]
    resources: usize,
    /// Threads that each enter every resource once (comma-separated: one run each).
    #[arg(long, value_delimiter = ',', default_value = "1,8,16")]
    threads: Vec<usize>,
    /// Runs one measurement in this process (used by the parent run).
    #[arg(long, hide = true)]
    child: bool,
}

/// Resident memory, in bytes (Linux `/proc/self/statm`).
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// One measurement: (RSS bytes, heap bytes) per resource.
fn measure(resources: usize, threads: usize) -> (f64, f64) {
    let names: Vec<String> = (0..resources).map(|i| format!("GET:/item/{i}")).collect();
    let rules: Vec<FlowRule> = names.iter().map(|n| FlowRule::qps(n, 1e9)).collect();
    let (rss_before, heap_before) = (rss(), IN_USE.load(Ordering::Relaxed));
    let sentinel = Sentinel::builder()
        .limits(Limits::default().max_resources(resources + 1))
        .build();
    sentinel
        .flow_rules()
        .load_rules(rules)
        .expect("valid rules");
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                for name in &names {
                    drop(sentinel.entry(name).enter());
                }
            });
        }
    });
    let rss_after = rss();
    let heap_after = IN_USE.load(Ordering::Relaxed);
    let per = |bytes: isize| bytes as f64 / resources as f64;
    let result = (
        per(rss_after as isize - rss_before as isize),
        per(heap_after - heap_before),
    );
    drop(sentinel);
    result
}

fn main() {
    let args = <Args as clap::Parser>::parse();
    if args.child {
        let threads = args.threads.first().copied().unwrap_or(1);
        let (rss, heap) = measure(args.resources, threads);
        println!("{rss:.0} {heap:.0}");
        return;
    }
    println!(
        "{} resources, one QPS rule each, entered once from each thread:",
        args.resources
    );
    let me = std::env::current_exe().expect("the program's path");
    for threads in args.threads {
        let out = std::process::Command::new(&me)
            .args([
                "--child",
                "--resources",
                &args.resources.to_string(),
                "--threads",
                &threads.to_string(),
            ])
            .output()
            .expect("the measuring child runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut numbers = text.split_whitespace();
        let (rss, heap) = (numbers.next().unwrap_or("?"), numbers.next().unwrap_or("?"));
        println!("  {threads:>2} thread(s): {rss:>6} bytes resident, {heap:>6} bytes of heap per resource");
    }
}
