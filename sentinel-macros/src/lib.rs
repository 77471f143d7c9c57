#![doc = include_str!("../README.md")]

use proc_macro::TokenStream;
use syn::ItemFn;

mod expand;
mod options;

/// Guards a function (sync or `async`, free or a method) with Sentinel: every call enters a
/// resource, and a blocked call gets the block handler's answer instead of running the
/// body. The options are in the [crate docs](crate).
#[proc_macro_attribute]
pub fn sentinel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let parsed = match syn::parse::<ItemFn>(item.clone()) {
        Ok(parsed) => parsed,
        Err(error) => {
            let message = format!(
                "`#[sentinel]` guards a function with a body (free, or a method in an `impl` \
                 block): {error}"
            );
            return with_error(syn::Error::new(error.span(), message), item);
        }
    };
    let mut options = options::Options::default();
    let parser = syn::meta::parser(|meta| options.parse(meta));
    if let Err(error) = syn::parse::Parser::parse(parser, attr) {
        return with_error(error, item);
    }
    match expand::expand(options, parsed) {
        Ok(expanded) => expanded.into(),
        Err(error) => with_error(error, item),
    }
}

/// The error, and the item unchanged: the rest of the crate still sees the function, so the
/// error is the only one reported.
fn with_error(error: syn::Error, item: TokenStream) -> TokenStream {
    let mut tokens: TokenStream = error.to_compile_error().into();
    tokens.extend(item);
    tokens
}
