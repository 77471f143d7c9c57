//! A rule shared with the list it was loaded in.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// A rule of a loaded rule list, as a [`BlockError`](crate::BlockError) names it: derefs to
/// the rule, and clones share the list (a reference count, no copy).
///
/// A reload keeps its rules in one list rather than one allocation per rule, which is most
/// of what loading 10 000 flow rules used to cost. A `RuleRef` keeps that whole list alive
/// while it lives: keep a copy of the rule (`FlowRule::clone(&rule)`) to hold on to one rule
/// for long.
///
/// Compared, hashed and printed as the rule.
///
/// ```
/// use sentinel_core::flow::FlowRule;
/// use sentinel_core::RuleRef;
///
/// let rule = RuleRef::new(FlowRule::qps("GET:/order", 10.0));
/// assert_eq!(rule.count, 10.0);
/// assert_eq!(*rule, FlowRule::qps("GET:/order", 10.0));
/// ```
pub struct RuleRef<T> {
    list: Arc<Vec<T>>,
    /// In range of `list`, by construction.
    at: usize,
}

impl<T> RuleRef<T> {
    /// A rule of its own (a list of one).
    pub fn new(rule: T) -> Self {
        Self {
            list: Arc::new(vec![rule]),
            at: 0,
        }
    }

    /// Every rule of `rules`, each sharing the one list.
    pub(crate) fn each(rules: Vec<T>) -> Vec<Self> {
        Self::each_of(&Arc::new(rules)).collect()
    }

    /// Every item of a shared `list`, in order.
    pub(crate) fn each_of(list: &Arc<Vec<T>>) -> impl Iterator<Item = Self> + '_ {
        (0..list.len()).map(|at| Self {
            list: list.clone(),
            at,
        })
    }

    /// Whether both are the same rule of the same list (not merely equal rules).
    pub fn ptr_eq(this: &Self, other: &Self) -> bool {
        Arc::ptr_eq(&this.list, &other.list) && this.at == other.at
    }

    /// Whether both sit in the same list.
    #[cfg(test)]
    pub(crate) fn shares_list_with(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.list, &other.list)
    }

    /// The rule's address, which no other live rule shares (a key for per-rule counters).
    pub(crate) fn address(this: &Self) -> usize {
        std::ptr::from_ref::<T>(this).addr()
    }
}

impl<T> Deref for RuleRef<T> {
    type Target = T;

    // Always inlined: the entry path reads a resource's flow rules through one.
    #[inline(always)]
    fn deref(&self) -> &T {
        // `at` is in range by construction (`new`, `each_of`).
        &self.list[self.at]
    }
}

impl<T> Clone for RuleRef<T> {
    fn clone(&self) -> Self {
        Self {
            list: self.list.clone(),
            at: self.at,
        }
    }
}

impl<T> From<T> for RuleRef<T> {
    fn from(rule: T) -> Self {
        Self::new(rule)
    }
}

impl<T> AsRef<T> for RuleRef<T> {
    fn as_ref(&self) -> &T {
        self
    }
}

impl<T: fmt::Debug> fmt::Debug for RuleRef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        T::fmt(self, f)
    }
}

impl<T: PartialEq> PartialEq for RuleRef<T> {
    fn eq(&self, other: &Self) -> bool {
        T::eq(self, other)
    }
}

impl<T: Eq> Eq for RuleRef<T> {}

impl<T: Hash> Hash for RuleRef<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        T::hash(self, state);
    }
}

impl<T: serde::Serialize> serde::Serialize for RuleRef<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        T::serialize(self, serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::FlowRule;

    #[test]
    fn each_rule_of_a_list_shares_the_list_and_reads_as_its_own_rule() {
        let refs = RuleRef::each(vec![FlowRule::qps("a", 1.0), FlowRule::qps("b", 2.0)]);
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[0].resource, "a");
        assert_eq!(refs[1].count, 2.0);
        assert!(refs[0].shares_list_with(&refs[1]));
        assert_eq!(Arc::strong_count(&refs[0].list), 2);
        assert!(!RuleRef::ptr_eq(&refs[0], &refs[1]));
        assert!(RuleRef::ptr_eq(&refs[1], &refs[1].clone()));
        assert_ne!(RuleRef::address(&refs[0]), RuleRef::address(&refs[1]));
    }

    #[test]
    fn equal_rules_of_different_lists_compare_and_hash_equal() {
        let a = RuleRef::new(FlowRule::qps("a", 1.0));
        let b = RuleRef::each(vec![FlowRule::qps("z", 9.0), FlowRule::qps("a", 1.0)]).remove(1);
        assert_eq!(a, b);
        assert!(!RuleRef::ptr_eq(&a, &b));
        let hash = |r: &RuleRef<FlowRule>| {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            r.hash(&mut hasher);
            hasher.finish()
        };
        assert_eq!(hash(&a), hash(&b));
        assert_eq!(format!("{a:?}"), format!("{:?}", FlowRule::qps("a", 1.0)));
    }
}
