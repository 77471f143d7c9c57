//! Events: rule tables applied or rejected, circuit-breaker transitions. They go to listeners
//! registered on the engine (which survive rule reloads) and out as `tracing` events.

use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::circuit_breaker::{BreakerState, DegradeRule, Transition, Transitions};
use crate::rules::{RuleError, RuleFamily};

/// Something the engine reports.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum SentinelEvent {
    /// A rule source's rules were applied.
    RulesApplied {
        /// The source (`api` for direct `load_rules` calls, or a data source's name).
        source: String,
        /// The families the update replaced, with the number of active rules of each
        /// (over all sources) afterwards.
        families: Vec<(RuleFamily, usize)>,
        /// The rule-table version after the update.
        version: u64,
        /// What loaded but deserves a look: unknown keys, and in lenient mode absent fields
        /// read as Sentinel's defaults ([`LoadReport::warnings`](crate::rules::LoadReport::warnings)).
        warnings: Vec<crate::rules::RuleIssue>,
    },
    /// A rule payload was rejected; the previous rules stay active.
    RulesRejected {
        /// The source.
        source: String,
        /// Why.
        error: RuleError,
    },
    /// A circuit breaker changed state.
    BreakerStateChanged {
        /// The resource.
        resource: String,
        /// The breaker's rule.
        rule: DegradeRule,
        /// The previous state.
        from: BreakerState,
        /// The new state.
        to: BreakerState,
        /// The slow ratio, error ratio or error count that tripped the breaker, when a
        /// threshold did (CLOSED -> OPEN); 1.0 when a failed probe reopened it.
        value: Option<f64>,
    },
    /// The cluster backend cannot decide: `clusterMode` flow rules fall back to local checks
    /// (with `fallbackToLocalWhenFail`) or pass, until [`ClusterResumed`](Self::ClusterResumed).
    ClusterDegraded {
        /// The backend (its `Debug` name, such as the Redis replica's id).
        backend: String,
        /// Why, without secrets.
        reason: String,
    },
    /// The cluster backend decides again.
    ClusterResumed {
        /// The backend.
        backend: String,
    },
    /// A shadow rule would have blocked a call (see [`crate::shadow`]); the call passed.
    /// At most one per rule per second: sent on the rule's first would-block of a second.
    ShadowBlocked {
        /// The resource called.
        resource: String,
        /// The shadow rule's family.
        family: RuleFamily,
        /// The shadow rule, as a JSON object in the combined document's spelling.
        rule: String,
        /// When (engine clock, ms).
        at_ms: u64,
        /// Would-blocks of this rule in the second before this one.
        previous_second: u64,
        /// Would-blocks of this rule so far, before this call.
        total: u64,
    },
    /// A shadow circuit breaker would have changed state (its own state machine, fed the
    /// same completions as the enforced breakers; it never blocks a call).
    ShadowBreakerStateChanged {
        /// The resource.
        resource: String,
        /// The shadow breaker's rule.
        rule: DegradeRule,
        /// The previous state.
        from: BreakerState,
        /// The new state.
        to: BreakerState,
        /// What tripped it, as in [`BreakerStateChanged`](Self::BreakerStateChanged).
        value: Option<f64>,
    },
    /// A command port (such as `sentinel-transport`, the dashboard's protocol) refused a
    /// command: read-only, not allowed, an invalid rule, a conflict. Sent through
    /// [`Sentinel::report_command_refused`](crate::Sentinel::report_command_refused).
    CommandRefused {
        /// What refused it (`transport`, `console`...).
        component: String,
        /// The command (`setRules`...).
        command: String,
        /// Why, in a word (`read_only`, `forbidden`, `invalid`, `conflict`...).
        reason: String,
        /// What the caller was told. Never carries a rule payload.
        message: String,
    },
}

/// Receives [`SentinelEvent`]s. Any `Fn(&SentinelEvent) + Send + Sync` is a listener.
///
/// Listeners run on the thread that caused the event (a loader, or a caller whose request
/// moved a breaker), so they should be quick.
pub trait EventListener: Send + Sync + 'static {
    /// Called once per event.
    fn on_event(&self, event: &SentinelEvent);
}

impl<F> EventListener for F
where
    F: Fn(&SentinelEvent) + Send + Sync + 'static,
{
    fn on_event(&self, event: &SentinelEvent) {
        self(event)
    }
}

/// The listeners of one engine.
#[derive(Default)]
pub(crate) struct EventBus {
    listeners: ArcSwap<Vec<Arc<dyn EventListener>>>,
}

impl fmt::Debug for EventBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventBus")
            .field("listeners", &self.listeners.load().len())
            .finish()
    }
}

impl EventBus {
    pub(crate) fn add(&self, listener: Arc<dyn EventListener>) {
        self.listeners.rcu(|current| {
            let mut next = Vec::clone(current);
            next.push(listener.clone());
            next
        });
    }

    pub(crate) fn emit(&self, event: SentinelEvent) {
        match &event {
            SentinelEvent::RulesApplied {
                source,
                families,
                version,
                warnings,
            } => {
                tracing::info!(source = %source, families = ?families, version, "sentinel rules applied");
                for warning in warnings {
                    tracing::warn!(source = %source, warning = %warning, "sentinel rule payload: unknown or absent key");
                }
            }
            SentinelEvent::RulesRejected { source, error } => {
                tracing::warn!(source = %source, error = %error, "sentinel rules rejected; previous rules kept")
            }
            SentinelEvent::BreakerStateChanged {
                resource,
                from,
                to,
                value,
                ..
            } => {
                tracing::info!(resource = %resource, from = %from, to = %to, value = ?value, "circuit breaker state changed")
            }
            SentinelEvent::ClusterDegraded { backend, reason } => {
                tracing::warn!(backend = %backend, reason = %reason, "cluster flow checks degraded to local checks")
            }
            SentinelEvent::ClusterResumed { backend } => {
                tracing::info!(backend = %backend, "cluster flow checks resumed")
            }
            SentinelEvent::ShadowBlocked {
                resource,
                family,
                previous_second,
                ..
            } => {
                tracing::info!(resource = %resource, family = %family, previous_second, "shadow rule would block")
            }
            SentinelEvent::ShadowBreakerStateChanged {
                resource, from, to, ..
            } => {
                tracing::info!(resource = %resource, from = %from, to = %to, "shadow circuit breaker would change state")
            }
            SentinelEvent::CommandRefused {
                component,
                command,
                reason,
                message,
            } => {
                tracing::warn!(component = %component, command = %command, reason = %reason, message = %message, "command refused")
            }
        }
        for listener in self.listeners.load().iter() {
            listener.on_event(&event);
        }
    }
}

impl Transitions for EventBus {
    fn changed(&self, change: Transition<'_>) {
        self.emit(change.event(false));
    }
}

impl Transition<'_> {
    /// The event that reports this change: [`SentinelEvent::ShadowBreakerStateChanged`] for a
    /// shadow breaker, else [`SentinelEvent::BreakerStateChanged`].
    pub(crate) fn event(self, shadow: bool) -> SentinelEvent {
        let resource = self.rule.resource.clone();
        let rule = self.rule.clone();
        if shadow {
            SentinelEvent::ShadowBreakerStateChanged {
                resource,
                rule,
                from: self.from,
                to: self.to,
                value: self.value,
            }
        } else {
            SentinelEvent::BreakerStateChanged {
                resource,
                rule,
                from: self.from,
                to: self.to,
                value: self.value,
            }
        }
    }
}
