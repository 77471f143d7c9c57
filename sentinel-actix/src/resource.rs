//! Which Sentinel resource a request enters: its method and matched route pattern (the
//! default), the pattern alone, its method and path, or a closure.

use std::fmt;
use std::sync::Arc;

use actix_web::dev::ServiceRequest;

type NameFn = dyn Fn(&ServiceRequest) -> String + Send + Sync;

/// How a request names its resource. Rules, statistics and circuit breakers are per resource.
///
/// | | `GET /order/42` on `web::resource("/order/{id}")` |
/// | --- | --- |
/// | [`method_and_route`](Self::method_and_route) (default) | `GET:/order/{id}` |
/// | [`route`](Self::route) | `/order/{id}` |
/// | [`method_and_path`](Self::method_and_path) | `GET:/order/42` |
/// | [`from_fn`](Self::from_fn) | the closure's name |
///
/// A request that no route matches (a 404) is named by its path with the route keys, so
/// that it is still guarded; each distinct path is then a resource (the engine caps their
/// number).
#[derive(Clone)]
pub struct ResourceKey {
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    MethodAndRoute,
    Route,
    MethodAndPath,
    Custom(Arc<NameFn>),
}

impl Default for ResourceKey {
    fn default() -> Self {
        Self::method_and_route()
    }
}

impl ResourceKey {
    /// `METHOD:/pattern`, the route actix-web matched: `GET:/order/{id}` for `/order/42`
    /// and `/order/43` alike, as Sentinel's web adapters name HTTP resources.
    pub fn method_and_route() -> Self {
        Self {
            kind: Kind::MethodAndRoute,
        }
    }

    /// The matched route pattern alone: `/order/{id}`.
    pub fn route() -> Self {
        Self { kind: Kind::Route }
    }

    /// `METHOD:/path`: `GET:/order/42`, a resource per path (bound it: ids make one each).
    pub fn method_and_path() -> Self {
        Self {
            kind: Kind::MethodAndPath,
        }
    }

    /// A closure naming the resource of a request.
    ///
    /// ```
    /// use sentinel_actix::ResourceKey;
    ///
    /// // One resource per API version.
    /// let key = ResourceKey::from_fn(|request| {
    ///     let version = request.path().split('/').nth(1).unwrap_or("");
    ///     format!("api:{version}")
    /// });
    /// # let _ = key;
    /// ```
    pub fn from_fn<F>(f: F) -> Self
    where
        F: Fn(&ServiceRequest) -> String + Send + Sync + 'static,
    {
        Self {
            kind: Kind::Custom(Arc::new(f)),
        }
    }

    /// The resource of `request`.
    pub fn resource(&self, request: &ServiceRequest) -> String {
        let route = || request.match_pattern();
        match &self.kind {
            Kind::Custom(f) => f(request),
            Kind::Route => route().unwrap_or_else(|| request.path().to_owned()),
            Kind::MethodAndRoute => {
                let method = request.method().as_str();
                match route() {
                    // The pattern's own buffer (actix-web gives it room to spare), with the
                    // method put in front: no second allocation.
                    Some(mut route) => {
                        route.insert(0, ':');
                        route.insert_str(0, method);
                        route
                    }
                    None => format!("{method}:{}", request.path()),
                }
            }
            Kind::MethodAndPath => format!("{}:{}", request.method(), request.path()),
        }
    }
}

impl fmt::Debug for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::MethodAndRoute => f.write_str("ResourceKey::MethodAndRoute"),
            Kind::Route => f.write_str("ResourceKey::Route"),
            Kind::MethodAndPath => f.write_str("ResourceKey::MethodAndPath"),
            Kind::Custom(_) => f.write_str("ResourceKey::Custom"),
        }
    }
}
