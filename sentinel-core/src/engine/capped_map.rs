//! A copy-on-write map of names with a cap and a one-time warning, split into shards, and the
//! cheap mix of a name that picks a shard (and a slot of the per-thread name cache).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::hash::FastMap;
/// A copy-on-write map with a cap and a one-time warning, split into shards so that an
/// insert copies one shard, not the whole map.
///
/// A shard is picked from the name's length and last eight bytes (a multiply and a shift,
/// not a second hash): names that differ only early share a shard, which costs inserts only.
#[derive(Debug)]
pub(crate) struct CappedMap<V> {
    shards: Box<[Shard<V>]>,
    /// `shards.len() - 1` (a power of two).
    mask: usize,
    len: AtomicUsize,
    cap: usize,
    warned: AtomicBool,
    what: &'static str,
}

#[derive(Debug)]
struct Shard<V> {
    map: ArcSwap<FastMap<Arc<str>, Arc<V>>>,
    insert: Mutex<()>,
}

impl<V> CappedMap<V> {
    /// One shard: for small maps (a resource's origins and contexts).
    pub(crate) fn new(cap: usize, what: &'static str) -> Self {
        Self::sharded(cap, what, 1)
    }

    /// `shards` shards (rounded up to a power of two).
    pub(crate) fn sharded(cap: usize, what: &'static str, shards: usize) -> Self {
        let shards = shards.max(1).next_power_of_two();
        Self {
            shards: (0..shards)
                .map(|_| Shard {
                    map: ArcSwap::from_pointee(FastMap::default()),
                    insert: Mutex::new(()),
                })
                .collect(),
            mask: shards - 1,
            len: AtomicUsize::new(0),
            cap,
            warned: AtomicBool::new(false),
            what,
        }
    }

    #[inline(always)]
    fn shard(&self, name: &str) -> &Shard<V> {
        if self.mask == 0 {
            return &self.shards[0];
        }
        &self.shards[(mix(name) >> 32) as usize & self.mask]
    }

    #[inline]
    pub(crate) fn get(&self, name: &str) -> Option<Arc<V>> {
        self.shard(name).map.load().get(name).cloned()
    }

    /// Gets or inserts. `None` past the cap.
    pub(crate) fn get_or_insert_with(
        &self,
        name: &str,
        make: impl FnOnce(Arc<str>) -> V,
    ) -> Option<Arc<V>> {
        self.get_or_insert_keyed(name, || Arc::from(name), make)
    }

    /// [`get_or_insert_with`](Self::get_or_insert_with), with the key of a new entry from
    /// `key` (`name` as an `Arc<str>` that already exists elsewhere, shared, not copied).
    pub(crate) fn get_or_insert_keyed(
        &self,
        name: &str,
        key: impl FnOnce() -> Arc<str>,
        make: impl FnOnce(Arc<str>) -> V,
    ) -> Option<Arc<V>> {
        let shard = self.shard(name);
        let current = shard.map.load();
        if let Some(found) = current.get(name) {
            return Some(found.clone());
        }
        if self.len.load(Ordering::Relaxed) >= self.cap {
            // Past the cap, a new name never takes the writer lock.
            self.warn_cap(name);
            return None;
        }
        drop(current);
        // The writer lock only orders inserts; a poisoned lock still protects nothing shared.
        let _guard = shard.insert.lock().unwrap_or_else(|e| e.into_inner());
        let current = shard.map.load_full();
        if let Some(found) = current.get(name) {
            return Some(found.clone());
        }
        // Taken before the insert, so racing shards cannot pass the cap together.
        if self.len.fetch_add(1, Ordering::AcqRel) >= self.cap {
            self.len.fetch_sub(1, Ordering::AcqRel);
            self.warn_cap(name);
            return None;
        }
        let key = key();
        let value = Arc::new(make(key.clone()));
        let mut next = FastMap::clone(&current);
        next.insert(key, value.clone());
        shard.map.store(Arc::new(next));
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
        self.len.load(Ordering::Relaxed)
    }

    /// Removes the entries `drop_it` selects; returns how many.
    pub(crate) fn remove_where(&self, drop_it: impl Fn(&Arc<str>, &Arc<V>) -> bool) -> usize {
        let mut removed = 0;
        for shard in self.shards.iter() {
            if !shard.map.load().iter().any(|(k, v)| drop_it(k, v)) {
                continue;
            }
            let _guard = shard.insert.lock().unwrap_or_else(|e| e.into_inner());
            let current = shard.map.load_full();
            let next: FastMap<Arc<str>, Arc<V>> = current
                .iter()
                .filter(|(k, v)| !drop_it(k, v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let gone = current.len() - next.len();
            if gone > 0 {
                shard.map.store(Arc::new(next));
                self.len.fetch_sub(gone, Ordering::AcqRel);
                removed += gone;
            }
        }
        removed
    }

    /// Every value.
    pub(crate) fn values(&self) -> Vec<Arc<V>> {
        self.shards
            .iter()
            .flat_map(|s| s.map.load().values().cloned().collect::<Vec<_>>())
            .collect()
    }
}

/// A cheap mix of a name: its length and its last eight bytes (fewer: folded one by one),
/// multiplied by the golden ratio. Picks a shard and a slot of the per-thread name cache.
#[inline(always)]
pub(super) fn mix(name: &str) -> u64 {
    let bytes = name.as_bytes();
    let len = bytes.len();
    let tail = match bytes.get(len.wrapping_sub(8)..).map(<[u8; 8]>::try_from) {
        Some(Ok(last)) => u64::from_le_bytes(last),
        _ => bytes.iter().fold(0, |x, &b| x << 8 | u64::from(b)),
    };
    (tail ^ len as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}
