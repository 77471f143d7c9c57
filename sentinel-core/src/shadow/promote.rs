//! Promote and demote: moving rules between a set's shadow section and its enforced lists.

use crate::authority::AuthorityRule;
use crate::circuit_breaker::DegradeRule;
use crate::flow::FlowRule;
use crate::param_flow::ParamFlowRule;
use crate::rule_set::RuleSet;
use crate::rules::RuleFamily;
use crate::system::SystemRule;

/// Which rules of a [`RuleSet`] a [`promote`](RuleSet::promote) or
/// [`demote`](RuleSet::demote) moves: every rule of `family`, narrowed by resource and/or by
/// position in the family's list.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuleSelector {
    /// The family.
    pub family: RuleFamily,
    /// Only rules of this resource (system rules have none: give no resource for them).
    pub resource: Option<String>,
    /// Only the rule at this position (0-based) of the family's list, counted before the
    /// resource filter.
    pub index: Option<usize>,
}

impl RuleSelector {
    /// Every rule of `family`.
    pub fn new(family: RuleFamily) -> Self {
        Self {
            family,
            resource: None,
            index: None,
        }
    }

    /// Only rules of `resource`.
    pub fn resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// Only the rule at `index` of the family's list.
    pub fn index(mut self, index: usize) -> Self {
        self.index = Some(index);
        self
    }
}

/// Why a promote or demote moved nothing (the set is then unchanged).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShadowMoveError {
    /// No rule matches the selector in the list it was looked for in.
    #[error(
        "no {} {family} rule matches{}{}: that list has {available} rule(s)",
        if *shadow { "shadow" } else { "enforced" },
        resource.as_deref().map(|r| format!(" resource {r:?}")).unwrap_or_default(),
        index.map(|i| format!(" at index {i}")).unwrap_or_default()
    )]
    NoMatch {
        /// The family.
        family: RuleFamily,
        /// Looked for among the shadow rules (promote) or the enforced ones (demote).
        shadow: bool,
        /// The selector's resource.
        resource: Option<String>,
        /// The selector's index.
        index: Option<usize>,
        /// How many rules of the family that list has.
        available: usize,
    },
}

/// A rule's resource, for selection (`None` for system rules).
trait Resourced: Clone {
    fn resource_name(&self) -> Option<&str>;
}

macro_rules! resourced {
    ($($t:ty),*) => {$(
        impl Resourced for $t {
            fn resource_name(&self) -> Option<&str> {
                Some(&self.resource)
            }
        }
    )*};
}
resourced!(FlowRule, DegradeRule, AuthorityRule, ParamFlowRule);

impl Resourced for SystemRule {
    fn resource_name(&self) -> Option<&str> {
        None
    }
}

/// Moves the selected rules of `from` to the end of `to`; with `replace`, the rules of `to`
/// on the moved rules' resources go first (all of them for system rules).
fn move_rules<T: Resourced>(
    from: &mut Option<Vec<T>>,
    to: &mut Option<Vec<T>>,
    selector: &RuleSelector,
    shadow: bool,
    replace: bool,
) -> Result<usize, ShadowMoveError> {
    let list = from.as_deref().unwrap_or(&[]);
    let picked: Vec<usize> = (0..list.len())
        .filter(|&i| selector.index.is_none_or(|want| want == i))
        .filter(|&i| {
            selector
                .resource
                .as_deref()
                .is_none_or(|want| list[i].resource_name() == Some(want))
        })
        .collect();
    if picked.is_empty() {
        return Err(ShadowMoveError::NoMatch {
            family: selector.family,
            shadow,
            resource: selector.resource.clone(),
            index: selector.index,
            available: list.len(),
        });
    }
    let mut remaining = from.take().unwrap_or_default();
    let mut moved = Vec::with_capacity(picked.len());
    for i in picked.iter().rev() {
        moved.push(remaining.remove(*i));
    }
    moved.reverse();
    *from = Some(remaining);
    let target = to.get_or_insert_with(Vec::new);
    if replace {
        target.retain(|kept| {
            let name = kept.resource_name();
            !moved
                .iter()
                .any(|m| name.is_none() || m.resource_name() == name)
        });
    }
    let n = moved.len();
    target.extend(moved);
    Ok(n)
}

impl RuleSet {
    /// Moves the selected shadow rules into the enforced lists (appended to their family's
    /// list), so that they block from the next load of this set. An authority rule replaces
    /// the enforced authority rule of its resource (one per resource). Returns how many
    /// rules moved; on error the set is unchanged.
    pub fn promote(&mut self, selector: &RuleSelector) -> Result<usize, ShadowMoveError> {
        self.promote_with(selector, selector.family == RuleFamily::Authority)
    }

    /// [`promote`](Self::promote), and the enforced rules of the family on the promoted
    /// rules' resources (every enforced system rule, for system rules) are dropped first: the
    /// tried limit replaces the current one.
    pub fn promote_replacing(&mut self, selector: &RuleSelector) -> Result<usize, ShadowMoveError> {
        self.promote_with(selector, true)
    }

    fn promote_with(
        &mut self,
        selector: &RuleSelector,
        replace: bool,
    ) -> Result<usize, ShadowMoveError> {
        let had = self.shadow.is_some();
        let mut shadow = self.shadow.take().map(|s| *s).unwrap_or_default();
        let moved = move_family(&mut shadow, self, selector, true, replace);
        self.shadow = (had || moved.is_ok()).then(|| Box::new(shadow));
        moved
    }

    /// Moves the selected enforced rules into the shadow section (appended), so that they
    /// only count would-blocks from the next load of this set. Returns how many moved; on
    /// error the set is unchanged.
    pub fn demote(&mut self, selector: &RuleSelector) -> Result<usize, ShadowMoveError> {
        let had = self.shadow.is_some();
        let mut shadow = self.shadow.take().map(|s| *s).unwrap_or_default();
        let replace = selector.family == RuleFamily::Authority;
        let moved = move_family(self, &mut shadow, selector, false, replace);
        self.shadow = (had || moved.is_ok()).then(|| Box::new(shadow));
        moved
    }
}

fn move_family(
    from: &mut RuleSet,
    to: &mut RuleSet,
    selector: &RuleSelector,
    shadow: bool,
    replace: bool,
) -> Result<usize, ShadowMoveError> {
    match selector.family {
        RuleFamily::Flow => move_rules(&mut from.flow, &mut to.flow, selector, shadow, replace),
        RuleFamily::Degrade => move_rules(
            &mut from.degrade,
            &mut to.degrade,
            selector,
            shadow,
            replace,
        ),
        RuleFamily::System => {
            move_rules(&mut from.system, &mut to.system, selector, shadow, replace)
        }
        RuleFamily::Authority => move_rules(
            &mut from.authority,
            &mut to.authority,
            selector,
            shadow,
            replace,
        ),
        RuleFamily::ParamFlow => move_rules(
            &mut from.param_flow,
            &mut to.param_flow,
            selector,
            shadow,
            replace,
        ),
    }
}
