//! Request values for hot-parameter (param-flow) rules: sentinel-tower's sources, reading
//! actix-web's requests.

use std::net::IpAddr;

use actix_web::dev::ServiceRequest;
use actix_web::http::header::HeaderName;
use sentinel_tower::{ParamRequest, ParamSourceOf};

/// One argument of a request's entry: sentinel-tower's `ParamSource`, reading actix-web's
/// requests. The middleware's [`arg`](crate::SentinelMiddleware::arg) calls give them in
/// order (the first is `paramIdx` 0); [`peer_ip`](ParamSourceOf::peer_ip) is the
/// connection's peer address and a [`from_fn`](ParamSourceOf::from_fn) closure gets the
/// [`ServiceRequest`].
///
/// A request **without the value passes unchecked** by default (its argument is empty,
/// which no param-flow rule checks, as in Sentinel). Choose otherwise per source:
/// [`or`](ParamSourceOf::or) another source, [`or_value`](ParamSourceOf::or_value) a fixed
/// value shared by every such request, or [`or_block`](ParamSourceOf::or_block): blocked
/// before it enters, as a param-flow block.
///
/// ```
/// use actix_web::http::header::HeaderName;
/// use sentinel_actix::{ParamSource, SentinelMiddleware};
///
/// // Argument 0: the user from a header, else the client's IP address.
/// let middleware = SentinelMiddleware::new(sentinel_core::Sentinel::new()).arg(
///     ParamSource::header(HeaderName::from_static("x-user-id")).or(ParamSource::peer_ip()),
/// );
/// # let _ = middleware;
/// ```
pub type ParamSource = ParamSourceOf<ActixRequest>;

/// actix-web's requests, as param sources read them.
#[derive(Debug)]
pub enum ActixRequest {}

impl ParamRequest for ActixRequest {
    type HeaderName = HeaderName;
    type Request<'r> = ServiceRequest;

    #[inline]
    fn header<'a>(request: &'a ServiceRequest, name: &HeaderName) -> Option<&'a str> {
        request.headers().get(name).and_then(|v| v.to_str().ok())
    }

    #[inline]
    fn query(request: &ServiceRequest) -> Option<&str> {
        Some(request.query_string()).filter(|query| !query.is_empty())
    }

    #[inline]
    fn path(request: &ServiceRequest) -> &str {
        request.path()
    }

    fn peer_ip(request: &ServiceRequest) -> Option<IpAddr> {
        request.peer_addr().map(|addr| addr.ip())
    }
}
