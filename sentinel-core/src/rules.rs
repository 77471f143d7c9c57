//! What all rule families share: the family names, validation issues and errors, and how a
//! rule set is loaded (strict or lenient).

use std::fmt;

/// A rule family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum RuleFamily {
    /// Flow rules ([`FlowRule`](crate::flow::FlowRule)).
    Flow,
    /// Circuit-breaker (degrade) rules
    /// ([`DegradeRule`](crate::circuit_breaker::DegradeRule)).
    Degrade,
    /// System adaptive protection rules ([`SystemRule`](crate::system::SystemRule)).
    System,
    /// Authority (origin white/black list) rules
    /// ([`AuthorityRule`](crate::authority::AuthorityRule)).
    Authority,
    /// Hot-parameter (param-flow) rules
    /// ([`ParamFlowRule`](crate::param_flow::ParamFlowRule)).
    ParamFlow,
}

impl RuleFamily {
    /// Every family, in the order of the combined document.
    pub const ALL: &'static [RuleFamily] = &[
        RuleFamily::Flow,
        RuleFamily::Degrade,
        RuleFamily::System,
        RuleFamily::Authority,
        RuleFamily::ParamFlow,
    ];

    /// The family's name, as used in combined documents (`flow`, `degrade`...).
    pub fn as_str(self) -> &'static str {
        match self {
            RuleFamily::Flow => "flow",
            RuleFamily::Degrade => "degrade",
            RuleFamily::System => "system",
            RuleFamily::Authority => "authority",
            RuleFamily::ParamFlow => "paramFlow",
        }
    }
}

/// The family list (`for_each_family!`) and [`RuleFamily::ALL`] name every variant once,
/// in one order, or the crate does not compile: the match is exhaustive only if the list
/// names every variant, and the list must match `ALL` in length and order (so it names none
/// twice).
macro_rules! family_list_is_complete {
    ($($variant:ident, $field:ident, $rule:ty;)*) => {
        const _: () = {
            const fn listed(family: RuleFamily) -> usize {
                match family {
                    $(RuleFamily::$variant => 0,)*
                }
            }
            let list = [$(RuleFamily::$variant),*];
            assert!(list.len() == RuleFamily::ALL.len());
            let mut i = 0;
            while i < list.len() {
                assert!(list[i] as u8 == RuleFamily::ALL[i] as u8);
                i += listed(list[i]) + 1;
            }
        };
    };
}

for_each_family!(family_list_is_complete);

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
    /// The rule is a shadow rule (the `shadow` section of a combined document, or a shadow
    /// key): `index` counts in the shadow list of its family.
    pub shadow: bool,
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
            shadow: false,
        }
    }

    /// The same issue, about a shadow rule.
    pub fn in_shadow(mut self) -> Self {
        self.shadow = true;
        self
    }

    /// Where the issue is: the rule's index and the field, as in `(1, "count")`.
    pub fn position(&self) -> (usize, &str) {
        (self.index, &self.field)
    }
}

impl fmt::Display for RuleIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.shadow {
            f.write_str("shadow ")?;
        }
        write!(f, "{} rule #{}", self.family, self.index)?;
        if let Some(resource) = &self.resource {
            write!(f, " (resource {resource:?})")?;
        }
        write!(f, ": field `{}`: {}", self.field, self.message)
    }
}

/// An enum that travels as an integer code (made by `int_code_enum!`), for [`Issues::code`].
pub(crate) trait IntCode: Sized {
    /// The value for an integer code, if it is known.
    fn from_code(code: i64) -> Option<Self>;
    /// The known codes, for error messages.
    fn known_codes() -> &'static str;
}

/// Collects the issues of one rule while it is decoded or validated: the family, the rule's
/// index and its resource are given once, then each problem names only its field.
#[derive(Debug)]
pub(crate) struct Issues<'a> {
    family: RuleFamily,
    index: usize,
    resource: Option<&'a str>,
    found: Vec<RuleIssue>,
}

impl<'a> Issues<'a> {
    pub(crate) fn new(family: RuleFamily, index: usize, resource: Option<&'a str>) -> Self {
        Self {
            family,
            index,
            resource,
            found: Vec::new(),
        }
    }

    /// Records a problem with `field`.
    pub(crate) fn add(&mut self, field: &str, message: impl Into<String>) {
        self.found.push(RuleIssue::new(
            self.family,
            self.index,
            self.resource,
            field,
            message,
        ));
    }

    /// Reports `regex: true`, which no family supports.
    pub(crate) fn no_regex(&mut self, regex: Option<bool>) {
        if regex == Some(true) {
            self.add("regex", "regular-expression resources are not supported");
        }
    }

