//! Which Sentinel resource a request enters: its method and path, its path, or a closure.

use std::borrow::Cow;
use std::fmt;

use http::Request;

/// Names the Sentinel resource a request enters. Rules, statistics and circuit breakers are
/// per resource.
///
/// Implemented by [`ResourceKey`] (the built-in keys) and by [`ResourceKeyFn`] (a closure).
pub trait ExtractResource<B> {
    /// The resource name of `request`. It may borrow from the request.
    fn resource<'r>(&self, request: &'r Request<B>) -> Cow<'r, str>;

    /// Calls `f` with the resource name of `request`: what the service does with each
    /// request, the name needed only while the request enters. The default calls `f` with
    /// [`resource`](Self::resource)'s name; override it to build a name without allocating
    /// (the built-in `METHOD:/path` key builds it on the stack).
    fn with_resource<R, F>(&self, request: &Request<B>, f: F) -> R
    where
        F: FnOnce(&str) -> R,
        Self: Sized,
    {
        f(&self.resource(request))
    }
}

/// The longest `METHOD:/path` name built on the stack; a longer one is allocated.
const INLINE_NAME: usize = 128;

/// `method:path`, allocated.
fn join(method: &str, path: &str) -> String {
    let mut name = String::with_capacity(method.len() + 1 + path.len());
    name.push_str(method);
    name.push(':');
    name.push_str(path);
    name
}

/// Calls `f` with `method:path`, built in a stack buffer when it fits.
#[inline]
fn with_joined<R>(method: &str, path: &str, f: impl FnOnce(&str) -> R) -> R {
    let len = method.len() + 1 + path.len();
    if len <= INLINE_NAME {
        let mut buffer = [0u8; INLINE_NAME];
        buffer[..method.len()].copy_from_slice(method.as_bytes());
        buffer[method.len()] = b':';
        buffer[method.len() + 1..len].copy_from_slice(path.as_bytes());
        // Two strings and an ASCII colon: always UTF-8 (the check is short for a short name).
        if let Ok(name) = std::str::from_utf8(&buffer[..len]) {
            return f(name);
        }
    }
    f(&join(method, path))
}

/// The built-in resource names. The default is [`method_and_path`](Self::method_and_path).
///
/// Each distinct name is a resource with its own statistics, so a name should be bounded: a
/// path with identifiers in it (`/order/42`) makes a resource per identifier. Name such
/// routes by their pattern with [`from_fn`](Self::from_fn) instead (in axum, the
/// `MatchedPath` request extension, as the crate docs show).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceKey {
    kind: KeyKind,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum KeyKind {
    #[default]
    MethodAndPath,
    Path,
    #[cfg(feature = "axum")]
    MethodAndRoute,
}

impl ResourceKey {
    /// `METHOD:/path`, as Sentinel's web adapters name HTTP resources: `GET:/order`. The
    /// query is left out.
    pub fn method_and_path() -> Self {
        Self {
            kind: KeyKind::MethodAndPath,
        }
    }

    /// The path alone: `/order`. The query is left out.
    pub fn path() -> Self {
        Self {
            kind: KeyKind::Path,
        }
    }

    /// `METHOD:/route`, the route axum matched (its `MatchedPath`): `GET:/order/{id}` for
    /// `/order/42` and `/order/43` alike, one resource per route, built without allocating.
    /// A request without a matched route (no route matched, and the layer wraps the router's
    /// fallback too, as `Router::layer` does) is named by its path: use `route_layer` to
    /// guard the routes only.
    ///
    /// ```
    /// use axum::{http::StatusCode, response::IntoResponse, routing::get, Router};
    /// use sentinel_tower::{ResourceKey, SentinelLayer};
    ///
    /// let sentinel = sentinel_core::Sentinel::new();
    /// let layer = SentinelLayer::new(sentinel)
    ///     .resource_key(ResourceKey::method_and_route())
    ///     .on_block(|_blocked| StatusCode::TOO_MANY_REQUESTS.into_response());
    /// let app: Router = Router::new()
    ///     .route("/order/{id}", get(|| async { "order" }))
    ///     .route_layer(layer); // the routes only, each with its matched route
    /// # let _ = app;
    /// ```
    #[cfg(feature = "axum")]
    #[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
    pub fn method_and_route() -> Self {
        Self {
            kind: KeyKind::MethodAndRoute,
        }
    }

