//! The values the strict converters refuse, as JSON Schema: each Sentinel (Java) family's
//! codes, ranges, required fields and the checks that depend on another field (a warm-up
//! period for a warm-up rule, `clusterConfig` in cluster mode...), added to the rule objects
//! the wire types generate, which only say which keys there are and their JSON types.
//!
//! A lenient scalar is also read from text (`"count": "5"`), so each constraint has a number
//! form and a text form (a regular expression of the spellings the converter reads: an
//! optional sign, leading zeros, a `.0` fraction for an integer, an exponent for a number).
//! What JSON Schema cannot say (a product of two fields, a regular expression that must
//! compile, one rule per resource...) is listed in `docs/cli.md`; the converter still
//! checks it.

use serde_json::{json, Map, Value};

mod golang;
mod java;

pub(crate) use golang::constrain_go;
pub(crate) use java::constrain_java;

/// Surrounding whitespace, which the converter trims.
const TRIM: &str = r"\s*";
/// A decimal number's text, without its sign: what `f64::from_str` reads (but `inf`/`NaN`).
const NUMBER: &str = r"(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?";
/// An integral fraction an integer may carry as text (`"5.0"`).
const INTEGRAL: &str = r"(\.0*)?";

/// Text a lenient integer reads (any value).
pub(crate) const INT_TEXT: &str = r"^\s*[+-]?\d+(\.0*)?\s*$";
/// Text a lenient number reads (any finite value).
pub(crate) const NUMBER_TEXT: &str = r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$";
/// Text a lenient boolean reads.
pub(crate) const BOOL_TEXT: &str = r"^\s*(true|false)\s*$";

/// The largest `paramsMaxCapacity`, as text: 1 to 1 000 000.
const CAPACITY_TEXT: &str = r"0*([1-9]\d{0,5}|1000000)";

/// What a lenient scalar field must hold.
#[derive(Debug, Clone, Copy)]
enum Scalar {
    /// An integer code, one of these.
    Code(&'static [i64]),
    /// An integer in `[0, u32::MAX]`.
    U32,
    /// An integer in `[1, u32::MAX]`.
    PositiveU32,
    /// An integer in `i32`'s range.
    I32,
    /// An integer in `[1, i32::MAX]`.
    PositiveI32,
    /// An integer in `[1, i64::MAX]`.
    PositiveI64,
    /// An integer in `[0, i64::MAX]`.
    NonNegativeI64,
    /// An integer in `[1, 1 000 000]`.
    Capacity,
    /// An integer in `[0, 1 000 000]` (0: the default).
    CapacityOrZero,
    /// A number `>= 0`.
    NonNegative,
    /// A number in `[0, 1]`.
    Ratio,
    /// A number `<= 1` (negative: off).
    AtMostOne,
    /// Text with a character other than whitespace.
    NonBlank,
}

impl Scalar {
    /// The JSON form: a number (or string) schema.
    fn value(self) -> Value {
        match self {
            Scalar::Code(codes) => json!({ "type": "integer", "enum": codes }),
            Scalar::U32 => json!({ "type": "integer", "minimum": 0, "maximum": u32::MAX }),
            Scalar::PositiveU32 => json!({ "type": "integer", "minimum": 1, "maximum": u32::MAX }),
            Scalar::I32 => json!({ "type": "integer", "minimum": i32::MIN, "maximum": i32::MAX }),
            Scalar::PositiveI32 => json!({ "type": "integer", "minimum": 1, "maximum": i32::MAX }),
            Scalar::PositiveI64 => json!({ "type": "integer", "minimum": 1, "maximum": i64::MAX }),
            Scalar::NonNegativeI64 => {
                json!({ "type": "integer", "minimum": 0, "maximum": i64::MAX })
            }
            Scalar::Capacity => json!({ "type": "integer", "minimum": 1, "maximum": 1_000_000 }),
            Scalar::CapacityOrZero => {
                json!({ "type": "integer", "minimum": 0, "maximum": 1_000_000 })
            }
            Scalar::NonNegative => json!({ "type": "number", "minimum": 0 }),
            Scalar::Ratio => json!({ "type": "number", "minimum": 0, "maximum": 1 }),
            Scalar::AtMostOne => json!({ "type": "number", "maximum": 1 }),
            Scalar::NonBlank => json!({ "type": "string", "pattern": r"\S" }),
        }
    }

    /// The text form's regular expression (`None`: no text form beyond `value`'s).
    fn text(self) -> Option<String> {
        let whole = |body: &str| Some(format!("^{TRIM}{body}{TRIM}$"));
        match self {
            Scalar::Code(codes) => {
                let alternatives: Vec<String> = codes.iter().map(i64::to_string).collect();
                whole(&format!(r"\+?0*({}){INTEGRAL}", alternatives.join("|")))
            }
            // Digit counts bound the text loosely (10 digits: up to 9 999 999 999).
            Scalar::U32 => whole(&format!(r"\+?0*\d{{1,10}}{INTEGRAL}")),
            Scalar::PositiveU32 | Scalar::PositiveI32 => {
                whole(&format!(r"\+?0*[1-9]\d{{0,9}}{INTEGRAL}"))
            }
            Scalar::I32 => whole(&format!(r"[+-]?0*\d{{1,10}}{INTEGRAL}")),
            Scalar::PositiveI64 => whole(&format!(r"\+?0*[1-9]\d{{0,18}}{INTEGRAL}")),
            Scalar::NonNegativeI64 => whole(&format!(r"\+?0*\d{{1,19}}{INTEGRAL}")),
            Scalar::Capacity => whole(&format!(r"\+?{CAPACITY_TEXT}{INTEGRAL}")),
            Scalar::CapacityOrZero => whole(&format!(r"\+?(0+|{CAPACITY_TEXT}){INTEGRAL}")),
            Scalar::NonNegative => whole(&format!(r"\+?{NUMBER}")),
            Scalar::Ratio => whole(r"\+?(0+(\.\d*)?|0*\.\d+|0*1(\.0*)?)"),
            Scalar::AtMostOne => whole(&format!(r"(-{NUMBER}|\+?(0+(\.\d*)?|0*\.\d+|0*1(\.0*)?))")),
            Scalar::NonBlank => None,
        }
    }

