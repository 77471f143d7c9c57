//! What the engine needs of a rule family, in one trait, implemented here once per family.
//!
//! The list of families is `for_each_family!` (in `lib.rs`); the per-family plumbing (the
//! methods of `RuleSet` and `ActiveRules`, the engine's tables, the pipeline's loops) is
//! generated from it, while the public types are written out. A family's own module keeps
//! its rule type, its wire shapes and its compiled table; this file is where each family is
//! wired into the engine, and its tests check that every per-family edit was made
//! (docs/adding-a-family.md).

use std::fmt;
use std::hash::Hash;
use std::ops::Deref;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::authority::{self, AuthorityRule, AuthorityRuleWire, AuthorityTable};
use crate::circuit_breaker::{DegradeRule, DegradeRuleWire, DegradeTable};
use crate::flow::{FlowRule, FlowRuleWire, FlowTable};
use crate::hash::FastSet;
use crate::param_flow::{ParamFlowRule, ParamFlowRuleWire, ParamFlowTable};
use crate::rule_ref::RuleRef;
use crate::rules::{RuleFamily, RuleIssue};
use crate::stat::OwnsStat;
use crate::system::{SystemRule, SystemRuleWire, SystemTable};

/// What compiling a table may look up: the statistics of another resource (a relate rule),
/// and the cluster backend, if one is installed.
pub(crate) struct CompileEnv<'a> {
    /// The node of a resource, created if needed; `None` past the resource cap.
    pub(crate) node: &'a dyn Fn(&str) -> Option<Arc<dyn OwnsStat>>,
    /// The cluster backend that decides `clusterMode` flow rules.
    pub(crate) cluster: Option<&'a Arc<dyn crate::cluster::ClusterBackend>>,
}

/// Copies of the rules that `handles` hold (for the listings: rules by source, shadow rules).
pub(crate) fn copies<H: Deref>(handles: &[H]) -> Vec<H::Target>
where
    H::Target: Clone,
{
    handles.iter().map(|h| H::Target::clone(h)).collect()
}

/// A rule family: its rule type, how Sentinel (Java) JSON spells it, its validity checks and
/// its compiled table.
pub(crate) trait Family:
    Clone + Eq + Hash + Serialize + fmt::Debug + Send + Sync + Sized + 'static
{
    /// The family.
    const FAMILY: RuleFamily;

    /// The rule as Sentinel (Java) JSON spells it.
    type Wire: DeserializeOwned + crate::wire::RuleWire;

    /// The compiled rules of every source, as the hot path reads them.
    type Table: Default + fmt::Debug + Send + Sync + 'static;

    /// How a loaded rule is held: compared, hashed and read as the rule. An `Arc` per rule,
    /// or, for a family whose tables never carry a rule into the next reload, a
    /// [`RuleRef`] into the load's one list (no allocation per rule).
    type Handle: Clone
        + Deref<Target = Self>
        + Eq
        + Hash
        + fmt::Debug
        + Send
        + Sync
        + From<Self>
        + 'static;

    /// A loaded payload's rules, as handles: one each, unless the family shares the list.
    fn handles(rules: Vec<Self>) -> Vec<Self::Handle> {
        rules.into_iter().map(Self::Handle::from).collect()
    }

    /// The typed rule with Sentinel's defaults, and what the wire gets wrong (a wrong value
    /// is read as its default, so the rule can still be validated).
    fn decode(wire: Self::Wire, index: usize) -> (Self, Vec<RuleIssue>);

    /// The rule's own validity checks: the one authority on whether a rule may load. Every
    /// path runs it once per rule (a converter, or the engine for rules from the API and from
    /// converters that do not validate).
    fn validate(&self, index: usize) -> Vec<RuleIssue>;

    /// Lenient loading, before [`validate`](Family::validate): drops the parts of the rule
    /// that Sentinel skips while it keeps the rule (a param-flow exception item it cannot
    /// use), and takes out of `found` (the issues decoding found) those about parts decoding
    /// already left out. Returns an issue per dropped part, naming the rule's index and the
    /// part's field: warnings, not reasons to skip the rule. None by default.
    fn skip_parts(&mut self, index: usize, found: &mut Vec<RuleIssue>) -> Vec<RuleIssue> {
        let _ = (index, found);
        Vec::new()
    }

    /// Whether the family has checks that span the rules of one payload
    /// ([`keep_together`](Family::keep_together)).
    const CHECKED_TOGETHER: bool = false;

    /// Checks that span the rules of one payload, after each rule passed [`validate`]: the
    /// rules that may load together (every one, unless the family says otherwise).
    ///
    /// [`validate`]: Family::validate
    fn keep_together(rules: Vec<(usize, Self)>, issues: &mut Vec<RuleIssue>) -> Vec<Self> {
        let _ = issues;
        rules.into_iter().map(|(_, rule)| rule).collect()
    }

    /// Compiles the union of every source's rules. Rules equal to ones in `previous` keep
    /// their state (controllers, breakers).
    fn compile(
        rules: Vec<Self::Handle>,
        previous: &Self::Table,
        env: &CompileEnv<'_>,
    ) -> Self::Table;

    /// Compiles one source's rules alone (the common case: one source), which may repeat a
    /// rule: by default deduplicated through [`union_of`] first. A family that can tell a
    /// repeated rule while it compiles, for less than hashing every rule, overrides it.
    fn compile_part(
        rules: &Arc<Vec<Self::Handle>>,
        previous: &Self::Table,
        env: &CompileEnv<'_>,
    ) -> Self::Table {
        Self::compile(union_of(std::iter::once(rules.as_slice())), previous, env)
    }

    /// The rules a table was compiled from.
    fn active(table: &Self::Table) -> &[Self::Handle];

    /// Why the rule cannot be a shadow rule, as `(field, message)`; `None` if it can.
    fn shadow_unsupported(&self) -> Option<(&'static str, &'static str)> {
        None
    }
}

