//! End-to-end tests that span crates live in `tests/`; this crate has no library code.