    /// The field's schema: the value, its text, and `null` (the default) when `nullable`.
    fn schema(self, description: &str, nullable: bool) -> Value {
        let mut choices = vec![self.value()];
        if let Some(pattern) = self.text() {
            choices.push(json!({ "type": "string", "pattern": pattern }));
        }
        if nullable {
            choices.push(json!({ "type": "null" }));
        }
        json!({ "description": description, "anyOf": choices })
    }
}

/// A field holds one of `codes` (as a number or text); absent or `null` never matches.
fn is_code(field: &str, codes: &'static [i64]) -> Value {
    let code = Scalar::Code(codes);
    json!({
        "required": [field],
        "properties": { field: { "anyOf": [code.value(), { "type": "string", "pattern": code.text() }] } }
    })
}

/// A field is `true` (or `"true"`, or 1).
fn is_true(field: &str) -> Value {
    json!({
        "required": [field],
        "properties": { field: { "anyOf": [
            { "const": true },
            { "type": "integer", "const": 1 },
            { "type": "string", "pattern": r"^\s*true\s*$" }
        ] } }
    })
}

/// A field is absent or `null`.
fn is_absent(field: &str) -> Value {
    json!({ "anyOf": [
        { "not": { "required": [field] } },
        { "properties": { field: { "type": "null" } } }
    ] })
}

/// A field is present and not `null`.
fn is_present(field: &str) -> Value {
    json!({ "required": [field], "properties": { field: { "not": { "type": "null" } } } })
}

/// `then` holds whenever `condition` does.
fn when(condition: Value, then: Value) -> Value {
    json!({ "if": condition, "then": then })
}

/// A field must not hold `codes`.
fn not_code(field: &str, codes: &'static [i64]) -> Value {
    json!({ "not": is_code(field, codes) })
}

/// Sets `field`'s schema to `scalar`'s, keeping its description.
fn constrain(properties: &mut Map<String, Value>, field: &str, scalar: Scalar, nullable: bool) {
    let description = properties
        .get(field)
        .and_then(|p| p.get("description"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    properties.insert(field.to_owned(), scalar.schema(&description, nullable));
}

/// Marks `fields` required and not `null` (the converter reads `null` as absent).
fn require(rule: &mut Map<String, Value>, fields: &[&str]) {
    let mut required: Vec<Value> = rule
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for field in fields {
        if !required.iter().any(|r| r == field) {
            required.push(json!(field));
        }
    }
    rule.insert("required".into(), Value::Array(required));
}

/// Adds the constraints that span several fields.
fn all_of(rule: &mut Map<String, Value>, constraints: Vec<Value>) {
    if !constraints.is_empty() {
        rule.insert("allOf".into(), Value::Array(constraints));
    }
}

fn properties(rule: &mut Map<String, Value>) -> Option<&mut Map<String, Value>> {
    rule.get_mut("properties").and_then(Value::as_object_mut)
}

/// What every cluster rule's `clusterConfig` must hold in cluster mode (Sentinel's
/// `isValidClusterRule`): an object with a positive `flowId`, and a positive `sampleCount`
/// that divides a positive `windowIntervalMs`. The divisibility is checked when one of the
/// two is left at its default (10 and 1000).
fn cluster_mode_checks(extra: Vec<(&str, Value)>) -> Value {
    let divides_1000: &[i64] = &[
        1, 2, 4, 5, 8, 10, 20, 25, 40, 50, 100, 125, 200, 250, 500, 1000,
    ];
    let mut config = Map::new();
    config.insert("flowId".into(), Scalar::PositiveI64.schema("", false));
    config.insert("sampleCount".into(), Scalar::PositiveI32.schema("", true));
    config.insert(
        "windowIntervalMs".into(),
        Scalar::PositiveI32.schema("", true),
    );
    for (field, schema) in extra {
        config.insert(field.into(), schema);
    }
    json!({
        "required": ["clusterConfig"],
        "properties": { "clusterConfig": {
            "type": "object",
            "required": ["flowId"],
            "properties": config,
            "allOf": [
                when(is_absent("sampleCount"), json!({
                    "properties": { "windowIntervalMs": { "anyOf": [
                        { "type": ["string", "null"] },
                        { "multipleOf": 10 }
                    ] } }
                })),
                when(is_absent("windowIntervalMs"), json!({
                    "properties": { "sampleCount": { "anyOf": [
                        { "type": ["string", "null"] },
                        { "enum": divides_1000 }
                    ] } }
                }))
            ]
        } }
    })
}

/// The text of a number `f64::from_str` reads, `inf` and `NaN` included.
fn any_number_text() -> String {
    format!(r"^\s*[+-]?({NUMBER}|[iI][nN][fF]([iI][nN][iI][tT][yY])?|[nN][aA][nN])\s*$")
}