/// The union of several sources' rules, in source order, without duplicates.
pub(crate) fn union_of<'a, H: Clone + Eq + Hash + 'a>(
    parts: impl Iterator<Item = &'a [H]> + Clone,
) -> Vec<H> {
    // Sized for every rule up front: growing by rehash costs more than the set itself.
    let n = parts.clone().map(<[H]>::len).sum();
    let mut seen: FastSet<&H> = FastSet::with_capacity_and_hasher(n, Default::default());
    let mut out = Vec::with_capacity(n);
    for part in parts {
        for rule in part {
            if seen.insert(rule) {
                out.push(rule.clone());
            }
        }
    }
    out
}

/// A shadow rule names one resource: regex resources are refused.
const SHADOW_REGEX: Option<(&str, &str)> =
    Some(("regex", "a shadow rule cannot match resources by regex"));
/// A cluster backend's tokens would be taken twice.
const SHADOW_CLUSTER: Option<(&str, &str)> = Some((
    "clusterMode",
    "a shadow rule cannot be a cluster rule (it would take the cluster's tokens)",
));

impl Family for FlowRule {
    const FAMILY: RuleFamily = RuleFamily::Flow;
    type Wire = FlowRuleWire;
    type Table = FlowTable;
    /// A flow table's compiled rules are made anew on each reload (their controllers are
    /// carried, not their rules): the rules can share the load's list.
    type Handle = RuleRef<Self>;

    fn handles(rules: Vec<Self>) -> Vec<RuleRef<Self>> {
        RuleRef::each(rules)
    }

    fn decode(wire: FlowRuleWire, index: usize) -> (Self, Vec<RuleIssue>) {
        wire.decode(index)
    }

    fn validate(&self, index: usize) -> Vec<RuleIssue> {
        FlowRule::validate(self, index)
    }

    fn compile(rules: Vec<RuleRef<Self>>, previous: &FlowTable, env: &CompileEnv<'_>) -> FlowTable {
        FlowTable::compile(rules, previous, env.node, env.cluster)
    }

    fn compile_part(
        rules: &Arc<Vec<RuleRef<Self>>>,
        previous: &FlowTable,
        env: &CompileEnv<'_>,
    ) -> FlowTable {
        // The compile groups rules by resource anyway: a repeated rule is found there, and
        // only then is the part deduplicated and compiled again. Not with a cluster backend,
        // which registers the rules it is given. Without a repeat, the table shares the
        // part's list.
        if env.cluster.is_none() {
            if let Some(table) =
                FlowTable::compile_unless_repeated(rules.clone(), previous, env.node)
            {
                return table;
            }
        }
        Self::compile(union_of(std::iter::once(rules.as_slice())), previous, env)
    }

    fn active(table: &FlowTable) -> &[RuleRef<Self>] {
        &table.rules
    }

    fn shadow_unsupported(&self) -> Option<(&'static str, &'static str)> {
        if self.regex {
            SHADOW_REGEX
        } else if self.cluster_mode {
            SHADOW_CLUSTER
        } else {
            None
        }
    }
}

impl Family for DegradeRule {
    const FAMILY: RuleFamily = RuleFamily::Degrade;
    type Wire = DegradeRuleWire;
    type Table = DegradeTable;
    // A breaker carried into the next reload keeps its rule: a `RuleRef` would keep that
    // load's whole list alive with it.
    type Handle = Arc<Self>;

    fn decode(wire: DegradeRuleWire, index: usize) -> (Self, Vec<RuleIssue>) {
        wire.decode(index)
    }

    fn validate(&self, index: usize) -> Vec<RuleIssue> {
        DegradeRule::validate(self, index)
    }

