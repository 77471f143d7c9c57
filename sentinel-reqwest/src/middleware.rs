//! The middleware: enters each call before it is sent and keeps the entry until the response
//! head arrives.

use std::sync::Arc;

use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};
use sentinel_core::{Admission, Entry, Sentinel};
// An entry whose call is on the wire; dropped before its exit (the caller dropped the
// call's future, as `tokio::time::timeout` does), it exits as an error.
use sentinel_tower::InFlight;

use crate::error::SentinelError;
use crate::outcome::{ErrorIf, Outcome};
use crate::resource::ResourceName;
use crate::retry_after::{Holds, RetryAfter};

/// Guards every outbound call of a `reqwest-middleware` client with a [`Sentinel`] engine:
/// the call enters its resource (an outbound entry, so system rules do not apply), a blocked
/// call fails with [`SentinelError`] without being sent, and the outcome feeds the circuit
/// breakers.
///
/// Cheap to clone: clones share the settings and the `Retry-After` holds.
#[derive(Debug, Clone)]
pub struct SentinelMiddleware {
    sentinel: Sentinel,
    name: ResourceName,
    error_if: ErrorIf,
    retry_after: Option<(RetryAfter, Arc<Holds>)>,
}

impl SentinelMiddleware {
    /// A middleware entering calls into `sentinel`: a resource per host
    /// ([`ResourceName::host`], with the call's [`Route`](crate::Route) when it has one), a
    /// `5xx` response or a failed call (timeout, connection error) counted as an error, and
    /// the upstream's `Retry-After` not followed.
    pub fn new(sentinel: Sentinel) -> Self {
        Self {
            sentinel,
            name: ResourceName::host(),
            error_if: ErrorIf::new(),
            retry_after: None,
        }
    }

    /// How a call names its resource.
    pub fn resource_name(mut self, name: ResourceName) -> Self {
        self.name = name;
        self
    }

    /// Which outcomes count as errors for the circuit breakers; by default a `5xx` response
    /// and every failure ([`Outcome::is_server_error_or_failure`]).
    ///
    /// ```
    /// use reqwest::StatusCode;
    /// use sentinel_reqwest::{Outcome, SentinelMiddleware};
    ///
    /// // Timeouts and 5xx count; a refused connection does not (the upstream is deployed
    /// // elsewhere meanwhile), and neither does any other failure.
    /// let middleware = SentinelMiddleware::new(sentinel_core::Sentinel::new()).error_if(
    ///     |outcome: &Outcome<'_>| {
    ///         outcome.is_timeout() || outcome.status().is_some_and(|s| s.is_server_error())
    ///     },
    /// );
    /// # let _ = middleware;
    /// ```
    pub fn error_if<F>(mut self, is_error: F) -> Self
    where
        F: Fn(&Outcome<'_>) -> bool + Send + Sync + 'static,
    {
        self.error_if.picks(Arc::new(is_error));
        self
    }

    /// Whether a call that a Sentinel middleware after this one held back counts as an
    /// error of this one's resource too (off by default), as
    /// `sentinel-tower`'s `count_block_answers`: an inner breaker's open state should not
    /// trip the outer one.
    pub fn count_inner_blocks(mut self, count: bool) -> Self {
        self.error_if.count_inner_blocks = count;
        self
    }

    /// Follows the upstream's `Retry-After` on 429 and 503 (see [`RetryAfter`]): off by
    /// default, so that only the loaded rules decide which calls go out.
    pub fn retry_after(mut self, policy: RetryAfter) -> Self {
        self.retry_after = Some((policy, Arc::new(Holds::default())));
        self
    }

    /// Enters `resource`, waiting out a rate limiter's queue on tokio's timer.
    async fn enter<'a>(&'a self, resource: &'a str) -> Result<Entry<'a>, SentinelError> {
        if let Some((_, holds)) = &self.retry_after {
            if let Some(retry_in) = holds.check(resource, self.sentinel.clock().now_ms()) {
                return Err(SentinelError::RetryAfter {
                    resource: Arc::from(resource),
                    retry_in,
                });
            }
        }
        match self.sentinel.entry(resource).outbound().try_enter()? {
            Admission::Now(entry) => Ok(entry),
            Admission::Queued(queued) => {
                tokio::time::sleep(queued.wait()).await;
                Ok(queued.start())
            }
        }
    }
}

#[async_trait::async_trait]
impl Middleware for SentinelMiddleware {
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let resource = self.name.name(&request, extensions);
        let entry = match self.enter(&resource).await {
            Ok(entry) => entry,
            Err(held) => {
                tracing::debug!(resource, reason = %held, "outbound call held back");
                return Err(reqwest_middleware::Error::middleware(held));
            }
        };
        let mut in_flight = InFlight::new(entry);
        let result = next.run(request, extensions).await;
        let outcome = match &result {
            Ok(response) => Outcome::Response(response),
            Err(error) => Outcome::Failed(error),
        };
        in_flight.exit(self.error_if.matches(&outcome));
        if let (Some((policy, holds)), Ok(response)) = (&self.retry_after, &result) {
            if let Some(wait) = policy.wait_of(response) {
                holds.hold(&resource, self.sentinel.clock().now_ms(), wait);
            }
        }
        result
    }
}
