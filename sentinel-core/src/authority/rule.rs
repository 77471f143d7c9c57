//! The authority rule: an origin white or black list for one resource.

use std::hash::Hash;

use serde::Serialize;

use crate::codes::int_code_enum;
use crate::rules::{Issues, RuleFamily, RuleIssue};
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
    /// `resource` is a regular expression (Sentinel's `regex`): the rule applies to every
    /// resource whose whole name it matches, each with a limit and state of its own.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub regex: bool,
}

impl AuthorityRule {
    /// Only `origins` (comma-separated) may call `resource`.
    pub fn white_list(resource: impl Into<String>, origins: impl Into<String>) -> Self {
        Self {
            resource: resource.into(),
            limit_app: origins.into(),
            strategy: AuthorityStrategy::White,
            regex: false,
        }
    }

    /// `origins` (comma-separated) may not call `resource`.
    pub fn black_list(resource: impl Into<String>, origins: impl Into<String>) -> Self {
        Self {
            strategy: AuthorityStrategy::Black,
            ..Self::white_list(resource, origins)
        }
    }

    /// Sets `regex`: `resource` is a regular expression matched against whole names.
    pub fn regex(mut self, on: bool) -> Self {
        self.regex = on;
        self
    }

    /// Checks the rule as Sentinel's `AuthorityRuleManager.isValidRule` does (a `regex` rule's
    /// resource must be a pattern the `regex` crate reads).
    pub fn validate(&self, index: usize) -> Vec<RuleIssue> {
        let mut issues = Issues::new(RuleFamily::Authority, index, Some(&self.resource));
        if self.regex {
            crate::pattern::check_pattern(&mut issues, &self.resource);
        }
        if crate::rules::blank(&self.resource) {
            issues.add("resource", "must not be blank");
        }
        if crate::rules::blank(&self.limit_app) {
            issues.add("limitApp", "must list at least one origin");
        }
        issues.into_vec()
    }

    /// Whether a call from `origin` passes (Sentinel's `AuthorityRuleChecker.passCheck`).
    ///
    /// One leniency, on purpose: spaces around the names in `limitApp` are ignored
    /// (`"app-a, app-b"` lists `app-b`), where Sentinel compares each comma-separated piece
    /// as written. An origin itself is compared exactly.
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

wire::wire_struct! {
    /// The JSON wire shape (other keys are collected, see `wire::keys`). `limitApp`, the
    /// origins the rule lists, decides what it does.
    pub(crate) struct AuthorityRuleWire (Exact) {
        resource: String = "resource",
        limit_app: String = "limitApp" required,
        strategy: Int = "strategy",
        regex: crate::wire::Bool = "regex",
    }
}

impl AuthorityRuleWire {
    /// Builds the typed rule, reporting what the wire gets wrong; the rule's own checks are
    /// [`AuthorityRule::validate`]'s.
    pub(crate) fn decode(self, index: usize) -> (AuthorityRule, Vec<RuleIssue>) {
        let resource = self.resource.unwrap_or_default();
        let mut issues = Issues::new(RuleFamily::Authority, index, Some(&resource));
        let regex = wire::boolean(self.regex).unwrap_or(false);
        let strategy = issues.code(
            "strategy",
            wire::int(self.strategy),
            AuthorityStrategy::White,
        );
        let rule = AuthorityRule {
            limit_app: self.limit_app.unwrap_or_default(),
            strategy,
            resource: resource.clone(),
            regex,
        };
        issues.finish(rule)
    }
}