    fn compile(rules: Vec<Arc<Self>>, previous: &DegradeTable, _: &CompileEnv<'_>) -> DegradeTable {
        DegradeTable::compile(rules, previous)
    }

    fn active(table: &DegradeTable) -> &[Arc<Self>] {
        &table.rules
    }

    fn shadow_unsupported(&self) -> Option<(&'static str, &'static str)> {
        self.regex.then_some(SHADOW_REGEX).flatten()
    }
}

impl Family for SystemRule {
    const FAMILY: RuleFamily = RuleFamily::System;
    type Wire = SystemRuleWire;
    type Table = SystemTable;
    // A handful of rules: one `Arc` each.
    type Handle = Arc<Self>;

    fn decode(wire: SystemRuleWire, index: usize) -> (Self, Vec<RuleIssue>) {
        wire.decode(index)
    }

    fn validate(&self, index: usize) -> Vec<RuleIssue> {
        SystemRule::validate(self, index)
    }

    fn compile(rules: Vec<Arc<Self>>, _: &SystemTable, _: &CompileEnv<'_>) -> SystemTable {
        SystemTable::compile(rules)
    }

    fn active(table: &SystemTable) -> &[Arc<Self>] {
        &table.rules
    }
}

impl Family for AuthorityRule {
    const FAMILY: RuleFamily = RuleFamily::Authority;
    type Wire = AuthorityRuleWire;
    type Table = AuthorityTable;
    // One rule per resource at most, named by `BlockError::Authority` as an `Arc`.
    type Handle = Arc<Self>;

    fn decode(wire: AuthorityRuleWire, index: usize) -> (Self, Vec<RuleIssue>) {
        wire.decode(index)
    }

    fn validate(&self, index: usize) -> Vec<RuleIssue> {
        AuthorityRule::validate(self, index)
    }

    const CHECKED_TOGETHER: bool = true;

    /// One rule per resource: a second one is an issue.
    fn keep_together(rules: Vec<(usize, Self)>, issues: &mut Vec<RuleIssue>) -> Vec<Self> {
        authority::one_rule_per_resource(rules, issues)
    }

    fn compile(rules: Vec<Arc<Self>>, _: &AuthorityTable, _: &CompileEnv<'_>) -> AuthorityTable {
        AuthorityTable::compile(rules)
    }

    fn active(table: &AuthorityTable) -> &[Arc<Self>] {
        &table.rules
    }

    fn shadow_unsupported(&self) -> Option<(&'static str, &'static str)> {
        self.regex.then_some(SHADOW_REGEX).flatten()
    }
}

impl Family for ParamFlowRule {
    const FAMILY: RuleFamily = RuleFamily::ParamFlow;
    type Wire = ParamFlowRuleWire;
    type Table = ParamFlowTable;
    // A per-value table carried into the next reload keeps its rule (as a breaker does).
    type Handle = Arc<Self>;

    fn decode(wire: ParamFlowRuleWire, index: usize) -> (Self, Vec<RuleIssue>) {
        wire.decode(index)
    }

    fn validate(&self, index: usize) -> Vec<RuleIssue> {
        ParamFlowRule::validate(self, index)
    }

    fn skip_parts(&mut self, index: usize, found: &mut Vec<RuleIssue>) -> Vec<RuleIssue> {
        self.skip_unusable_items(index, found)
    }

    fn compile(
        rules: Vec<Arc<Self>>,
        previous: &ParamFlowTable,
        _: &CompileEnv<'_>,
    ) -> ParamFlowTable {
        ParamFlowTable::compile(rules, previous)
    }

    fn active(table: &ParamFlowTable) -> &[Arc<Self>] {
        &table.rules
    }

    fn shadow_unsupported(&self) -> Option<(&'static str, &'static str)> {
        if self.regex {
            SHADOW_REGEX
        } else if self.cluster_mode {
            SHADOW_CLUSTER
        } else if self.grade == crate::param_flow::ParamFlowGrade::Thread {
            Some((
                "grade",
                "a shadow param rule must be QPS-grade (a thread-grade rule holds places \
                 for the call, which a shadow rule does not own)",
            ))
        } else {
            None
        }
    }
}

/// Validates one family's rules: each with [`Family::validate`], then together with
/// [`Family::keep_together`]. Returns the rules that may load; `issues` receives the rest.
pub(crate) fn validate_all<F: Family>(rules: Vec<F>, issues: &mut Vec<RuleIssue>) -> Vec<F> {
    // Validated in place: the list is copied only when a rule is left out or the family
    // checks rules together.
    let mut invalid: Vec<usize> = Vec::new();
    for (index, rule) in rules.iter().enumerate() {
        let found = rule.validate(index);
        if !found.is_empty() {
            invalid.push(index);
        }
        issues.extend(found);
    }
    if invalid.is_empty() && !F::CHECKED_TOGETHER {
        return rules;
    }
    let mut invalid = invalid.into_iter().peekable();
    let valid: Vec<(usize, F)> = rules
        .into_iter()
        .enumerate()
        .filter(|(index, _)| invalid.next_if_eq(index).is_none())
        .collect();
    F::keep_together(valid, issues)
}

