//! The table of a node's stripes other than the inline one (see `spread`), made when a
//! second stripe index writes the node.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::OnceLock;

use super::hot::HotStripe;
use super::stripe::{made, STRIPES};

/// `StatNode::owner` before any stripe wrote the node.
pub(super) const NO_OWNER: u8 = u8::MAX;

/// The stripes of the stripe indexes other than the owner's, each made on its first write.
#[derive(Debug, Default)]
pub(super) struct Others {
    pub(super) stripes: [OnceLock<Box<HotStripe>>; STRIPES],
    /// The stripes made, one bit each: readers skip the others.
    pub(super) active: AtomicU16,
}

impl Others {
    /// The stripes made so far.
    pub(super) fn made(&self) -> impl Iterator<Item = &HotStripe> {
        made(
            &self.stripes,
            u64::from(self.active.load(Ordering::Acquire)),
        )
    }
}
