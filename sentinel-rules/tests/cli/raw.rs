//! A store's text as it is, past `push` (which validates and encodes): a broken payload put
//! in place, a hand-written document, and the exact text a command left behind. For a file,
//! etcd, Redis, NATS (plain) and a ZooKeeper znode, through the backends' own writers and
//! sources.

use sentinel_core::datasource::{Expected, ReadableDataSource, WritableDataSource};
use sentinel_datasource_etcd::{EtcdConfig, EtcdRuleWriter, EtcdSource};
use sentinel_datasource_nats::{NatsConfig, NatsRuleWriter, NatsSource};
use sentinel_datasource_redis::{ChangeMode, RedisConfig, RedisRuleWriter, RedisSource};
use sentinel_datasource_zookeeper::{ZooKeeperConfig, ZooKeeperRuleWriter, ZooKeeperSource};

use super::*;

/// The stores whose text these helpers reach: a file, etcd, Redis, NATS (without TLS) and
/// one znode.
pub(crate) fn raw_stores(dir: &Path, test: &str) -> Vec<Store> {
    stores(dir, test)
        .into_iter()
        .filter(|s| {
            ["file://", "etcd://", "nats://", "zk://"]
                .iter()
                .any(|scheme| s.url.starts_with(scheme))
                || (s.url.starts_with("redis://") && !s.url.contains('?'))
        })
        .collect()
}

/// The parts of a URL these helpers take: scheme, `host:port`, and the path after it.
fn parts(url: &str) -> (&str, &str, &str) {
    let (scheme, rest) = url.split_once("://").expect("a store URL");
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    (scheme, host, path)
}

fn block_on<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(work)
}

/// The writer and the source of the store's key.
async fn open(store: &Store) -> (Box<dyn WritableDataSource>, Box<dyn ReadableDataSource>) {
    let (scheme, host, path) = parts(&store.url);
    let up = |e: &dyn std::fmt::Display| {
        format!(
            "{}: {e}; is the server up? start it with `scripts/services.sh start {}`",
            store.url, store.service
        )
    };
    match scheme {
        "etcd" => {
            let config = || {
                EtcdConfig::builder()
                    .endpoints([format!("http://{host}")])
                    .build()
                    .expect("an etcd config")
            };
            let key = format!("/{path}");
            let writer = EtcdRuleWriter::connect(config())
                .await
                .unwrap_or_else(|e| panic!("{}", up(&e)))
                .at(key.clone());
            (Box::new(writer), Box::new(EtcdSource::key(config(), key)))
        }
        "redis" => {
            let config = || {
                RedisConfig::builder()
                    .server(host)
                    .build()
                    .expect("a Redis config")
            };
            let channel = format!("{path}:changed");
            let writer = RedisRuleWriter::connect(config())
                .await
                .unwrap_or_else(|e| panic!("{}", up(&e)))
                .at(path, channel.clone());
            let source = RedisSource::new(config(), path, ChangeMode::Notify(channel));
            (Box::new(writer), Box::new(source))
        }
        "nats" => {
            let config = || {
                NatsConfig::builder()
                    .servers([format!("nats://{host}")])
                    .build()
                    .expect("a NATS config")
            };
            let (bucket, key) = path.split_once('/').expect("bucket/key");
            let writer = NatsRuleWriter::create_bucket(config(), bucket, 1)
                .await
                .unwrap_or_else(|e| panic!("{}", up(&e)))
                .at(key);
            (
                Box::new(writer),
                Box::new(NatsSource::key(config(), bucket, key)),
            )
        }
        "zk" => {
            let config = || {
                ZooKeeperConfig::builder()
                    .servers([host])
                    .build()
                    .expect("a ZooKeeper config")
            };
            let path = format!("/{path}");
            let writer = ZooKeeperRuleWriter::connect(config())
                .await
                .unwrap_or_else(|e| panic!("{}", up(&e)))
                .at(path.clone());
            (
                Box::new(writer),
                Box::new(ZooKeeperSource::node(config(), path)),
            )
        }
        other => panic!("no raw access to {other} stores"),
    }
}

/// Stores `text` as it is.
pub(crate) fn put(store: &Store, text: &str) {
    if let Some(path) = store.url.strip_prefix("file://") {
        std::fs::write(path, text).expect("write the file");
        return;
    }
    block_on(async {
        let (writer, mut source) = open(store).await;
        writer
            .store(text.as_bytes().to_vec(), Expected::Anything)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", store.url));
        source.close().await;
    });
}

/// The text stored now.
pub(crate) fn text(store: &Store) -> String {
    if let Some(path) = store.url.strip_prefix("file://") {
        return std::fs::read_to_string(path).expect("read the file");
    }
    block_on(async {
        let (_writer, mut source) = open(store).await;
        let payload = source
            .read()
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", store.url));
        source.close().await;
        let [entry] = &payload.entries[..] else {
            panic!("{}: {} entries stored", store.url, payload.entries.len());
        };
        String::from_utf8_lossy(&entry.value).into_owned()
    })
}
