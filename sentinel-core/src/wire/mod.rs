//! How rules are spelt on the wire: lenient scalars as fastjson reads them, and the JSON
//! plumbing every rule-list format shares (parsing, one rule at a time with every problem
//! reported, the dashboard's entity shape).

mod formats;
mod json;
mod keys;
mod scalar;

pub(crate) use formats::Format;
#[cfg(test)]
pub(crate) use formats::{formats_of, TELLS_NOTHING};
pub(crate) use json::{
    format_error, invalid, kind, not_a_rule_list, parse_document, parse_family,
    parse_family_skipping, rule_list, WireShape,
};
#[cfg(feature = "schema")]
pub(crate) use keys::CARRIED_BY_STORES;
pub(crate) use keys::{wire_struct, Checked, KeyCase, KeyText, NestedKeys, RuleWire, UnknownKeys};
pub(crate) use scalar::{boolean, float, hash_f64, int, Bool, Float, Int};
