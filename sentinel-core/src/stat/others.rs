//! The table of a node's stripes other than the inline one (see `spread`), made when a
//! second stripe index writes the node.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::OnceLock;

use super::folded::Fold;
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
    /// The passes the fast path folds in, made on its first fold.
    fold: OnceLock<Box<Fold>>,
}

impl Others {
    /// The stripes made so far.
    pub(super) fn made(&self) -> impl Iterator<Item = &HotStripe> {
        made(
            &self.stripes,
            u64::from(self.active.load(Ordering::Acquire)),
        )
    }

    /// The made stripes and the folded passes: everything readers sum.
    pub(super) fn counted(&self) -> impl Iterator<Item = &HotStripe> {
        self.made()
            .chain(self.fold.get().into_iter().flat_map(|f| f.stripes()))
    }

    /// The heap bytes of the fold, if made.
    #[cfg(test)]
    pub(super) fn fold_bytes(&self) -> usize {
        self.fold.get().map_or(0, |_| std::mem::size_of::<Fold>())
    }

    /// The folded passes, if made.
    #[inline]
    pub(super) fn made_fold(&self) -> Option<&Fold> {
        self.fold.get().map(|f| &**f)
    }

    /// The folded passes, made on first use.
    #[inline(always)]
    pub(super) fn fold(&self) -> &Fold {
        self.fold.get_or_init(Box::default)
    }
}
