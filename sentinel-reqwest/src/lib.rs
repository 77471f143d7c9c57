//! Sentinel flow control and circuit breaking for outbound HTTP calls, as a reqwest-middleware middleware
//!
//! Work in progress: see the crate's issue.
