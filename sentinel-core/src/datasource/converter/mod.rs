//! Converters: the bytes a config store holds, turned into typed rules.
//!
//! Built in:
//! - [`FlowJson`], [`DegradeJson`], [`SystemJson`], [`AuthorityJson`], [`ParamFlowJson`]:
//!   Sentinel (Java) rule JSON, exactly as Sentinel and its dashboard write it;
//! - [`CombinedJson`]: one document carrying several families,
//!   `{"flow": [...], "degrade": [...], "system": [...], "authority": [...], "paramFlow": [...]}`;
//! - [`GoFlowJson`] and its siblings: sentinel-golang's JSON (`threshold`,
//!   `tokenCalculateStrategy`...), mapped onto Sentinel's rules ([`GoIsolationJson`]: its
//!   concurrency limits, as thread-count flow rules);
//! - `KubernetesYaml` (feature `yaml`): sentinel-golang's Kubernetes custom resources
//!   (`FlowRules`, `CircuitBreakerRules`, `HotspotRules`, `IsolationRules`, `SystemRules`);
//! - [`converter_fn`]: any closure, for a custom format.
//!
//! # Wire tolerance
//!
//! The JSON converters read what real payloads contain: the keys stores add (`id`, `app`,
//! `ip`, `gmtCreate`...) are ignored, an explicit `null` means the default, a single object where a
//! list is expected is one rule, the dashboard's nested entity `{"rule": {...}, "app": ...}` is
//! unwrapped, and an empty, whitespace-only or `null` payload is an empty list (which clears
//! the family, as Sentinel does). Payloads written with single quotes, which Java's fastjson
//! accepts, are read through a JSON5 fallback.
//!
//! # Unknown keys
//!
//! A key that is no field of the rule is looked at, never dropped unseen: a key of another
//! family's format is an error (the payload was given to the wrong converter), a key close to
//! a field is an error naming it (`unknown field "cuont" (did you mean "count"?)`), the keys
//! real stores carry beside rules (`id`, `app`, `ip`, `port`, `gmtCreate`, `gmtModified`,
//! `passCount`, sentinel-golang's memory-adaptive fields) are ignored, and any other key is
//! a warning ([`Converted::warnings`], the source's status), or an error with
//! [`KeyPolicy::Deny`](crate::KeyPolicy::Deny). In strict mode a rule without the field that decides what it does
//! (`count` of a flow or paramFlow rule, `grade` and `count` of a degrade rule, `limitApp` of
//! an authority rule, `threshold` of a sentinel-golang rule...) is an error; lenient mode
//! reads Sentinel's default and warns.
//!
//! # Errors
//!
//! A syntax error is a [`RuleError::Format`] whose message names the line and column. A value
//! of the wrong type and an invalid rule are [`RuleError::Invalid`], with one [`RuleIssue`] per
//! problem naming the rule's index, its resource and the field. Conversion is strict by
//! default: one bad rule rejects the payload. In [`Validation::Lenient`] mode the bad rules are
//! skipped and returned in [`Converted::skipped`].

use std::fmt;
use std::sync::Arc;

use crate::rules::{RuleError, RuleIssue, Validation};

#[cfg(any(test, feature = "fuzzing"))]
#[cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))]
pub mod differential;
mod golang;
mod java;
#[cfg(feature = "yaml")]
pub(crate) mod kubernetes;
#[cfg(feature = "yaml")]
pub(crate) mod opensergo;

pub use golang::{GoCircuitBreakerJson, GoFlowJson, GoHotspotJson, GoIsolationJson, GoSystemJson};
#[cfg(test)]
pub(crate) use java::java_converter;
pub use java::{AuthorityJson, CombinedJson, DegradeJson, FlowJson, ParamFlowJson, SystemJson};
#[cfg(feature = "yaml")]
pub use kubernetes::KubernetesYaml;

/// Turns a raw value of type `S` into `T`: bytes into a [`RuleSet`](crate::rule_set::RuleSet), for
/// data sources.
///
/// Implement it for a custom format, or wrap a closure with [`converter_fn`].
pub trait Converter<S: ?Sized, T>: Send + Sync {
    /// Converts `source`, with the converter's own validation mode.
    fn convert(&self, source: &S) -> Result<T, RuleError>;

    /// Converts `source` with the given validation mode, reporting the rules skipped in
    /// lenient mode. The data-source driver calls this with its own mode.
    ///
    /// The default calls [`convert`](Self::convert) and reports nothing skipped, which is
    /// right for converters that do not validate (the engine validates every rule again).
    fn convert_with(&self, source: &S, validation: Validation) -> Result<Converted<T>, RuleError> {
        let _ = validation;
        self.convert(source).map(Converted::new)
    }
}

/// What a conversion produced, and what lenient mode skipped on the way.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Converted<T> {
    /// The converted value.
    pub value: T,
    /// Rules skipped because they are invalid (lenient mode only).
    pub skipped: Vec<RuleIssue>,
    /// What loaded but deserves a look: unknown keys (see [`KeyPolicy`](crate::KeyPolicy)), and in lenient
    /// mode the absent fields that decide what a rule does, read as Sentinel's defaults.
    pub warnings: Vec<RuleIssue>,
    /// Every rule passed the families' validity checks: the engine need not run them again.
    /// Only the built-in converters, which run them, set it.
    pub(crate) validated: bool,
}

