//! Which resource an outbound call enters: its host, or its host and a route template the
//! caller gives, or a closure.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use http::Extensions;
use reqwest::Request;

/// A route template for one call, as an extension of the request: the call enters
/// `http://host:port/users/{id}` rather than its host's resource, so that every id of the
/// route shares one resource (and one circuit breaker).
///
/// ```
/// use reqwest_middleware::ClientBuilder;
/// use sentinel_reqwest::{Route, SentinelMiddleware};
///
/// let client = ClientBuilder::new(reqwest::Client::new())
///     .with(SentinelMiddleware::new(sentinel_core::Sentinel::new()))
///     .build();
/// // Enters `http://users.internal:8080/users/{id}` (sent when awaited with `.send()`).
/// let request = client
///     .get("http://users.internal:8080/users/42")
///     .with_extension(Route::new("/users/{id}"));
/// # let _ = request;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route(Cow<'static, str>);

impl Route {
    /// The template, e.g. `/users/{id}`; a missing leading `/` is added.
    pub fn new(template: impl Into<Cow<'static, str>>) -> Self {
        let template = template.into();
        if template.starts_with('/') {
            Self(template)
        } else {
            Self(Cow::Owned(format!("/{template}")))
        }
    }

    /// The template.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A [`ResourceName::from_fn`] closure.
type NameFn = dyn Fn(&Request, &Extensions) -> String + Send + Sync;

/// How an outbound call names its resource. Rules, statistics and circuit breakers are per
/// resource.
///
/// | | a call to `http://users.internal:8080/users/42` | with [`Route`]`("/users/{id}")` |
/// | --- | --- | --- |
/// | [`host`](Self::host) (default) | `http://users.internal:8080` | `http://users.internal:8080/users/{id}` |
/// | [`method_and_host`](Self::method_and_host) | `GET:http://users.internal:8080` | `GET:http://users.internal:8080/users/{id}` |
/// | [`from_fn`](Self::from_fn) | the closure's name | the closure's name (it sees the extensions) |
///
/// The port is always written, the default one too. `method_and_host` is Spring Cloud
/// Alibaba's `@SentinelRestTemplate` naming of a host resource.
#[derive(Clone)]
pub struct ResourceName {
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    Host,
    MethodAndHost,
    Custom(Arc<NameFn>),
}

impl Default for ResourceName {
    fn default() -> Self {
        Self::host()
    }
}

impl ResourceName {
    /// `scheme://host:port`, and the call's [`Route`] after it when the request has one.
    pub fn host() -> Self {
        Self { kind: Kind::Host }
    }

    /// `METHOD:scheme://host:port`, and the call's [`Route`] after it when the request has
    /// one.
    pub fn method_and_host() -> Self {
        Self {
            kind: Kind::MethodAndHost,
        }
    }

    /// A closure over the request and its `reqwest-middleware` extensions (where a
    /// [`Route`] or your own per-call types are).
    ///
    /// ```
    /// use sentinel_reqwest::{ResourceName, Route};
    ///
    /// // One resource per route, named without the host.
    /// let name = ResourceName::from_fn(|request, extensions| {
    ///     match extensions.get::<Route>() {
    ///         Some(route) => format!("users-api:{}", route.as_str()),
    ///         None => format!("users-api:{}", request.url().path()),
    ///     }
    /// });
    /// # let _ = name;
    /// ```
    pub fn from_fn<F>(f: F) -> Self
    where
        F: Fn(&Request, &Extensions) -> String + Send + Sync + 'static,
    {
        Self {
            kind: Kind::Custom(Arc::new(f)),
        }
    }

    /// The resource of `request`.
    pub fn name(&self, request: &Request, extensions: &Extensions) -> String {
        let method = match &self.kind {
            Kind::Custom(f) => return f(request, extensions),
            Kind::Host => None,
            Kind::MethodAndHost => Some(request.method().as_str()),
        };
        let url = request.url();
        let route = extensions.get::<Route>().map_or("", Route::as_str);
        let host = url.host_str().unwrap_or("");
        let port = url.port_or_known_default().unwrap_or(0);
        match method {
            Some(method) => format!("{method}:{}://{host}:{port}{route}", url.scheme()),
            None => format!("{}://{host}:{port}{route}", url.scheme()),
        }
    }
}

impl fmt::Debug for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::Host => f.write_str("ResourceName::Host"),
            Kind::MethodAndHost => f.write_str("ResourceName::MethodAndHost"),
            Kind::Custom(_) => f.write_str("ResourceName::Custom"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: reqwest::Method, url: &str) -> Request {
        Request::new(method, url.parse().expect("a valid URL"))
    }

    #[test]
    fn a_host_is_named_with_its_port() {
        let none = Extensions::new();
        let get = request(reqwest::Method::GET, "https://api.example/v1/users/7?x=1");
        assert_eq!(
            ResourceName::host().name(&get, &none),
            "https://api.example:443"
        );
        let post = request(reqwest::Method::POST, "http://127.0.0.1:8080/users");
        assert_eq!(
            ResourceName::method_and_host().name(&post, &none),
            "POST:http://127.0.0.1:8080"
        );
    }

    #[test]
    fn a_route_extension_adds_the_template() {
        let mut extensions = Extensions::new();
        extensions.insert(Route::new("users/{id}"));
        let get = request(reqwest::Method::GET, "http://users:9000/users/42");
        assert_eq!(
            ResourceName::host().name(&get, &extensions),
            "http://users:9000/users/{id}"
        );
        assert_eq!(
            ResourceName::method_and_host().name(&get, &extensions),
            "GET:http://users:9000/users/{id}"
        );
        let custom = ResourceName::from_fn(|_, _| String::from("fixed"));
        assert_eq!(custom.name(&get, &extensions), "fixed");
        assert_eq!(format!("{custom:?}"), "ResourceName::Custom");
    }
}
