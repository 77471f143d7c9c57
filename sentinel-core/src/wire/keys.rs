//! The keys of a rule object: each wire struct reads its own fields and collects the keys it
//! does not know, decoded (escapes resolved, as written otherwise), so one check decides
//! what they mean, whichever path read the payload: a key of another format (the payload is
//! another family's), a typo of a field (`cuont`), a key real stores carry (`gmtCreate`), or
//! an unknown key (a warning).
//!
//! The value of an unknown key is read with every check a JSON document gets (numbers in
//! range, valid UTF-8, no lone surrogate, bounded nesting), never skipped: the typed fast
//! path and the general path, which reads a `serde_json::Value` first, accept the same bytes.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::formats::{foreign_key_message, Format};

/// Keys that real stores write beside a rule, ignored without a warning: Sentinel's
/// dashboard entities (`id`, `app`, `ip`, `port`, `gmtCreate`, `gmtModified`), Sentinel's
/// legacy degrade `passCount`, sentinel-golang's rule `id`, and the Go flow rule's
/// memory-adaptive thresholds (meaningful only with `tokenCalculateStrategy: 2`, which is
/// refused on its own).
pub(crate) const CARRIED_BY_STORES: &[&str] = &[
    "id",
    "app",
    "ip",
    "port",
    "gmtCreate",
    "gmtModified",
    "passCount",
    "lowMemUsageThreshold",
    "highMemUsageThreshold",
    "memLowWaterMarkBytes",
    "memHighWaterMarkBytes",
];

/// How a format matches keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyCase {
    /// As written (Sentinel's fastjson, for the fields it knows).
    Exact,
    /// In any letter case (Go's `encoding/json`).
    Insensitive,
}

impl KeyCase {
    /// Whether `key` spells `field`.
    #[inline]
    pub(crate) fn matches(self, key: &str, field: &str) -> bool {
        match self {
            KeyCase::Exact => key == field,
            KeyCase::Insensitive => key.eq_ignore_ascii_case(field),
        }
    }
}

/// One key a wire struct does not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnknownKey {
    /// Where it is: `cuont`, or `clusterConfig.flowid`, `paramFlowItemList[0].objct`.
    pub(crate) path: String,
    /// The key, decoded.
    pub(crate) key: String,
    /// The fields of the object it is in (for a did-you-mean).
    pub(crate) fields: &'static [&'static str],
    /// How that object matches keys.
    pub(crate) case: KeyCase,
    /// Whether it is a key of the rule itself (not of a nested object).
    pub(crate) top: bool,
}

/// The unknown keys of one object (and of the objects nested in it), in document order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UnknownKeys(Vec<UnknownKey>);

impl UnknownKeys {
    /// Notes `key`, unless real stores carry it.
    pub(crate) fn note(&mut self, key: &str, fields: &'static [&'static str], case: KeyCase) {
        if CARRIED_BY_STORES.iter().any(|c| case.matches(key, c)) {
            return;
        }
        self.0.push(UnknownKey {
            path: key.to_owned(),
            key: key.to_owned(),
            fields,
            case,
            top: true,
        });
    }

    /// Takes a nested object's unknown keys, under `prefix` (`clusterConfig`).
    pub(crate) fn absorb(&mut self, prefix: &str, nested: &mut UnknownKeys) {
        for mut key in nested.0.drain(..) {
            key.path = format!("{prefix}.{}", key.path);
            key.top = false;
            self.0.push(key);
        }
    }

    /// Whether there is none.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every unknown key.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &UnknownKey> {
        self.0.iter()
    }
}

/// What an unknown key means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyProblem {
    /// A key of another format: the payload is another family's. Always an error.
    Foreign(String),
    /// Close to one of the object's fields: a typo. Always an error.
    Typo(&'static str),
    /// Unknown: a warning (an error with strict keys).
    Unknown,
}

impl KeyProblem {
    /// The message for `key`.
    pub(crate) fn message(&self, key: &str) -> String {
        match self {
            KeyProblem::Foreign(message) => message.clone(),
            KeyProblem::Typo(field) => format!("unknown field {key:?} (did you mean {field:?}?)"),
            KeyProblem::Unknown => format!(
                "unknown field {key:?}: ignored (not a field of this rule; `validate \
                 --strict-keys` makes it an error)"
            ),
        }
    }

