//! Sentinel rules from a ZooKeeper znode, watched
//!
//! Work in progress: see the crate's issue.
