//! How rules are spelt on the wire: lenient scalars as fastjson reads them, and the JSON
//! plumbing every rule-list format shares (parsing, one rule at a time with every problem
//! reported, the dashboard's entity shape).

mod formats;
mod json;
mod scalar;

pub(crate) use formats::{may_hold_foreign_key, Format};
pub(crate) use json::{
    format_error, invalid, kind, lowercase_keys, not_a_rule_list, parse_document, parse_family,
    rule_list, WireShape,
};
pub(crate) use scalar::{boolean, float, hash_f64, int, Bool, Float, Int};
