//! Sentinel flow control and circuit breaking as actix-web middleware
//!
//! Work in progress: see the crate's issue.
