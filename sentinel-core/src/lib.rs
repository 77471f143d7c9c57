//! Sentinel for Rust: flow control, circuit breaking and adaptive system protection.

pub mod datasource;
