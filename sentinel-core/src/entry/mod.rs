//! Guarding a call: the entry builder and pre-resolved handles (`builder`), the checks of the
//! hot path (`check`, with `families` for param-flow and the circuit breakers), and the RAII
//! [`Entry`] (`guard`).

mod builder;
mod check;
mod families;
mod fast;
pub(crate) use fast::UNCACHED as UNCACHED_FAST;
mod guard;

pub use builder::{Admission, EntryBuilder, EntryType, Queued, ResourceHandle};
pub use guard::Entry;

#[cfg(test)]
mod tests;