    /// Whether it rejects the rule whatever the key policy.
    pub(crate) fn is_error(&self) -> bool {
        !matches!(self, KeyProblem::Unknown)
    }
}

/// What `key` means for a rule of `format`. The one check both paths run.
pub(crate) fn classify(key: &UnknownKey, format: Format) -> KeyProblem {
    if key.top {
        if let Some(message) = foreign_key_message(&key.key, format) {
            return KeyProblem::Foreign(message);
        }
    }
    match did_you_mean(&key.key, key.fields, key.case) {
        Some(field) => KeyProblem::Typo(field),
        None => KeyProblem::Unknown,
    }
}

/// The field `key` is most likely a typo of: the same letters in another case, or within a
/// small edit distance (one edit for short names, two for longer ones).
fn did_you_mean(key: &str, fields: &'static [&'static str], case: KeyCase) -> Option<&'static str> {
    let lower = key.to_ascii_lowercase();
    let mut best: Option<(usize, &'static str)> = None;
    for &field in fields {
        let field_lower = field.to_ascii_lowercase();
        if case == KeyCase::Exact && field_lower == lower {
            return Some(field);
        }
        let distance = strsim::damerau_levenshtein(&lower, &field_lower);
        let allowed = if field.len() <= 5 { 1 } else { 2 };
        if distance <= allowed && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, field));
        }
    }
    best.map(|(_, field)| field)
}

/// A key as the deserializer gives it: borrowed from the input when it has no escape.
pub(crate) enum KeyText<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl KeyText<'_> {
    /// The key.
    #[inline]
    pub(crate) fn as_str(&self) -> &str {
        match self {
            KeyText::Borrowed(s) => s,
            KeyText::Owned(s) => s,
        }
    }
}

