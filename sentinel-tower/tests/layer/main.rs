//! The layer against in-process `service_fn` handlers: shared limits, blocked requests,
//! circuit breakers fed by statuses and response times, cancelled requests and queueing.

mod block;
mod breaker;
mod cancel;
mod future;
mod key;
mod limit;
mod param;
mod queue;
mod support;
