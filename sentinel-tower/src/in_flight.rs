//! The entry of a call being served, which exits as an error if the call is dropped.

use sentinel_core::Entry;

/// The entry of a call that an adapter is serving (or sending): [`exit`](Self::exit) ends
/// it with the call's outcome. Dropped before that (the response future was dropped because
/// the client went away or a timeout fired, or the inner service panicked), it exits as an
/// error, as sentinel-core's `EntryBuilder::run` does.
///
/// The layer, sentinel-actix, sentinel-reqwest and sentinel-tonic hold their entries in one.
///
/// ```
/// use sentinel_core::Sentinel;
/// use sentinel_tower::InFlight;
///
/// let sentinel = Sentinel::new();
/// let entry = sentinel.entry("report").enter().expect("no rule");
/// let mut call = InFlight::new(entry);
/// // ... the call is served; a 5xx would say `true`.
/// call.exit(false);
/// assert!(call.is_exited());
/// ```
#[derive(Debug)]
pub struct InFlight<'a>(Option<Entry<'a>>);

impl<'a> InFlight<'a> {
    /// Holds `entry` until the call ends.
    #[inline]
    pub fn new(entry: Entry<'a>) -> Self {
        Self(Some(entry))
    }

    /// Exits the entry, as an error if `failed`; a second call does nothing.
    #[inline]
    pub fn exit(&mut self, failed: bool) {
        if let Some(mut entry) = self.0.take() {
            if failed {
                entry.set_error();
            }
        }
    }

    /// Whether the entry has exited.
    #[inline]
    pub fn is_exited(&self) -> bool {
        self.0.is_none()
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.exit(true);
    }
}

#[cfg(test)]
mod tests {
    use sentinel_core::{FakeClock, Sentinel};

    use super::InFlight;

    fn errors(sentinel: &Sentinel) -> f64 {
        sentinel
            .resource_stats("call")
            .map_or(0.0, |stats| stats.error_qps)
    }

    #[test]
    fn a_dropped_call_exits_as_an_error_and_an_exited_one_by_its_outcome() {
        // A fake clock that never moves: every exit lands in the same window.
        let clock = FakeClock::at_ms(1_000_000);
        let sentinel = Sentinel::builder().clock(clock).build();
        let enter = || InFlight::new(sentinel.entry("call").enter().expect("no rule"));

        let mut ok = enter();
        ok.exit(false);
        ok.exit(true); // exited already: no second exit
        drop(ok);
        assert_eq!(errors(&sentinel), 0.0);

        drop(enter());
        assert_eq!(errors(&sentinel), 1.0, "dropped before its exit");

        let mut failed = enter();
        failed.exit(true);
        assert!(failed.is_exited());
        drop(failed);
        assert_eq!(errors(&sentinel), 2.0);
    }
}
