//! sentinel-golang's formats' value constraints, their keys in any letter case.

use serde_json::{json, Map, Value};

use super::{any_number_text, is_code, is_present, not_code, when, Scalar};
use crate::datasource::schema::{any_case_pattern, properties_in_any_case};
use crate::wire::Format;

/// The spellings of a boolean item of sentinel-golang's (`strconv.ParseBool`), as written.
const GO_BOOLEAN_TEXT: &str = r"^(1|t|T|TRUE|true|True|0|f|F|FALSE|false|False)$";

/// Adds a sentinel-golang format's value constraints to its rule object, whose keys match in
/// any letter case ([`any_case`](crate::datasource::schema::any_case)): the constraints are written with exact keys, then
/// rewritten to match any case ([`any_case_constraints`]) and added to the rule's `allOf`.
pub(crate) fn constrain_go(format: Format, rule: &mut Value) {
    let constraints = match format {
        Format::GoFlow => go_flow(),
        Format::GoIsolation => go_isolation(),
        Format::GoBreaker => go_breaker(),
        Format::GoHotspot => go_hotspot(),
        Format::GoSystem => go_system(),
        _ => return,
    };
    let mut constraints = Value::Object(constraints);
    any_case_constraints(&mut constraints);
    if let Some(rule) = rule.as_object_mut() {
        match rule.get_mut("allOf").and_then(Value::as_array_mut) {
            Some(all) => all.push(constraints),
            None => {
                rule.insert("allOf".into(), json!([constraints]));
            }
        }
    }
}

