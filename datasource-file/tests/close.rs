//! `close` releases everything a file source holds: its driver task and notify's watch
//! thread. Its own test binary, so no other test's threads or tasks are counted.

use sentinel_core::datasource::testkit::{flow_payload, wait_until};
use sentinel_core::datasource::{DataSource, FlowJson};
use sentinel_core::Sentinel;
use sentinel_datasource_file::FileSource;

/// Threads of this process whose name says they are notify's.
fn notify_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(Result::ok)
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .filter(|name| name.contains("notify"))
                .count()
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "current_thread")]
async fn close_leaves_no_task_and_no_watch_thread() {
    let metrics = tokio::runtime::Handle::current().metrics();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rules.json");
    std::fs::write(&path, flow_payload(1)).expect("write");
    let (tasks_before, threads_before) = (metrics.num_alive_tasks(), notify_threads());

    let sentinel = Sentinel::new();
    let source = DataSource::builder(FileSource::new(&path).expect("settings"), FlowJson::new())
        .start(&sentinel)
        .await
        .expect("starts");
    assert!(
        metrics.num_alive_tasks() > tasks_before,
        "the driver task runs"
    );
    assert!(
        notify_threads() > threads_before,
        "notify watches the directory"
    );

    source.close().await;
    assert_eq!(
        metrics.num_alive_tasks(),
        tasks_before,
        "the driver task ended"
    );
    wait_until("notify's thread to end", || {
        notify_threads() == threads_before
    })
    .await;
}
