//! Authority rules: origin white and black lists, at most one rule per resource.
//!
//! A second rule for the same resource is an error in strict mode and is skipped (with a
//! reported issue) in lenient mode. When two sources each bring a rule for one resource, the
//! first source in name order wins and the other is logged.

mod rule;
mod table;

pub(crate) use rule::AuthorityRuleWire;
pub use rule::{AuthorityRule, AuthorityStrategy};
pub(crate) use table::{one_rule_per_resource, AuthorityTable};

#[cfg(test)]
mod tests;
