//! `getRules` / `setRules` and `getParamFlowRules` / `setParamFlowRules`: the engine's active
//! rules as Sentinel JSON, and the dashboard's edits written to the family's rule store.
//!
//! An edit is read with the family's Sentinel JSON converter (which ignores the dashboard's
//! own keys, `id`, `app`, `ip`, `port`, `gmtCreate`...) and validated whole. It must derive
//! from rules in force: from a view its caller was shown at the store's current revision
//! (see the `views` module); one derived from an older view, or from none this instance
//! showed, is refused and changes nothing. A list that holds the rules in force (a no-op,
//! or a rule added twice, which the engine collapses) answers `success` at once and writes
//! nothing. Otherwise it is written with [`WritableDataSource::write_if`], compare-and-set
//! on that revision, and the answer waits until this engine applied it from the store, like
//! every other instance reading the key. Everything happens within the answer time
//! (`apply_wait`, 2.5 s by default; the dashboard gives up at 5 s): a store that does not
//! answer in time, or an apply that does not come, answers a failure saying what is known
//! (nothing written, maybe written, or written at revision N and not applied yet).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use sentinel_core::datasource::{
    AuthorityJson, Converter, DegradeJson, FlowJson, ParamFlowJson, SystemJson, WritableDataSource,
    WriteError,
};
use sentinel_core::{RuleError, RuleFamily, RuleSet, Sentinel};
use tokio::sync::Mutex;

use crate::config::{Access, FamilyKey, TransportConfig};
use crate::error::{EditError, Revision, Written};
use crate::views::{as_set, rule_key, Base, Canonical, View, Views};

/// A family's rule store, and what each caller was shown of the family.
pub(crate) struct RuleStore {
    writer: Arc<dyn WritableDataSource>,
    views: std::sync::Mutex<Views>,
    /// Held through an edit: one edit of a family at a time.
    editing: Mutex<()>,
}

/// Where edits go, per family.
pub(crate) struct Edits {
    access: Access,
    memory_only: bool,
    answer_within: Duration,
    stores: BTreeMap<FamilyKey, RuleStore>,
}

