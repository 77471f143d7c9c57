//! The param-flow rule's Sentinel (Java) JSON wire form, and how it is decoded into a
//! [`ParamFlowRule`] with Sentinel's defaults.

use serde::Deserialize;

use super::rule::{
    ParamControlBehavior, ParamFlowClusterConfig, ParamFlowGrade, ParamFlowItem, ParamFlowRule,
};
use crate::flow::LIMIT_APP_DEFAULT;
use crate::rules::{Issues, RuleFamily, RuleIssue};
use crate::wire::{self, Bool, Float, Int};

wire::wire_struct! {
    /// The JSON wire shape: every field optional, `null` meaning the default; other keys
    /// are collected (see `wire::keys`). `count` decides what the rule does.
    pub(crate) struct ParamFlowRuleWire (Exact) {
        resource: String = "resource",
        limit_app: String = "limitApp",
        grade: Int = "grade",
        param_idx: Int = "paramIdx",
        param_key: String = "paramKey",
        count: Float = "count" required,
        control_behavior: Int = "controlBehavior",
        max_queueing_time_ms: Int = "maxQueueingTimeMs",
        burst_count: Int = "burstCount",
        duration_in_sec: Int = "durationInSec",
        param_flow_item_list: Vec<ParamFlowItemWire> = "paramFlowItemList",
        params_max_capacity: Int = "paramsMaxCapacity",
        cluster_mode: Bool = "clusterMode",
        cluster_config: ClusterConfigWire = "clusterConfig",
        regex: Bool = "regex",
    }
}

wire::wire_struct! {
    /// One of `paramFlowItemList`.
    struct ParamFlowItemWire (Exact) {
        object: ItemObject = "object",
        count: Int = "count",
        class_type: String = "classType",
    }
}

impl wire::NestedKeys for ItemObject {
    fn take_unknown(&mut self, _: &str, _: &mut wire::UnknownKeys) {}
}

/// An item's `object`: text, or a bare JSON scalar (written by hand, `"object": 42`).
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
enum ItemObject {
    Text(String),
    Number(serde_json::Number),
    Bool(bool),
}

wire::wire_struct! {
    /// A param-flow rule's `clusterConfig`.
    struct ClusterConfigWire (Exact) {
        flow_id: Int = "flowId",
        threshold_type: Int = "thresholdType",
        fallback_to_local_when_fail: Bool = "fallbackToLocalWhenFail",
        sample_count: Int = "sampleCount",
        window_interval_ms: Int = "windowIntervalMs",
    }
}

impl ParamFlowRuleWire {
    /// Builds the typed rule with Sentinel's defaults. Reports what the wire gets wrong; the
    /// rule's own checks are [`ParamFlowRule::validate`]'s.
    pub(crate) fn decode(self, index: usize) -> (ParamFlowRule, Vec<RuleIssue>) {
        let resource = self.resource.unwrap_or_default();
        let mut issues = Issues::new(RuleFamily::ParamFlow, index, Some(&resource));
        let regex = wire::boolean(self.regex).unwrap_or(false);
        let grade = issues.code("grade", wire::int(self.grade), ParamFlowGrade::Qps);
        let behavior = issues.code(
            "controlBehavior",
            wire::int(self.control_behavior),
            ParamControlBehavior::Reject,
        );
        let idx_given = self.param_idx.is_some();
        let param_idx = wire::int(self.param_idx).and_then(|i| match i32::try_from(i) {
            Ok(i) => Some(i),
            Err(_) => {
                issues.add("paramIdx", format!("out of range: {i}"));
                None
            }
        });
        if !idx_given && self.param_key.is_none() {
            // Sentinel refuses it too; the message says what such a payload usually is.
            issues.add(
                "paramIdx",
                "is required (or a paramKey): without it, this looks like a Sentinel flow \
                 rule, not a param-flow rule",
            );
        }
        let max_queueing_time_ms =
            issues.u32("maxQueueingTimeMs", wire::int(self.max_queueing_time_ms), 0);
        let burst_count = issues.u32("burstCount", wire::int(self.burst_count), 0);
        let duration_in_sec = issues.u32("durationInSec", wire::int(self.duration_in_sec), 1);
        let params_max_capacity = wire::int(self.params_max_capacity)
            .map(|c| issues.u32("paramsMaxCapacity", Some(c), 0));
        let mut items = Vec::new();
        for (i, item) in self
            .param_flow_item_list
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            let object = match item.object {
                Some(ItemObject::Text(text)) => Some(text),
                Some(ItemObject::Number(n)) => Some(n.to_string()),
                Some(ItemObject::Bool(b)) => Some(b.to_string()),
                None => None,
            };
            let Some(object) = object else {
                issues.add(&format!("paramFlowItemList[{i}].object"), "is required");
                continue;
            };
            let Some(count) = wire::int(item.count) else {
                issues.add(&format!("paramFlowItemList[{i}].count"), "is required");
                continue;
            };
            items.push(ParamFlowItem {
                object,
                count,
                class_type: item.class_type.filter(|c| !c.trim().is_empty()),
            });
        }
        let cluster_config = self.cluster_config.map(|c| {
            let d = ParamFlowClusterConfig::default();
            let small = |v: Option<Int>, default: i32| {
                wire::int(v).map_or(default, |v| i32::try_from(v).unwrap_or(-1))
            };
            ParamFlowClusterConfig {
                flow_id: wire::int(c.flow_id),
                threshold_type: small(c.threshold_type, d.threshold_type),
                fallback_to_local_when_fail: wire::boolean(c.fallback_to_local_when_fail)
                    .unwrap_or(d.fallback_to_local_when_fail),
                sample_count: small(c.sample_count, d.sample_count),
                window_interval_ms: small(c.window_interval_ms, d.window_interval_ms),
            }
        });
        let limit_app = match self.limit_app {
            Some(app) if !app.trim().is_empty() => app,
            _ => LIMIT_APP_DEFAULT.to_owned(),
        };
        let rule = ParamFlowRule {
            resource: resource.clone(),
            limit_app,
            grade,
            param_idx,
            param_key: self.param_key,
            count: wire::float(self.count).unwrap_or(0.0),
            control_behavior: behavior,
            max_queueing_time_ms,
            burst_count,
            duration_in_sec,
            param_flow_item_list: items,
            params_max_capacity,
            cluster_mode: wire::boolean(self.cluster_mode).unwrap_or(false),
            cluster_config,
            regex,
        };
        issues.finish(rule)
    }
}
