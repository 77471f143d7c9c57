//! Resources named by a regular expression (Sentinel's `regex: true`): the check of a
//! pattern when a rule is validated, and a family's compiled patterns, which its table keeps.
//! How a resource learns the rules whose pattern matches its name is the engine's
//! (`engine/regex.rs`).

use regex::Regex;

use crate::family::Family;
use crate::rules::Issues;

/// Reports a `resource` that is not a pattern this engine reads.
pub(crate) fn check_pattern(issues: &mut Issues<'_>, pattern: &str) {
    if let Err(error) = compile(pattern) {
        let reason = match error {
            regex::Error::Syntax(text) => text,
            regex::Error::CompiledTooBig(limit) => format!("the pattern is over {limit} bytes"),
            other => other.to_string(),
        };
        issues.add(
            "resource",
            format!("is not a regular expression this engine reads (no look-around or backreferences): {reason}"),
        );
    }
}

/// `pattern`, anchored at both ends: Sentinel matches whole names (`Matcher::matches`).
fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    Regex::new(&format!("^(?:{pattern})$"))
}

/// A rule that may name its resource by a pattern.
pub(crate) trait PatternRule: Sized {
    fn resource(&self) -> &str;
    fn is_regex(&self) -> bool;
    /// The rule as the matched resource `name`'s own.
    fn retarget(&self, name: &str) -> Self;
}

/// The regex rules of one family, compiled.
#[derive(Debug)]
pub(crate) struct Patterns<R: Family> {
    list: Vec<(Regex, R::Handle)>,
}

impl<R: Family> Default for Patterns<R> {
    fn default() -> Self {
        Self { list: Vec::new() }
    }
}

impl<R: Family + PatternRule> Patterns<R> {
    /// The regex rules among `rules` (validated, so every pattern compiles).
    pub(crate) fn of<'a>(rules: impl IntoIterator<Item = &'a R::Handle>) -> Self {
        let list = rules
            .into_iter()
            .filter(|r| r.is_regex())
            .filter_map(|r| Some((compile(r.resource()).ok()?, r.clone())))
            .collect();
        Self { list }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The rules whose pattern matches `name`, as `name`'s own.
    pub(crate) fn matching(&self, name: &str) -> Vec<R::Handle> {
        self.list
            .iter()
            .filter(|(pattern, _)| pattern.is_match(name))
            .map(|(_, rule)| R::Handle::from(rule.retarget(name)))
            .collect()
    }
}
