//! The engine-wide rule snapshot: every family's compiled table, every source's part, and
//! each resource's rules in one slot, published in one `ArcSwap` store.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use crate::authority::AuthorityRule;
use crate::circuit_breaker::CircuitBreaker;
use crate::family::Family;
use crate::flow::FlowRef;
use crate::hash::FastMap;
use crate::param_flow::ResourceParamRules;
use crate::rules::RuleFamily;

/// The families a running data source has applied, enforced and shadow: a payload of the
/// source that no longer carries one of them clears the source's part of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Owned {
    /// Enforced families.
    pub(crate) families: BTreeSet<RuleFamily>,
    /// Shadow families.
    pub(crate) shadow: BTreeSet<RuleFamily>,
}

macro_rules! per_family {
    ($($variant:ident, $field:ident, $rule:ty;)*) => {
        /// One source's contribution, per family, validated. `None`: the source brings no
        /// rule of that family.
        #[derive(Debug, Clone, Default)]
        pub(crate) struct SourceRules {
            $(pub(crate) $field: Option<Arc<Vec<<$rule as Family>::Handle>>>,)*
        }

        impl SourceRules {
            pub(crate) fn is_empty(&self) -> bool {
                true $(&& self.$field.is_none())*
            }
        }

        /// Every family's compiled table.
        #[derive(Debug, Default)]
        pub(crate) struct Tables {
            $(pub(crate) $field: Arc<<$rule as Family>::Table>,)*
        }

        impl Tables {
            /// How many rules of `family` are active.
            pub(crate) fn count(&self, family: RuleFamily) -> usize {
                match family {
                    $(RuleFamily::$variant => <$rule as Family>::active(&self.$field).len(),)*
                }
            }
        }
    };
}

for_each_family!(per_family);

/// Every rule of one resource, compiled, for the hot path's single lookup.
#[derive(Debug, Default, Clone)]
pub(crate) struct ResourceRules {
    pub(crate) authority: Option<Arc<AuthorityRule>>,
    pub(crate) param: Option<Arc<ResourceParamRules>>,
    pub(crate) flow: Option<FlowRef>,
    /// `flow`'s count when its only rule is a plain QPS reject rule.
    pub(crate) plain_qps: Option<f64>,
    pub(crate) breakers: Option<Arc<[Arc<CircuitBreaker>]>>,
}

/// The engine-wide rule snapshot: one `ArcSwap` load gives every family, consistently.
#[derive(Debug, Default)]
pub(crate) struct RuleSnapshot {
    pub(crate) version: u64,
    pub(crate) sources: BTreeMap<Arc<str>, SourceRules>,
    pub(crate) tables: Tables,
    /// Where each resource's rules sit in `resources`.
    pub(crate) index: SlotIndex,
    pub(crate) resources: Vec<ResourceRules>,
    /// The slots of regex-matched resources, resolved as they are first called; `None`
    /// when no family has a regex rule.
    pub(crate) regex: Option<Box<ResolvedSlots>>,
    /// The shadow rules (see [`crate::shadow`]); `None` when no source has one, so that a
    /// call pays one test of this field for them.
    pub(crate) shadow: Option<Arc<super::ShadowSnapshot>>,
}

impl RuleSnapshot {
    /// Builds every resource's slot from the tables.
    pub(crate) fn index_resources(&mut self) {
        let tables = &self.tables;
        let any_regex = !(tables.flow.patterns.is_empty()
            && tables.degrade.patterns.is_empty()
            && tables.param_flow.patterns.is_empty()
            && tables.authority.patterns.is_empty());
        self.regex = any_regex.then(Box::default);
        let resources = &mut self.resources;
        // The flow table's resources take the first slots, in its order: its name map is
        // the index of those, shared, not built again.
        let index = &mut self.index;
        index.flow = tables.flow.index();
        let others = tables.degrade.by_resource.len() + tables.param_flow.by_resource.len();
        resources.reserve(tables.flow.len() + others);
        resources.extend(tables.flow.refs().map(|rules| ResourceRules {
            plain_qps: rules.only_plain_qps(),
            flow: Some(rules),
            ..ResourceRules::default()
        }));
        index.others.reserve(others);
        for (name, breakers) in &tables.degrade.by_resource {
            index.slot(resources, name).breakers = Some(breakers.clone());
        }
        for (name, rules) in &tables.param_flow.by_resource {
            index.slot(resources, name).param = Some(rules.clone());
        }
        for rule in tables.authority.rules.iter().filter(|r| !r.regex) {
            let name: Arc<str> = Arc::from(rule.resource.as_str());
            index.slot(resources, &name).authority = Some(rule.clone());
        }
    }
}

/// Where each resource's rules sit in a snapshot's `resources`: the flow table's own name
/// map for the resources with flow rules (the first slots, in the table's order), and a map
/// of its own for the names only other families have (the slots after them). Read on cold
/// paths only: the hot path caches a resource's slot in its node.
#[derive(Debug, Default)]
pub(crate) struct SlotIndex {
    flow: Arc<FastMap<Arc<str>, usize>>,
    others: FastMap<Arc<str>, usize>,
}

impl SlotIndex {
    /// The index's key for `name` (the name the rule tables hold) and its slot, if it has
    /// rules.
    fn entry(&self, name: &str) -> Option<(&Arc<str>, usize)> {
        self.flow
            .get_key_value(name)
            .or_else(|| self.others.get_key_value(name))
            .map(|(key, &slot)| (key, slot))
    }

    /// The slot of `name`, if it has rules.
    pub(crate) fn get(&self, name: &str) -> Option<usize> {
        self.entry(name).map(|(_, slot)| slot)
    }

    /// The index's key for `name`: the name the rule tables hold.
    pub(crate) fn key(&self, name: &str) -> Option<&Arc<str>> {
        self.entry(name).map(|(key, _)| key)
    }

    /// Whether `name` has rules.
    pub(crate) fn contains_key(&self, name: &str) -> bool {
        self.entry(name).is_some()
    }

    /// Whether the flow resources' slots are looked up in `table`'s own name map.
    #[cfg(test)]
    pub(crate) fn shares_flow_map_of(&self, table: &crate::flow::FlowTable) -> bool {
        Arc::ptr_eq(&self.flow, &table.index())
    }

    /// The rules slot of resource `name`, added on first use.
    fn slot<'a>(
        &mut self,
        resources: &'a mut Vec<ResourceRules>,
        name: &Arc<str>,
    ) -> &'a mut ResourceRules {
        let next = resources.len();
        let i = match self.flow.get(&**name) {
            Some(&i) => i,
            None => *self.others.entry(name.clone()).or_insert(next),
        };
        if i >= next {
            // A new name: its slot is the one pushed now.
            resources.push(ResourceRules::default());
            return &mut resources[next];
        }
        &mut resources[i]
    }
}

/// The slots a table version resolved for regex-matched resources. References into it stay
/// valid as long as the version does: the list only grows.
#[derive(Debug, Default)]
pub(crate) struct ResolvedSlots {
    pub(crate) slots: boxcar::Vec<ResourceRules>,
    pub(crate) names: Mutex<FastMap<Arc<str>, usize>>,
}

impl ResolvedSlots {
    pub(crate) fn get(&self, index: usize) -> Option<&ResourceRules> {
        self.slots.get(index)
    }
}
