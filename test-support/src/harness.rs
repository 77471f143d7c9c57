//! The server half of a conformance harness, written once: [`server_control!`] expands, inside
//! an `#[async_trait] impl ConformanceHarness`, into `stop_server`, `start_server` and
//! `write_while_down` delegated to a [`ServerControl`](crate::ServerControl) field.

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
/// The methods are written in the form `#[async_trait]` gives the trait's (a boxed future),
/// since the attribute does not reach into a macro call.
#[macro_export]
macro_rules! server_control {
    (@delegate $method:ident, $control:ident, $call:ident) => {
        fn $method<'life0, 'async_trait>(
            &'life0 self,
        ) -> ::std::pin::Pin<
            ::std::boxed::Box<
                dyn ::std::future::Future<Output = ::std::result::Result<(), $crate::__Unsupported>>
                    + ::std::marker::Send
                    + 'async_trait,
            >,
        >
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            ::std::boxed::Box::pin(self.$control.$call())
        }
    };
    ($control:ident, stop_start) => {
        $crate::server_control!(@delegate stop_server, $control, stop);
        $crate::server_control!(@delegate start_server, $control, start);
    };
    ($control:ident) => {
        $crate::server_control!($control, stop_start);

        fn write_while_down<'life0, 'life1, 'async_trait>(
            &'life0 self,
            bytes: &'life1 [u8],
        ) -> ::std::pin::Pin<
            ::std::boxed::Box<
                dyn ::std::future::Future<Output = ::std::result::Result<(), $crate::__Unsupported>>
                    + ::std::marker::Send
                    + 'async_trait,
            >,
        >
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            Self: 'async_trait,
        {
            ::std::boxed::Box::pin(async move {
                if !self.$control.writable_while_down() {
                    return ::std::result::Result::Err($crate::__Unsupported);
                }
                <Self as $crate::__ConformanceHarness>::write(self, bytes).await;
                ::std::result::Result::Ok(())
            })
        }
    };
}
