//! Go's `encoding/json` matches keys in any letter case, and of two keys that differ only
//! in case the last one in the document wins: the rule objects that have such keys are read
//! again in document order.

use serde::Deserialize;
use serde_json::Value;

use crate::wire;

/// Go's `encoding/json` matches keys in any letter case, and of two keys that differ only
/// in case the last one in the document wins. A `serde_json::Value` keeps its keys sorted,
/// so a rule object with such keys is read again from the bytes, in document order, and
/// only the last of each is kept.
pub(super) fn last_of_case_duplicates(source: &[u8], mut items: Vec<Value>) -> Vec<Value> {
    let has_duplicates = |item: &Value| {
        item.as_object().is_some_and(|map| {
            let mut lower: Vec<String> = map.keys().map(|k| k.to_ascii_lowercase()).collect();
            lower.sort_unstable();
            lower.windows(2).any(|w| w[0] == w[1])
        })
    };
    if !items.iter().any(has_duplicates) {
        return items;
    }
    let source = source.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(source);
    let Ok(ordered) = serde_json::from_slice::<OneOrMany>(source) else {
        return items;
    };
    let ordered = match ordered {
        OneOrMany::Many(list) => list,
        OneOrMany::One(one) => vec![one],
    };
    for (item, pairs) in items.iter_mut().zip(ordered) {
        let (Some(map), Some(pairs)) = (item.as_object_mut(), pairs.0) else {
            continue;
        };
        if !has_duplicates(&Value::Object(map.clone())) {
            continue;
        }
        let mut kept: Vec<(String, Value)> = Vec::new();
        for (key, value) in pairs {
            kept.retain(|(k, _)| !k.eq_ignore_ascii_case(&key));
            kept.push((key, value));
        }
        *map = kept.into_iter().collect();
    }
    items
}

/// A rule list read with each object's keys in document order.
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    Many(Vec<Ordered>),
    One(Ordered),
}

/// An object's entries in document order (`None` for any other value).
struct Ordered(Option<Vec<(String, Value)>>);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Ordered, A::Error> {
                let mut pairs = Vec::new();
                while let Some(entry) = map.next_entry::<String, Value>()? {
                    pairs.push(entry);
                }
                Ok(Ordered(Some(pairs)))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Ordered, A::Error> {
                while seq.next_element::<wire::Checked>()?.is_some() {}
                Ok(Ordered(None))
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Ordered, E> {
                Ok(Ordered(None))
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Ordered, E> {
                Ok(Ordered(None))
            }
            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Ordered, E> {
                Ok(Ordered(None))
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Ordered, E> {
                Ok(Ordered(None))
            }
            fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Ordered, E> {
                Ok(Ordered(None))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Ordered, E> {
                Ok(Ordered(None))
            }
        }
        d.deserialize_any(V)
    }
}
