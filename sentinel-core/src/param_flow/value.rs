//! The arguments of a call, as param-flow rules see them: [`ParamValue`], the
//! [`ParamArg`] trait for a caller's own types, and the fingerprint a value is tracked by.

use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::OnceLock;

/// One argument of a call: what a param-flow rule limits per value.
///
/// Integers of every width are one kind (`5u8` and `5i64` are the same value), as are `&str`
/// and `char`. Values of different kinds never match: the integer `5` and the string `"5"`
/// are two values.
///
/// ```
/// use sentinel_core::param_flow::ParamValue;
///
/// let args = [ParamValue::from(42u32), ParamValue::from("alice"), true.into()];
/// assert_eq!(args[0], ParamValue::Int(42));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum ParamValue<'a> {
    /// An integer.
    Int(i128),
    /// A floating-point number (`-0.0` is `0.0`; every NaN is one value).
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A string (or a `char`).
    Str(&'a str),
    /// Raw bytes.
    Bytes(&'a [u8]),
    /// A collection or array argument: as in Sentinel, a rule checks each element as a
    /// value of its own (each takes its own tokens or place), and the call is blocked if
    /// any element is hot; the elements before it keep what they took, as in Sentinel. An
    /// empty list passes. A call holding thread-grade places for two or more elements keeps
    /// them in a small allocation (one place needs none).
    ///
    /// ```
    /// use sentinel_core::param_flow::{ParamFlowRule, ParamValue};
    /// use sentinel_core::Sentinel;
    ///
    /// let sentinel = Sentinel::new();
    /// sentinel
    ///     .param_flow_rules()
    ///     .load_rules(vec![ParamFlowRule::qps("cart.add", 0, 1.0)])?;
    /// let items = [ParamValue::from(7u32), ParamValue::from(8u32)];
    /// let batch = [ParamValue::List(&items)];
    /// assert!(sentinel.entry("cart.add").args(&batch).enter().is_ok());
    /// // Item 8 has used its one call this second.
    /// let again = [ParamValue::from(8u32)];
    /// assert!(sentinel.entry("cart.add").args(&again).enter().is_err());
    /// # Ok::<(), sentinel_core::RuleError>(())
    /// ```
    List(&'a [ParamValue<'a>]),
}

/// An argument type of the caller's own: how it reads as a [`ParamValue`] (Sentinel's
/// `ParamFlowArgument`).
///
/// ```
/// use sentinel_core::param_flow::{ParamArg, ParamValue};
///
/// struct UserId(u64);
///
/// impl ParamArg for UserId {
///     fn param_value(&self) -> ParamValue<'_> {
///         ParamValue::Int(self.0.into())
///     }
/// }
///
/// assert_eq!(ParamValue::of(&UserId(7)), ParamValue::Int(7));
/// ```
pub trait ParamArg {
    /// The value param-flow rules limit this argument by.
    fn param_value(&self) -> ParamValue<'_>;
}

impl<'a> ParamValue<'a> {
    /// The value of any [`ParamArg`].
    pub fn of<A: ParamArg + ?Sized>(arg: &'a A) -> Self {
        arg.param_value()
    }

    /// The value's fingerprint: its kind and content hashed with a process-wide random key.
    /// Param-flow state is kept per fingerprint; two distinct values share one with
    /// probability 2^-64, and the key is secret, so callers cannot make them collide.
    #[inline]
    pub(crate) fn fingerprint(&self) -> u64 {
        let mut hasher = hasher_key().build_hasher();
        match *self {
            ParamValue::Int(v) => {
                hasher.write_u8(0);
                hasher.write_i128(v);
            }
            ParamValue::Float(v) => {
                hasher.write_u8(1);
                let v = if v == 0.0 { 0.0 } else { v };
                let bits = if v.is_nan() {
                    f64::NAN.to_bits()
                } else {
                    v.to_bits()
                };
                hasher.write_u64(bits);
            }
            ParamValue::Bool(v) => {
                hasher.write_u8(2);
                hasher.write_u8(u8::from(v));
            }
            ParamValue::Str(v) => {
                hasher.write_u8(3);
                v.hash(&mut hasher);
            }
            ParamValue::Bytes(v) => {
                hasher.write_u8(4);
                v.hash(&mut hasher);
            }
            // Never tracked: rules check a list's elements. Its kind keeps it apart from the
            // other kinds (and not hashing its elements keeps this function from recursing,
            // so it stays inlined on the hot path).
            ParamValue::List(items) => {
                hasher.write_u8(5);
                hasher.write_usize(items.len());
            }
        }
        // 0 marks an empty slot of a value table, and a set top bit a slot being filled.
        (hasher.finish() >> 1).max(1)
    }
}

