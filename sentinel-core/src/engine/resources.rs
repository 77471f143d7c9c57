//! The resource registry: names to resource nodes (statistics, and where the resource's rules
//! sit in the rule table), with caps.
//!
//! Lookups are lock-free (one `ArcSwap` load and a hash lookup, in a [`CappedMap`]); an entry
//! by name looks first in a per-thread cache of the nodes it entered last. Inserting a new
//! name copies one shard of the map under that shard's writer mutex; names are inserted once,
//! so the copy is cheap next to the contention a concurrent map would add on every lookup.
//!
//! A registry that never frees idle resources (the default) also keeps every node in an
//! append-only list, so an entry by name borrows its node for as long as it borrows the
//! engine: no reference count is taken or given back per call ([`NodeRef::Borrowed`]).

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use super::capped_map::{mix, CappedMap};
use super::limits::Limits;
use super::shared::Shared;
use super::snapshot::{ResourceRules, RuleSnapshot};
use crate::block::BlockTally;
use crate::stat::{OwnsStat, StatNode};
#[cfg(feature = "metrics")]
use crate::telemetry::NodeMetrics;

/// Slots of the per-thread name cache (a power of two).
const NAME_SLOTS: usize = 8;

/// One slot of the per-thread name cache: a node looked up by name, with the registry it
/// came from and that registry's removal count at the time.
struct NamedNode {
    registry: u64,
    removals: u64,
    node: Named,
}

/// Where a cached name's node is.
enum Named {
    /// In the registry's list of kept nodes, at this index (a registry that never frees).
    Kept(usize),
    /// Anywhere: `Weak`, so that a cached node can still be freed as idle.
    Shared(Weak<ResourceNode>),
}

/// A resource node as its user holds it: borrowed (from a [`ResourceHandle`] or from a
/// registry that never frees its nodes, for as long as either is borrowed), or owned (a
/// reference of its own, where the registry may free idle nodes or the holder outlives
/// the borrow).
///
/// [`ResourceHandle`]: crate::ResourceHandle
#[derive(Debug)]
pub(crate) enum NodeRef<'a> {
    Borrowed(&'a Arc<ResourceNode>),
    Owned(Arc<ResourceNode>),
}

impl std::ops::Deref for NodeRef<'_> {
    type Target = ResourceNode;

    #[inline]
    fn deref(&self) -> &ResourceNode {
        match self {
            NodeRef::Borrowed(node) => node,
            NodeRef::Owned(node) => node,
        }
    }
}

impl NodeRef<'_> {
    /// The node, as a reference of its own.
    pub(crate) fn into_shared(self) -> Arc<ResourceNode> {
        match self {
            NodeRef::Borrowed(node) => node.clone(),
            NodeRef::Owned(node) => node,
        }
    }
}

/// [`ResourceNode::kept_at`] of a node not (yet) in the registry's kept list.
const NOT_KEPT: usize = usize::MAX;

thread_local! {
    /// The nodes this thread entered by name last, so that an entry by name skips the
    /// registry's shared map. A slot is used only while its registry has removed nothing
    /// since it was filled.
    static NAMES: RefCell<[Option<NamedNode>; NAME_SLOTS]> =
        const { RefCell::new([const { None }; NAME_SLOTS]) };
}

/// Gives every registry its own number, so that a cached node never answers for another
/// engine's registry.
static REGISTRY_IDS: AtomicU64 = AtomicU64::new(0);