impl<'de> Deserialize<'de> for KeyText<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = KeyText<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(KeyText::Borrowed(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(KeyText::Owned(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(KeyText::Owned(v))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// The value of an unknown key: read in full, with every check a JSON document gets, and
/// dropped. (`serde::de::IgnoredAny` would skip it unchecked.)
pub(crate) struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_none<E: de::Error>(self) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Checked, D::Error> {
        Checked::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_entry::<Checked, Checked>()?.is_some() {}
        Ok(Checked)
    }
}

/// A field's value that may hold nested wire objects, whose unknown keys go to the rule's.
pub(crate) trait NestedKeys {
    /// Moves the unknown keys of the objects in `self` into `into`, under `prefix`.
    fn take_unknown(&mut self, prefix: &str, into: &mut UnknownKeys);
}

impl<T: NestedKeys> NestedKeys for Option<T> {
    fn take_unknown(&mut self, prefix: &str, into: &mut UnknownKeys) {
        if let Some(value) = self {
            value.take_unknown(prefix, into);
        }
    }
}

impl<T: NestedKeys> NestedKeys for Vec<T> {
    fn take_unknown(&mut self, prefix: &str, into: &mut UnknownKeys) {
        for (i, value) in self.iter_mut().enumerate() {
            value.take_unknown(&format!("{prefix}[{i}]"), into);
        }
    }
}

macro_rules! no_nested_keys {
    ($($t:ty),*) => {
        $(impl NestedKeys for $t {
            #[inline]
            fn take_unknown(&mut self, _: &str, _: &mut UnknownKeys) {}
        })*
    };
}

no_nested_keys!(String, super::Int, super::Float, super::Bool);

/// What every wire struct of a rule tells the generic decoding code.
pub(crate) trait RuleWire {
    /// The fields it reads, as the format spells them.
    const FIELDS: &'static [&'static str];
    /// How it matches keys.
    const CASE: KeyCase;
    /// The fields that decide what the rule does.
    #[allow(dead_code)] // read by the `schema` feature
    const REQUIRED: &'static [&'static str];
    /// The keys it did not read, its nested objects' included.
    fn unknown(&self) -> &UnknownKeys;
    /// The fields that decide what the rule does and are absent (strict mode refuses the
    /// rule; lenient mode reads Sentinel's defaults).
    fn missing(&self) -> Vec<&'static str>;
}

/// Declares a wire struct: its fields (every one optional, `null` meaning absent), a
/// `Deserialize` that reads them and collects every other key with [`UnknownKeys`], and its
/// [`RuleWire`] facts. A field marked `required` decides what the rule does.
///
/// Duplicate keys: the last one wins, as it does in a `serde_json::Value` (and in Go).
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident ($case:ident) {
            $($field:ident: $ty:ty = $key:literal $($required:ident)?,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Default)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        #[cfg_attr(feature = "schema", schemars(deny_unknown_fields))]
        $vis struct $name {
            $(
                #[cfg_attr(feature = "schema", schemars(rename = $key))]
                $field: Option<$ty>,
            )*
            #[cfg_attr(feature = "schema", schemars(skip))]
            unknown: $crate::wire::UnknownKeys,
        }

        impl $crate::wire::RuleWire for $name {
            const FIELDS: &'static [&'static str] = &[$($key),*];
            const CASE: $crate::wire::KeyCase = $crate::wire::KeyCase::$case;
            const REQUIRED: &'static [&'static str] = &[
                $($($crate::wire::wire_struct!(@name $key $required),)?)*
            ];

            fn unknown(&self) -> &$crate::wire::UnknownKeys {
                &self.unknown
            }

            fn missing(&self) -> Vec<&'static str> {
                #[allow(unused_mut)]
                let mut missing = Vec::new();
                $($crate::wire::wire_struct!(@required missing, self, $field, $key $($required)?);)*
                missing
            }
        }

        impl $crate::wire::NestedKeys for $name {
            fn take_unknown(&mut self, prefix: &str, into: &mut $crate::wire::UnknownKeys) {
                into.absorb(prefix, &mut self.unknown);
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct WireVisitor;
                impl<'de> serde::de::Visitor<'de> for WireVisitor {
                    type Value = $name;

                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a rule object")
                    }

                    fn visit_map<A: serde::de::MapAccess<'de>>(
                        self,
                        mut map: A,
                    ) -> Result<$name, A::Error> {
                        use $crate::wire::{KeyCase, RuleWire as _};
                        let mut out = $name::default();
                        let case = KeyCase::$case;
                        while let Some(key) = map.next_key::<$crate::wire::KeyText<'de>>()? {
                            let key = key.as_str();
                            $(if case.matches(key, $key) {
                                out.$field = map.next_value()?;
                                continue;
                            })*
                            map.next_value::<$crate::wire::Checked>()?;
                            out.unknown.note(key, $name::FIELDS, case);
                        }
                        $($crate::wire::NestedKeys::take_unknown(
                            &mut out.$field,
                            $key,
                            &mut out.unknown,
                        );)*
                        Ok(out)
                    }
                }
                d.deserialize_map(WireVisitor)
            }
        }
    };
    (@required $missing:ident, $self:ident, $field:ident, $key:literal required) => {
        if $self.$field.is_none() {
            $missing.push($key);
        }
    };
    (@required $missing:ident, $self:ident, $field:ident, $key:literal) => {};
    (@name $key:literal required) => {
        $key
    };
}

pub(crate) use wire_struct;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_are_told_from_unknown_keys() {
        let fields = &["resource", "count", "grade", "controlBehavior", "limitApp"];
        assert_eq!(did_you_mean("cuont", fields, KeyCase::Exact), Some("count"));
        assert_eq!(did_you_mean("Count", fields, KeyCase::Exact), Some("count"));
        assert_eq!(
            did_you_mean("controlBehaviour", fields, KeyCase::Exact),
            Some("controlBehavior")
        );
        assert_eq!(
            did_you_mean("resorce", fields, KeyCase::Exact),
            Some("resource")
        );
        assert_eq!(did_you_mean("weird", fields, KeyCase::Exact), None);
        assert_eq!(did_you_mean("x", fields, KeyCase::Exact), None);
    }

    #[test]
    fn keys_stores_carry_are_not_noted() {
        let mut keys = UnknownKeys::default();
        for key in CARRIED_BY_STORES {
            keys.note(key, &["count"], KeyCase::Exact);
        }
        assert!(keys.is_empty());
        keys.note("weird", &["count"], KeyCase::Exact);
        assert_eq!(keys.iter().count(), 1);
    }
}
