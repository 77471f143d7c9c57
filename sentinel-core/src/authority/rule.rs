//! The authority rule: an origin white or black list for one resource.

use std::hash::Hash;

use serde::{Deserialize, Serialize};

use crate::codes::{code_field, int_code_enum};
use crate::rules::{RuleFamily, RuleIssue};
use crate::wire::{self, Int};

int_code_enum! {
    /// White or black list (`strategy`).
    pub enum AuthorityStrategy {
        /// Only the listed origins may call (`AUTHORITY_WHITE`), the default.
        White = 0,
        /// The listed origins may not call (`AUTHORITY_BLACK`).
        Black = 1,
    }
}

/// An authority rule: `limitApp` is a comma-separated list of origins.
///
/// As in Sentinel, a call without an origin is not checked.
///
/// ```
/// use sentinel_core::authority::AuthorityRule;
///
/// let rule = AuthorityRule::black_list("GET:/admin", "crawler,scanner");
/// assert!(rule.validate(0).is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AuthorityRule {
    /// The guarded resource.
    pub resource: String,
    /// Comma-separated origins. Required.
    pub limit_app: String,
    /// White or black list.
    pub strategy: AuthorityStrategy,
}

impl AuthorityRule {
    /// Only `origins` (comma-separated) may call `resource`.
    pub fn white_list(resource: impl Into<String>, origins: impl Into<String>) -> Self {
        Self {
            resource: resource.into(),
            limit_app: origins.into(),
            strategy: AuthorityStrategy::White,
        }
    }

    /// `origins` (comma-separated) may not call `resource`.
    pub fn black_list(resource: impl Into<String>, origins: impl Into<String>) -> Self {
        Self {
            strategy: AuthorityStrategy::Black,
            ..Self::white_list(resource, origins)
        }
    }

    /// Checks the rule as Sentinel's `AuthorityRuleManager.isValidRule` does.
    pub fn validate(&self, index: usize) -> Vec<RuleIssue> {
        let mut issues = Vec::new();
        let res = Some(self.resource.as_str());
        if self.resource.trim().is_empty() {
            issues.push(RuleIssue::new(
                RuleFamily::Authority,
                index,
                res,
                "resource",
                "must not be blank",
            ));
        }
        if self.limit_app.trim().is_empty() {
            issues.push(RuleIssue::new(
                RuleFamily::Authority,
                index,
                res,
                "limitApp",
                "must list at least one origin",
            ));
        }
        issues
    }

    /// Whether a call from `origin` passes (Sentinel's `AuthorityRuleChecker.passCheck`).
    pub fn passes(&self, origin: &str) -> bool {
        if origin.is_empty() {
            return true;
        }
        let listed = self.limit_app.split(',').any(|app| app.trim() == origin);
        match self.strategy {
            AuthorityStrategy::White => listed,
            AuthorityStrategy::Black => !listed,
        }
    }
}

/// The JSON wire shape.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AuthorityRuleWire {
    resource: Option<String>,
    limit_app: Option<String>,
    strategy: Option<Int>,
    regex: Option<crate::wire::Bool>,
}

impl AuthorityRuleWire {
    pub(crate) fn into_rule(self, index: usize) -> Result<AuthorityRule, Vec<RuleIssue>> {
        let fam = RuleFamily::Authority;
        let mut issues = Vec::new();
        let resource = self.resource.unwrap_or_default();
        let res = Some(resource.as_str());
        if wire::boolean(self.regex) == Some(true) {
            issues.push(RuleIssue::new(
                fam,
                index,
                res,
                "regex",
                "regular-expression resources are not supported",
            ));
        }
        let strategy = code_field!(
            issues,
            fam,
            index,
            res,
            "strategy",
            wire::int(self.strategy),
            AuthorityStrategy,
            AuthorityStrategy::White
        );
        let Some(strategy) = strategy else {
            return Err(issues);
        };
        let rule = AuthorityRule {
            limit_app: self.limit_app.unwrap_or_default(),
            strategy,
            resource,
        };
        crate::rules::checked(rule, issues, |r| r.validate(index))
    }
}
