//! Sentinel flow control and circuit breaking for gRPC with tonic: a server layer and a client layer
//!
//! Work in progress: see the crate's issue.
