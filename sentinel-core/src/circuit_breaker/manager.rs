//! The compiled degrade table.

use std::sync::Arc;

use crate::pattern::Patterns;

use super::breaker::CircuitBreaker;
use super::rule::DegradeRule;
use crate::hash::FastMap;

/// Every active degrade rule, compiled into breakers.
#[derive(Debug, Default)]
pub(crate) struct DegradeTable {
    pub(crate) rules: Vec<Arc<DegradeRule>>,
    pub(crate) by_resource: FastMap<Arc<str>, Arc<[Arc<CircuitBreaker>]>>,
    breakers: FastMap<Arc<DegradeRule>, Arc<CircuitBreaker>>,
    /// The regex rules, matched per resource (see `engine::regex`).
    pub(crate) patterns: Patterns<DegradeRule>,
}

impl DegradeTable {
    /// Compiles rules. A rule equal to one in `previous` keeps its breaker, and so its state
    /// and statistics (Sentinel's `getExistingSameCbOrNew`).
    pub(crate) fn compile(rules: Vec<Arc<DegradeRule>>, previous: &DegradeTable) -> Self {
        let mut breakers = FastMap::with_capacity_and_hasher(rules.len(), Default::default());
        let mut grouped: FastMap<Arc<str>, Vec<Arc<CircuitBreaker>>> = FastMap::default();
        for rule in rules.iter().filter(|r| !r.regex) {
            let breaker = previous
                .breakers
                .get(rule)
                .cloned()
                .unwrap_or_else(|| Arc::new(CircuitBreaker::new(rule.clone())));
            breakers.insert(rule.clone(), breaker.clone());
            grouped
                .entry(Arc::from(rule.resource.as_str()))
                .or_default()
                .push(breaker);
        }
        Self {
            patterns: Patterns::of(&rules),
            rules,
            by_resource: grouped
                .into_iter()
                .map(|(k, v)| (k, Arc::from(v)))
                .collect(),
            breakers,
        }
    }

    pub(crate) fn breakers(&self) -> impl Iterator<Item = &Arc<CircuitBreaker>> {
        self.rules.iter().filter_map(|r| self.breakers.get(r))
    }
}