#[cfg(test)]
mod tests {
    use crate::datasource::{java_converter, CombinedJson, Converter};
    use crate::{BlockError, RuleFamily, RuleSet, Sentinel};

    /// Every family of the list is wired into each place that handles families by hand: its
    /// converter reads its own family, the combined document and the engine carry it, and
    /// a block error names it. (The rest is generated from the list.)
    #[test]
    fn every_family_is_wired() {
        for &family in RuleFamily::ALL {
            let set = java_converter(family).convert(b"[]");
            assert_eq!(set.map(|s| s.families()).ok(), Some(vec![family]));

            let cleared = RuleSet::cleared(&[family]);
            let doc = cleared.to_combined_json().unwrap_or_default();
            let read = CombinedJson::new().convert(&doc);
            assert_eq!(
                read.map(|s| s.families()).ok(),
                Some(vec![family]),
                "{family}"
            );

            let sentinel = Sentinel::new();
            let report = sentinel.apply(
                "test",
                "test",
                crate::engine::Incoming::unchecked(cleared, Default::default()),
            );
            assert_eq!(report.map(|r| r.applied).ok(), Some(vec![(family, 0)]));

            assert_eq!(crate::block::example(family).family(), family);
            let _: BlockError = crate::block::example(family);

            // The hand-written per-family methods: a family without its `RuleSet::with_*`
            // or its manager accessor does not compile here.
            let with = match family {
                RuleFamily::Flow => RuleSet::new().with_flow(Vec::new()),
                RuleFamily::Degrade => RuleSet::new().with_degrade(Vec::new()),
                RuleFamily::System => RuleSet::new().with_system(Vec::new()),
                RuleFamily::Authority => RuleSet::new().with_authority(Vec::new()),
                RuleFamily::ParamFlow => RuleSet::new().with_param_flow(Vec::new()),
            };
            assert_eq!(with.families(), vec![family]);
            let active = match family {
                RuleFamily::Flow => sentinel.flow_rules().rules().len(),
                RuleFamily::Degrade => sentinel.degrade_rules().rules().len(),
                RuleFamily::System => sentinel.system_rules().rules().len(),
                RuleFamily::Authority => sentinel.authority_rules().rules().len(),
                RuleFamily::ParamFlow => sentinel.param_flow_rules().rules().len(),
            };
            assert_eq!(active, 0);
        }
    }

    /// Every key of every wire shape, Sentinel's and sentinel-golang's, is in the table
    /// that tells one format from another (`wire/formats.rs`) under its format, or is
    /// listed there as telling nothing: a new family's or field's keys cannot be forgotten.
    #[test]
    fn every_wire_key_tells_its_format_or_is_listed_as_telling_nothing() {
        use crate::wire::{formats_of, Format, RuleWire, TELLS_NOTHING};
        let java = |family: RuleFamily| match family {
            RuleFamily::Flow => crate::flow::FlowRuleWire::FIELDS,
            RuleFamily::Degrade => crate::circuit_breaker::DegradeRuleWire::FIELDS,
            RuleFamily::System => crate::system::SystemRuleWire::FIELDS,
            RuleFamily::Authority => crate::authority::AuthorityRuleWire::FIELDS,
            RuleFamily::ParamFlow => crate::param_flow::ParamFlowRuleWire::FIELDS,
        };
        let mut shapes: Vec<(Format, &[&str])> = RuleFamily::ALL
            .iter()
            .map(|&family| (Format::java(family), java(family)))
            .collect();
        shapes.extend([
            (Format::GoFlow, crate::flow::GoFlowRuleWire::FIELDS),
            (
                Format::GoBreaker,
                crate::circuit_breaker::GoBreakerRuleWire::FIELDS,
            ),
            (Format::GoSystem, crate::system::GoSystemRuleWire::FIELDS),
            (
                Format::GoHotspot,
                crate::param_flow::GoHotspotRuleWire::FIELDS,
            ),
            (
                Format::GoIsolation,
                crate::flow::GoIsolationRuleWire::FIELDS,
            ),
        ]);
        let mut missing = Vec::new();
        for (format, fields) in shapes {
            for key in fields {
                let listed = formats_of(key.as_bytes()).is_some_and(|f| f.contains(&format));
                if !listed && !TELLS_NOTHING.contains(key) {
                    missing.push(format!("{format:?} {key}"));
                }
            }
        }
        assert!(missing.is_empty(), "not in wire/formats.rs: {missing:?}");
    }
}