    /// An optional integer field as a `u32`, `default` when absent; out of range is an issue.
    pub(crate) fn u32(&mut self, field: &str, value: Option<i64>, default: u32) -> u32 {
        match value {
            None => default,
            Some(v) => u32::try_from(v).unwrap_or_else(|_| {
                self.add(
                    field,
                    format!("must be between 0 and {}, got {v}", u32::MAX),
                );
                default
            }),
        }
    }

    /// An optional integer code of enum `T`, `default` when absent; `default` and an issue
    /// for an unknown code (so the rest of the rule is still checked).
    pub(crate) fn code<T: IntCode>(&mut self, field: &str, value: Option<i64>, default: T) -> T {
        match value {
            None => default,
            Some(code) => match T::from_code(code) {
                Some(known) => known,
                None => {
                    self.add(
                        field,
                        format!(
                            "unknown value {code}; expected one of {}",
                            T::known_codes().trim_end()
                        ),
                    );
                    default
                }
            },
        }
    }

    /// Everything found.
    pub(crate) fn into_vec(self) -> Vec<RuleIssue> {
        self.found
    }

    /// The rule, with every issue found: the caller validates the rule even when the wire
    /// had problems, so that one message lists them all.
    pub(crate) fn finish<R>(self, value: R) -> (R, Vec<RuleIssue>) {
        (value, self.found)
    }
}

/// How many distinct rules `issues` are about (a rule is its family and its index).
/// Whether `s` is empty or only whitespace (`s.trim().is_empty()`, stopping at the first
/// other character: a reload checks several names per rule).
pub(crate) fn blank(s: &str) -> bool {
    s.chars().all(char::is_whitespace)
}

pub(crate) fn rules_in(issues: &[RuleIssue]) -> usize {
    let mut rules: Vec<(RuleFamily, usize)> = issues.iter().map(|i| (i.family, i.index)).collect();
    rules.sort_unstable();
    rules.dedup();
    rules.len()
}

/// A rule set that was not applied. The rules that were active stay active.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    /// The payload is not readable as the expected format (syntax or type errors).
    #[error("{}cannot be read as {format}: {message}", named(payload))]
    Format {
        /// Which payload (a file path, a key...); empty from a converter, which does not
        /// know.
        payload: String,
        /// The expected format.
        format: String,
        /// What the parser said, with a position or path.
        message: String,
    },
    /// One or more rules are invalid. Strict mode rejects the whole payload.
    #[error("{}{} invalid rule(s): {}", named(payload), issues.len(), list(issues))]
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

    /// Names the payload: a data source names it after its key, a tool after its file
    /// (a converter leaves it empty, and the message then names none).
    pub fn with_payload(mut self, name: &str) -> Self {
        match &mut self {
            RuleError::Format { payload, .. } | RuleError::Invalid { payload, .. } => {
                *payload = name.to_owned()
            }
        }
        self
    }
}

/// `payload NAME: `, or nothing for an unnamed payload.
fn named(payload: &str) -> String {
    if payload.is_empty() {
        String::new()
    } else {
        format!("payload {payload}: ")
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

/// What a rule converter does with a key that is no field of the rule, real stores' extras
/// (`id`, `app`, `gmtCreate`...) aside. A key close to a field (`cuont`) and a key of another
/// family are errors whatever the policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyPolicy {
    /// Ignored, and reported as a warning ([`LoadReport::warnings`], the source's status). The
    /// default.
    #[default]
    Warn,
    /// An error of its rule (`sentinel-rules validate --strict-keys`).
    Deny,
}

/// What a successful load did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadReport {
    /// Rules now active from this load, per family, after deduplication.
    pub applied: Vec<(RuleFamily, usize)>,
    /// The issues of the rules skipped in lenient mode (a rule can have several).
    pub skipped: Vec<RuleIssue>,
    /// How many rules lenient mode skipped.
    pub skipped_rules: usize,
    /// What loaded but deserves a look: unknown keys, and (lenient mode) absent fields that
    /// decide what a rule does, read as Sentinel's defaults.
    pub warnings: Vec<RuleIssue>,
    /// Engine rule-table version after the load.
    pub version: u64,
    /// Shadow rules now active from this load, per shadow family the payload carried, over
    /// every source (see [`crate::shadow`]).
    pub shadow_applied: Vec<(RuleFamily, usize)>,
    /// How many shadow rules the loading source supplies after the load.
    pub shadow_rules: usize,
}
