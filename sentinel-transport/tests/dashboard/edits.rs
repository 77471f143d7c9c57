//! Rule edits from the dashboard: in memory only when chosen, or written to the family's
//! store (etcd, Redis) and read back by a second engine; a store without revisions refuses
//! them.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_only_edits_apply_only_when_chosen() {
    let sentinel = Sentinel::new();
    let data = r#"[{"resource":"mem","count":2.0,"grade":1,"limitApp":"default","id":3,"app":"x","ip":"1.2.3.4","port":8719,"gmtCreate":1700000000000}]"#;
    let no_store = start(&sentinel, config("nostore-app").access(Access::ReadWrite)).await;
    let (status, body) = Dashboard::calling(local(&no_store))
        .set_rules("flow", data)
        .await
        .expect_err("no store, no memory-only");
    assert_eq!(status, 400);
    assert!(
        body.contains("no rule store") && body.contains("memory_only_edits"),
        "{body}"
    );
    no_store.shutdown().await;
    let memory = start(
        &sentinel,
        config("memory-app")
            .access(Access::ReadWrite)
            .memory_only_edits(true),
    )
    .await;
    let dashboard = Dashboard::calling(local(&memory));
    dashboard
        .set_rules("flow", data)
        .await
        .expect("applied in memory");
    let rules = sentinel.flow_rules().rules();
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].resource, "mem");
    let (status, body) = dashboard.get("setSwitch", &[("value", "false")]).await;
    assert_eq!(
        (status, body.as_str()),
        (200, "Sentinel set switch value: false")
    );
    assert!(!sentinel.is_enabled());
    memory.shutdown().await;
}

