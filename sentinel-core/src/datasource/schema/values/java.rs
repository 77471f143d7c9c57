//! The Sentinel (Java) families' value constraints.

use serde_json::{json, Map, Value};

use super::{
    all_of, any_number_text, cluster_mode_checks, constrain, is_code, is_present, is_true,
    not_code, properties, require, when, Scalar,
};
use crate::authority::AuthorityStrategy;
use crate::circuit_breaker::DegradeGrade;
use crate::flow::{ControlBehavior, FlowGrade, FlowStrategy};
use crate::param_flow::{ParamControlBehavior, ParamFlowGrade};
use crate::rules::RuleFamily;

/// Adds `family`'s value constraints to its rule object.
pub(crate) fn constrain_java(family: RuleFamily, rule: &mut Value) {
    let Some(rule) = rule.as_object_mut() else {
        return;
    };
    match family {
        RuleFamily::Flow => flow(rule),
        RuleFamily::Degrade => degrade(rule),
        RuleFamily::System => system(rule),
        RuleFamily::Authority => authority(rule),
        RuleFamily::ParamFlow => param_flow(rule),
    }
}

/// The resource, required and not blank, and `regex`.
fn resource(rule: &mut Map<String, Value>) {
    if let Some(p) = properties(rule) {
        constrain(p, "resource", Scalar::NonBlank, false);
    }
    require(rule, &["resource"]);
}

fn flow(rule: &mut Map<String, Value>) {
    resource(rule);
    require(rule, &["count"]);
    let Some(p) = properties(rule) else { return };
    constrain(p, "grade", Scalar::Code(FlowGrade::CODES), true);
    constrain(p, "count", Scalar::NonNegative, false);
    constrain(p, "strategy", Scalar::Code(FlowStrategy::CODES), true);
    constrain(
        p,
        "controlBehavior",
        Scalar::Code(ControlBehavior::CODES),
        true,
    );
    constrain(p, "warmUpPeriodSec", Scalar::U32, true);
    constrain(p, "maxQueueingTimeMs", Scalar::U32, true);
    let warm_up: &'static [i64] = &[
        ControlBehavior::WarmUp as i64,
        ControlBehavior::WarmUpRateLimiter as i64,
    ];
    let queue: &'static [i64] = &[
        ControlBehavior::RateLimiter as i64,
        ControlBehavior::WarmUpRateLimiter as i64,
    ];
    let thread: &'static [i64] = &[FlowGrade::Thread as i64];
    all_of(
        rule,
        vec![
            // A relate or chain rule names its resource or context.
            when(
                is_code("strategy", &[1, 2]),
                json!({ "required": ["refResource"], "properties": {
                    "refResource": Scalar::NonBlank.schema("", false)
                } }),
            ),
            // A QPS warm-up rule has a period, a QPS rate limiter a queueing time.
            json!({
                "if": is_code("grade", thread),
                "else": { "allOf": [
                    when(is_code("controlBehavior", warm_up), not_code("warmUpPeriodSec", &[0])),
                    when(is_code("controlBehavior", queue), not_code("maxQueueingTimeMs", &[0]))
                ] }
            }),
            // A regex rule rejects (controlBehavior 0), is no cluster rule and no relate rule.
            when(
                is_true("regex"),
                json!({ "allOf": [
                    { "not": is_true("clusterMode") },
                    not_code("controlBehavior", &[1, 2, 3]),
                    not_code("strategy", &[1])
                ] }),
            ),
            when(
                is_true("clusterMode"),
                cluster_mode_checks(vec![
                    (
                        "thresholdType",
                        Scalar::Code(&[0, 1]).schema("0 average per instance, 1 global", true),
                    ),
                    (
                        "strategy",
                        Scalar::Code(&[0]).schema("only 0 (normal) is supported", true),
                    ),
                ]),
            ),
        ],
    );
}

fn degrade(rule: &mut Map<String, Value>) {
    resource(rule);
    // `timeWindow` has no default: absent, it is 0, which is refused.
    require(rule, &["grade", "count", "timeWindow"]);
    let Some(p) = properties(rule) else { return };
    constrain(p, "grade", Scalar::Code(DegradeGrade::CODES), false);
    constrain(p, "count", Scalar::NonNegative, false);
    constrain(p, "timeWindow", Scalar::PositiveU32, false);
    constrain(p, "minRequestAmount", Scalar::PositiveU32, true);
    constrain(p, "statIntervalMs", Scalar::PositiveU32, true);
    let slow: &'static [i64] = &[DegradeGrade::SlowRequestRatio as i64];
    let error_ratio: &'static [i64] = &[DegradeGrade::ErrorRatio as i64];
    all_of(
        rule,
        vec![
            when(
                is_code("grade", slow),
                json!({ "properties": { "slowRatioThreshold": Scalar::Ratio.schema("", true) } }),
            ),
            when(
                is_code("grade", error_ratio),
                json!({ "properties": { "count": Scalar::Ratio.schema("an error ratio", false) } }),
            ),
        ],
    );
}

