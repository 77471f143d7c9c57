//! The file backend on a real filesystem: every wait is bounded.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sentinel_core::datasource::{RawPayload, ReadableDataSource, SourceError, WatchEvent};
use sentinel_datasource_file::FileSource;
use tokio::time::{timeout, Instant};

/// Longest wait for an expected event.
const EVENT_WAIT: Duration = Duration::from_secs(5);
/// How long nothing must happen to count as "no event".
const QUIET: Duration = Duration::from_millis(400);
const DEBOUNCE: Duration = Duration::from_millis(20);
const SETTLE: Duration = Duration::from_millis(300);

fn source(path: &Path) -> FileSource {
    FileSource::builder(path)
        .debounce(DEBOUNCE)
        .delete_settle(SETTLE)
        .build()
        .expect("valid settings")
}

async fn next_change(source: &mut FileSource) -> RawPayload {
    match timeout(EVENT_WAIT, source.watch()).await {
        Ok(Ok(WatchEvent::Changed(payload))) => payload,
        Ok(Ok(other)) => panic!("expected a change, got {other:?}"),
        Ok(Err(error)) => panic!("watch failed: {error}"),
        Err(_) => panic!("no change within {EVENT_WAIT:?}"),
    }
}

async fn assert_quiet(source: &mut FileSource) {
    if let Ok(result) = timeout(QUIET, source.watch()).await {
        panic!("expected no event, got {result:?}");
    }
}

fn value(payload: &RawPayload) -> &[u8] {
    assert_eq!(payload.entries.len(), 1, "one entry expected: {payload:?}");
    &payload.entries[0].value
}

fn temp_rules() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rules.json");
    (dir, path)
}

