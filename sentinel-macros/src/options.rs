//! The attribute's options: `#[sentinel(resource = "...", origin = ..., args(...), ...)]`.

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::meta::ParseNestedMeta;
use syn::punctuated::Punctuated;
use syn::{Expr, Path, Token, Type};

/// The options, every one optional.
#[derive(Default)]
pub(crate) struct Options {
    /// The resource name (default: the function's path).
    pub(crate) resource: Option<Expr>,
    /// The caller's name, per call.
    pub(crate) origin: Option<Expr>,
    /// The param-flow arguments, in order (`paramIdx` 0 first).
    pub(crate) args: Vec<Expr>,
    /// The entry is inbound (system rules apply).
    pub(crate) inbound: bool,
    /// Called with the arguments and the `BlockError` when a rule blocks the call.
    pub(crate) block_handler: Option<Path>,
    /// Called with the body's error.
    pub(crate) fallback: Option<Path>,
    /// Error types that neither count nor reach the fallback (found by `downcast_ref`).
    pub(crate) exceptions_to_ignore: Vec<Type>,
    /// A predicate on the error: `true` neither counts nor reaches the fallback.
    pub(crate) ignore_if: Option<Path>,
    /// The engine (default: `Sentinel::global()`).
    pub(crate) sentinel: Option<Expr>,
}

const NAMES: &str = "`resource`, `origin`, `args`, `inbound`, `block_handler`, `fallback`, \
                     `exceptions_to_ignore`, `ignore_if`, `sentinel`";

impl Options {
    /// Parses one option.
    pub(crate) fn parse(&mut self, meta: ParseNestedMeta<'_>) -> syn::Result<()> {
        let name = meta
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        match name.as_str() {
            "resource" => set(&meta, &mut self.resource, meta.value()?.parse()?),
            "origin" => set(&meta, &mut self.origin, meta.value()?.parse()?),
            "sentinel" => set(&meta, &mut self.sentinel, meta.value()?.parse()?),
            "block_handler" => set(&meta, &mut self.block_handler, meta.value()?.parse()?),
            "fallback" => set(&meta, &mut self.fallback, meta.value()?.parse()?),
            "ignore_if" => set(&meta, &mut self.ignore_if, meta.value()?.parse()?),
            "inbound" => {
                if self.inbound {
                    return Err(meta.error("`inbound` is given twice"));
                }
                self.inbound = true;
                Ok(())
            }
            "args" => {
                let content;
                syn::parenthesized!(content in meta.input);
                let list = Punctuated::<Expr, Token![,]>::parse_terminated(&content)?;
                self.args.extend(list);
                Ok(())
            }
            "exceptions_to_ignore" => {
                let content;
                syn::parenthesized!(content in meta.input);
                let list = Punctuated::<Type, Token![,]>::parse_terminated(&content)?;
                self.exceptions_to_ignore.extend(list);
                Ok(())
            }
            _ => Err(meta.error(format_args!(
                "unknown `#[sentinel]` option `{}`: expected one of {NAMES}",
                path_text(&meta.path)
            ))),
        }
    }

    /// Whether the body's result must be a `Result` taken apart (a fallback or a filter).
    pub(crate) fn inspects_errors(&self) -> bool {
        self.fallback.is_some() || self.ignore_if.is_some() || !self.exceptions_to_ignore.is_empty()
    }
}

fn set<T>(meta: &ParseNestedMeta<'_>, slot: &mut Option<T>, value: T) -> syn::Result<()> {
    if slot.is_some() {
        return Err(meta.error(format_args!("`{}` is given twice", path_text(&meta.path))));
    }
    *slot = Some(value);
    Ok(())
}

fn path_text(path: &Path) -> String {
    quote::ToTokens::to_token_stream(path)
        .to_string()
        .replace(' ', "")
}

/// The first use in `tokens` of `self` or of a variable named in `names` (an identifier
/// that starts a path, is not called and is not a field), with its span.
pub(crate) fn uses_any(tokens: TokenStream, names: &[String]) -> Option<(String, Span)> {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, tree) in trees.iter().enumerate() {
        match tree {
            TokenTree::Ident(ident) => {
                let text = ident.to_string();
                let after_path_or_dot = i
                    .checked_sub(1)
                    .and_then(|j| trees.get(j))
                    .is_some_and(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ':' || p.as_char() == '.'));
                let called = trees.get(i + 1).is_some_and(|t| {
                    matches!(t, TokenTree::Group(g) if g.delimiter() == proc_macro2::Delimiter::Parenthesis)
                        || matches!(t, TokenTree::Punct(p) if p.as_char() == ':' || p.as_char() == '!')
                });
                if text == "self" || (names.contains(&text) && !after_path_or_dot && !called) {
                    return Some((text, ident.span()));
                }
            }
            TokenTree::Group(group) => {
                if let Some(found) = uses_any(group.stream(), names) {
                    return Some(found);
                }
            }
            TokenTree::Punct(_) | TokenTree::Literal(_) => {}
        }
    }
    None
}
