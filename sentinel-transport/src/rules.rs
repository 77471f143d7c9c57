//! `getRules` / `setRules` and `getParamFlowRules` / `setParamFlowRules`: the engine's active
//! rules as Sentinel JSON, and the dashboard's edits written to the family's rule store.
//!
//! An edit is read with the family's Sentinel JSON converter (which ignores the dashboard's
//! own keys, `id`, `app`, `ip`, `port`, `gmtCreate`...), validated whole, and written with
//! [`WritableDataSource::write_if`]: compare-and-set on the store revision this instance
//! last saw for the family (when it last answered `getRules` for it, which the dashboard
//! asks before it shows the rules it then edits, or last wrote it). The answer is `success`
//! only once the store accepted the write; the engine applies it from the store like every
//! other instance reading the key. An invalid rule or a conflict answers an error naming the
//! rule index and field, or the store, and changes nothing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use sentinel_core::datasource::{
    AuthorityJson, Converter, DegradeJson, FlowJson, ParamFlowJson, SystemJson, WritableDataSource,
    WriteError,
};
use sentinel_core::{RuleError, RuleFamily, RuleSet, Sentinel};
use tokio::sync::Mutex;

use crate::config::{Access, FamilyKey, TransportConfig};
use crate::error::EditError;

/// A family's rule store, and the revision it held when this instance last read or wrote it.
pub(crate) struct RuleStore {
    writer: Arc<dyn WritableDataSource>,
    /// `None`: not read yet; `Some(r)`: the revision seen (`Some(None)`: nothing stored).
    seen: Mutex<Option<Option<u64>>>,
}

/// Where edits go, per family.
pub(crate) struct Edits {
    access: Access,
    memory_only: bool,
    apply_wait: Duration,
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

/// The engine's active rules of `family`, as the family's Sentinel JSON list.
pub(crate) fn active_json(sentinel: &Sentinel, family: RuleFamily) -> String {
    let active = sentinel.active_rules();
    let set = match family {
        RuleFamily::Flow => RuleSet::new().with_flow(active.flow),
        RuleFamily::Degrade => RuleSet::new().with_degrade(active.degrade),
        RuleFamily::System => RuleSet::new().with_system(active.system),
        RuleFamily::Authority => RuleSet::new().with_authority(active.authority),
        _ => RuleSet::new().with_param_flow(active.param_flow),
    };
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

/// Whether the engine's active rules of the set's family are the set's.
fn applied(sentinel: &Sentinel, set: &RuleSet) -> bool {
    let active = sentinel.active_rules();
    match (set.flow.as_ref(), set.degrade.as_ref(), set.system.as_ref()) {
        (Some(rules), _, _) => *rules == active.flow,
        (_, Some(rules), _) => *rules == active.degrade,
        (_, _, Some(rules)) => *rules == active.system,
        _ => match (set.authority.as_ref(), set.param_flow.as_ref()) {
            (Some(rules), _) => *rules == active.authority,
            (_, Some(rules)) => *rules == active.param_flow,
            _ => true,
        },
    }
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

impl Edits {
    pub(crate) fn new(config: &TransportConfig) -> Self {
        Self {
            access: config.access,
            memory_only: config.memory_only_edits,
            apply_wait: config.apply_wait,
            stores: config
                .stores
                .iter()
                .map(|(family, writer)| {
                    (
                        *family,
                        RuleStore {
                            writer: writer.clone(),
                            seen: Mutex::new(None),
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

    /// Notes the store's revision when the dashboard reads `family`'s rules: the edit it
    /// sends next is based on them.
    pub(crate) async fn note_read(&self, family: RuleFamily) {
        let Some(store) = self.stores.get(&FamilyKey::of(family)) else {
            return;
        };
        match store.writer.revision().await {
            Ok(revision) => *store.seen.lock().await = Some(revision),
            Err(error) => {
                tracing::warn!(%family, store = %store.writer.describe(), %error, "cannot read the rule store's revision");
            }
        }
    }

    /// `setRules` / `setParamFlowRules`: validates `data`, writes it, waits (bounded) for the
    /// engine to apply it.
    pub(crate) async fn set_rules(
        &self,
        sentinel: &Sentinel,
        command: &'static str,
        family: RuleFamily,
        data: Option<&str>,
    ) -> Result<(), EditError> {
        if !self.writable() {
            return Err(EditError::ReadOnly { command });
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
            return Ok(());
        };
        // One edit of a family at a time: the lock spans read, compare-and-set and wait.
        let mut seen = store.seen.lock().await;
        let expected = match *seen {
            Some(revision) => revision,
            None => store
                .writer
                .revision()
                .await
                .map_err(|e| EditError::Store {
                    family,
                    source: WriteError::Store(e),
                })?,
        };
        let written = store.writer.write_if(&set, expected).await;
        let revision = match written {
            Ok(revision) => revision,
            Err(WriteError::Conflict { .. }) => {
                // Read again next time: the dashboard reloads and edits what is stored now.
                *seen = None;
                return Err(EditError::Conflict {
                    family,
                    target: store.writer.describe(),
                    expected,
                });
            }
            Err(source) => return Err(EditError::Store { family, source }),
        };
        *seen = Some(revision);
        tracing::info!(%family, store = %store.writer.describe(), ?revision, "rules edited from the dashboard written to the store");
        let deadline = tokio::time::Instant::now() + self.apply_wait;
        while !applied(sentinel, &set) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if !applied(sentinel, &set) {
            tracing::warn!(%family, store = %store.writer.describe(), "the store accepted the edit but this engine has not applied it yet; is its data source reading that key?");
        }
        Ok(())
    }
}
