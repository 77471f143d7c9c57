//! The compiled authority table: at most one rule per resource.

use std::borrow::Borrow;
use std::sync::Arc;

use super::rule::AuthorityRule;
use crate::hash::FastSet;
use crate::pattern::Patterns;
use crate::rules::{RuleFamily, RuleIssue};

/// Every active authority rule, one per resource.
#[derive(Debug, Default)]
pub(crate) struct AuthorityTable {
    pub(crate) rules: Vec<Arc<AuthorityRule>>,
    /// The regex rules, matched per resource (see `engine::regex`).
    pub(crate) patterns: Patterns<AuthorityRule>,
}

impl AuthorityTable {
    /// The union of every source's rules. When two sources bring a rule for one resource,
    /// the first source (in name order) wins and the other is logged.
    pub(crate) fn compile(rules: Vec<Arc<AuthorityRule>>) -> Self {
        let mut ignored = Vec::new();
        let rules = one_rule_per_resource(rules.into_iter().enumerate(), &mut ignored);
        for issue in ignored {
            tracing::warn!(%issue, "two sources bring an authority rule for one resource; keeping the first");
        }
        Self {
            patterns: Patterns::of(&rules),
            rules,
        }
    }
}

/// Keeps the first authority rule of each resource; later ones become issues, named by the
/// index paired with each rule (its place in the payload).
pub(crate) fn one_rule_per_resource<R: Borrow<AuthorityRule>>(
    rules: impl IntoIterator<Item = (usize, R)>,
    issues: &mut Vec<RuleIssue>,
) -> Vec<R> {
    let mut seen = FastSet::default();
    let mut kept = Vec::new();
    for (index, rule) in rules {
        let resource = &rule.borrow().resource;
        if seen.insert(resource.clone()) {
            kept.push(rule);
        } else {
            issues.push(RuleIssue::new(
                RuleFamily::Authority,
                index,
                Some(resource),
                "resource",
                "a resource may have only one authority rule",
            ));
        }
    }
    kept
}
