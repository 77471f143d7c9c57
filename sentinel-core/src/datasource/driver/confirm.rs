//! A change read right after a reconnect is confirmed before it is applied.
//!
//! A store that restarts can answer before it has loaded its data. rnacos 0.8.8 does: it
//! serves HTTP while it replays its raft log into its config cache, one record at a time,
//! so for a few hundred milliseconds it answers a config it holds with 404, then with each
//! older value the log holds, deletions included, before the current one. Taken at its
//! word, such an answer clears the rules (the default delete policy) or brings back old ones
//! on every instance that reconnects. So a payload that would change the rules in force,
//! read within [`confirm_after_reconnect`](super::DataSourceBuilder::confirm_after_reconnect)
//! of a reconnect, is not applied: the driver reads again once that time since the
//! reconnect is over, and processes what the second read finds. A store that really lost
//! the key, or really holds a new value, still shows it then, and it applies then.

use tokio::time::Instant;

use super::hash::content_hash;
use super::options::DeletePolicy;
use super::task::Driver;
use crate::datasource::source::RawPayload;

/// True when every entry is blank (or there is none): the payload clears the rules under
/// [`DeletePolicy::Clear`].
pub(super) fn is_blank(payload: &RawPayload) -> bool {
    payload
        .entries
        .iter()
        .all(|e| e.value.iter().all(u8::is_ascii_whitespace))
}

impl Driver {
    /// When a confirming read is due for `payload`: `Some` when it would change the rules in
    /// force and was read within the confirmation time of a reconnect, `None` when it can be
    /// processed now.
    pub(super) fn confirmation_due(&self, payload: &RawPayload) -> Option<Instant> {
        if self.confirm_after_reconnect.is_zero() {
            return None;
        }
        let until = self.reconnected_at? + self.confirm_after_reconnect;
        if Instant::now() >= until || !self.changes_rules(payload) {
            return None;
        }
        Some(until)
    }

    /// True when processing `payload` would change the rules in force: it differs from the
    /// last payload processed, and is not a deletion that [`DeletePolicy::Keep`] ignores.
    fn changes_rules(&self, payload: &RawPayload) -> bool {
        self.last_hash != Some(content_hash(payload))
            && !(self.delete_policy == DeletePolicy::Keep && is_blank(payload))
    }

    /// Reports a payload held until `until` for a confirming read.
    pub(super) fn hold(&self, payload: &RawPayload, until: Instant) {
        let wait = until.saturating_duration_since(Instant::now());
        let what = if is_blank(payload) {
            "a deletion"
        } else {
            "a new value"
        };
        tracing::info!(
            source = %self.name,
            ?wait,
            "{what} read right after a reconnect; reading again before applying it"
        );
    }

    /// Reports what the confirming read found against the `held` payload: the change
    /// confirmed, or withdrawn (the store answered before it had loaded its data), which the
    /// status counts.
    pub(super) fn confirmed(&self, held: &RawPayload, confirming: &RawPayload) {
        if content_hash(held) == content_hash(confirming) {
            tracing::info!(source = %self.name, "change confirmed by a second read; applying it");
            return;
        }
        tracing::warn!(
            source = %self.name,
            deletion = is_blank(held),
            "a change read right after a reconnect was not confirmed by a second read (the \
             store answered before it had loaded its data); applying what the second read found"
        );
        self.status.send_modify(|s| s.unconfirmed_changes += 1);
    }
}
