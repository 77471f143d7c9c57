//! The per-family rule managers: `sentinel.flow_rules().load_rules(...)` and friends.

use std::fmt;

use super::apply::Incoming;
use super::sentinel::{ActiveRules, Sentinel};
use crate::authority::AuthorityRule;
use crate::circuit_breaker::DegradeRule;
use crate::family::Family;
use crate::flow::FlowRule;
use crate::param_flow::ParamFlowRule;
use crate::rule_set::RuleSet;
use crate::rules::{LoadReport, RuleError, RuleFamily, Validation};
use crate::system::SystemRule;

/// The source name of rules loaded through the managers' `load_rules`.
pub const API_SOURCE: &str = "api";

mod sealed {
    pub trait Sealed: Sized {
        fn into_set(rules: Vec<Self>) -> crate::rule_set::RuleSet;
        fn active(sentinel: &crate::engine::Sentinel) -> Vec<Self>;
    }
}

macro_rules! family_rules {
    ($($variant:ident, $field:ident, $rule:ty;)*) => {
        $(
            impl sealed::Sealed for $rule {
                fn into_set(rules: Vec<Self>) -> RuleSet {
                    RuleSet::of(rules)
                }

                fn active(sentinel: &Sentinel) -> Vec<Self> {
                    let snapshot = sentinel.inner.shared.rules.load();
                    <$rule as Family>::active(&snapshot.tables.$field)
                        .iter()
                        .map(|r| <$rule>::clone(r))
                        .collect()
                }
            }

            impl FamilyRule for $rule {
                const FAMILY: RuleFamily = RuleFamily::$variant;

                fn in_active(active: &ActiveRules) -> &[Self] {
                    &active.$field
                }
            }
        )*
    };
}

/// A rule type with a manager: [`FlowRule`], [`DegradeRule`], [`SystemRule`],
/// [`AuthorityRule`] and [`ParamFlowRule`].
pub trait FamilyRule: sealed::Sealed + Clone + Sized {
    /// The family.
    const FAMILY: RuleFamily;

    /// This family's rules in `active`.
    fn in_active(active: &ActiveRules) -> &[Self];
}

for_each_family!(family_rules);

/// Loads and reads the rules of one family. Obtained from [`Sentinel::flow_rules`],
/// [`Sentinel::degrade_rules`], [`Sentinel::system_rules`], [`Sentinel::authority_rules`],
/// [`Sentinel::param_flow_rules`] or [`Sentinel::rules`].
///
/// Rules loaded here form the `api` source. Data sources add their own sources; the active
/// rules of a family are the union of all sources.
pub struct RuleManager<'a, R> {
    sentinel: &'a Sentinel,
    _family: std::marker::PhantomData<fn() -> R>,
}

impl<R> fmt::Debug for RuleManager<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleManager").finish_non_exhaustive()
    }
}

impl<R: FamilyRule> RuleManager<'_, R> {
    /// Validates, compiles and publishes `rules` as the API source's rules of this family,
    /// replacing what it loaded before. An empty list clears them. Strict unless the engine
    /// was built lenient: one invalid rule rejects the list and the active rules stay.
    pub fn load_rules(&self, rules: Vec<R>) -> Result<LoadReport, RuleError> {
        self.load(rules, self.sentinel.inner.validation)
    }

    /// Like [`load_rules`](Self::load_rules), but skips invalid rules and reports them.
    pub fn load_rules_lenient(&self, rules: Vec<R>) -> Result<LoadReport, RuleError> {
        self.load(rules, Validation::Lenient)
    }

    fn load(&self, rules: Vec<R>, validation: Validation) -> Result<LoadReport, RuleError> {
        let incoming = Incoming::unchecked(R::into_set(rules), validation);
        self.sentinel.apply(API_SOURCE, API_SOURCE, incoming)
    }

    /// Every active rule of this family, from all sources.
    pub fn rules(&self) -> Vec<R> {
        R::active(self.sentinel)
    }
}

impl Sentinel {
    /// The rule manager of family `R`.
    pub fn rules<R: FamilyRule>(&self) -> RuleManager<'_, R> {
        RuleManager {
            sentinel: self,
            _family: std::marker::PhantomData,
        }
    }

    /// The flow rule manager.
    pub fn flow_rules(&self) -> RuleManager<'_, FlowRule> {
        self.rules()
    }

    /// The circuit-breaker (degrade) rule manager.
    pub fn degrade_rules(&self) -> RuleManager<'_, DegradeRule> {
        self.rules()
    }

    /// The system rule manager.
    pub fn system_rules(&self) -> RuleManager<'_, SystemRule> {
        self.rules()
    }

    /// The authority rule manager.
    pub fn authority_rules(&self) -> RuleManager<'_, AuthorityRule> {
        self.rules()
    }

    /// The hot-parameter (param-flow) rule manager.
    pub fn param_flow_rules(&self) -> RuleManager<'_, ParamFlowRule> {
        self.rules()
    }
}
