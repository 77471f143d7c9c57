//! The layers against a real tonic server and channel on loopback: resources per method,
//! the status of each block, breakers fed by statuses, streams held as one entry.

mod client;
mod nested;
mod server;
mod stream;
mod support;
