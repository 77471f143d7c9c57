//! Hash maps with a fast, randomly seeded hasher (foldhash) for rule tables and registries.

use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::sync::{Arc, OnceLock};

/// A `HashMap` with foldhash.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// A `HashSet` with foldhash.
pub(crate) type FastSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;

/// A map keyed by [`Hashed`] values: each key's hash was computed once, when it was made.
pub(crate) type HashedMap<T, V> =
    std::collections::HashMap<Hashed<T>, V, BuildHasherDefault<PassThrough>>;

/// A shared value with its hash, computed once with the process's random seed, so that a
/// key built for one [`HashedMap`] finds its equal in another without hashing the value
/// again.
#[derive(Debug, Clone)]
pub(crate) struct Hashed<T> {
    hash: u64,
    value: Arc<T>,
}

impl<T: Hash> Hashed<T> {
    /// `value` with its hash.
    pub(crate) fn new(value: Arc<T>) -> Self {
        static SEED: OnceLock<foldhash::fast::RandomState> = OnceLock::new();
        let hash = SEED.get_or_init(Default::default).hash_one(&*value);
        Self { hash, value }
    }
}

impl<T: PartialEq> PartialEq for Hashed<T> {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.value == other.value
    }
}

impl<T: Eq> Eq for Hashed<T> {}

impl<T> Hash for Hashed<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// The hasher of a [`HashedMap`]: it passes the key's carried hash through.
#[derive(Debug, Default)]
pub(crate) struct PassThrough(u64);

impl Hasher for PassThrough {
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used by `Hashed`; anything else still gets a hash.
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
