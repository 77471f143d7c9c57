//! `jsonTree`, `clusterNode` and `systemStatus`: the engine's statistics as Java's `NodeVo`
//! and `ENTRY_NODE` views.
//!
//! A `NodeVo` has `id`, `parentId`, `resource`, `threadNum`, `passQps`, `blockQps`,
//! `totalQps`, `averageRt`, `successQps`, `exceptionQps`, `oneMinutePass`,
//! `oneMinuteBlock`, `oneMinuteException`, `oneMinuteTotal` and `timestamp` (epoch ms); the
//! rates are whole numbers (Java casts them to `long`). As fastjson does, keys whose value is
//! null are left out: `clusterNode` entries have no `id` or `parentId`, the tree's root no
//! `parentId`.

use serde_json::{json, Map, Value};

use sentinel_core::{NodeStats, Sentinel};

use crate::metric::epoch_now_ms;

/// Java's root node and the context every call without one enters.
const ROOT: &str = "machine-root";
const DEFAULT_CONTEXT: &str = "sentinel_default_context";

/// The sums a parent node shows (Java's `EntranceNode` sums its children).
#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    threads: u64,
    pass: f64,
    block: f64,
    success: f64,
    error: f64,
    rt_weighted: f64,
    pass_minute: u64,
    block_minute: u64,
    error_minute: u64,
}

impl Totals {
    fn add(&mut self, s: &NodeStats) {
        self.threads += s.concurrency;
        self.pass += s.pass_qps;
        self.block += s.block_qps;
        self.success += s.success_qps;
        self.error += s.error_qps;
        self.rt_weighted += s.avg_rt_ms * s.success_qps;
        self.pass_minute += s.pass_minute;
        self.block_minute += s.block_minute;
        self.error_minute += s.error_minute;
    }

    fn of(s: &NodeStats) -> Self {
        let mut t = Self::default();
        t.add(s);
        t
    }

    fn avg_rt(&self) -> f64 {
        if self.success > 0.0 {
            self.rt_weighted / self.success
        } else {
            0.0
        }
    }
}

fn node_vo(resource: &str, t: &Totals, id: Option<String>, parent: Option<&str>) -> Value {
    let mut vo = Map::new();
    if let Some(id) = id {
        vo.insert("id".into(), json!(id));
    }
    if let Some(parent) = parent {
        vo.insert("parentId".into(), json!(parent));
    }
    vo.insert("resource".into(), json!(resource));
    vo.insert("threadNum".into(), json!(t.threads));
    vo.insert("passQps".into(), json!(t.pass as i64));
    vo.insert("blockQps".into(), json!(t.block as i64));
    vo.insert("totalQps".into(), json!((t.pass + t.block) as i64));
    vo.insert("averageRt".into(), json!(t.avg_rt() as i64));
    vo.insert("successQps".into(), json!(t.success as i64));
    vo.insert("exceptionQps".into(), json!(t.error as i64));
    vo.insert("oneMinutePass".into(), json!(t.pass_minute));
    vo.insert("oneMinuteBlock".into(), json!(t.block_minute));
    vo.insert("oneMinuteException".into(), json!(t.error_minute));
    vo.insert(
        "oneMinuteTotal".into(),
        json!(t.pass_minute + t.block_minute),
    );
    vo.insert("timestamp".into(), json!(epoch_now_ms()));
    Value::Object(vo)
}

fn resource_stats(sentinel: &Sentinel) -> Vec<(String, NodeStats)> {
    sentinel
        .resources()
        .into_iter()
        .filter_map(|name| sentinel.resource_stats(&name).map(|s| (name, s)))
        .collect()
}

/// `jsonTree`: the root, the default context under it, every resource under that.
pub(crate) fn json_tree(sentinel: &Sentinel) -> String {
    let resources = resource_stats(sentinel);
    let mut all = Totals::default();
    for (_, s) in &resources {
        all.add(s);
    }
    let tag = epoch_now_ms();
    let id = |i: usize| format!("{tag:x}-{i}");
    let mut nodes = vec![
        node_vo(ROOT, &all, Some(id(0)), None),
        node_vo(DEFAULT_CONTEXT, &all, Some(id(1)), Some(&id(0))),
    ];
    let context = id(1);
    for (i, (name, s)) in resources.iter().enumerate() {
        nodes.push(node_vo(
            name,
            &Totals::of(s),
            Some(id(i + 2)),
            Some(&context),
        ));
    }
    Value::Array(nodes).to_string()
}

/// `clusterNode`: one entry per resource; `type=notZero` keeps those with calls in the last
/// minute.
pub(crate) fn cluster_nodes(sentinel: &Sentinel, not_zero: bool) -> String {
    let nodes: Vec<Value> = resource_stats(sentinel)
        .iter()
        .filter(|(_, s)| !not_zero || s.pass_minute + s.block_minute > 0)
        .map(|(name, s)| node_vo(name, &Totals::of(s), None, None))
        .collect();
    Value::Array(nodes).to_string()
}

/// `clusterNodeById`: one resource's entry, `{}` when it has none.
pub(crate) fn cluster_node_by_id(sentinel: &Sentinel, id: &str) -> String {
    match sentinel.resource_stats(id) {
        Some(s) => node_vo(id, &Totals::of(&s), None, None).to_string(),
        None => "{}".to_owned(),
    }
}

/// `systemStatus`: the inbound node's rates (`rqps` success, `qps` pass, `b` block, `r`
/// average RT, `t` calls in flight).
pub(crate) fn system_status(sentinel: &Sentinel) -> String {
    let s = sentinel.inbound_stats();
    json!({
        "rqps": s.success_qps,
        "qps": s.pass_qps,
        "b": s.block_qps,
        "r": s.avg_rt_ms,
        "t": s.concurrency,
    })
    .to_string()
}
