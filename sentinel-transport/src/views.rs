//! Which rules each caller was shown, so that an edit derived from an older view than the
//! store's current value is refused instead of overwriting it.
//!
//! The dashboard's protocol carries no page or session: a page (`/v1/flow/rules?...`) makes
//! the dashboard call `getRules`, the dashboard replaces its own copy of the machine's rules
//! with the answer (`InMemoryRuleRepositoryAdapter.saveAll`), and an edit (add, edit or
//! delete one rule) posts that copy with the change as the whole list (`setRules`). So
//! what an edit was derived from is known by two things only: who called, and what was
//! posted.
//!
//! For every caller address this keeps the views it was shown since this instance started
//! (the rules answered, as the engine compares rules, and the store revision when they were
//! read), and the list it last wrote. An edit's **base** is a view of its caller from which
//! the posted list is at most one change away (as a multiset: one rule added, removed or
//! replaced, or none). The edit goes through only when it has a base and every base is
//! current (read at the store's current revision); a base read at an older revision means
//! the page may hold rules that changed since it loaded, and the edit is refused. A caller
//! with no view (this instance restarted since the page loaded, or the caller never read)
//! is refused too. A view that made an edit refused is dropped, since that page is told to
//! reload; a caller's views at the revision it wrote from are replaced by the list written.
//!
//! What this cannot tell apart: two dashboards calling from one address are one caller,
//! so the second one's stale edit can look like the first one's follow-up edit; give them
//! different addresses.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

/// A rule as the engine compares it: a 128-bit hash of its canonical JSON (16 bytes a rule
/// a view, whatever the rule's size; two different rules share one with a chance of about
/// 2^-128).
pub(crate) type RuleKey = u128;

/// A list of rules as the engine compares them: each rule's key, sorted.
pub(crate) type Canonical = Vec<RuleKey>;

/// The key of a rule's canonical JSON.
pub(crate) fn rule_key(canonical_json: &str) -> RuleKey {
    use std::hash::{Hash, Hasher};
    let half = |salt: u8| {
        let mut hasher = std::hash::DefaultHasher::new();
        salt.hash(&mut hasher);
        canonical_json.hash(&mut hasher);
        hasher.finish()
    };
    (u128::from(half(1)) << 64) | u128::from(half(2))
}

/// What a caller was shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct View {
    pub(crate) rules: Canonical,
    /// The store's revision when the rules were read (`None`: nothing stored).
    pub(crate) revision: Option<u64>,
}

/// The views kept per caller; the oldest is forgotten first.
const VIEWS_PER_CALLER: usize = 16;
/// The callers kept; the one that called least recently is forgotten first.
const CALLERS: usize = 64;

#[derive(Debug, Default)]
struct Caller {
    views: VecDeque<View>,
    last_seen: u64,
}

/// The views of every caller, of one rule family.
#[derive(Debug, Default)]
pub(crate) struct Views {
    callers: HashMap<IpAddr, Caller>,
    tick: u64,
}

/// Where an edit comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Base {
    /// The caller was shown nothing since this instance started.
    NoView,
    /// The posted list is more than one change away from every view of the caller.
    NotDerived,
    /// The posted list is one change (or none) away from these views of the caller.
    Views(Vec<View>),
}

/// Whether `posted` is at most one change (add, remove, replace one rule) away from `view`;
/// both sorted.
pub(crate) fn one_change_away(view: &[RuleKey], posted: &[RuleKey]) -> bool {
    let (mut i, mut j) = (0, 0);
    let (mut only_view, mut only_posted) = (0usize, 0usize);
    while i < view.len() || j < posted.len() {
        match (view.get(i), posted.get(j)) {
            (Some(a), Some(b)) if a == b => {
                i += 1;
                j += 1;
            }
            (Some(a), Some(b)) if a < b => {
                only_view += 1;
                i += 1;
            }
            (Some(_), None) => {
                only_view += 1;
                i += 1;
            }
            _ => {
                only_posted += 1;
                j += 1;
            }
        }
        if only_view > 1 || only_posted > 1 {
            return false;
        }
    }
    true
}

/// The rules as a set (the engine collapses duplicates): sorted, without repeats.
pub(crate) fn as_set(rules: &[RuleKey]) -> Canonical {
    let mut set = rules.to_vec();
    set.dedup();
    set
}

impl Views {
    fn caller(&mut self, caller: IpAddr) -> &mut Caller {
        self.tick += 1;
        let tick = self.tick;
        if !self.callers.contains_key(&caller) && self.callers.len() >= CALLERS {
            if let Some(oldest) = self
                .callers
                .iter()
                .min_by_key(|(_, c)| c.last_seen)
                .map(|(ip, _)| *ip)
            {
                self.callers.remove(&oldest);
            }
        }
        let entry = self.callers.entry(caller).or_default();
        entry.last_seen = tick;
        entry
    }

