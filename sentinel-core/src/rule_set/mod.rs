//! [`RuleSet`], the typed rules of one payload, with both directions of its JSON: Sentinel's
//! per-family lists and the combined document `{"flow": [...], "degrade": [...], ...}`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::authority::AuthorityRule;
use crate::circuit_breaker::DegradeRule;
use crate::family::{validate_all, Family};
use crate::flow::FlowRule;
use crate::param_flow::ParamFlowRule;
use crate::rules::{KeyPolicy, RuleError, RuleFamily, RuleIssue, Validation};
use crate::system::SystemRule;
use crate::wire::{self, WireShape};

mod shadow;

/// What reading Sentinel JSON gives: the rules with what a lenient pass skipped and the
/// warnings, or every issue (strict).
pub(crate) type Decoded = Result<Loaded, Vec<RuleIssue>>;

/// Rules read from a payload, with what a lenient pass skipped and what deserves a look.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    pub(crate) set: RuleSet,
    pub(crate) skipped: Vec<RuleIssue>,
    pub(crate) warnings: Vec<RuleIssue>,
}

/// A family's place in a [`RuleSet`].
pub(crate) trait InRuleSet: Family {
    /// Sets `set`'s rules of this family.
    fn put(set: &mut RuleSet, rules: Vec<Self>);
}

/// Typed rules of one payload, per family. `None` means the payload does not carry that
/// family (it is left alone); `Some(vec![])` clears what this source contributed.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct RuleSet {
    /// Flow rules ([`FlowRule`]).
    pub flow: Option<Vec<FlowRule>>,
    /// Circuit-breaker (degrade) rules ([`DegradeRule`]).
    pub degrade: Option<Vec<DegradeRule>>,
    /// System adaptive protection rules ([`SystemRule`]).
    pub system: Option<Vec<SystemRule>>,
    /// Authority (origin white/black list) rules ([`AuthorityRule`]).
    pub authority: Option<Vec<AuthorityRule>>,
    /// Hot-parameter (param-flow) rules ([`ParamFlowRule`]).
    pub param_flow: Option<Vec<ParamFlowRule>>,
    /// Shadow rules: evaluated on live traffic like enforced ones, never blocking
    /// (see [`crate::shadow`]). `None`: the payload carries no shadow section.
    /// A shadow set's own `shadow` is always `None`.
    pub shadow: Option<Box<RuleSet>>,
}

/// The per-family methods of [`RuleSet`], from the family list: a family the list names and
/// the struct lacks, or the reverse, does not compile.
macro_rules! rule_set {
    ($($variant:ident, $field:ident, $rule:ty;)*) => {
        impl RuleSet {
            /// The families this set carries.
            pub fn families(&self) -> Vec<RuleFamily> {
                let mut families = Vec::new();
                $(if self.$field.is_some() {
                    families.push(RuleFamily::$variant);
                })*
                families
            }

            /// Number of rules carried, over all families, shadow rules included.
            pub fn len(&self) -> usize {
                self.enforced_len() + self.shadow.as_ref().map_or(0, |s| s.len())
            }

            /// Number of enforced (not shadow) rules carried, over all families.
            pub fn enforced_len(&self) -> usize {
                0 $(+ self.$field.as_ref().map_or(0, Vec::len))*
            }

            /// A set that clears `families`.
            pub fn cleared(families: &[RuleFamily]) -> Self {
                Self {
                    $($field: families.contains(&RuleFamily::$variant).then(Vec::new),)*
                    shadow: None,
                }
            }

            /// Appends another set's rules, family by family (used to union a prefix of keys).
            pub fn merge(&mut self, other: RuleSet) {
                fn join<T>(into: &mut Option<Vec<T>>, from: Option<Vec<T>>) {
                    if let Some(mut from) = from {
                        into.get_or_insert_with(Vec::new).append(&mut from);
                    }
                }
                $(join(&mut self.$field, other.$field);)*
                if let Some(shadow) = other.shadow {
                    self.shadow.get_or_insert_with(Box::default).merge(*shadow);
                }
            }

            /// Lenient loading, before validation: drops the parts of rules Sentinel skips
            /// while it keeps the rule ([`Family::skip_parts`]), shadow rules' too. Returns a
            /// warning per part dropped.
            pub(crate) fn skip_parts(&mut self) -> Vec<RuleIssue> {
                let mut warnings = Vec::new();
                $(for (index, rule) in self.$field.iter_mut().flatten().enumerate() {
                    warnings.extend(rule.skip_parts(index, &mut Vec::new()));
                })*
                if let Some(shadow) = self.shadow.as_deref_mut() {
                    warnings.extend(shadow.skip_parts().into_iter().map(RuleIssue::in_shadow));
                }
                warnings
            }

            /// The validation stage of the pipeline: keeps the rules that may load and
            /// collects the issues of the others (see [`Family::validate`]).
            pub(crate) fn keep_valid(self, issues: &mut Vec<RuleIssue>) -> RuleSet {
                RuleSet {
                    $($field: self.$field.map(|rules| validate_all(rules, issues)),)*
                    shadow: self.shadow.map(|shadow| {
                        let mut found = Vec::new();
                        let kept = shadow::keep_valid(*shadow, &mut found);
                        issues.extend(found.into_iter().map(RuleIssue::in_shadow));
                        Box::new(kept)
                    }),
                }
            }

            fn to_document(&self) -> Result<BTreeMap<&'static str, Value>, serde_json::Error> {
                let mut doc = BTreeMap::new();
                $(if let Some(rules) = &self.$field {
                    doc.insert(RuleFamily::$variant.as_str(), serde_json::to_value(rules)?);
                })*
                if let Some(shadow) = &self.shadow {
                    doc.insert(SHADOW_KEY, serde_json::to_value(shadow.to_document()?)?);
                }
                Ok(doc)
            }
        }

        $(impl InRuleSet for $rule {
            fn put(set: &mut RuleSet, rules: Vec<Self>) {
                set.$field = Some(rules);
            }
        })*

        /// One family's rule list (a list, one object, or `null`) as a set carrying that
        /// family.
        pub(crate) fn decode_family(
            family: RuleFamily,
            value: Value,
            validation: Validation,
            keys: KeyPolicy,
        ) -> Decoded {
            match family {
                $(RuleFamily::$variant => decode_list::<$rule>(value, validation, keys)
                    .map(|(rules, skipped, warnings)| Loaded {
                        set: RuleSet::of(rules),
                        skipped,
                        warnings,
                    }),)*
            }
        }
    };
}

