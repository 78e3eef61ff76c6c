//! `#[torch_function(class = C)]` on an `impl Trait for Tensor` block: the methods of a user's
//! class, callable as `t.method()`, that go through the protocol as RFC-0001 asks of a
//! subclass's own methods (Python's `@torch_function_dispatch` on a method of a subclass).
//!
//! Each method becomes an associated function of the class, `C::method(self_: &Tensor, ...)`,
//! written with `#[torch_function(class = C)]` (its handle is `C::METHOD`, registered as
//! `C.method`); the trait's method calls it.

use proc_macro2::{Group, Ident, TokenStream, TokenTree};
use quote::{ToTokens, quote};
use syn::spanned::Spanned;
use syn::{FnArg, ImplItem, ItemImpl, Path, Type};

use crate::expand::CLASS_RECEIVER;

/// The expansion of the block; `args` are the attribute's own options (with `class`).
pub fn expand(args: TokenStream, class: &Path, block: ItemImpl) -> syn::Result<TokenStream> {
    let tensor_self =
        matches!(&*block.self_ty, Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "Tensor"));
    if block.trait_.is_none() || !tensor_self {
        return Err(syn::Error::new(
            block.self_ty.span(),
            "#[torch_function(class = ...)] goes on an `impl Trait for Tensor` block (Rust allows no inherent methods on Tensor outside torchfn)",
        ));
    }
    let mut forwarding = block.clone();
    let mut associated = Vec::new();
    for item in forwarding.items.iter_mut() {
        let ImplItem::Fn(method) = item else { continue };
        // The method's own `#[torch_function(...)]` options, if it has any, join the block's.
        let mut options = args.clone();
        method.attrs.retain(|attr| {
            if attr.path().is_ident("torch_function") {
                if let Ok(list) = attr.meta.require_list() {
                    options.extend(quote!(, ));
                    options.extend(list.tokens.clone());
                }
                false
            } else {
                true
            }
        });
        let (docs, others): (Vec<_>, Vec<_>) = method.attrs.iter().cloned().partition(|a| a.path().is_ident("doc"));
        let mut sig = method.sig.clone();
        let receiver = match sig.inputs.first() {
            Some(FnArg::Receiver(r)) if r.reference.is_some() && r.mutability.is_none() && r.colon_token.is_none() => {
                r.span()
            }
            _ => return Err(syn::Error::new(sig.ident.span(), "a class's method takes `&self` first")),
        };
        let self_ = Ident::new(CLASS_RECEIVER, receiver);
        if let Some(first) = sig.inputs.first_mut() {
            *first = syn::parse_quote_spanned!(receiver=> #self_: &::torchfn::Tensor);
        }
        let body = rename_self(method.block.to_token_stream());
        let ident = &sig.ident;
        associated.push(quote! {
            #(#docs)*
            #(#others)*
            #[::torchfn::torch_function(#options)]
            pub #sig #body
        });
        // The trait's method: the same signature without the helper marks, calling the class's.
        let mut plain = method.sig.clone();
        for input in plain.inputs.iter_mut() {
            let attrs = match input {
                FnArg::Receiver(r) => &mut r.attrs,
                FnArg::Typed(t) => &mut t.attrs,
            };
            attrs.retain(|a| !["default", "variadic", "keyword_only"].iter().any(|m| a.path().is_ident(m)));
        }
        let args: Vec<TokenStream> = plain
            .inputs
            .iter()
            .skip(1)
            .map(|input| match input {
                FnArg::Typed(t) => t.pat.to_token_stream(),
                FnArg::Receiver(r) => r.self_token.to_token_stream(),
            })
            .collect();
        method.sig = plain;
        method.attrs.push(syn::parse_quote!(#[inline]));
        method.block = syn::parse_quote!({ #class::#ident(self, #(#args),*) });
    }
    Ok(quote! {
        #forwarding
        impl #class {
            #(#associated)*
        }
    })
}

/// `tokens` with the receiver `self` renamed to the class method's first parameter (a path
/// starting `self::` is a module path and stays).
fn rename_self(tokens: TokenStream) -> TokenStream {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out = Vec::with_capacity(tokens.len());
    for (i, token) in tokens.iter().enumerate() {
        let path_follows = matches!(
            (tokens.get(i + 1), tokens.get(i + 2)),
            (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) if a.as_char() == ':' && b.as_char() == ':'
        );
        out.push(match token {
            TokenTree::Ident(id) if id == "self" && !path_follows => {
                TokenTree::Ident(Ident::new(CLASS_RECEIVER, id.span()))
            }
            TokenTree::Group(g) => {
                let mut renamed = Group::new(g.delimiter(), rename_self(g.stream()));
                renamed.set_span(g.span());
                TokenTree::Group(renamed)
            }
            other => other.clone(),
        });
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    #[test]
    fn methods_forward_to_the_class_s_associated_functions() {
        let block: ItemImpl = parse_quote! {
            impl MetersExt for Tensor {
                /// In feet.
                fn to_feet(&self, #[default(1.0)] scale: f64) -> Result<Tensor> {
                    self.mul_scalar(scale * 3.28)
                }
            }
        };
        let out = expand(quote!(class = Meters), &parse_quote!(Meters), block).unwrap().to_string();
        assert!(
            out.contains("fn to_feet (& self , scale : f64) -> Result < Tensor > { Meters :: to_feet (self , scale) }"),
            "{out}"
        );
        assert!(
            out.contains("pub fn to_feet (self_ : & :: torchfn :: Tensor , # [default (1.0)] scale : f64)"),
            "{out}"
        );
        assert!(out.contains("self_ . mul_scalar"), "{out}");
        assert!(out.contains("# [:: torchfn :: torch_function (class = Meters)]"), "{out}");
    }

    #[test]
    fn only_trait_impls_for_tensor_are_taken() {
        let block: ItemImpl = parse_quote!(impl Meters { fn f(&self) -> Result<Tensor> { todo!() } });
        let err = expand(quote!(class = Meters), &parse_quote!(Meters), block).unwrap_err();
        assert!(err.to_string().contains("`impl Trait for Tensor`"), "{err}");
    }

    #[test]
    fn module_paths_keep_their_self() {
        let out = rename_self(quote!(self.x + self::helper(self)));
        assert_eq!(out.to_string(), "self_ . x + self :: helper (self_)");
    }
}
