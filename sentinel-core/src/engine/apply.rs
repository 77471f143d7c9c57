//! The last stages of the rule pipeline, for every payload from every source: validate
//! (unless a converter did), replace the source's part, compile the changed families'
//! tables, and publish them all in one store.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::sentinel::Sentinel;
use super::snapshot::{Owned, RuleSnapshot, SourceRules, Tables};
use crate::events::SentinelEvent;
use crate::family::{union_of, CompileEnv, Family};
use crate::rule_set::RuleSet;
use crate::rules::{rules_in, LoadReport, RuleError, RuleFamily, RuleIssue, Validation};
use crate::stat::OwnsStat;

/// A payload on its way into the engine: converted, and validated or not yet.
#[derive(Debug)]
pub(crate) struct Incoming {
    set: RuleSet,
    /// Issues of rules a lenient conversion left out.
    skipped: Vec<RuleIssue>,
    /// How many rules those are.
    skipped_rules: usize,
    /// What loaded but deserves a look (unknown keys...).
    warnings: Vec<RuleIssue>,
    /// `None`: already validated (by a converter that validates); the set is applied as it
    /// is. `Some(mode)`: validate here, in this mode.
    validate: Option<Validation>,
    /// The set is the source's whole payload: what the source applied before and the set
    /// does not carry is cleared ([`Incoming::replacing_source`]).
    replaces_source: bool,
}

impl Incoming {
    /// A set that still has to be validated (from the API, or from a converter that does not
    /// validate).
    pub(crate) fn unchecked(set: RuleSet, validation: Validation) -> Self {
        Self {
            set,
            skipped: Vec::new(),
            skipped_rules: 0,
            warnings: Vec::new(),
            validate: Some(validation),
            replaces_source: false,
        }
    }

    /// A set every rule of which passed validation, with what a lenient pass skipped (the
    /// issues, and how many rules they are about).
    pub(crate) fn checked(set: RuleSet, skipped: Vec<RuleIssue>, skipped_rules: usize) -> Self {
        Self {
            set,
            skipped,
            skipped_rules,
            warnings: Vec::new(),
            validate: None,
            replaces_source: false,
        }
    }

    /// Marks the set as a running data source's whole payload: every family (and shadow
    /// family) the source applied before and the set does not carry is cleared, and an
    /// empty set clears them all. The engine, not the source, knows what it applied
    /// ([`Sentinel::owned`]). A set that neither carries nor clears a family changes nothing:
    /// the report's `applied` and `shadow_applied` are empty, and nothing is published.
    pub(crate) fn replacing_source(mut self) -> Self {
        self.replaces_source = true;
        self
    }

    /// Adds the warnings of the conversion.
    pub(crate) fn with_warnings(mut self, warnings: Vec<RuleIssue>) -> Self {
        self.warnings = warnings;
        self
    }
}

macro_rules! apply_families {
    ($($variant:ident, $field:ident, $rule:ty;)*) => {
        /// Replaces the part of `mine` of each family `set` carries; returns those families.
        pub(crate) fn replace_parts(mine: &mut SourceRules, set: RuleSet) -> Vec<RuleFamily> {
            let mut changed = Vec::new();
            $(if let Some(rules) = set.$field {
                mine.$field = part(rules);
                changed.push(RuleFamily::$variant);
            })*
            changed
        }

        /// Compiles the union of every source's rules of each changed family; the other
        /// families keep their table.
        pub(crate) fn compile_tables(
            changed: &[RuleFamily],
            sources: &BTreeMap<Arc<str>, SourceRules>,
            current: &Tables,
            env: &CompileEnv<'_>,
        ) -> Tables {
            Tables {
                $($field: if changed.contains(&RuleFamily::$variant) {
                    // One source (the common case) is compiled as its part; several as their
                    // union, without duplicates.
                    let parts = sources.values().filter_map(|s| s.$field.as_ref());
                    let mut each = parts.clone();
                    let table = match (each.next(), each.next()) {
                        (Some(only), None) => <$rule as Family>::compile_part(only, &current.$field, env),
                        _ => {
                            let union = union_of(parts.map(|p| p.as_slice()));
                            <$rule as Family>::compile(union, &current.$field, env)
                        }
                    };
                    Arc::new(table)
                } else {
                    current.$field.clone()
                },)*
            }
        }
    };
}

for_each_family!(apply_families);

impl Sentinel {
    /// Applies one payload of `source` (named `payload` in errors), or reports why it cannot
    /// be (through [`reject`](Self::reject)).
    ///
    /// Two sources feeding one family are unioned: each source owns its part, and an update
    /// from one replaces only that part. Rules equal to active ones (ignoring `id` and unknown
    /// fields) keep their compiled state. Duplicates collapse.
    pub(crate) fn apply(
        &self,
        source: &str,
        payload: &str,
        incoming: Incoming,
    ) -> Result<LoadReport, RuleError> {
        self.apply_incoming(source, payload, incoming)
            .inspect_err(|error| self.reject(source, error))
    }

    /// Reports that a payload of `source` was rejected, wherever in the pipeline (its
    /// conversion, its validation, the swap): the one place that emits
    /// [`SentinelEvent::RulesRejected`].
    pub(crate) fn reject(&self, source: &str, error: &RuleError) {
        self.inner.shared.events.emit(SentinelEvent::RulesRejected {
            source: source.to_owned(),
            error: error.clone(),
        });
    }

