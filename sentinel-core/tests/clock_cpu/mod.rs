//! What the clock tests measure: the CPU time of the clock's upkeep thread.

/// The upkeep thread's CPU time so far, in ns: `/proc/self/task/<tid>/schedstat` (its
/// first field), or the thread's utime + stime ticks (10 ms) from its `stat` if the kernel
/// keeps no schedstat.
pub(crate) fn upkeep_cpu_ns() -> u64 {
    // The thread names itself once it runs: wait for that (bounded).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        if let Some(ns) = find_upkeep_cpu_ns() {
            return ns;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no sentinel-clock thread after 5 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// [`upkeep_cpu_ns`], if the thread is there (and named) yet.
fn find_upkeep_cpu_ns() -> Option<u64> {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    for task in tasks.flatten() {
        let dir = task.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() != "sentinel-clock" {
            continue;
        }
        if let Ok(schedstat) = std::fs::read_to_string(dir.join("schedstat")) {
            if let Some(ns) = schedstat.split(' ').next().and_then(|f| f.parse().ok()) {
                return Some(ns);
            }
        }
        let stat = std::fs::read_to_string(dir.join("stat")).expect("the thread's stat");
        let rest = &stat[stat.rfind(')').expect("a command name") + 2..];
        let fields: Vec<&str> = rest.split(' ').collect();
        let ticks =
            fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
        return Some(ticks * 10_000_000);
    }
    None
}
