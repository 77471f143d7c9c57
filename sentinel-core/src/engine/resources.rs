//! The resource registry: names to resource nodes (statistics, and where the resource's rules
//! sit in the rule table), with caps.
//!
//! Lookups are lock-free (one `ArcSwap` load and a hash lookup). Inserting a new name copies
//! the map under a writer mutex; names are few and inserted once, so the copy is cheap next to
//! the contention a concurrent map would add on every lookup.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use arc_swap::ArcSwap;

use super::shared::Shared;
use super::snapshot::{ResourceRules, RuleSnapshot};
use crate::hash::FastMap;
use crate::stat::{OwnsStat, StatNode};

/// Caps on the number of distinct names the statistics keep, so that hostile or unbounded
/// names cannot exhaust memory.
///
/// Past a cap, calls still run: past `max_resources` an entry passes with no checks and no
/// statistics (as Sentinel does past its 6 000 slot chains); past `max_contexts_per_resource`
/// the call is checked and counted on the resource, but not on the extra context. Origins past
/// `max_origins_per_resource` share one overflow node per resource, so origin-scoped rules
/// still apply to them, as a group: a `limitApp: other` rule limits all of them together (a
/// caller cannot escape it by sending fresh origin names). Each cap logs one warning the first
/// time it is hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Distinct resources. Default 6 000, as Sentinel's `MAX_SLOT_CHAIN_SIZE`.
    pub max_resources: usize,
    /// Distinct origins per resource. Default 1 000.
    pub max_origins_per_resource: usize,
    /// Distinct context names per resource. Default 2 000, as Sentinel's
    /// `MAX_CONTEXT_NAME_SIZE`.
    pub max_contexts_per_resource: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_resources: 6_000,
            max_origins_per_resource: 1_000,
            max_contexts_per_resource: 2_000,
        }
    }
}

impl Limits {
    /// Sets `max_resources`.
    pub fn max_resources(mut self, n: usize) -> Self {
        self.max_resources = n;
        self
    }

    /// Sets `max_origins_per_resource`.
    pub fn max_origins_per_resource(mut self, n: usize) -> Self {
        self.max_origins_per_resource = n;
        self
    }

    /// Sets `max_contexts_per_resource`.
    pub fn max_contexts_per_resource(mut self, n: usize) -> Self {
        self.max_contexts_per_resource = n;
        self
    }
}

/// A copy-on-write map with a cap and a one-time warning.
#[derive(Debug)]
pub(crate) struct CappedMap<V> {
    map: ArcSwap<FastMap<Arc<str>, Arc<V>>>,
    insert: Mutex<()>,
    cap: usize,
    warned: AtomicBool,
    what: &'static str,
}

impl<V> CappedMap<V> {
    pub(crate) fn new(cap: usize, what: &'static str) -> Self {
        Self {
            map: ArcSwap::from_pointee(FastMap::default()),
            insert: Mutex::new(()),
            cap,
            warned: AtomicBool::new(false),
            what,
        }
    }

    #[inline]
    pub(crate) fn get(&self, name: &str) -> Option<Arc<V>> {
        self.map.load().get(name).cloned()
    }

    /// Gets or inserts. `None` past the cap.
    pub(crate) fn get_or_insert_with(
        &self,
        name: &str,
        make: impl FnOnce(Arc<str>) -> V,
    ) -> Option<Arc<V>> {
        let current = self.map.load();
        if let Some(found) = current.get(name) {
            return Some(found.clone());
        }
        if current.len() >= self.cap {
            // Past the cap, a new name never takes the writer lock.
            self.warn_cap(name);
            return None;
        }
        drop(current);
        // The writer lock only orders inserts; a poisoned lock still protects nothing shared.
        let _guard = self.insert.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.map.load_full();
        if let Some(found) = current.get(name) {
            return Some(found.clone());
        }
        if current.len() >= self.cap {
            self.warn_cap(name);
            return None;
        }
        let key: Arc<str> = Arc::from(name);
        let value = Arc::new(make(key.clone()));
        let mut next = FastMap::clone(&current);
        next.insert(key, value.clone());
        self.map.store(Arc::new(next));
        Some(value)
    }

    fn warn_cap(&self, name: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                cap = self.cap,
                kind = self.what,
                name,
                "statistics cap reached; further names pass without statistics"
            );
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.map.load().len()
    }

    pub(crate) fn snapshot(&self) -> Arc<FastMap<Arc<str>, Arc<V>>> {
        self.map.load_full()
    }
}

