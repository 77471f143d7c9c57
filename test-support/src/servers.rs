//! Reaching the workspace's test servers: their addresses from the environment, the script
//! that starts and stops them, keys no other test uses.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The value of the environment variable `name`, or `default` when it is unset or blank.
pub fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_owned())
}

/// A path the services script made: the value of the environment variable `name` (which
/// `scripts/services.sh env` exports), or `relative` under the script's data folder (as the
/// script finds it: `SENTINEL_SERVICES_DIR`, or the workspace's `.services/`).
pub fn services_path(name: &str, relative: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(name).filter(|v| !v.is_empty()) {
        return PathBuf::from(path);
    }
    match std::env::var_os("SENTINEL_SERVICES_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir).join(relative),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../.services")
            .join(relative),
    }
}

/// A key no other test (or earlier run) uses: `{root}/{test}/{pid}-{nanos}-{n}`. `root` puts
/// it where a test server's permissions expect it (`/rules`, `rules:`...).
pub fn unique_key(root: &str, test: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{root}/{test}/{}-{nanos}-{n}", std::process::id())
}

/// The workspace's `scripts/services.sh`.
pub(crate) fn services_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/services.sh")
}

/// Runs the workspace's `scripts/services.sh` with `args` (blocking), for example
/// `["start", "redis-fault"]`, and fails the test, with the script's output, if it fails.
///
/// # Panics
///
/// When the script cannot run or fails: that is the test's failure message.
pub fn run_services(args: &[&str]) {
    let script = services_script();
    let out = Command::new("bash")
        .arg(&script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "scripts/services.sh {} failed:\n{}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// [`run_services`] on a blocking thread.
///
/// # Panics
///
/// As [`run_services`].
pub async fn services(args: &[&str]) {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    let done = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_services(&args);
    })
    .await;
    if let Err(e) = done {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// Held by a test that stops, restarts, freezes or fails over a shared server: see
/// [`fault_lock`]. Dropping it lets the next such test go.
#[derive(Debug)]
pub struct FaultLock {
    // The lock lives as long as this open file: closing it releases the lock.
    _file: std::fs::File,
}

/// Serialises the tests that stop, restart or fail over a shared server (`etcd-fault`,
/// `redis-fault`, `redis-ha`, ...), whichever test binary they are in and whether they run on
/// threads of one process or, as cargo-nextest runs them, each in a process of its own: an
/// exclusive lock on `faults.lock` in the services' data folder (`SENTINEL_FAULT_LOCK` names
/// another file).
///
/// # Panics
///
/// When the lock file cannot be created or locked: that is the test's failure message.
pub async fn fault_lock() -> FaultLock {
    match tokio::task::spawn_blocking(fault_lock_blocking).await {
        Ok(lock) => lock,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// [`fault_lock`] for a synchronous test: blocks the calling thread until the lock is free.
///
/// # Panics
///
/// As [`fault_lock`].
pub fn fault_lock_blocking() -> FaultLock {
    let path = services_path("SENTINEL_FAULT_LOCK", "faults.lock");
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("cannot open the fault lock {}: {e}", path.display()));
    file.lock()
        .unwrap_or_else(|e| panic!("cannot lock {}: {e}", path.display()));
    FaultLock { _file: file }
}
