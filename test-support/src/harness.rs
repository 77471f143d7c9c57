//! The server half of a conformance harness, written once: [`server_control!`] expands, inside
//! an `#[async_trait] impl ConformanceHarness`, into `stop_server`, `start_server` and
//! `write_while_down` delegated to a [`ServerControl`](crate::ServerControl) field.

use std::future::Future;
use std::pin::Pin;

use sentinel_core::datasource::testkit::Unsupported;

/// Expands, inside an `#[async_trait] impl ConformanceHarness for ...` block, into the
/// methods that stop and start "the server" through the harness's
/// [`ServerControl`](crate::ServerControl) field `$control`:
///
/// - `server_control!(control)`: `stop_server`, `start_server`, and `write_while_down`
///   (the harness's own `write`, when the server keeps running behind a cut
///   [`Partition`](crate::Partition); `Unsupported` otherwise);
/// - `server_control!(control, stop_start)`: `stop_server` and `start_server` only, for a
///   harness that writes while down in its own way.
///
/// The methods are written in the form `#[async_trait]` gives the trait's (a boxed future,
/// `__ServerFuture`), since the attribute does not reach into a macro call.
#[macro_export]
macro_rules! server_control {
    // One method in the boxed-future form, its signature written once: `self`, then
    // borrowed arguments each with its own lifetime. The caller passes its `self` token, so
    // that the body's `self` is the signature's (macro hygiene).
    (@method $self:ident $method:ident ($($arg:ident: &$life:lifetime $ty:ty),*) { $($body:tt)* }) => {
        fn $method<'life0, $($life,)* 'async_trait>(
            &'life0 $self,
            $($arg: &$life $ty),*
        ) -> $crate::__ServerFuture<'async_trait>
        where
            'life0: 'async_trait,
            $($life: 'async_trait,)*
            Self: 'async_trait,
        {
            ::std::boxed::Box::pin(async move { $($body)* })
        }
    };
    ($control:ident, stop_start) => {
        $crate::server_control!(@method self stop_server () { self.$control.stop().await });
        $crate::server_control!(@method self start_server () { self.$control.start().await });
    };
    ($control:ident) => {
        $crate::server_control!($control, stop_start);
        $crate::server_control!(@method self write_while_down (bytes: &'life1 [u8]) {
            if !self.$control.writable_while_down() {
                return ::std::result::Result::Err($crate::__Unsupported);
            }
            <Self as $crate::__ConformanceHarness>::write(self, bytes).await;
            ::std::result::Result::Ok(())
        });
    };
}

/// The future `#[async_trait]` makes a harness's server method return.
#[doc(hidden)]
pub type __ServerFuture<'a> = Pin<Box<dyn Future<Output = Result<(), Unsupported>> + Send + 'a>>;