/// Rewrites constraints written with exact keys to match keys in any letter case:
/// `properties` become `patternProperties`, and a `required` key is one that some key
/// matches (`not` every matching key refused).
fn any_case_constraints(value: &mut Value) {
    match value {
        Value::Object(map) => {
            properties_in_any_case(map);
            if let Some(Value::Array(required)) = map.remove("required") {
                let present: Vec<Value> = required
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|key| json!({ "not": { "patternProperties": { any_case_pattern(key): false } } }))
                    .collect();
                match map.get_mut("allOf").and_then(Value::as_array_mut) {
                    Some(all) => all.extend(present),
                    None => {
                        map.insert("allOf".into(), Value::Array(present));
                    }
                }
            }
            for (key, child) in map.iter_mut() {
                // An `enum` or `const` holds values, not schemas.
                if key != "enum" && key != "const" {
                    any_case_constraints(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(any_case_constraints),
        _ => {}
    }
}

/// Constraints on the fields of a rule object, with exact keys.
struct Fields {
    properties: Map<String, Value>,
    required: Vec<&'static str>,
    all_of: Vec<Value>,
}

impl Fields {
    fn new() -> Self {
        Fields {
            properties: Map::new(),
            required: Vec::new(),
            all_of: Vec::new(),
        }
    }

    /// `field` holds `scalar` when present (and not `null`).
    fn optional(mut self, field: &str, scalar: Scalar) -> Self {
        self.properties
            .insert(field.into(), scalar.schema("", true));
        self
    }

    /// `field` is present, not `null`, and holds `scalar`.
    fn required(mut self, field: &'static str, scalar: Scalar) -> Self {
        self.properties
            .insert(field.into(), scalar.schema("", false));
        self.required.push(field);
        self
    }

    fn check(mut self, constraint: Value) -> Self {
        self.all_of.push(constraint);
        self
    }

    fn build(self) -> Map<String, Value> {
        let mut map = Map::new();
        map.insert("properties".into(), Value::Object(self.properties));
        map.insert("required".into(), json!(self.required));
        map.insert("allOf".into(), Value::Array(self.all_of));
        map
    }
}

/// A boolean that is not `true` (sentinel-golang rules have no regular expressions here).
fn never_true() -> Value {
    json!({ "not": { "anyOf": [
        { "const": true },
        { "type": "integer", "const": 1 },
        { "type": "string", "pattern": r"^\s*true\s*$" }
    ] } })
}

fn go_flow() -> Map<String, Value> {
    Fields::new()
        .required("resource", Scalar::NonBlank)
        .required("threshold", Scalar::NonNegative)
        .optional("tokenCalculateStrategy", Scalar::Code(&[0, 1]))
        .optional("controlBehavior", Scalar::Code(&[0, 1]))
        .optional("relationStrategy", Scalar::Code(&[0, 1]))
        .optional("statIntervalInMs", Scalar::Code(&[0, 1000]))
        .optional("warmUpColdFactor", Scalar::Code(&[0, 3]))
        .optional("warmUpPeriodSec", Scalar::U32)
        .optional("maxQueueingTimeMs", Scalar::U32)
        .check(json!({ "properties": { "regex": never_true() } }))
        // Warm-up needs a period (there is no default), a relate rule its resource.
        .check(when(
            is_code("tokenCalculateStrategy", &[1]),
            json!({ "allOf": [is_present("warmUpPeriodSec"), not_code("warmUpPeriodSec", &[0])] }),
        ))
        .check(when(
            is_code("relationStrategy", &[1]),
            json!({ "required": ["refResource"], "properties": {
                "refResource": Scalar::NonBlank.schema("", false)
            } }),
        ))
        .build()
}

fn go_isolation() -> Map<String, Value> {
    Fields::new()
        .required("resource", Scalar::NonBlank)
        .required("threshold", Scalar::U32)
        .optional("metricType", Scalar::Code(&[0]))
        .build()
}

fn go_breaker() -> Map<String, Value> {
    Fields::new()
        .required("resource", Scalar::NonBlank)
        .required("strategy", Scalar::Code(&[0, 1, 2]))
        // No defaults: absent, each is 0, which is refused.
        .required("retryTimeoutMs", Scalar::PositiveU32)
        .required("statIntervalMs", Scalar::PositiveU32)
        .optional("minRequestAmount", Scalar::U32)
        .check(is_present("threshold"))
        // A ratio for the two ratio strategies (slow calls, errors), a count otherwise; a
        // slow-call rule's maxAllowedRtMs is its count.
        .check(when(
            is_code("strategy", &[0, 1]),
            json!({ "properties": { "threshold": Scalar::Ratio.schema("", false) } }),
        ))
        .check(when(
            is_code("strategy", &[2]),
            json!({ "properties": { "threshold": Scalar::NonNegative.schema("", false) } }),
        ))
        .check(when(
            is_code("strategy", &[0]),
            json!({ "properties": { "maxAllowedRtMs": Scalar::NonNegative.schema("", true) } }),
        ))
        .build()
}

fn go_hotspot() -> Map<String, Value> {
    let key_given = json!({
        "required": ["paramKey"],
        "properties": { "paramKey": { "type": "string", "minLength": 1 } }
    });
    let item = Fields::new()
        .required("valKind", Scalar::Code(&[0, 1, 2, 3]))
        .required("threshold", Scalar::NonNegativeI64)
        .check(when(
            is_code("valKind", &[0]),
            json!({ "required": ["valStr"], "properties": {
                "valStr": { "type": "string", "pattern": r"^[+-]?0*\d{1,19}$" }
            } }),
        ))
        .check(when(
            is_code("valKind", &[2]),
            json!({ "required": ["valStr"], "properties": {
                "valStr": { "type": "string", "pattern": GO_BOOLEAN_TEXT }
            } }),
        ))
        .check(when(
            is_code("valKind", &[3]),
            json!({ "required": ["valStr"], "properties": {
                "valStr": { "type": "string", "pattern": any_number_text() }
            } }),
        ))
        .build();
    Fields::new()
        .required("resource", Scalar::NonBlank)
        .required("threshold", Scalar::NonNegative)
        .optional("metricType", Scalar::Code(&[0, 1]))
        .optional("controlBehavior", Scalar::Code(&[0, 1]))
        .optional("paramIndex", Scalar::I32)
        .optional("maxQueueingTimeMs", Scalar::U32)
        .optional("burstCount", Scalar::U32)
        .optional("durationInSec", Scalar::U32)
        .optional("paramsMaxCapacity", Scalar::CapacityOrZero)
        // The argument: an index, or a key (with an index of 0 or less, if any).
        .check(json!({ "anyOf": [is_present("paramIndex"), key_given.clone()] }))
        .check(when(
            key_given,
            json!({ "properties": { "paramIndex": { "anyOf": [
                { "type": "null" },
                { "type": "integer", "maximum": 0 },
                { "type": "string", "pattern": r"^\s*(-\d+|[+-]?0+)(\.0*)?\s*$" }
            ] } } }),
        ))
        // A QPS rule counts over durationInSec, which has no default.
        .check(when(
            is_code("metricType", &[1]),
            json!({ "allOf": [is_present("durationInSec"), not_code("durationInSec", &[0])] }),
        ))
        .check(json!({ "properties": { "specificItems": {
            "anyOf": [{ "type": "null" }, { "type": "array", "items": Value::Object(item) }]
        } } }))
        .build()
}

fn go_system() -> Map<String, Value> {
    Fields::new()
        .required("metricType", Scalar::Code(&[0, 1, 2, 3, 4]))
        .required("triggerCount", Scalar::NonNegative)
        .check(when(
            is_code("metricType", &[4]),
            json!({ "properties": { "triggerCount": Scalar::Ratio.schema("a CPU usage", false) } }),
        ))
        .build()
}