/// Statistics of one resource: its own node, its origins and its contexts.
#[derive(Debug)]
pub(crate) struct ResourceNode {
    pub(crate) name: Arc<str>,
    pub(crate) stat: StatNode,
    /// Its origins' nodes, made with the first origin (most resources never see one).
    origins: OnceLock<Box<Origins>>,
    /// Its contexts' nodes, made with the first context.
    contexts: OnceLock<Box<CappedMap<StatNode>>>,
    pub(crate) shared: Arc<Shared>,
    /// Where this resource's rules sit in the rule table last seen, tagged with its version
    /// (see [`ResourceNode::rules_in`]).
    pub(crate) rule_slot: AtomicU64,
    /// The same for the shadow rule table (see `ShadowSnapshot::slot_of`).
    pub(crate) shadow_slot: AtomicU64,
    /// The resource's statistics as its shadow rules, enforced, would have left them: the
    /// calls that passed every shadow rule (`crate::shadow`). Made on the first call a shadow
    /// rule of the resource checks.
    pub(crate) shadow_stat: OnceLock<Box<StatNode>>,
    /// What the rule table last seen says of an outbound call of this resource, tagged with
    /// its version, for the common call's fast path (`entry::fast`).
    pub(crate) fast: AtomicU64,
    /// Blocks by reason, since the node was made.
    pub(crate) blocks: BlockTally,
    /// A call entered the resource (see [`OwnsStat::entered`]): set where an entry first
    /// finds the node's rules ([`ResourceNode::rules_in`] past a reload, which every first
    /// entry of a node takes), so the hot path pays nothing for it.
    entered: AtomicBool,
    /// Its index in the registry's kept list ([`NOT_KEPT`]: none, or not yet).
    kept_at: AtomicUsize,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: NodeMetrics,
}

/// A resource's origins: one node per origin up to the cap, one overflow node for the rest.
#[derive(Debug)]
struct Origins {
    nodes: CappedMap<StatNode>,
    /// The node of every origin past the cap, made when the cap is first hit.
    overflow: OnceLock<Arc<StatNode>>,
}

/// A node's cached slot: the table version in the high bits, the index in the low ones.
const SLOT_INDEX_BITS: u32 = 24;
const SLOT_INDEX_MASK: u64 = (1 << SLOT_INDEX_BITS) - 1;
/// The index of "no rules"; larger tables are not cached.
const NO_RULES: u64 = SLOT_INDEX_MASK;

impl ResourceNode {
    /// This resource's rules in `snapshot`.
    ///
    /// The node caches where its rules sit in the table it saw last, tagged with that table's
    /// version, so the hot path skips hashing the name until the next reload. A stale or
    /// racing cache entry only costs a lookup: the tag is checked on every read.
    #[inline(always)]
    pub(crate) fn rules_in<'s>(&self, snapshot: &'s RuleSnapshot) -> Option<&'s ResourceRules> {
        let slot = self.rule_slot.load(Ordering::Relaxed);
        if slot & !SLOT_INDEX_MASK == snapshot.version << SLOT_INDEX_BITS {
            let index = slot & SLOT_INDEX_MASK;
            if index == NO_RULES {
                return None;
            }
            return snapshot.slot(index as usize);
        }
        self.look_up(snapshot)
    }

    /// `rules_in` past a reload: looks the name up and caches the slot in the node.
    #[cold]
    #[inline(never)]
    fn look_up<'s>(&self, snapshot: &'s RuleSnapshot) -> Option<&'s ResourceRules> {
        // Only entries read a node's rules: this one enters it.
        if !self.entered.load(Ordering::Relaxed) {
            self.entered.store(true, Ordering::Relaxed);
        }
        let tag = snapshot.version << SLOT_INDEX_BITS;
        let index = snapshot
            .resolve_regex(self)
            .or_else(|| snapshot.index.get(&self.name));
        match index {
            None => self.rule_slot.store(tag | NO_RULES, Ordering::Relaxed),
            // An index too large to cache is looked up every time.
            Some(i) if (i as u64) < NO_RULES => {
                self.rule_slot.store(tag | i as u64, Ordering::Relaxed)
            }
            Some(_) => {}
        }
        index.and_then(|i| snapshot.slot(i))
    }

    /// The statistics of `origin`: its own node, or past the origin cap the overflow node.
    #[inline]
    pub(crate) fn origin_node(&self, origin: &str) -> Option<Arc<StatNode>> {
        let origins = self.origins();
        let node = origins
            .nodes
            .get_or_insert_with(origin, |_| StatNode::new());
        Some(node.unwrap_or_else(|| Self::overflow_origin(origins)))
    }

    /// The origins' table, made on the first origin.
    #[inline]
    fn origins(&self) -> &Origins {
        self.origins.get_or_init(|| {
            Box::new(Origins {
                nodes: CappedMap::new(self.shared.node_caps.origins, "origin"),
                overflow: OnceLock::new(),
            })
        })
    }

    #[cold]
    fn overflow_origin(origins: &Origins) -> Arc<StatNode> {
        origins
            .overflow
            .get_or_init(|| Arc::new(StatNode::new()))
            .clone()
    }

    /// The node of `origin`, if that origin was seen (and is under the cap).
    pub(crate) fn origin(&self, origin: &str) -> Option<Arc<StatNode>> {
        self.origins.get()?.nodes.get(origin)
    }

    #[inline]
    pub(crate) fn context_node(&self, context: &str) -> Option<Arc<StatNode>> {
        self.contexts
            .get_or_init(|| Box::new(CappedMap::new(self.shared.node_caps.contexts, "context")))
            .get_or_insert_with(context, |_| StatNode::new())
    }
}

