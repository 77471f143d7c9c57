//! Two backends feeding one engine: a rules file and an etcd key, both carrying flow rules.
//! The engine unions the two sources' parts; an update or a deletion from one source replaces
//! only its own part.
//!
//! ```text
//! scripts/services.sh start etcd-main
//! cargo test -p sentinel-tests --test two_sources
//! ```

use std::time::Duration;

use sentinel_core::datasource::testkit::{wait_status, wait_until, EventRecorder, WAIT};
use sentinel_core::datasource::{DataSource, DataSourceError, FlowJson};
use sentinel_core::flow::FlowRule;
use sentinel_core::Sentinel;
use sentinel_datasource_etcd::{EtcdConfig, EtcdRuleWriter, EtcdSource};
use sentinel_datasource_file::FileSource;

/// The etcd that `scripts/services.sh start etcd-main` runs (`SENTINEL_ETCD_ENDPOINTS`).
fn etcd_endpoints() -> String {
    std::env::var("SENTINEL_ETCD_ENDPOINTS")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "http://127.0.0.1:23790".to_owned())
}

fn etcd_config() -> EtcdConfig {
    EtcdConfig::builder()
        .endpoints([etcd_endpoints()])
        .connect_timeout(Duration::from_secs(2))
        .request_timeout(Duration::from_secs(5))
        .build()
        .expect("valid etcd settings")
}

/// A writer to the test etcd; fails naming the command that starts it.
async fn etcd_writer() -> EtcdRuleWriter {
    match tokio::time::timeout(WAIT, EtcdRuleWriter::connect(etcd_config())).await {
        Ok(Ok(writer)) => writer,
        other => panic!(
            "etcd at {} is unreachable ({other:?}); start it with `scripts/services.sh start \
             etcd-main` from the repository root",
            etcd_endpoints()
        ),
    }
}

fn flow(resources: &[(&str, u32)]) -> String {
    let rules: Vec<String> = resources
        .iter()
        .map(|(r, count)| format!(r#"{{"resource":"{r}","count":{count}}}"#))
        .collect();
    format!("[{}]", rules.join(","))
}

/// The active flow rules as (resource, count), sorted.
fn active(sentinel: &Sentinel) -> Vec<(String, u32)> {
    let mut rules: Vec<(String, u32)> = sentinel
        .flow_rules()
        .rules()
        .iter()
        .map(|r: &FlowRule| (r.resource.clone(), r.count as u32))
        .collect();
    rules.sort();
    rules
}

fn pairs(list: &[(&str, u32)]) -> Vec<(String, u32)> {
    list.iter().map(|(r, c)| ((*r).to_owned(), *c)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_and_an_etcd_key_are_unioned_and_each_replaces_only_its_part() {
    let writer = etcd_writer().await;
    let key = format!(
        "/sentinel-test/two-sources/{}-{:?}",
        std::process::id(),
        std::time::SystemTime::now()
    );
    writer
        .put_bytes(key.clone(), flow(&[("shared", 5), ("etcd-only", 1)]))
        .await
        .expect("put");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("flow.json");
    std::fs::write(&path, flow(&[("shared", 9), ("file-only", 2)])).expect("write");

    let sentinel = Sentinel::new();
    let from_etcd = EventRecorder::attach(&sentinel, "etcd");
    let etcd = DataSource::builder(EtcdSource::key(etcd_config(), key.clone()), FlowJson::new())
        .name("etcd")
        .start(&sentinel)
        .await
        .expect("the etcd source starts");
    let file = DataSource::builder(FileSource::new(&path).expect("settings"), FlowJson::new())
        .name("file")
        .start(&sentinel)
        .await
        .expect("the file source starts");
    // Both parts are active; the two rules on `shared` both apply (a union, not a merge).
    assert_eq!(
        active(&sentinel),
        pairs(&[
            ("etcd-only", 1),
            ("file-only", 2),
            ("shared", 5),
            ("shared", 9)
        ])
    );

    // A source of another backend cannot take a running source's name.
    let clash = DataSource::builder(FileSource::new(&path).expect("settings"), FlowJson::new())
        .name("etcd")
        .start(&sentinel)
        .await;
    assert!(matches!(clash, Err(DataSourceError::DuplicateName { .. })));

    // The file's update replaces the file's part only.
    std::fs::write(&path, flow(&[("file-only", 3)])).expect("write");
    let expected = pairs(&[("etcd-only", 1), ("file-only", 3), ("shared", 5)]);
    wait_until("the file's update", || active(&sentinel) == expected).await;

    // Deleting the etcd key clears the etcd part only.
    writer.delete(key.clone()).await.expect("delete");
    wait_until("the etcd deletion", || {
        active(&sentinel) == pairs(&[("file-only", 3)])
    })
    .await;
    wait_status(&etcd, "the deletion applied", |s| s.applied_count == 2).await;
    assert_eq!(
        from_etcd.applied().len(),
        2,
        "the etcd source applied twice"
    );
    assert_eq!(file.status().applied_count, 2);

    etcd.close().await;
    file.close().await;
}