impl<T> Converted<T> {
    /// A conversion that skipped nothing. The engine validates its rules when it applies
    /// them.
    pub fn new(value: T) -> Self {
        Self {
            value,
            skipped: Vec::new(),
            warnings: Vec::new(),
            validated: false,
        }
    }

    /// A conversion whose rules were all validated, with what a lenient pass skipped and
    /// the warnings.
    pub(crate) fn validated(value: T, skipped: Vec<RuleIssue>, warnings: Vec<RuleIssue>) -> Self {
        Self {
            value,
            skipped,
            warnings,
            validated: true,
        }
    }
}

impl<S: ?Sized, T, C: Converter<S, T> + ?Sized> Converter<S, T> for Arc<C> {
    fn convert(&self, source: &S) -> Result<T, RuleError> {
        (**self).convert(source)
    }

    fn convert_with(&self, source: &S, validation: Validation) -> Result<Converted<T>, RuleError> {
        (**self).convert_with(source, validation)
    }
}

impl<S: ?Sized, T, C: Converter<S, T> + ?Sized> Converter<S, T> for Box<C> {
    fn convert(&self, source: &S) -> Result<T, RuleError> {
        (**self).convert(source)
    }

    fn convert_with(&self, source: &S, validation: Validation) -> Result<Converted<T>, RuleError> {
        (**self).convert_with(source, validation)
    }
}

/// A converter made from a closure. Built by [`converter_fn`].
#[derive(Clone, Copy)]
pub struct FnConverter<F> {
    f: F,
}

impl<F> fmt::Debug for FnConverter<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnConverter").finish_non_exhaustive()
    }
}

/// Wraps a closure as a [`Converter`], for a custom payload format.
///
/// ```
/// use sentinel_core::datasource::{converter_fn, Converter};
/// use sentinel_core::{flow::FlowRule, RuleSet};
///
/// // One resource name per line, each limited to 10 QPS.
/// let lines = converter_fn(|bytes: &[u8]| {
///     let text = String::from_utf8_lossy(bytes);
///     let rules = text.lines().filter(|l| !l.trim().is_empty());
///     Ok(RuleSet::new().with_flow(rules.map(|r| FlowRule::qps(r.trim(), 10.0)).collect()))
/// });
/// let set = lines.convert(b"GET:/a\nGET:/b\n").unwrap();
/// assert_eq!(set.flow.map(|f| f.len()), Some(2));
/// ```
pub fn converter_fn<F>(f: F) -> FnConverter<F> {
    FnConverter { f }
}

impl<S: ?Sized, T, F> Converter<S, T> for FnConverter<F>
where
    F: Fn(&S) -> Result<T, RuleError> + Send + Sync,
{
    fn convert(&self, source: &S) -> Result<T, RuleError> {
        (self.f)(source)
    }
}

/// Declares a bytes-to-`RuleSet` converter type that carries a validation mode (strict by
/// default) and a key policy, with its constructors; `|self, source, validation| body`
/// converts.
macro_rules! converter_with_mode {
    ($(#[$meta:meta])* $name:ident, |$self_:ident, $source:ident, $validation:ident| $body:expr) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name {
            validation: Validation,
            keys: $crate::rules::KeyPolicy,
        }

        impl $name {
            /// A strict converter: one invalid rule rejects the payload.
            pub fn new() -> Self {
                Self::default()
            }

            /// A lenient converter: invalid rules are skipped and reported.
            pub fn lenient() -> Self {
                Self {
                    validation: Validation::Lenient,
                    ..Self::default()
                }
            }

            /// Sets what an unknown key is: a warning (the default) or an error of its rule.
            pub fn keys(mut self, keys: $crate::rules::KeyPolicy) -> Self {
                self.keys = keys;
                self
            }

            /// Sets the validation mode used by [`Converter::convert`].
            pub fn validation(mut self, validation: Validation) -> Self {
                self.validation = validation;
                self
            }
        }

        impl Converter<[u8], $crate::rule_set::RuleSet> for $name {
            fn convert(
                &self,
                source: &[u8],
            ) -> Result<$crate::rule_set::RuleSet, $crate::rules::RuleError> {
                self.convert_with(source, self.validation).map(|c| c.value)
            }

            fn convert_with(
                &$self_,
                $source: &[u8],
                $validation: Validation,
            ) -> Result<Converted<$crate::rule_set::RuleSet>, $crate::rules::RuleError> {
                $body
            }
        }
    };
}

use converter_with_mode;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::FlowRule;
    use crate::RuleSet;

    fn flow(set: RuleSet) -> Vec<FlowRule> {
        set.flow.unwrap_or_default()
    }

    #[test]
    fn closures_convert() {
        let c = converter_fn(|bytes: &[u8]| {
            Ok(RuleSet::new().with_flow(vec![FlowRule::qps(
                String::from_utf8_lossy(bytes).into_owned(),
                1.0,
            )]))
        });
        let out = c.convert_with(b"x", Validation::Lenient).ok();
        assert_eq!(
            out.map(|o| flow(o.value)),
            Some(vec![FlowRule::qps("x", 1.0)])
        );
        let boxed: Box<dyn Converter<[u8], RuleSet>> = Box::new(FlowJson::new());
        assert!(boxed.convert(b"[]").is_ok());
    }
}