impl OwnsStat for ResourceNode {
    fn stat(&self) -> &StatNode {
        &self.stat
    }

    fn entered(&self) -> bool {
        self.entered.load(Ordering::Relaxed)
    }
}

/// Shards of the resource registry: an insert copies one of them.
const REGISTRY_SHARDS: usize = 64;

/// All resources of one engine.
#[derive(Debug)]
pub(crate) struct Registry {
    resources: CappedMap<ResourceNode>,
    /// Every node ever made, when idle resources are never freed: an entry by name borrows
    /// its node from here.
    kept: Option<boxcar::Vec<Arc<ResourceNode>>>,
    /// This registry's number (for the per-thread name cache).
    id: u64,
    /// How many times resources were removed (freed as idle): a cached node filled before
    /// the last removal is not used.
    removals: AtomicU64,
    limits: Limits,
    /// When the cap last triggered a sweep for idle resources.
    last_sweep: AtomicU64,
}

impl Registry {
    pub(crate) fn new(limits: Limits) -> Self {
        Self {
            resources: CappedMap::sharded(limits.max_resources, "resource", REGISTRY_SHARDS),
            kept: limits.free_idle_after.is_none().then(boxcar::Vec::new),
            id: REGISTRY_IDS.fetch_add(1, Ordering::Relaxed),
            removals: AtomicU64::new(0),
            limits,
            last_sweep: AtomicU64::new(u64::MAX),
        }
    }

    #[inline]
    pub(crate) fn get(&self, name: &str) -> Option<Arc<ResourceNode>> {
        self.resources.get(name)
    }

    /// The node of `name`, made if new; `None` past the resource cap.
    #[inline]
    pub(crate) fn get_or_create(
        &self,
        name: &str,
        shared: &Arc<Shared>,
    ) -> Option<Arc<ResourceNode>> {
        self.find(name, shared).map(NodeRef::into_shared)
    }

