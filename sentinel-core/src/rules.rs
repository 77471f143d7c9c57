//! What all rule families share: the family names, validation issues and errors, and how a
//! rule set is loaded (strict or lenient).

use std::fmt;

/// A rule family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum RuleFamily {
    /// Flow rules ([`FlowRule`](crate::flow::FlowRule)).
    Flow,
    /// Circuit-breaker (degrade) rules.
    Degrade,
    /// System adaptive protection rules.
    System,
    /// Authority (origin white/black list) rules.
    Authority,
}

impl RuleFamily {
    /// Every family, in check order of their tables.
    pub const ALL: [RuleFamily; 4] = [
        RuleFamily::Flow,
        RuleFamily::Degrade,
        RuleFamily::System,
        RuleFamily::Authority,
    ];

    /// The family's name, as used in combined documents (`flow`, `degrade`...).
    pub fn as_str(self) -> &'static str {
        match self {
            RuleFamily::Flow => "flow",
            RuleFamily::Degrade => "degrade",
            RuleFamily::System => "system",
            RuleFamily::Authority => "authority",
        }
    }
}

impl fmt::Display for RuleFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem with one rule: enough to fix the payload from the message alone.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuleIssue {
    /// The family of the rule.
    pub family: RuleFamily,
    /// The rule's position in its list (0-based).
    pub index: usize,
    /// The rule's resource, when it has a readable one.
    pub resource: Option<String>,
    /// The offending field, in the payload's spelling (`count`, `controlBehavior`...).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl RuleIssue {
    /// An issue with rule `index` of `family` (custom converters report through this).
    pub fn new(
        family: RuleFamily,
        index: usize,
        resource: Option<&str>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            family,
            index,
            resource: resource.filter(|r| !r.is_empty()).map(str::to_owned),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for RuleIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} rule #{}", self.family, self.index)?;
        if let Some(resource) = &self.resource {
            write!(f, " (resource {resource:?})")?;
        }
        write!(f, ": field `{}`: {}", self.field, self.message)
    }
}

/// Finishes a wire-to-rule conversion: runs the rule's own validation after the wire-level
/// issues, and returns the rule only if nothing is wrong.
pub(crate) fn checked<R>(
    rule: R,
    mut issues: Vec<RuleIssue>,
    validate: impl FnOnce(&R) -> Vec<RuleIssue>,
) -> Result<R, Vec<RuleIssue>> {
    issues.extend(validate(&rule));
    if issues.is_empty() {
        Ok(rule)
    } else {
        Err(issues)
    }
}

/// A rule set that was not applied. The rules that were active stay active.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    /// The payload is not readable as the expected format (syntax or type errors).
    #[error("payload {payload}: cannot be read as {format}: {message}")]
    Format {
        /// Which payload (a file path, a key...).
        payload: String,
        /// The expected format.
        format: String,
        /// What the parser said, with a position or path.
        message: String,
    },
    /// One or more rules are invalid. Strict mode rejects the whole payload.
    #[error("payload {payload}: {} invalid rule(s): {}", issues.len(), list(issues))]
    Invalid {
        /// Which payload.
        payload: String,
        /// Every problem found.
        issues: Vec<RuleIssue>,
    },
}

impl RuleError {
    /// The validation issues, if this is an [`RuleError::Invalid`].
    pub fn issues(&self) -> &[RuleIssue] {
        match self {
            RuleError::Invalid { issues, .. } => issues,
            RuleError::Format { .. } => &[],
        }
    }

    /// Renames the payload (a data source names it after its key).
    pub(crate) fn with_payload(mut self, name: &str) -> Self {
        match &mut self {
            RuleError::Format { payload, .. } | RuleError::Invalid { payload, .. } => {
                *payload = name.to_owned()
            }
        }
        self
    }
}

fn list(issues: &[RuleIssue]) -> String {
    issues
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// How a rule table treats invalid rules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Validation {
    /// One invalid rule rejects the whole payload; the active rules stay. The default.
    #[default]
    Strict,
    /// Invalid rules are skipped one at a time, as Sentinel (Java) does, and reported.
    Lenient,
}

/// What a successful load did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadReport {
    /// Rules now active from this load, per family, after deduplication.
    pub applied: Vec<(RuleFamily, usize)>,
    /// Rules skipped in lenient mode, with why.
    pub skipped: Vec<RuleIssue>,
    /// Engine rule-table version after the load.
    pub version: u64,
}