    /// A closure that names the resource of a request. It returns a `String`, a
    /// `&'static str` or a `Cow<'static, str>`; annotate its argument with the request's body
    /// type, e.g. `|request: &http::Request<Body>|`.
    ///
    /// ```
    /// use sentinel_tower::ResourceKey;
    ///
    /// // One resource per API version and method.
    /// let key = ResourceKey::from_fn(|request: &http::Request<String>| {
    ///     let version = request.uri().path().split('/').nth(1).unwrap_or("");
    ///     format!("{}:/{version}", request.method())
    /// });
    /// # let _ = key;
    /// ```
    pub fn from_fn<F, B, R>(f: F) -> ResourceKeyFn<F>
    where
        F: Fn(&Request<B>) -> R,
        R: Into<Cow<'static, str>>,
    {
        ResourceKeyFn { f }
    }
}

impl<B> ExtractResource<B> for ResourceKey {
    fn resource<'r>(&self, request: &'r Request<B>) -> Cow<'r, str> {
        let path = request.uri().path();
        match self.kind {
            KeyKind::Path => Cow::Borrowed(path),
            KeyKind::MethodAndPath => Cow::Owned(join(request.method().as_str(), path)),
            #[cfg(feature = "axum")]
            KeyKind::MethodAndRoute => Cow::Owned(join(request.method().as_str(), route(request))),
        }
    }

    #[inline]
    fn with_resource<R, F>(&self, request: &Request<B>, f: F) -> R
    where
        F: FnOnce(&str) -> R,
    {
        let path = request.uri().path();
        match self.kind {
            KeyKind::Path => f(path),
            KeyKind::MethodAndPath => with_joined(request.method().as_str(), path, f),
            #[cfg(feature = "axum")]
            KeyKind::MethodAndRoute => with_joined(request.method().as_str(), route(request), f),
        }
    }
}

/// The route axum matched for `request`, or its path when none was.
#[cfg(feature = "axum")]
fn route<B>(request: &Request<B>) -> &str {
    request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or(request.uri().path(), |route| route.as_str())
}

/// A resource name computed by a closure; made by [`ResourceKey::from_fn`].
#[derive(Clone, Copy)]
pub struct ResourceKeyFn<F> {
    f: F,
}

impl<F> fmt::Debug for ResourceKeyFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceKeyFn")
            .field("f", &std::any::type_name::<F>())
            .finish()
    }
}

impl<B, F, R> ExtractResource<B> for ResourceKeyFn<F>
where
    F: Fn(&Request<B>) -> R,
    R: Into<Cow<'static, str>>,
{
    fn resource<'r>(&self, request: &'r Request<B>) -> Cow<'r, str> {
        (self.f)(request).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, uri: &str) -> Request<()> {
        Request::builder()
            .method(method)
            .uri(uri)
            .body(())
            .expect("a valid request")
    }

    #[test]
    fn method_and_path_leaves_the_query_out() {
        let request = request("POST", "http://shop.test/order?id=7");
        assert_eq!(
            ResourceKey::method_and_path().resource(&request),
            "POST:/order"
        );
        assert_eq!(ResourceKey::default(), ResourceKey::method_and_path());
        let key = ResourceKey::method_and_path();
        assert_eq!(key.with_resource(&request, str::to_owned), "POST:/order");
    }

    #[test]
    fn a_long_method_and_path_is_allocated_whole() {
        let key = ResourceKey::method_and_path();
        let long = format!("/{}", "a".repeat(INLINE_NAME));
        let name = key.with_resource(&request("GET", &long), str::to_owned);
        assert_eq!(name, format!("GET:{long}"));
        let fits = format!("/{}", "b".repeat(INLINE_NAME - "GET:/".len()));
        let name = key.with_resource(&request("GET", &fits), str::to_owned);
        assert_eq!(name.len(), INLINE_NAME);
        assert_eq!(name, format!("GET:{fits}"));
    }

    #[test]
    fn path_borrows_from_the_request() {
        let request = request("GET", "/cart/items?page=2");
        let name = ResourceKey::path().resource(&request);
        assert!(matches!(name, Cow::Borrowed("/cart/items")));
    }

    #[test]
    fn a_closure_names_the_resource() {
        let key = ResourceKey::from_fn(|request: &Request<()>| {
            if request.uri().path().starts_with("/admin") {
                "admin"
            } else {
                "public"
            }
        });
        assert_eq!(key.resource(&request("GET", "/admin/users")), "admin");
        assert_eq!(key.resource(&request("GET", "/")), "public");
        assert_eq!(
            key.with_resource(&request("GET", "/admin"), str::to_owned),
            "admin"
        );
        assert!(format!("{key:?}").starts_with("ResourceKeyFn"));
    }
}
