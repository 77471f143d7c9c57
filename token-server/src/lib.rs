//! A token server that speaks Sentinel 1.8's cluster protocol, with its budget kept in Redis
//!
//! Work in progress: see the crate's issue.
