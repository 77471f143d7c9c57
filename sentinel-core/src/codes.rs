//! Enums that travel as Sentinel's integer codes.

/// Declares a `#[repr(i32)]` enum serialised as its integer code.
macro_rules! int_code_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $code:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(i32)]
        pub enum $name {
            $( $(#[$vmeta])* $variant = $code ),+
        }

        impl $name {
            /// The integer code Sentinel uses for this value.
            pub fn code(self) -> i32 {
                self as i32
            }

            /// The value for an integer code, if it is known.
            pub fn from_code(code: i64) -> Option<Self> {
                match code {
                    $( $code => Some(Self::$variant), )+
                    _ => None,
                }
            }

            /// The known codes, in order (the JSON Schemas' enums).
            #[allow(dead_code)] // read by the `schema` feature
            pub(crate) const CODES: &'static [i64] = &[$($code),+];

            /// The known codes, for error messages.
            pub(crate) fn known_codes() -> &'static str {
                concat!($( stringify!($code), " (", stringify!($variant), ") " ),+)
            }
        }

        impl $crate::rules::IntCode for $name {
            fn from_code(code: i64) -> Option<Self> {
                Self::from_code(code)
            }

            fn known_codes() -> &'static str {
                Self::known_codes()
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_i32(self.code())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let code = <crate::wire::Int as serde::Deserialize>::deserialize(d)?.0;
                Self::from_code(code).ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "unknown code {code}; expected one of {}",
                        Self::known_codes().trim_end()
                    ))
                })
            }
        }
    };
}

pub(crate) use int_code_enum;