/// Statistics of one resource: its own node, its origins and its contexts.
#[derive(Debug)]
pub(crate) struct ResourceNode {
    pub(crate) name: Arc<str>,
    pub(crate) stat: StatNode,
    pub(crate) origins: CappedMap<StatNode>,
    /// The node of every origin past the cap, made when the cap is first hit.
    overflow_origin: OnceLock<Arc<StatNode>>,
    pub(crate) contexts: CappedMap<StatNode>,
    pub(crate) shared: Arc<Shared>,
    /// Where this resource's rules sit in the rule table last seen, tagged with its version
    /// (see [`ResourceNode::rules_in`]).
    pub(crate) rule_slot: AtomicU64,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: NodeMetrics,
}

/// Per-resource counters in the `metrics` facade, registered once per resource so the hot
/// path only increments. Install the recorder before the first entry of a resource.
#[cfg(feature = "metrics")]
#[derive(Debug)]
pub(crate) struct NodeMetrics {
    pub(crate) pass: metrics::Counter,
    pub(crate) block: metrics::Counter,
    pub(crate) error: metrics::Counter,
}

#[cfg(feature = "metrics")]
impl NodeMetrics {
    fn new(resource: &str) -> Self {
        let label = resource.to_owned();
        Self {
            pass: metrics::counter!("sentinel_pass_total", "resource" => label.clone()),
            block: metrics::counter!("sentinel_block_total", "resource" => label.clone()),
            error: metrics::counter!("sentinel_error_total", "resource" => label),
        }
    }
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
            return snapshot.resources.get(index as usize);
        }
        self.look_up(snapshot)
    }

    /// `rules_in` past a reload: looks the name up and caches the slot in the node.
    #[cold]
    #[inline(never)]
    fn look_up<'s>(&self, snapshot: &'s RuleSnapshot) -> Option<&'s ResourceRules> {
        let tag = snapshot.version << SLOT_INDEX_BITS;
        let index = snapshot.index.get(&*self.name).copied();
        match index {
            None => self.rule_slot.store(tag | NO_RULES, Ordering::Relaxed),
            // An index too large to cache is looked up every time.
            Some(i) if u64::from(i) < NO_RULES => {
                self.rule_slot.store(tag | u64::from(i), Ordering::Relaxed)
            }
            Some(_) => {}
        }
        index.and_then(|i| snapshot.resources.get(i as usize))
    }

    /// The statistics of `origin`: its own node, or past the origin cap the overflow node.
    #[inline]
    pub(crate) fn origin_node(&self, origin: &str) -> Option<Arc<StatNode>> {
        let node = self.origins.get_or_insert_with(origin, |_| StatNode::new());
        Some(node.unwrap_or_else(|| self.overflow_origin()))
    }

    #[cold]
    fn overflow_origin(&self) -> Arc<StatNode> {
        self.overflow_origin
            .get_or_init(|| Arc::new(StatNode::new()))
            .clone()
    }

    #[inline]
    pub(crate) fn context_node(&self, context: &str) -> Option<Arc<StatNode>> {
        self.contexts
            .get_or_insert_with(context, |_| StatNode::new())
    }
}

impl OwnsStat for ResourceNode {
    fn stat(&self) -> &StatNode {
        &self.stat
    }
}

/// All resources of one engine.
#[derive(Debug)]
pub(crate) struct Registry {
    resources: CappedMap<ResourceNode>,
    limits: Limits,
}

impl Registry {
    pub(crate) fn new(limits: Limits) -> Self {
        Self {
            resources: CappedMap::new(limits.max_resources, "resource"),
            limits,
        }
    }

    #[inline]
    pub(crate) fn get(&self, name: &str) -> Option<Arc<ResourceNode>> {
        self.resources.get(name)
    }

    pub(crate) fn get_or_create(
        &self,
        name: &str,
        shared: &Arc<Shared>,
    ) -> Option<Arc<ResourceNode>> {
        let limits = self.limits;
        self.resources
            .get_or_insert_with(name, |name| ResourceNode {
                #[cfg(feature = "metrics")]
                metrics: NodeMetrics::new(&name),
                name,
                stat: StatNode::new(),
                origins: CappedMap::new(limits.max_origins_per_resource, "origin"),
                overflow_origin: OnceLock::new(),
                contexts: CappedMap::new(limits.max_contexts_per_resource, "context"),
                shared: shared.clone(),
                rule_slot: AtomicU64::new(u64::MAX),
            })
    }

    pub(crate) fn len(&self) -> usize {
        self.resources.len()
    }

    pub(crate) fn all(&self) -> Vec<Arc<ResourceNode>> {
        let mut all: Vec<_> = self.resources.snapshot().values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }
}