    /// The node of `name`, made if new; `None` past the resource cap. Looks in this thread's
    /// name cache first, and lends the node when the registry keeps every node.
    #[inline]
    pub(crate) fn find<'a>(&'a self, name: &str, shared: &Arc<Shared>) -> Option<NodeRef<'a>> {
        let slot = (mix(name) >> 61) as usize & (NAME_SLOTS - 1);
        // Read before the lookup: a removal after it makes the slot filled below stale.
        let removals = self.removals.load(Ordering::Acquire);
        let cached = NAMES.try_with(|names| {
            let names = names.try_borrow().ok()?;
            let named = names.get(slot)?.as_ref()?;
            if named.registry != self.id || named.removals != removals {
                return None;
            }
            let found = match &named.node {
                Named::Kept(at) => NodeRef::Borrowed(self.kept.as_ref()?.get(*at)?),
                Named::Shared(node) => NodeRef::Owned(node.upgrade()?),
            };
            (*found.name == *name).then_some(found)
        });
        if let Ok(Some(found)) = cached {
            return Some(found);
        }
        let node = self.create(name, shared)?;
        let (named, found) = match &self.kept {
            None => (
                Some(Named::Shared(Arc::downgrade(&node))),
                NodeRef::Owned(node),
            ),
            Some(kept) => match node.kept_at.load(Ordering::Acquire) {
                // Made by another thread that has not listed it yet: shared this once.
                NOT_KEPT => (None, NodeRef::Owned(node)),
                at => match kept.get(at) {
                    Some(lent) => (Some(Named::Kept(at)), NodeRef::Borrowed(lent)),
                    None => (None, NodeRef::Owned(node)),
                },
            },
        };
        // A listener that looks a name up from inside another lookup finds the cache
        // borrowed: it only skips filling it.
        let _ = NAMES.try_with(|names| {
            if let (Ok(mut names), Some(named)) = (names.try_borrow_mut(), named) {
                if let Some(entry) = names.get_mut(slot) {
                    *entry = Some(NamedNode {
                        registry: self.id,
                        removals,
                        node: named,
                    });
                }
            }
        });
        Some(found)
    }

    /// `find` past the name cache: the shared map. The thread that makes a node lists it
    /// among the kept ones.
    #[cold]
    fn create(&self, name: &str, shared: &Arc<Shared>) -> Option<Arc<ResourceNode>> {
        // A resource with rules shares the name the rule table holds.
        let key = || {
            shared
                .rules
                .load()
                .index
                .key(name)
                .map_or_else(|| Arc::from(name), Arc::clone)
        };
        let mut made = false;
        let node = self.resources.get_or_insert_keyed(name, key, |name| {
            made = true;
            ResourceNode {
                #[cfg(feature = "metrics")]
                metrics: NodeMetrics::new(&name),
                name,
                stat: StatNode::new(),
                origins: OnceLock::new(),
                contexts: OnceLock::new(),
                shared: shared.clone(),
                rule_slot: AtomicU64::new(u64::MAX),
                shadow_slot: AtomicU64::new(0),
                shadow_stat: OnceLock::new(),
                fast: AtomicU64::new(crate::entry::UNCACHED_FAST),
                blocks: BlockTally::default(),
                entered: AtomicBool::new(false),
                kept_at: AtomicUsize::new(NOT_KEPT),
            }
        })?;
        if let (true, Some(kept)) = (made, &self.kept) {
            node.kept_at
                .store(kept.push(node.clone()), Ordering::Release);
        }
        Some(node)
    }

    pub(crate) fn len(&self) -> usize {
        self.resources.len()
    }

    /// Whether a sweep for idle resources may run at `now`: at most one a second.
    pub(crate) fn sweep_due(&self, now: u64) -> bool {
        let last = self.last_sweep.load(Ordering::Relaxed);
        (last == u64::MAX || now.saturating_sub(last) >= 1000)
            && self
                .last_sweep
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// The idle time after which resources may be freed, if set.
    pub(crate) fn free_idle_after(&self) -> Option<Duration> {
        self.limits.free_idle_after
    }

    /// Frees the resources that have no rules (`has_rules` says), that nothing else holds
    /// (no handle, no entry in flight, no rule of another resource), and whose statistics
    /// were last written `idle_ms` or more before `now`. Returns how many.
    pub(crate) fn free_idle(
        &self,
        now: u64,
        idle_ms: u64,
        has_rules: impl Fn(&str) -> bool,
    ) -> usize {
        let removed = self.resources.remove_where(|name, node| {
            Arc::strong_count(node) == 1
                && !has_rules(name)
                && node
                    .stat
                    .last_written(now)
                    .is_none_or(|last| now.saturating_sub(last) >= idle_ms)
        });
        if removed > 0 {
            self.removals.fetch_add(1, Ordering::AcqRel);
        }
        removed
    }

    pub(crate) fn all(&self) -> Vec<Arc<ResourceNode>> {
        let mut all = self.resources.values();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }
}