fn system(rule: &mut Map<String, Value>) {
    let Some(p) = properties(rule) else { return };
    constrain(p, "highestCpuUsage", Scalar::AtMostOne, true);
}

fn authority(rule: &mut Map<String, Value>) {
    resource(rule);
    require(rule, &["limitApp"]);
    let Some(p) = properties(rule) else { return };
    constrain(p, "limitApp", Scalar::NonBlank, false);
    constrain(p, "strategy", Scalar::Code(AuthorityStrategy::CODES), true);
}

/// A `classType` (trimmed, `java.lang.` optional) of one of `names`.
fn class_type(names: &str) -> Value {
    json!({ "required": ["classType"], "properties": {
        "classType": { "type": "string", "pattern": format!(r"^\s*(java\.lang\.)?({names})\s*$") }
    } })
}

/// A param-flow item's `object`, as its `classType` reads it: an integer class in its Java
/// width (the text as written, untrimmed; its digits bound it loosely), a `double` or
/// `float` as a number; a `boolean` reads any text (Java's `Boolean.parseBoolean`), any
/// other class a string.
fn item_object_checks() -> Value {
    let object = |choices: Value| json!({ "properties": { "object": { "anyOf": choices } } });
    let integer = |names: &str, min: i64, max: i64, digits: u32| {
        when(
            class_type(names),
            object(json!([
                { "type": "integer", "minimum": min, "maximum": max },
                { "type": "string", "pattern": format!(r"^[+-]?0*\d{{1,{digits}}}$") }
            ])),
        )
    };
    json!([
        integer("int|Integer", i32::MIN.into(), i32::MAX.into(), 10),
        integer("long|Long", i64::MIN, i64::MAX, 19),
        integer("short|Short", i16::MIN.into(), i16::MAX.into(), 5),
        integer("byte|Byte", i8::MIN.into(), i8::MAX.into(), 3),
        when(
            class_type("double|Double|float|Float"),
            object(json!([
                { "type": "number" },
                { "type": "string", "pattern": any_number_text() }
            ])),
        )
    ])
}

fn param_flow(rule: &mut Map<String, Value>) {
    resource(rule);
    require(rule, &["count"]);
    let Some(p) = properties(rule) else { return };
    constrain(p, "grade", Scalar::Code(ParamFlowGrade::CODES), true);
    constrain(p, "count", Scalar::NonNegative, false);
    constrain(p, "paramIdx", Scalar::I32, true);
    constrain(
        p,
        "controlBehavior",
        Scalar::Code(ParamControlBehavior::CODES),
        true,
    );
    constrain(p, "maxQueueingTimeMs", Scalar::U32, true);
    constrain(p, "burstCount", Scalar::U32, true);
    constrain(p, "durationInSec", Scalar::PositiveU32, true);
    constrain(p, "paramsMaxCapacity", Scalar::Capacity, true);
    if let Some(item) = p
        .get_mut("paramFlowItemList")
        .and_then(|list| list.get_mut("items"))
        .and_then(Value::as_object_mut)
    {
        require(item, &["object", "count"]);
        if let Some(item_properties) = properties(item) {
            if let Some(object) = item_properties.get_mut("object") {
                *object = json!({
                    "description": "the value, as its classType reads it",
                    "type": ["string", "number", "boolean"]
                });
            }
            constrain(item_properties, "count", Scalar::NonNegativeI64, false);
        }
        item.insert("allOf".into(), item_object_checks());
    }
    all_of(
        rule,
        vec![
            // The argument is chosen by index or by key, not both.
            json!({ "anyOf": [is_present("paramIdx"), is_present("paramKey")] }),
            json!({ "not": { "allOf": [is_present("paramIdx"), is_present("paramKey")] } }),
            json!({ "properties": { "paramKey": { "type": ["string", "null"], "minLength": 1 } } }),
            when(is_true("clusterMode"), cluster_mode_checks(Vec::new())),
        ],
    );
}