for_each_family!(rule_set);

impl RuleSet {
    /// An empty set that carries no family.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the flow rules.
    pub fn with_flow(mut self, rules: Vec<FlowRule>) -> Self {
        self.flow = Some(rules);
        self
    }

    /// Sets the degrade rules.
    pub fn with_degrade(mut self, rules: Vec<DegradeRule>) -> Self {
        self.degrade = Some(rules);
        self
    }

    /// Sets the system rules.
    pub fn with_system(mut self, rules: Vec<SystemRule>) -> Self {
        self.system = Some(rules);
        self
    }

    /// Sets the authority rules.
    pub fn with_authority(mut self, rules: Vec<AuthorityRule>) -> Self {
        self.authority = Some(rules);
        self
    }

    /// Sets the hot-parameter (param-flow) rules.
    pub fn with_param_flow(mut self, rules: Vec<ParamFlowRule>) -> Self {
        self.param_flow = Some(rules);
        self
    }

    /// A set carrying `rules`, of their family only.
    pub(crate) fn of<F: InRuleSet>(rules: Vec<F>) -> Self {
        let mut set = Self::new();
        F::put(&mut set, rules);
        set
    }

    /// True when the set carries no rule.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks every rule of every family as loading would (including one authority rule
    /// per resource), returning every problem. Empty means the set would load strictly.
    pub fn validate(&self) -> Vec<RuleIssue> {
        let mut issues = Vec::new();
        let _ = self.clone().keep_valid(&mut issues);
        issues
    }

    /// The validation stage with a mode: strict rejects the set on any issue; lenient
    /// drops the invalid rules and returns their issues with the rest.
    pub(crate) fn checked(
        self,
        validation: Validation,
    ) -> Result<(RuleSet, Vec<RuleIssue>), Vec<RuleIssue>> {
        let mut issues = Vec::new();
        let kept = self.keep_valid(&mut issues);
        if validation == Validation::Strict && !issues.is_empty() {
            return Err(issues);
        }
        Ok((kept, issues))
    }