/// Two engines on one store key, the transport on the first writing to that key: an edit
/// reaches both, an invalid one and a conflicting one change nothing.
async fn round_trip<S: ReadableDataSource>(
    source: impl Fn() -> S,
    writer: Arc<dyn WritableDataSource>,
    other: Arc<dyn WritableDataSource>,
) {
    let a = Sentinel::new();
    let b = Sentinel::new();
    let source_a = DataSource::builder(source(), FlowJson::new())
        .start(&a)
        .await
        .unwrap_or_else(|e| panic!("{e}; {START_HINT}"));
    let source_b = DataSource::builder(source(), FlowJson::new())
        .start(&b)
        .await
        .unwrap_or_else(|e| panic!("{e}; {START_HINT}"));
    let transport = start(
        &a,
        config("store-app")
            .access(Access::ReadWrite)
            .rule_store(RuleFamily::Flow, writer.clone()),
    )
    .await;
    let dashboard = Dashboard::calling(local(&transport));
    // The dashboard lists the rules before it edits them.
    assert_eq!(dashboard.get("getRules", &[("type", "flow")]).await.0, 200);
    let edit = format!("[{}]", dashboard_flow_rule("GET:/edited", 3.0));
    dashboard
        .set_rules("flow", &edit)
        .await
        .expect("the store accepted the edit");
    assert!(
        has_flow(&a, "GET:/edited", 3.0),
        "applied here before `success`"
    );
    wait_until("the second engine applies the edit from the store", || {
        has_flow(&b, "GET:/edited", 3.0)
    })
    .await;
    let (_, listed) = dashboard.get("getRules", &[("type", "flow")]).await;
    assert!(listed.contains("GET:/edited"), "{listed}");

    // An invalid rule: refused naming its index and field, nothing written.
    let revision = writer.revision().await.expect("a revision");
    let invalid = format!(
        "[{},{}]",
        dashboard_flow_rule("GET:/fine", 1.0),
        dashboard_flow_rule("GET:/bad", -1.0)
    );
    let (status, body) = dashboard
        .set_rules("flow", &invalid)
        .await
        .expect_err("invalid");
    assert_eq!(status, 400);
    assert!(body.contains("#1") && body.contains("`count`"), "{body}");
    assert!(
        !body.contains("clusterConfig"),
        "no payload in the message: {body}"
    );
    assert_eq!(writer.revision().await.expect("a revision"), revision);
    assert!(has_flow(&a, "GET:/edited", 3.0) && !has_flow(&a, "GET:/fine", 1.0));

    // Someone else writes the key: the dashboard's next edit, based on what it read before,
    // is a conflict and changes nothing.
    other
        .write(&RuleSet::new().with_flow(vec![FlowRule::qps("GET:/other", 7.0)]))
        .await
        .expect("the other writer");
    wait_until("both engines apply the other write", || {
        has_flow(&a, "GET:/other", 7.0) && has_flow(&b, "GET:/other", 7.0)
    })
    .await;
    let stale = format!("[{}]", dashboard_flow_rule("GET:/stale", 4.0));
    let (status, body) = dashboard
        .set_rules("flow", &stale)
        .await
        .expect_err("a conflict");
    assert_eq!(status, 400);
    assert!(body.contains("changed since"), "{body}");
    assert!(has_flow(&b, "GET:/other", 7.0) && !has_flow(&b, "GET:/stale", 4.0));
    // After reloading, the edit goes through.
    dashboard.get("getRules", &[("type", "flow")]).await;
    dashboard
        .set_rules("flow", &stale)
        .await
        .expect("after a reload");
    wait_until("the second engine applies the reloaded edit", || {
        has_flow(&b, "GET:/stale", 4.0)
    })
    .await;
    transport.shutdown().await;
    source_a.close().await;
    source_b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_rules_round_trip_through_etcd_to_a_second_engine() {
    use sentinel_datasource_etcd::{EtcdConfig, EtcdRuleWriter, EtcdSource};
    let endpoints = env_or("SENTINEL_ETCD_ENDPOINTS", "http://127.0.0.1:23790");
    let key = unique_key("/rules", "transport");
    let config = || {
        EtcdConfig::builder()
            .endpoints([endpoints.as_str()])
            .build()
            .expect("an etcd config")
    };
    let connect = || async {
        let writer = EtcdRuleWriter::connect(config())
            .await
            .unwrap_or_else(|e| panic!("etcd at {endpoints}: {e}; {START_HINT}"));
        Arc::new(writer.at(key.as_str())) as Arc<dyn WritableDataSource>
    };
    let source = || EtcdSource::key(config(), key.as_str());
    round_trip(source, connect().await, connect().await).await;
}

/// A key of the Redis of `scripts/services.sh` that no other test uses, and its channel.
struct RedisKey {
    addr: String,
    key: String,
    channel: String,
}

impl RedisKey {
    fn new(test: &str) -> Self {
        let key = unique_key("rules:", test);
        Self {
            addr: env_or("SENTINEL_REDIS_ADDR", "127.0.0.1:16379"),
            channel: format!("{key}:channel"),
            key,
        }
    }

    fn config(&self) -> sentinel_datasource_redis::RedisConfig {
        sentinel_datasource_redis::RedisConfig::builder()
            .server(self.addr.as_str())
            .build()
            .expect("a Redis config")
    }

    /// A source of the key, its payloads published on the channel.
    fn source(&self) -> sentinel_datasource_redis::RedisSource {
        use sentinel_datasource_redis::{ChangeMode, RedisSource};
        RedisSource::new(
            self.config(),
            self.key.as_str(),
            ChangeMode::Payload(self.channel.clone()),
        )
    }

    /// A writer of the key, connected.
    async fn writer(&self) -> Arc<dyn WritableDataSource> {
        let writer = sentinel_datasource_redis::RedisRuleWriter::connect(self.config())
            .await
            .unwrap_or_else(|e| panic!("Redis at {}: {e}; {START_HINT}", self.addr));
        Arc::new(writer.at(self.key.as_str(), self.channel.as_str()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_rules_round_trip_through_redis_to_a_second_engine() {
    let redis = RedisKey::new("transport");
    round_trip(
        || redis.source(),
        redis.writer().await,
        redis.writer().await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_param_flow_rules_write_to_their_store() {
    let redis = RedisKey::new("transport-param");
    let writer = redis.writer().await;
    let sentinel = Sentinel::new();
    let source = DataSource::builder(redis.source(), ParamFlowJson::new())
        .start(&sentinel)
        .await
        .unwrap_or_else(|e| panic!("{e}; {START_HINT}"));
    let transport = start(&sentinel, config_param(writer)).await;
    let dashboard = Dashboard::calling(local(&transport));
    // The dashboard lists the rules before it edits them.
    assert_eq!(dashboard.get("getParamFlowRules", &[]).await.0, 200);
    // ParamFlowRuleEntity.getRule() as fastjson writes it.
    let data = r#"[{"burstCount":0,"clusterMode":false,"controlBehavior":0,"count":5.0,"durationInSec":1,"grade":1,"limitApp":"default","maxQueueingTimeMs":0,"paramFlowItemList":[],"paramIdx":0,"resource":"GET:/hot"}]"#;
    let (status, body) = dashboard.post("setParamFlowRules", &[("data", data)]).await;
    assert_eq!((status, body.as_str()), (200, "success"));
    let rules = sentinel.param_flow_rules().rules();
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].resource, "GET:/hot");
    let (_, listed) = dashboard.get("getParamFlowRules", &[]).await;
    assert!(listed.contains("GET:/hot"), "{listed}");
    transport.shutdown().await;
    source.close().await;
}

fn config_param(writer: Arc<dyn WritableDataSource>) -> sentinel_transport::TransportConfigBuilder {
    config("param-app")
        .access(Access::ReadWrite)
        .rule_store(RuleFamily::ParamFlow, writer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_without_revisions_refuses_edits_and_keeps_its_file() {
    use sentinel_datasource_file::FileRuleWriter;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("flow.json");
    std::fs::write(&path, "[]").expect("the rules file");
    let sentinel = Sentinel::new();
    let transport = start(
        &sentinel,
        config("file-app")
            .access(Access::ReadWrite)
            .rule_store(RuleFamily::Flow, Arc::new(FileRuleWriter::new(&path))),
    )
    .await;
    let dashboard = Dashboard::calling(local(&transport));
    assert_eq!(dashboard.get("getRules", &[("type", "flow")]).await.0, 200);
    let edit = format!("[{}]", dashboard_flow_rule("GET:/file", 2.0));
    let (status, body) = dashboard
        .set_rules("flow", &edit)
        .await
        .expect_err("no CAS");
    assert_eq!(status, 400);
    assert!(body.contains("keeps no revisions"), "{body}");
    assert_eq!(std::fs::read_to_string(&path).expect("the file"), "[]");
    transport.shutdown().await;
}
