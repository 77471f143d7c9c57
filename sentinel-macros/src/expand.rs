//! The expansion: the function keeps its signature; its body enters the pre-resolved
//! resource, answers a block, runs the original body, and records how it ended.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, FnArg, ItemFn, Lit, Pat, ReturnType, Type};

use crate::options::{uses_any, Options};

/// Expands `#[sentinel(options)] item`.
pub(crate) fn expand(options: Options, mut item: ItemFn) -> syn::Result<TokenStream> {
    let sig = &item.sig;
    if let Some(constness) = &sig.constness {
        return Err(syn::Error::new(
            constness.span(),
            "`#[sentinel]` cannot guard a `const fn`: entering a resource happens at run time",
        ));
    }
    let is_async = sig.asyncness.is_some();
    let fn_name = sig.ident.to_string();

    // Parameters: an identifier keeps its name; any other pattern is taken under a name of
    // ours and destructured at the start of the body.
    let mut call_args: Vec<TokenStream> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut rebind: Vec<TokenStream> = Vec::new();
    let mut has_receiver = false;
    for (i, input) in item.sig.inputs.iter_mut().enumerate() {
        match input {
            FnArg::Receiver(receiver) => {
                has_receiver = true;
                call_args.push(receiver.self_token.to_token_stream());
            }
            FnArg::Typed(typed) => match &*typed.pat {
                Pat::Ident(pat) if pat.subpat.is_none() && pat.by_ref.is_none() => {
                    names.push(pat.ident.to_string());
                    call_args.push(pat.ident.to_token_stream());
                }
                _ => {
                    let name = format_ident!("__sentinel_arg{}", i);
                    let pat = &typed.pat;
                    rebind.push(quote!(let #pat = #name;));
                    call_args.push(name.to_token_stream());
                    *typed.pat = syn::parse_quote!(#name);
                }
            },
        }
    }

    // Evaluated once, at the first call: they may not read the call's arguments.
    for (option, expr) in [
        ("sentinel", &options.sentinel),
        ("resource", &options.resource),
    ] {
        if let Some(expr) = expr {
            if let Some((name, span)) = uses_any(expr.to_token_stream(), &names) {
                return Err(syn::Error::new(
                    span,
                    format!(
                        "`{option} = ...` is evaluated once, at the first call, and serves every \
                         later call, so it cannot use `{name}`: neither `self` nor the \
                         function's arguments"
                    ),
                ));
            }
        }
    }
    for arg in &options.args {
        if let Expr::Path(path) = arg {
            if let Some(ident) = path.path.get_ident() {
                if !names.contains(&ident.to_string()) {
                    return Err(syn::Error::new(
                        ident.span(),
                        format!(
                            "`args({ident})`: `{fn_name}` has no parameter named `{ident}`; \
                             name parameters (or their fields) whose values param-flow rules \
                             limit, in the order of `paramIdx`"
                        ),
                    ));
                }
            }
        }
    }

    let engine = match &options.sentinel {
        Some(expr) => quote!((#expr)),
        None => quote!(::sentinel_core::Sentinel::global()),
    };
    let name = match &options.resource {
        Some(expr) => quote!(&(#expr)),
        // A method: the type's path (without generic arguments, which a `static` cannot
        // depend on) and the method's name, as Sentinel names `Class:method`.
        None if has_receiver => quote! {
            &{
                let __sentinel_type = ::core::any::type_name::<Self>();
                let __sentinel_type = __sentinel_type
                    .split('<')
                    .next()
                    .unwrap_or(__sentinel_type);
                ::std::format!("{}::{}", __sentinel_type, #fn_name)
            }
        },
        None => quote!(::core::concat!(::core::module_path!(), "::", #fn_name)),
    };

    // The entry borrows what it is built from: with arguments, or an origin computed per
    // call, it is made independent of them (the handle's resource is shared, a reference
    // count), so that the body can take the arguments.
    let origin_is_static = matches!(
        &options.origin,
        None | Some(Expr::Lit(ExprLit {
            lit: Lit::Str(_),
            ..
        }))
    );
    let owned = !options.args.is_empty() || !origin_is_static;
    let origin = options.origin.as_ref().map(|o| quote!(.origin(#o)));
    let inbound = options.inbound.then(|| quote!(.inbound()));
    let (args_let, args_call) = if options.args.is_empty() {
        (quote!(), quote!())
    } else {
        let values = options
            .args
            .iter()
            .map(|arg| quote_spanned!(arg.span()=> (#arg).param_value()));
        (
            quote! {
                use ::sentinel_core::param_flow::ParamArg as _;
                let __sentinel_args = [#(#values),*];
            },
            quote!(.args(&__sentinel_args)),
        )
    };
    let enter = match (is_async, owned) {
        (false, false) => quote!(.enter()),
        (false, true) => quote!(.enter_owned()),
        (true, false) => quote!(.enter_async().await),
        (true, true) => quote!(.enter_async().await.map(::sentinel_core::Entry::into_owned)),
    };
    let dot_await = is_async.then(|| quote!(.await));

    // A blocked call: the block handler's answer, else the error (through the fallback if
    // there is one), else `Err(E::from(blocked))`.
    let on_block = match (&options.block_handler, &options.fallback) {
        (Some(handler), _) => quote!(#handler(#(#call_args,)* __sentinel_blocked)#dot_await),
        (None, Some(fallback)) => {
            quote!(#fallback(::core::convert::From::from(__sentinel_blocked))#dot_await)
        }
        (None, None) => {
            let span = return_span(&item.sig);
            quote_spanned! {span=>
                __SentinelFromBlock::__sentinel_from_block(__sentinel_blocked)
            }
        }
    };

    let ret: TokenStream = match &item.sig.output {
        ReturnType::Default => quote!(()),
        ReturnType::Type(_, ty) => ty.to_token_stream(),
    };
    let names_impl_trait = matches!(&item.sig.output, ReturnType::Type(_, ty) if mentions_impl(ty));
    let body = &item.block;
    let run_body = if is_async {
        quote!(async move { #(#rebind)* #body }.await)
    } else if names_impl_trait {
        quote!((move || { #(#rebind)* #body })())
    } else {
        quote!((move || -> #ret { #(#rebind)* #body })())
    };
    let result_ty = (!names_impl_trait).then(|| quote!(: #ret));

    let outcome = outcome(&options, &dot_await);
    let from_block = (options.block_handler.is_none() && options.fallback.is_none())
        .then(|| from_block_trait(return_span(&item.sig)));

    let new_body = quote! {
        {
            static __SENTINEL_RESOURCE: ::std::sync::OnceLock<::sentinel_core::ResourceHandle> =
                ::std::sync::OnceLock::new();
            /// Exits the entry as an error unless the body finished (a panic, or a future
            /// dropped before it completed).
            struct __SentinelGuard(::sentinel_core::Entry<'static>, bool);
            impl ::core::ops::Drop for __SentinelGuard {
                fn drop(&mut self) {
                    if !self.1 {
                        self.0.set_error();
                    }
                }
            }
            #from_block
            let __sentinel_handle: &'static ::sentinel_core::ResourceHandle =
                __SENTINEL_RESOURCE.get_or_init(|| #engine.resource(#name));
            let __sentinel_admission = {
                #args_let
                __sentinel_handle.entry() #origin #inbound #args_call #enter
            };
            let __sentinel_entry = match __sentinel_admission {
                ::core::result::Result::Ok(entry) => entry,
                ::core::result::Result::Err(__sentinel_blocked) => return #on_block,
            };
            let mut __sentinel_guard = __SentinelGuard(__sentinel_entry, false);
            #[allow(clippy::redundant_closure_call)]
            let __sentinel_result #result_ty = #run_body;
            __sentinel_guard.1 = true;
            #outcome
        }
    };
    item.block = Box::new(syn::parse2(new_body)?);
    Ok(item.into_token_stream())
}

/// What follows the body: the error recorded (unless ignored), the entry exited, and the
/// result returned or handed to the fallback.
fn outcome(options: &Options, dot_await: &Option<TokenStream>) -> TokenStream {
    if !options.inspects_errors() {
        // Any return type: a `Result`'s `Err` counts, other types never fail (the probe
        // picks the `Result` method when the type is one).
        return quote! {
            {
                struct __SentinelProbe<'a, T>(&'a T);
                trait __SentinelIsErr {
                    fn __sentinel_failed(&self) -> bool;
                }
                impl<T, E> __SentinelIsErr for __SentinelProbe<'_, ::core::result::Result<T, E>> {
                    fn __sentinel_failed(&self) -> bool {
                        self.0.is_err()
                    }
                }
                trait __SentinelNeverErr {
                    fn __sentinel_failed(&self) -> bool;
                }
                impl<T> __SentinelNeverErr for &__SentinelProbe<'_, T> {
                    fn __sentinel_failed(&self) -> bool {
                        false
                    }
                }
                if (&__SentinelProbe(&__sentinel_result)).__sentinel_failed() {
                    __sentinel_guard.0.set_error();
                }
            }
            ::core::mem::drop(__sentinel_guard);
            __sentinel_result
        };
    }
    let ignored = options
        .exceptions_to_ignore
        .iter()
        .map(|ty| quote_spanned!(ty.span()=> || __sentinel_error.downcast_ref::<#ty>().is_some()))
        .chain(
            options
                .ignore_if
                .iter()
                .map(|f| quote_spanned!(f.span()=> || #f(__sentinel_error))),
        );
    let span = options
        .fallback
        .as_ref()
        .map(Spanned::span)
        .or_else(|| options.ignore_if.as_ref().map(Spanned::span))
        .or_else(|| options.exceptions_to_ignore.first().map(Spanned::span))
        .unwrap_or_else(Span::call_site);
    let result_trait = quote_spanned! {span=>
            #[diagnostic::on_unimplemented(
                message = "`#[sentinel]`'s `fallback`, `ignore_if` and `exceptions_to_ignore` need a function that returns a `Result`: `{Self}` is not one",
                label = "this option needs the function to return a `Result`"
            )]
            trait __SentinelResult {
                type Ok;
                type Err;
                fn __sentinel_split(self) -> ::core::result::Result<Self::Ok, Self::Err>;
                fn __sentinel_join(result: ::core::result::Result<Self::Ok, Self::Err>) -> Self;
            }
            impl<T, E> __SentinelResult for ::core::result::Result<T, E> {
                type Ok = T;
                type Err = E;
                fn __sentinel_split(self) -> ::core::result::Result<T, E> {
                    self
                }
                fn __sentinel_join(result: ::core::result::Result<T, E>) -> Self {
                    result
                }
            }
    };
    let split = quote_spanned!(span=> __SentinelResult::__sentinel_split(__sentinel_result));
    // Every use of the trait at the option's span: a function that is not a `Result` gets
    // one error there.
    let join_ok = quote_spanned! {span=>
        __SentinelResult::__sentinel_join(::core::result::Result::Ok(value))
    };
    let join_err = quote_spanned! {span=>
        __SentinelResult::__sentinel_join(::core::result::Result::Err(__sentinel_error))
    };
    let on_error = match &options.fallback {
        Some(fallback) => quote!(#fallback(__sentinel_error)#dot_await),
        None => join_err.clone(),
    };
    quote! {
        #result_trait
        match #split {
            ::core::result::Result::Ok(value) => {
                ::core::mem::drop(__sentinel_guard);
                #join_ok
            }
            ::core::result::Result::Err(__sentinel_error) => {
                let __sentinel_ignored = {
                    let __sentinel_error = &__sentinel_error;
                    false #(#ignored)*
                };
                if __sentinel_ignored {
                    ::core::mem::drop(__sentinel_guard);
                    return #join_err;
                }
                __sentinel_guard.0.set_error();
                ::core::mem::drop(__sentinel_guard);
                #on_error
            }
        }
    }
}

/// The conversion of a block into the function's result when no handler answers it.
fn from_block_trait(span: Span) -> TokenStream {
    quote_spanned! {span=>
        #[diagnostic::on_unimplemented(
            message = "`#[sentinel]` without `block_handler` returns `Err(BlockError.into())` when a rule blocks the call, so the function must return a `Result` whose error implements `From<sentinel_core::BlockError>`: `{Self}` does not",
            label = "this return type cannot carry a `BlockError`",
            note = "add `block_handler = path` (called with the arguments and the `BlockError`), or return `Result<_, E>` with `E: From<sentinel_core::BlockError>`"
        )]
        trait __SentinelFromBlock: ::core::marker::Sized {
            fn __sentinel_from_block(blocked: ::sentinel_core::BlockError) -> Self;
        }
        impl<T, E: ::core::convert::From<::sentinel_core::BlockError>> __SentinelFromBlock
            for ::core::result::Result<T, E>
        {
            fn __sentinel_from_block(blocked: ::sentinel_core::BlockError) -> Self {
                ::core::result::Result::Err(::core::convert::From::from(blocked))
            }
        }
    }
}

/// Where the return type is written (the function's name when it returns `()`).
fn return_span(sig: &syn::Signature) -> Span {
    match &sig.output {
        ReturnType::Default => sig.ident.span(),
        ReturnType::Type(_, ty) => ty.span(),
    }
}

/// Whether `ty` names an `impl Trait` (which a closure's return type cannot).
fn mentions_impl(ty: &Type) -> bool {
    fn walk(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|tree| match tree {
            proc_macro2::TokenTree::Ident(ident) => ident == "impl",
            proc_macro2::TokenTree::Group(group) => walk(group.stream()),
            _ => false,
        })
    }
    walk(ty.to_token_stream())
}