    /// `caller` was shown `view`. The same rules shown before are the same view, now at
    /// this revision.
    pub(crate) fn shown(&mut self, caller: IpAddr, view: View) {
        let views = &mut self.caller(caller).views;
        views.retain(|v| v.rules != view.rules);
        views.push_back(view);
        while views.len() > VIEWS_PER_CALLER {
            views.pop_front();
        }
    }

    /// The views of `caller` the `posted` list can derive from.
    pub(crate) fn base_of(&self, caller: IpAddr, posted: &[RuleKey]) -> Base {
        let Some(known) = self.callers.get(&caller).filter(|c| !c.views.is_empty()) else {
            return Base::NoView;
        };
        let bases: Vec<View> = known
            .views
            .iter()
            .filter(|v| one_change_away(&v.rules, posted))
            .cloned()
            .collect();
        if bases.is_empty() {
            Base::NotDerived
        } else {
            Base::Views(bases)
        }
    }

    /// `caller`'s edit was refused because of `stale` views: the page is told to reload,
    /// so they will not be edited from again.
    pub(crate) fn forget(&mut self, caller: IpAddr, stale: &[View]) {
        if let Some(known) = self.callers.get_mut(&caller) {
            known.views.retain(|v| !stale.contains(v));
        }
    }

    /// `caller` wrote `view` over the store's revision `from`: its views at `from` are
    /// replaced by what it wrote (the dashboard's copy is now the list it posted).
    pub(crate) fn wrote(&mut self, caller: IpAddr, from: Option<u64>, view: View) {
        self.caller(caller).views.retain(|v| v.revision != from);
        self.shown(caller, view);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn rules(names: &[&str]) -> Canonical {
        let mut v: Canonical = names.iter().map(|s| rule_key(s)).collect();
        v.sort();
        v
    }

    fn view(names: &[&str], revision: u64) -> View {
        View {
            rules: rules(names),
            revision: Some(revision),
        }
    }

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

    #[test]
    fn one_change_is_an_add_a_remove_a_replace_or_none() {
        let base = rules(&["a", "c"]);
        assert!(one_change_away(&base, &rules(&["a", "c"])));
        assert!(one_change_away(&base, &rules(&["a", "b", "c"])));
        assert!(
            one_change_away(&base, &rules(&["a", "c", "c"])),
            "a double click"
        );
        assert!(one_change_away(&base, &rules(&["c"])));
        assert!(one_change_away(&base, &rules(&["a", "d"])));
        assert!(one_change_away(&[], &rules(&["a"])));
        assert!(!one_change_away(&base, &rules(&["b", "d"])));
        assert!(!one_change_away(&base, &rules(&["a", "b", "c", "d"])));
        assert!(!one_change_away(&base, &[]));
        assert!(!one_change_away(&rules(&["a", "b", "c"]), &rules(&["a"])));
    }

    #[test]
    fn bases_are_the_callers_own_views() {
        let mut views = Views::default();
        assert_eq!(views.base_of(A, &rules(&["x"])), Base::NoView);
        views.shown(A, view(&["a"], 1));
        views.shown(B, view(&["a", "b"], 2));
        assert_eq!(
            views.base_of(A, &rules(&["a", "c"])),
            Base::Views(vec![view(&["a"], 1)])
        );
        assert_eq!(views.base_of(A, &rules(&["x", "y", "z"])), Base::NotDerived);
        // The same rules read again are one view, at the newer revision.
        views.shown(A, view(&["a"], 3));
        assert_eq!(
            views.base_of(A, &rules(&["a"])),
            Base::Views(vec![view(&["a"], 3)])
        );
    }

    #[test]
    fn a_write_replaces_the_views_it_was_based_on_and_a_refusal_forgets_stale_ones() {
        let mut views = Views::default();
        views.shown(A, view(&["a"], 1));
        views.shown(A, view(&["a", "b"], 2));
        // A follow-up edit of the rule just added is one change from the old view too:
        // refused once, that view forgotten.
        let edit = rules(&["a", "c"]);
        let Base::Views(bases) = views.base_of(A, &edit) else {
            panic!("two bases");
        };
        assert_eq!(bases.len(), 2);
        views.forget(A, &[view(&["a"], 1)]);
        assert_eq!(
            views.base_of(A, &edit),
            Base::Views(vec![view(&["a", "b"], 2)])
        );
        views.wrote(A, Some(2), view(&["a", "c"], 3));
        assert_eq!(
            views.base_of(A, &rules(&["a", "c", "d"])),
            Base::Views(vec![view(&["a", "c"], 3)])
        );
    }

    #[test]
    fn callers_and_views_are_bounded() {
        let mut views = Views::default();
        for i in 0..(CALLERS as u32 + 10) {
            views.shown(IpAddr::V4(Ipv4Addr::from(i)), view(&["a"], 1));
        }
        assert_eq!(views.callers.len(), CALLERS);
        for i in 0..(VIEWS_PER_CALLER as u64 + 5) {
            views.shown(A, view(&[&i.to_string()], i));
        }
        assert_eq!(views.callers[&A].views.len(), VIEWS_PER_CALLER);
    }
}
