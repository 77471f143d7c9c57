//! Lenient scalar types for reading rule JSON as Sentinel's fastjson does: integers written
//! as `1.0` or `"1"`, booleans written as `"true"`, and explicit `null` meaning "default".

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

/// An integer that also accepts integral floats and numeric strings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Int(pub(crate) i64);

/// A float that also accepts numeric strings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Float(pub(crate) f64);

/// A boolean that also accepts `"true"`/`"false"` and 0/1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bool(pub(crate) bool);

struct IntVisitor;

impl Visitor<'_> for IntVisitor {
    type Value = Int;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Int, E> {
        Ok(Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Int, E> {
        i64::try_from(v)
            .map(Int)
            .map_err(|_| E::custom(format!("integer {v} is too large")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Int, E> {
        if v.is_finite() && v.fract() == 0.0 && v.abs() < 9.0e15 {
            Ok(Int(v as i64))
        } else {
            Err(E::custom(format!("expected an integer, found {v}")))
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Int, E> {
        let t = v.trim();
        if let Ok(i) = t.parse::<i64>() {
            return Ok(Int(i));
        }
        match t.parse::<f64>() {
            Ok(f) => self.visit_f64(f),
            Err(_) => Err(E::invalid_type(de::Unexpected::Str(v), &self)),
        }
    }
}

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(IntVisitor)
    }
}

struct FloatVisitor;

impl Visitor<'_> for FloatVisitor {
    type Value = Float;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Float, E> {
        Ok(Float(v as f64))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Float, E> {
        Ok(Float(v as f64))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Float, E> {
        Ok(Float(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Float, E> {
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Float)
            .ok_or_else(|| E::invalid_type(de::Unexpected::Str(v), &self))
    }
}

impl<'de> Deserialize<'de> for Float {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FloatVisitor)
    }
}

struct BoolVisitor;

impl Visitor<'_> for BoolVisitor {
    type Value = Bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a boolean")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Bool, E> {
        Ok(Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Bool, E> {
        match v {
            0 => Ok(Bool(false)),
            1 => Ok(Bool(true)),
            _ => Err(E::invalid_value(de::Unexpected::Signed(v), &self)),
        }
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Bool, E> {
        self.visit_i64(v.min(2) as i64)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Bool, E> {
        match v.trim() {
            "true" => Ok(Bool(true)),
            "false" => Ok(Bool(false)),
            _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
        }
    }
}

impl<'de> Deserialize<'de> for Bool {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(BoolVisitor)
    }
}

/// Reads an optional lenient integer field into `i64`.
pub(crate) fn int(v: Option<Int>) -> Option<i64> {
    v.map(|i| i.0)
}

/// Reads an optional lenient float field into `f64`.
pub(crate) fn float(v: Option<Float>) -> Option<f64> {
    v.map(|f| f.0)
}

/// Reads an optional lenient boolean field.
pub(crate) fn boolean(v: Option<Bool>) -> Option<bool> {
    v.map(|b| b.0)
}

/// Hashes a float by its bits, with `-0.0` equal to `0.0`.
pub(crate) fn hash_f64<H: std::hash::Hasher>(v: f64, state: &mut H) {
    use std::hash::Hash;
    let v = if v == 0.0 { 0.0 } else { v };
    v.to_bits().hash(state);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_scalars() {
        let i: Vec<Int> = serde_json::from_str(r#"[1, 2.0, "3", " 4 "]"#).unwrap_or_default();
        assert_eq!(i, vec![Int(1), Int(2), Int(3), Int(4)]);
        assert!(serde_json::from_str::<Int>("1.5").is_err());
        assert!(serde_json::from_str::<Int>(r#""test""#).is_err());
        let f: Vec<Float> = serde_json::from_str(r#"[1, 2.5, "3.5"]"#).unwrap_or_default();
        assert_eq!(f, vec![Float(1.0), Float(2.5), Float(3.5)]);
        let b: Vec<Bool> = serde_json::from_str(r#"[true, "false", 1]"#).unwrap_or_default();
        assert_eq!(b, vec![Bool(true), Bool(false), Bool(true)]);
    }
}

#[cfg(feature = "schema")]
mod schema {
    use std::borrow::Cow;

    use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};

    use super::{Bool, Float, Int};
    use crate::datasource::schema::values;

    impl JsonSchema for Int {
        fn schema_name() -> Cow<'static, str> {
            "Int".into()
        }
        fn inline_schema() -> bool {
            true
        }
        fn json_schema(_: &mut SchemaGenerator) -> Schema {
            json_schema!({
                "description": "an integer (or its text)",
                "anyOf": [
                    { "type": "integer" },
                    { "type": "string", "pattern": values::INT_TEXT }
                ]
            })
        }
    }

    impl JsonSchema for Float {
        fn schema_name() -> Cow<'static, str> {
            "Float".into()
        }
        fn inline_schema() -> bool {
            true
        }
        fn json_schema(_: &mut SchemaGenerator) -> Schema {
            json_schema!({
                "description": "a number (or its text)",
                "anyOf": [
                    { "type": "number" },
                    { "type": "string", "pattern": values::NUMBER_TEXT }
                ]
            })
        }
    }

    impl JsonSchema for Bool {
        fn schema_name() -> Cow<'static, str> {
            "Bool".into()
        }
        fn inline_schema() -> bool {
            true
        }
        fn json_schema(_: &mut SchemaGenerator) -> Schema {
            json_schema!({
                "description": "a boolean (or \"true\", \"false\", 1, 0)",
                "anyOf": [
                    { "type": "boolean" },
                    { "type": "integer", "enum": [0, 1] },
                    { "type": "string", "pattern": values::BOOL_TEXT }
                ]
            })
        }
    }
}