#[tokio::test]
async fn initial_read_returns_content_with_hash_revision() {
    let (_dir, path) = temp_rules();
    fs::write(&path, b"[1]").expect("write");
    let mut source = source(&path);

    let payload = source.read().await.expect("read");
    assert_eq!(value(&payload), b"[1]");
    assert_eq!(payload.entries[0].key, path.display().to_string());
    let revision = payload.revision.expect("revision");
    assert_eq!(revision.len(), 64);
    assert!(revision.bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(source.describe().contains("rules.json"));
    source.close().await;
}

#[tokio::test]
async fn missing_file_at_read_is_absent() {
    let (_dir, path) = temp_rules();
    let mut source = source(&path);
    assert!(source.read().await.expect("read").is_absent());

    fs::write(&path, b"[2]").expect("write");
    assert_eq!(value(&next_change(&mut source).await), b"[2]");
}

#[tokio::test]
async fn write_is_reported_and_identical_rewrite_is_not() {
    let (_dir, path) = temp_rules();
    fs::write(&path, b"[1]").expect("write");
    let mut source = source(&path);
    let first = source.read().await.expect("read");

    fs::write(&path, b"[1, 2]").expect("write");
    let second = next_change(&mut source).await;
    assert_eq!(value(&second), b"[1, 2]");
    assert_ne!(first.revision, second.revision);

    fs::write(&path, b"[1, 2]").expect("rewrite");
    assert_quiet(&mut source).await;

    // The source still works after the cancelled watch.
    fs::write(&path, b"[3]").expect("write");
    assert_eq!(value(&next_change(&mut source).await), b"[3]");
}

#[tokio::test]
async fn editor_rename_over_the_file_is_reported() {
    let (dir, path) = temp_rules();
    fs::write(&path, b"old").expect("write");
    let mut source = source(&path);
    source.read().await.expect("read");

    let tmp = dir.path().join(".rules.json.swp");
    fs::write(&tmp, b"new").expect("write tmp");
    fs::rename(&tmp, &path).expect("rename over");
    assert_eq!(value(&next_change(&mut source).await), b"new");

    // The rename left a new inode in place: later edits are still seen.
    fs::write(&path, b"newer").expect("write");
    assert_eq!(value(&next_change(&mut source).await), b"newer");
}

#[tokio::test]
async fn truncate_then_write_ends_with_the_complete_content() {
    let (_dir, path) = temp_rules();
    fs::write(&path, br#"{"v":1}"#).expect("write");
    let mut source = source(&path);
    source.read().await.expect("read");

    let complete: &[u8] = br#"{"v":2,"rules":[]}"#;
    let mut file = fs::File::create(&path).expect("truncate");
    file.write_all(&complete[..6]).expect("partial write");
    file.flush().expect("flush");
    // Longer than the debounce: the half-written file may be read and reported.
    tokio::time::sleep(Duration::from_millis(100)).await;
    file.write_all(&complete[6..]).expect("rest");
    drop(file);

    let deadline = Instant::now() + EVENT_WAIT;
    loop {
        let payload = timeout(deadline - Instant::now(), source.watch())
            .await
            .expect("the complete content within the wait")
            .expect("watch");
        let WatchEvent::Changed(payload) = payload else {
            panic!("expected a change");
        };
        assert!(!payload.is_absent(), "a truncation is not a deletion");
        if value(&payload) == complete {
            break;
        }
        assert!(
            complete.starts_with(value(&payload)),
            "only a prefix may come before the complete content"
        );
    }
    assert_quiet(&mut source).await;
}

/// The layout kubelet gives a mounted ConfigMap.
fn configmap_version(dir: &Path, version: &str, content: &[u8]) {
    let data = dir.join(version);
    fs::create_dir(&data).expect("version dir");
    fs::write(data.join("rules.json"), content).expect("write version");
}

#[cfg(unix)]
#[tokio::test]
async fn configmap_symlink_swap_is_reported() {
    use std::os::unix::fs::symlink;

    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    configmap_version(root, "..2024_01_01_00_00_00.1", b"v1");
    symlink("..2024_01_01_00_00_00.1", root.join("..data")).expect("..data");
    symlink("..data/rules.json", root.join("rules.json")).expect("rules.json");
    let path = root.join("rules.json");
    let mut source = source(&path);
    assert_eq!(value(&source.read().await.expect("read")), b"v1");

    // kubelet's atomic update: new version dir, new link, rename it over ..data, drop the old.
    configmap_version(root, "..2024_01_01_00_01_00.2", b"v2");
    symlink("..2024_01_01_00_01_00.2", root.join("..data_tmp")).expect("..data_tmp");
    fs::rename(root.join("..data_tmp"), root.join("..data")).expect("swap");
    fs::remove_dir_all(root.join("..2024_01_01_00_00_00.1")).expect("remove old");

    let payload = next_change(&mut source).await;
    assert_eq!(value(&payload), b"v2");
    assert_eq!(payload.entries[0].key, path.display().to_string());
    assert_quiet(&mut source).await;
}

#[tokio::test]
async fn delete_is_absent_after_the_settle_delay() {
    let (_dir, path) = temp_rules();
    fs::write(&path, b"[1]").expect("write");
    let mut source = source(&path);
    source.read().await.expect("read");

    let removed = Instant::now();
    fs::remove_file(&path).expect("remove");
    let payload = next_change(&mut source).await;
    assert!(payload.is_absent(), "{payload:?}");
    assert!(
        removed.elapsed() >= SETTLE,
        "absent after {:?}, before the settle delay",
        removed.elapsed()
    );
    assert_quiet(&mut source).await;
}

#[tokio::test]
async fn delete_and_quick_recreate_is_not_a_deletion() {
    let (_dir, path) = temp_rules();
    fs::write(&path, b"[1]").expect("write");
    let mut source = source(&path);
    source.read().await.expect("read");

    fs::remove_file(&path).expect("remove");
    tokio::time::sleep(Duration::from_millis(60)).await;
    fs::write(&path, b"[2]").expect("re-create");

    assert_eq!(value(&next_change(&mut source).await), b"[2]");
    assert_quiet(&mut source).await;
}

#[tokio::test]
async fn recreate_after_delete_is_reported() {
    let (_dir, path) = temp_rules();
    fs::write(&path, b"[1]").expect("write");
    let mut source = source(&path);
    source.read().await.expect("read");

    fs::remove_file(&path).expect("remove");
    assert!(next_change(&mut source).await.is_absent());

    // The same bytes as before the deletion are a change from "absent".
    fs::write(&path, b"[1]").expect("re-create");
    assert_eq!(value(&next_change(&mut source).await), b"[1]");
    fs::write(&path, b"[2]").expect("write");
    assert_eq!(value(&next_change(&mut source).await), b"[2]");
}

#[tokio::test]
async fn emptied_file_is_reported_as_empty_after_the_settle_delay() {
    let (_dir, path) = temp_rules();
    fs::write(&path, b"[1]").expect("write");
    let mut source = source(&path);
    source.read().await.expect("read");

    let emptied = Instant::now();
    fs::write(&path, b"").expect("truncate");
    let payload = next_change(&mut source).await;
    assert_eq!(value(&payload), b"");
    assert!(emptied.elapsed() >= SETTLE);
}

#[tokio::test]
async fn polling_mode_sees_changes_and_deletion() {
    let (_dir, path) = temp_rules();
    fs::write(&path, b"[1]").expect("write");
    let mut source = FileSource::builder(&path)
        .poll(Duration::from_millis(50))
        .delete_settle(SETTLE)
        .build()
        .expect("valid settings");
    assert!(source.describe().contains("polled"));
    assert_eq!(value(&source.read().await.expect("read")), b"[1]");

    fs::write(&path, b"[2]").expect("write");
    assert_eq!(value(&next_change(&mut source).await), b"[2]");

    fs::write(&path, b"[2]").expect("rewrite");
    assert_quiet(&mut source).await;

    fs::remove_file(&path).expect("remove");
    assert!(next_change(&mut source).await.is_absent());

    fs::write(&path, b"[3]").expect("re-create");
    assert_eq!(value(&next_change(&mut source).await), b"[3]");
}

#[tokio::test]
async fn size_cap_is_enforced() {
    let (_dir, path) = temp_rules();
    fs::write(&path, [b'x'; 17]).expect("write");
    let mut source = FileSource::builder(&path)
        .debounce(DEBOUNCE)
        .max_payload_bytes(16)
        .build()
        .expect("valid settings");
    match source.read().await {
        Err(SourceError::TooLarge { size, limit }) => assert_eq!((size, limit), (17, 16)),
        other => panic!("expected TooLarge, got {other:?}"),
    }

    fs::write(&path, [b'y'; 16]).expect("write");
    assert_eq!(value(&source.read().await.expect("read")), [b'y'; 16]);

    fs::write(&path, [b'z'; 1000]).expect("write");
    match timeout(EVENT_WAIT, source.watch()).await {
        Ok(Err(SourceError::TooLarge { size, limit })) => assert_eq!((size, limit), (1000, 16)),
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

fn sequence_of(payload: &RawPayload) -> Option<u32> {
    let text = std::str::from_utf8(value(payload)).ok()?;
    let number = text.strip_prefix("seq=")?.strip_suffix(';')?;
    number.parse().ok()
}

/// Writes `seq=0001;` .. `seq=0100;` in place, pausing past the debounce every tenth write so
/// that intermediate values get reported too, and checks what the source reports.
async fn rapid_writes(debounce: Duration) {
    const WRITES: u32 = 100;
    let (_dir, path) = temp_rules();
    fs::write(&path, b"seq=0000;").expect("write");
    let mut source = FileSource::builder(&path)
        .debounce(debounce)
        .delete_settle(SETTLE)
        .build()
        .expect("valid settings");
    source.read().await.expect("read");

    let writer_path = path.clone();
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        for seq in 1..=WRITES {
            // In place: truncate and write, so readers can see partial content.
            fs::write(&writer_path, format!("seq={seq:04};"))?;
            let pause = if seq % 10 == 0 { 30 } else { 1 };
            std::thread::sleep(Duration::from_millis(pause));
        }
        Ok(())
    });

    let mut last_seq = 0;
    let mut reports = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while last_seq != WRITES {
        let payload = timeout(deadline - Instant::now(), next_change(&mut source))
            .await
            .expect("the last write within the wait");
        reports += 1;
        assert!(!payload.is_absent(), "rewrites are not deletions");
        // A half-written payload is one the driver rejects; it carries no sequence number.
        if let Some(seq) = sequence_of(&payload) {
            assert!(seq > last_seq, "seq {seq} reported after {last_seq}");
            last_seq = seq;
        }
    }
    writer.join().expect("writer thread").expect("writes");
    assert_quiet(&mut source).await;
    eprintln!("debounce {debounce:?}: {reports} reports for {WRITES} writes");
    assert!(reports > 1, "intermediate values are reported too");
}

#[tokio::test]
async fn rapid_writes_end_on_the_last_and_never_go_back() {
    rapid_writes(DEBOUNCE).await;
}

#[tokio::test]
async fn rapid_writes_without_debounce_never_go_back() {
    rapid_writes(Duration::ZERO).await;
}

#[tokio::test]
async fn write_to_event_latency_fits_the_budget() {
    let (_dir, path) = temp_rules();
    fs::write(&path, b"0").expect("write");
    // Default debounce.
    let mut source = FileSource::new(&path).expect("valid settings");
    source.read().await.expect("read");

    let mut latencies = Vec::new();
    for i in 1..=10 {
        let written = Instant::now();
        fs::write(&path, i.to_string()).expect("write");
        let payload = next_change(&mut source).await;
        latencies.push(written.elapsed());
        assert_eq!(value(&payload), i.to_string().as_bytes());
    }
    latencies.sort();
    let median = latencies[latencies.len() / 2];
    eprintln!(
        "write-to-event latency: median {median:?}, max {:?}",
        latencies[latencies.len() - 1]
    );
    assert!(
        median < Duration::from_millis(150),
        "median latency {median:?}"
    );
}

#[tokio::test]
async fn missing_directory_is_absent_until_it_appears() {
    let parent = tempfile::tempdir().expect("tempdir");
    let dir = parent.path().join("conf");
    let path = dir.join("rules.json");
    let mut source = source(&path);
    assert!(source.read().await.expect("read").is_absent());

    fs::create_dir(&dir).expect("mkdir");
    fs::write(&path, b"[1]").expect("write");
    assert_eq!(value(&next_change(&mut source).await), b"[1]");

    // Once the directory exists the watch is set up: edits are seen quickly.
    let written = Instant::now();
    fs::write(&path, b"[2]").expect("write");
    assert_eq!(value(&next_change(&mut source).await), b"[2]");
    assert!(written.elapsed() < Duration::from_millis(900));
}

#[tokio::test]
async fn removed_directory_is_absent_and_its_return_is_seen() {
    let parent = tempfile::tempdir().expect("tempdir");
    let dir = parent.path().join("conf");
    fs::create_dir(&dir).expect("mkdir");
    let path = dir.join("rules.json");
    fs::write(&path, b"[1]").expect("write");
    let mut source = source(&path);
    source.read().await.expect("read");

    fs::remove_dir_all(&dir).expect("rm -r");
    // The file is reported absent, and the source says it cannot watch.
    let mut seen = Vec::new();
    for _ in 0..2 {
        match timeout(EVENT_WAIT, source.watch()).await {
            Ok(Ok(event)) => seen.push(event),
            other => panic!("expected an event, got {other:?}"),
        }
    }
    assert!(
        seen.contains(&WatchEvent::Changed(RawPayload::absent())),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|e| matches!(e, WatchEvent::Degraded(m) if m.contains("conf"))),
        "{seen:?}"
    );

    fs::create_dir(&dir).expect("mkdir");
    fs::write(&path, b"[2]").expect("write");
    // Watching again, then the new content.
    match timeout(EVENT_WAIT, source.watch()).await {
        Ok(Ok(WatchEvent::Restored)) => {}
        other => panic!("expected Restored, got {other:?}"),
    }
    assert_eq!(value(&next_change(&mut source).await), b"[2]");
}

#[tokio::test]
async fn closed_source_refuses_calls() {
    let (_dir, path) = temp_rules();
    fs::write(&path, b"[1]").expect("write");
    let mut source = source(&path);
    source.read().await.expect("read");
    source.close().await;

    fs::write(&path, b"[2]").expect("write");
    assert!(matches!(source.watch().await, Err(SourceError::Closed)));
    assert!(matches!(source.read().await, Err(SourceError::Closed)));
}

#[tokio::test]
async fn cancelled_watch_does_not_lose_a_change() {
    let (_dir, path) = temp_rules();
    fs::write(&path, b"[1]").expect("write");
    let mut source = FileSource::builder(&path)
        .debounce(Duration::from_millis(200))
        .build()
        .expect("valid settings");
    source.read().await.expect("read");

    fs::write(&path, b"[2]").expect("write");
    // Cancelled during the quiet period, after the event was taken from the channel.
    assert!(timeout(Duration::from_millis(50), source.watch())
        .await
        .is_err());
    assert_eq!(value(&next_change(&mut source).await), b"[2]");
}