    fn apply_incoming(
        &self,
        source: &str,
        payload: &str,
        incoming: Incoming,
    ) -> Result<LoadReport, RuleError> {
        let Incoming {
            set,
            mut skipped,
            mut skipped_rules,
            mut warnings,
            validate,
            replaces_source,
        } = incoming;
        let mut set = set;
        let owned = if replaces_source {
            let (families, shadow) = replace_whole(&mut set, &self.owned(source));
            if families.is_empty() && shadow.is_empty() {
                return Ok(LoadReport {
                    version: self.inner.shared.rules.load().version,
                    ..LoadReport::default()
                });
            }
            Some((families, shadow))
        } else {
            None
        };
        let mut set = match validate {
            None => set,
            Some(mode) => {
                if mode == Validation::Lenient {
                    warnings.append(&mut set.skip_parts());
                }
                let (set, mut found) = set.checked(mode).map_err(|issues| RuleError::Invalid {
                    payload: payload.to_owned(),
                    issues,
                })?;
                skipped_rules += rules_in(&found);
                skipped.append(&mut found);
                set
            }
        };
        // With a cluster backend, what it cannot decide is refused, whatever the mode.
        if let (Some(backend), Some(flow)) = (&self.inner.cluster, &set.flow) {
            let issues = crate::flow::check_rules(backend.as_ref(), flow);
            if !issues.is_empty() {
                return Err(RuleError::Invalid {
                    payload: payload.to_owned(),
                    issues,
                });
            }
        }

        let shadow_set = set.shadow.take();
        let writer = self.inner.writer.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.inner.shared.rules.load_full();
        let mut sources = current.sources.clone();
        let key: Arc<str> = Arc::from(source);
        let mut mine = sources.get(&key).cloned().unwrap_or_default();
        let changed = replace_parts(&mut mine, set);
        if mine.is_empty() {
            sources.remove(&key);
        } else {
            sources.insert(key.clone(), mine);
        }
        let node = |name: &str| self.node(name).map(|n| n as Arc<dyn OwnsStat>);
        let env = CompileEnv {
            node: &node,
            cluster: self.inner.cluster.as_ref(),
        };
        let tables = compile_tables(&changed, &sources, &current.tables, &env);
        let shadow_changed = shadow_set.as_ref().map(|s| s.families());
        let shadow = super::shadow_table::next(
            current.shadow.as_ref(),
            &key,
            shadow_set,
            current.version + 1,
            &env,
        )
        .unwrap_or_else(|| current.shadow.clone());
        let mut next = RuleSnapshot {
            version: current.version + 1,
            sources,
            tables,
            shadow,
            ..RuleSnapshot::default()
        };
        next.index_resources();
        let counts: Vec<(RuleFamily, usize)> = changed
            .iter()
            .map(|family| (*family, next.tables.count(*family)))
            .collect();
        let shadow_counts: Vec<(RuleFamily, usize)> = shadow_changed
            .unwrap_or_default()
            .into_iter()
            .map(|family| {
                let n = next.shadow.as_ref().map_or(0, |s| s.count(family));
                (family, n)
            })
            .collect();
        let shadow_rules = next.shadow.as_ref().map_or(0, |s| s.of_source(source));
        let version = next.version;
        self.inner.shared.rules.store(Arc::new(next));
        self.inner
            .shared
            .rules_version
            .store(version, Ordering::Release);
        if let Some((families, shadow)) = owned {
            self.own(source, families, shadow);
        }
        drop(writer);

        self.inner.shared.events.emit(SentinelEvent::RulesApplied {
            source: source.to_owned(),
            families: counts.clone(),
            version,
            warnings: warnings.clone(),
        });
        Ok(LoadReport {
            applied: counts,
            skipped,
            skipped_rules,
            warnings,
            version,
            shadow_applied: shadow_counts,
            shadow_rules,
        })
    }
}

/// Makes `set` a source's whole part: each family (and shadow family) of `owned` that `set`
/// does not carry is cleared. Returns the families and shadow families `set` then carries.
fn replace_whole(set: &mut RuleSet, owned: &Owned) -> (Vec<RuleFamily>, Vec<RuleFamily>) {
    let carried: BTreeSet<RuleFamily> = set.families().into_iter().collect();
    let missing: Vec<RuleFamily> = owned.families.difference(&carried).copied().collect();
    set.merge(RuleSet::cleared(&missing));
    let shadow_carried: BTreeSet<RuleFamily> = set
        .shadow
        .as_ref()
        .map(|s| s.families().into_iter().collect())
        .unwrap_or_default();
    let shadow_missing: Vec<RuleFamily> =
        owned.shadow.difference(&shadow_carried).copied().collect();
    if !shadow_missing.is_empty() {
        let shadow = set.shadow.get_or_insert_with(Box::default);
        shadow.merge(RuleSet::cleared(&shadow_missing));
    }
    let shadow = set
        .shadow
        .as_ref()
        .map(|s| s.families())
        .unwrap_or_default();
    (set.families(), shadow)
}

/// A source's part of one family: `None` when it brings no rule.
fn part<F: Family>(rules: Vec<F>) -> Option<Arc<Vec<F::Handle>>> {
    (!rules.is_empty()).then(|| Arc::new(F::handles(rules)))
}
