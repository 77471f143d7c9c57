//! Hash maps with a fast, randomly seeded hasher (foldhash) for rule tables and registries.

/// A `HashMap` with foldhash.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// A `HashSet` with foldhash.
pub(crate) type FastSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;