    /// The set as Sentinel JSON: one family's list when it carries exactly one family (what
    /// [`FlowJson`](crate::datasource::FlowJson) and its siblings read), the combined document
    /// otherwise (what [`CombinedJson`](crate::datasource::CombinedJson) reads).
    pub fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut doc = self.to_document()?;
        if doc.len() == 1 && self.shadow.is_none() {
            if let Some((_, list)) = doc.pop_first() {
                return serde_json::to_vec(&list);
            }
        }
        serde_json::to_vec(&doc)
    }

    /// The set as a combined document, `{"flow": [...], "degrade": [...], ...}`, whatever
    /// the number of families.
    pub fn to_combined_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec_pretty(&self.to_document()?)
    }

    /// Reads a combined document (see [`CombinedJson`](crate::datasource::CombinedJson)):
    /// a family that is absent is not carried, one that is `null` or `[]` is cleared, an
    /// empty or `null` document clears every family, and a key that names no family is a
    /// format error. Rules are validated; lenient mode returns the skipped rules' issues.
    pub(crate) fn from_combined_json(
        bytes: &[u8],
        validation: Validation,
        keys: KeyPolicy,
    ) -> Result<Loaded, RuleError> {
        let map = match wire::parse_document(bytes, COMBINED_FORMAT)? {
            Value::Null => {
                return Ok(Loaded {
                    set: RuleSet::cleared(RuleFamily::ALL),
                    ..Loaded::default()
                })
            }
            Value::Object(map) => map,
            Value::Array(_) => {
                return Err(wire::format_error(
                    COMBINED_FORMAT,
                    format!(
                        "expected an object keyed by rule family ({}), found a list: this looks \
                         like one family's rule list; give its family (`--family flow`, or \
                         the family's converter such as FlowJson)",
                        family_names()
                    ),
                ))
            }
            other => {
                return Err(wire::format_error(
                    COMBINED_FORMAT,
                    format!(
                        "expected an object keyed by rule family ({}), found {}",
                        family_names(),
                        wire::kind(&other)
                    ),
                ))
            }
        };
        let mut loaded = Loaded::default();
        let mut issues = Vec::new();
        for (key, value) in map {
            if key == SHADOW_KEY {
                match shadow::decode_section(value, validation, keys)? {
                    Ok(mut part) => {
                        let shadow = loaded.set.shadow.get_or_insert_with(Box::default);
                        shadow.merge(part.set);
                        loaded.skipped.append(&mut part.skipped);
                        loaded.warnings.append(&mut part.warnings);
                    }
                    Err(found) => issues.extend(found),
                }
                continue;
            }
            let Some(family) = RuleFamily::ALL.iter().copied().find(|f| f.as_str() == key) else {
                let hint = if looks_like_a_rule_key(&key) {
                    ": this looks like one family's rule, not a combined document; give its \
                     family (`--family flow`, or the family's converter such as FlowJson)"
                } else {
                    ""
                };
                return Err(wire::format_error(
                    COMBINED_FORMAT,
                    format!(
                        "unknown key `{key}`; expected rule families: {}{hint}",
                        family_names()
                    ),
                ));
            };
            match decode_family(family, value, validation, keys) {
                Ok(mut part) => {
                    loaded.set.merge(part.set);
                    loaded.skipped.append(&mut part.skipped);
                    loaded.warnings.append(&mut part.warnings);
                }
                Err(found) => issues.extend(found),
            }
        }
        if !issues.is_empty() {
            return Err(wire::invalid(issues));
        }
        Ok(loaded)
    }
}

/// Whether `key` is a field of a rule (of any family), so that a document holding it is
/// one family's rule rather than a combined document.
fn looks_like_a_rule_key(key: &str) -> bool {
    use crate::wire::RuleWire;
    let fields = [
        crate::flow::FlowRuleWire::FIELDS,
        crate::circuit_breaker::DegradeRuleWire::FIELDS,
        crate::system::SystemRuleWire::FIELDS,
        crate::authority::AuthorityRuleWire::FIELDS,
        crate::param_flow::ParamFlowRuleWire::FIELDS,
    ];
    fields.iter().any(|f| f.contains(&key))
}

/// The format named in errors about Sentinel's per-family lists.
pub(crate) const JAVA_FORMAT: &str = "Sentinel rule JSON";
pub(crate) const COMBINED_FORMAT: &str = "a combined Sentinel rule document";
/// The key of the shadow section of a combined document.
pub(crate) const SHADOW_KEY: &str = "shadow";

pub(crate) fn family_names() -> String {
    RuleFamily::ALL
        .iter()
        .map(|f| f.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// One family's Sentinel JSON list, decoded and validated: the rules, what a lenient pass
/// skipped, and the warnings.
type FamilyParts<F> = (Vec<F>, Vec<RuleIssue>, Vec<RuleIssue>);

/// One family's Sentinel JSON list, decoded and validated.
fn decode_list<F: Family>(
    value: Value,
    validation: Validation,
    keys: KeyPolicy,
) -> Result<FamilyParts<F>, Vec<RuleIssue>> {
    let family = F::FAMILY;
    let items = wire::rule_list(value, family, JAVA_FORMAT).map_err(|error| {
        // A family's part that is not a list (`"flow": 3`) is an issue of that family.
        let message = match error {
            RuleError::Format { message, .. } => message,
            other => other.to_string(),
        };
        vec![RuleIssue::new(family, 0, None, family.as_str(), message)]
    })?;
    let parsed = wire::parse_family_skipping(
        items,
        &WireShape::java(family, validation, keys),
        F::decode,
        F::validate,
        F::skip_parts,
    )?;
    let mut skipped = parsed.skipped;
    // Checks across the payload's rules (one authority rule per resource).
    let mut together = Vec::new();
    let rules = F::keep_together(parsed.rules, &mut together);
    if validation == Validation::Strict && !together.is_empty() {
        return Err(together);
    }
    skipped.append(&mut together);
    Ok((rules, skipped, parsed.warnings))
}