fn hasher_key() -> &'static foldhash::quality::RandomState {
    static KEY: OnceLock<foldhash::quality::RandomState> = OnceLock::new();
    KEY.get_or_init(foldhash::quality::RandomState::default)
}

impl fmt::Display for ParamValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Int(v) => write!(f, "{v}"),
            ParamValue::Float(v) => write!(f, "{v}"),
            ParamValue::Bool(v) => write!(f, "{v}"),
            ParamValue::Str(v) => write!(f, "{v:?}"),
            ParamValue::Bytes(v) => write!(f, "{} bytes", v.len()),
            ParamValue::List(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
        }
    }
}

macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for ParamValue<'_> {
            fn from(v: $t) -> Self {
                ParamValue::Int(v.into())
            }
        }

        impl ParamArg for $t {
            fn param_value(&self) -> ParamValue<'_> {
                ParamValue::Int((*self).into())
            }
        }
    )*};
}

from_int!(i8, i16, i32, i64, u8, u16, u32, u64);

impl From<isize> for ParamValue<'_> {
    fn from(v: isize) -> Self {
        // isize is at most 64 bits on every supported target.
        ParamValue::Int(v as i128)
    }
}

impl From<usize> for ParamValue<'_> {
    fn from(v: usize) -> Self {
        ParamValue::Int(v as i128)
    }
}

impl From<f64> for ParamValue<'_> {
    fn from(v: f64) -> Self {
        ParamValue::Float(v)
    }
}

impl From<f32> for ParamValue<'_> {
    fn from(v: f32) -> Self {
        ParamValue::Float(v.into())
    }
}

impl From<bool> for ParamValue<'_> {
    fn from(v: bool) -> Self {
        ParamValue::Bool(v)
    }
}

impl<'a> From<&'a str> for ParamValue<'a> {
    fn from(v: &'a str) -> Self {
        ParamValue::Str(v)
    }
}

impl<'a> From<&'a String> for ParamValue<'a> {
    fn from(v: &'a String) -> Self {
        ParamValue::Str(v)
    }
}

impl<'a> From<&'a [u8]> for ParamValue<'a> {
    fn from(v: &'a [u8]) -> Self {
        ParamValue::Bytes(v)
    }
}

impl ParamArg for str {
    fn param_value(&self) -> ParamValue<'_> {
        ParamValue::Str(self)
    }
}

impl ParamArg for String {
    fn param_value(&self) -> ParamValue<'_> {
        ParamValue::Str(self)
    }
}

impl ParamArg for bool {
    fn param_value(&self) -> ParamValue<'_> {
        ParamValue::Bool(*self)
    }
}

impl ParamArg for f64 {
    fn param_value(&self) -> ParamValue<'_> {
        ParamValue::Float(*self)
    }
}

/// A value parsed from a rule (an exception item), owned.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OwnedValue {
    Int(i128),
    Float(f64),
    Bool(bool),
    Str(String),
}

impl OwnedValue {
    pub(crate) fn as_value(&self) -> ParamValue<'_> {
        match self {
            OwnedValue::Int(v) => ParamValue::Int(*v),
            OwnedValue::Float(v) => ParamValue::Float(*v),
            OwnedValue::Bool(v) => ParamValue::Bool(*v),
            OwnedValue::Str(v) => ParamValue::Str(v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_distinct_and_widths_are_not() {
        let fp = |v: ParamValue<'_>| v.fingerprint();
        assert_eq!(fp(5u8.into()), fp(5i64.into()));
        assert_ne!(fp(5i64.into()), fp("5".into()));
        assert_ne!(fp(true.into()), fp(1i32.into()));
        assert_eq!(fp(0.0f64.into()), fp((-0.0f64).into()));
        assert_eq!(fp(f64::NAN.into()), fp((-f64::NAN).into()));
        assert_ne!(fp("a".into()), fp(ParamValue::Bytes(b"a")));
        let one = ["a".into()];
        assert_ne!(fp(ParamValue::List(&one)), fp("a".into()));
        assert_ne!(fp(ParamValue::List(&one)), fp(ParamValue::List(&[])));
        let nested = [ParamValue::List(&one), 2u8.into()];
        assert_eq!(ParamValue::List(&nested).to_string(), r#"[["a"], 2]"#);
    }
}