impl std::fmt::Debug for Edits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Edits")
            .field("access", &self.access)
            .field("memory_only", &self.memory_only)
            .field("stores", &self.stores.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The family a `type` parameter names (`flow`, `degrade`, `system`, `authority`; any
/// case, as Java compares them).
pub(crate) fn family_of_type(ty: Option<&str>) -> Option<RuleFamily> {
    let ty = ty?;
    [
        RuleFamily::Flow,
        RuleFamily::Degrade,
        RuleFamily::System,
        RuleFamily::Authority,
    ]
    .into_iter()
    .find(|f| f.as_str().eq_ignore_ascii_case(ty))
}

/// The engine's active rules of `family`, as a set of that family alone.
fn active_set(sentinel: &Sentinel, family: RuleFamily) -> RuleSet {
    let active = sentinel.active_rules();
    match family {
        RuleFamily::Flow => RuleSet::new().with_flow(active.flow),
        RuleFamily::Degrade => RuleSet::new().with_degrade(active.degrade),
        RuleFamily::System => RuleSet::new().with_system(active.system),
        RuleFamily::Authority => RuleSet::new().with_authority(active.authority),
        _ => RuleSet::new().with_param_flow(active.param_flow),
    }
}

/// The engine's active rules of `family`, as the family's Sentinel JSON list.
pub(crate) fn active_json(sentinel: &Sentinel, family: RuleFamily) -> String {
    let set = active_set(sentinel, family);
    let Ok(bytes) = set.to_json() else {
        return "[]".to_owned();
    };
    let Ok(mut rules) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return String::from_utf8_lossy(&bytes).into_owned();
    };
    // As fastjson writes Java's rules: no null values, and always `regex` (AbstractRule's
    // flag, false by default; the engine's JSON leaves it out when false).
    drop_nulls(&mut rules);
    if let Some(list) = rules.as_array_mut() {
        for rule in list.iter_mut().filter_map(serde_json::Value::as_object_mut) {
            rule.entry("regex")
                .or_insert(serde_json::Value::Bool(false));
        }
    }
    rules.to_string()
}

/// The rules of a one-family set as the engine compares them: the key of each rule's JSON
/// as the engine writes it (ignoring `id` and unknown keys, defaults spelled out), sorted.
fn canonical(set: &RuleSet) -> Result<Canonical, serde_json::Error> {
    let bytes = set.to_json()?;
    let list: Vec<serde_json::Value> = serde_json::from_slice(&bytes)?;
    let mut rules: Canonical = list.iter().map(|r| rule_key(&r.to_string())).collect();
    rules.sort();
    Ok(rules)
}

/// Removes every null-valued key, at any depth.
fn drop_nulls(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

fn decode(family: RuleFamily, data: &[u8]) -> Result<RuleSet, RuleError> {
    let set = match family {
        RuleFamily::Flow => FlowJson::new().convert(data),
        RuleFamily::Degrade => DegradeJson::new().convert(data),
        RuleFamily::System => SystemJson::new().convert(data),
        RuleFamily::Authority => AuthorityJson::new().convert(data),
        _ => ParamFlowJson::new().convert(data),
    };
    set.map_err(|e| e.with_payload("data"))
}

fn load_memory(sentinel: &Sentinel, set: RuleSet) -> Result<(), RuleError> {
    if let Some(rules) = set.flow {
        sentinel.flow_rules().load_rules(rules)?;
    } else if let Some(rules) = set.degrade {
        sentinel.degrade_rules().load_rules(rules)?;
    } else if let Some(rules) = set.system {
        sentinel.system_rules().load_rules(rules)?;
    } else if let Some(rules) = set.authority {
        sentinel.authority_rules().load_rules(rules)?;
    } else if let Some(rules) = set.param_flow {
        sentinel.param_flow_rules().load_rules(rules)?;
    }
    Ok(())
}

/// How an accepted edit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Edited {
    /// Applied to this engine's memory only.
    InMemory,
    /// The list sent holds the rules in force (a no-op, or a rule added twice, which the
    /// engine collapses): nothing written.
    Unchanged,
    /// Written to the store and applied by this engine from it.
    Applied,
}

impl Edits {
    pub(crate) fn new(config: &TransportConfig) -> Self {
        Self {
            access: config.access,
            memory_only: config.memory_only_edits,
            answer_within: config.apply_wait,
            stores: config
                .stores
                .iter()
                .map(|(family, writer)| {
                    (
                        *family,
                        RuleStore {
                            writer: writer.clone(),
                            views: std::sync::Mutex::new(Views::default()),
                            editing: Mutex::new(()),
                        },
                    )
                })
                .collect(),
        }
    }

    /// Whether edits are accepted at all.
    pub(crate) fn writable(&self) -> bool {
        self.access == Access::ReadWrite
    }

    /// Notes what `caller` is shown when it reads `family`'s rules (the dashboard's edits
    /// are derived from it), with the store's revision, read first: rules newer than the
    /// revision make the caller's next edit refused, never accepted wrongly.
    pub(crate) async fn note_read(&self, sentinel: &Sentinel, family: RuleFamily, caller: IpAddr) {
        let Some(store) = self.stores.get(&FamilyKey::of(family)) else {
            return;
        };
        let revision = tokio::time::timeout(self.answer_within, store.writer.revision()).await;
        let revision = match revision {
            Ok(Ok(revision)) => revision,
            Ok(Err(error)) => {
                tracing::warn!(%family, store = %store.writer.describe(), %error, "cannot read the rule store's revision: an edit from this view will be refused");
                return;
            }
            Err(_) => {
                tracing::warn!(%family, store = %store.writer.describe(), "the rule store's revision did not come in time: an edit from this view will be refused");
                return;
            }
        };
        match canonical(&active_set(sentinel, family)) {
            Ok(rules) => store
                .views
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .shown(caller, View { rules, revision }),
            Err(error) => {
                tracing::warn!(%family, %error, "cannot encode the active rules");
            }
        }
    }

    /// `setRules` / `setParamFlowRules` from `caller`: validates `data`, checks it derives
    /// from the rules in force, writes it compare-and-set and waits for the engine to
    /// apply it, all within the answer time.
    pub(crate) async fn set_rules(
        &self,
        sentinel: &Sentinel,
        command: &'static str,
        family: RuleFamily,
        data: Option<&str>,
        caller: IpAddr,
    ) -> Result<Edited, EditError> {
        if !self.writable() {
            return Err(EditError::ReadOnly {
                command: command.to_owned(),
            });
        }
        let data = data.ok_or(EditError::NoData)?;
        let store = self.stores.get(&FamilyKey::of(family));
        if store.is_none() && !self.memory_only {
            return Err(EditError::NoStore { family });
        }
        let set = decode(family, data.as_bytes())
            .map_err(|source| EditError::Rules { family, source })?;
        let Some(store) = store else {
            load_memory(sentinel, set).map_err(|source| EditError::Rules { family, source })?;
            tracing::info!(%family, "rules edited from the dashboard, in memory only");
            return Ok(Edited::InMemory);
        };
        let started = tokio::time::Instant::now();
        let deadline = started + self.answer_within;
        let target = store.writer.describe();
        let timed_out = |written: Written| EditError::TimedOut {
            family,
            target: target.clone(),
            waited: started.elapsed(),
            written,
        };
        let posted = canonical(&set).map_err(|source| EditError::Store {
            family,
            source: WriteError::Encode {
                key: target.clone(),
                source,
            },
        })?;
        // One edit of a family at a time: the lock spans the check, the compare-and-set
        // and the wait.
        let _editing = tokio::time::timeout_at(deadline, store.editing.lock())
            .await
            .map_err(|_| timed_out(Written::Busy))?;
        let current = tokio::time::timeout_at(deadline, store.writer.revision())
            .await
            .map_err(|_| timed_out(Written::No))?
            .map_err(|e| EditError::Store {
                family,
                source: WriteError::Store(e),
            })?;
        let active =
            canonical(&active_set(sentinel, family)).map_err(|source| EditError::Store {
                family,
                source: WriteError::Encode {
                    key: target.clone(),
                    source,
                },
            })?;
        {
            let mut views = store.views.lock().unwrap_or_else(PoisonError::into_inner);
            let bases = match views.base_of(caller, &posted) {
                Base::NoView => {
                    return Err(EditError::StaleView {
                        family,
                        target,
                        shown: None,
                        current,
                    })
                }
                Base::NotDerived => return Err(EditError::NotDerived { family, caller }),
                Base::Views(bases) => bases,
            };
            // A base read at another revision, or whose rules are not the ones in force
            // (read while this engine had not applied the store's value yet): the page
            // may hold rules that changed since it loaded.
            let stale: Vec<View> = bases
                .iter()
                .filter(|v| v.revision != current || as_set(&v.rules) != as_set(&active))
                .cloned()
                .collect();
            if let Some(first) = stale.first() {
                let shown = first.revision;
                views.forget(caller, &stale);
                return Err(EditError::StaleView {
                    family,
                    target,
                    shown: Some(shown),
                    current,
                });
            }
        }
        if as_set(&posted) == as_set(&active) {
            tracing::info!(%family, "an edit from the dashboard holds the rules in force: nothing to write");
            return Ok(Edited::Unchanged);
        }
        let revision = match tokio::time::timeout_at(deadline, store.writer.write_if(&set, current))
            .await
            .map_err(|_| timed_out(Written::Unknown))?
        {
            Ok(revision) => revision,
            Err(WriteError::Conflict { .. }) => {
                return Err(EditError::Conflict {
                    family,
                    target,
                    expected: current,
                })
            }
            Err(source) => return Err(EditError::Store { family, source }),
        };
        store
            .views
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .wrote(
                caller,
                current,
                View {
                    rules: posted.clone(),
                    revision,
                },
            );
        tracing::info!(%family, store = %target, revision = %Revision(revision), "rules edited from the dashboard written to the store");
        let wanted = as_set(&posted);
        let applied = || {
            canonical(&active_set(sentinel, family)).is_ok_and(|active| as_set(&active) == wanted)
        };
        while !applied() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if applied() {
            Ok(Edited::Applied)
        } else {
            Err(EditError::NotApplied {
                family,
                target,
                revision,
                waited: started.elapsed(),
            })
        }
    }
}
