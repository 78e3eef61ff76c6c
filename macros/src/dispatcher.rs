//! The expansion of `#[dispatcher]`: the dispatcher itself, plus a hidden macro of the same name
//! that carries its signature to `#[torch_function]`, wherever the dispatcher lives.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Attribute, ItemFn};

use crate::expand::tensor_type;
use crate::signature::{Errors, parse_params};
use crate::verify::{RECEIVER_IN_DISPATCHER, check_dispatcher_defaults};

/// `#[dispatcher] fn d(...) -> impl Relevant { ... }`. `unique` distinguishes the hidden macro,
/// which `#[macro_export]` places at the crate root, from those of other dispatchers.
pub fn expand(args: TokenStream, item: TokenStream, unique: &str) -> TokenStream {
    let mut func: ItemFn = match syn::parse2(item) {
        Ok(f) => f,
        Err(err) => return err.to_compile_error(),
    };
    let docs: Vec<Attribute> = func.attrs.iter().filter(|a| a.path().is_ident("doc")).cloned().collect();
    let original_sig = func.sig.clone();

    let mut errors = Errors::default();
    if !args.is_empty() {
        errors.push(args.span(), "#[dispatcher] takes no options");
    }
    match parse_params(&mut func.sig, &tensor_type()) {
        Ok(params) => {
            if let Some(r) = params.iter().find(|p| p.is_receiver) {
                errors.push(
                    r.span,
                    format!("a dispatcher is a free function: name the method's receiver `{RECEIVER_IN_DISPATCHER}`"),
                );
            }
            if let Err(e) = check_dispatcher_defaults(&params) {
                errors.add(e);
            }
        }
        Err(e) => errors.add(e),
    }
    if let Some(p) = func.sig.generics.type_params().next() {
        errors.push(p.span(), "a dispatcher cannot be generic: it takes the implementation's parameter types");
    }

    share_one_lifetime(&mut func.sig);
    let ident = &func.sig.ident;
    let vis = &func.vis;
    let hidden = format_ident!("__torchfn_dispatcher_{}_{}", ident, unique);
    let errors = match errors.finish(()) {
        Ok(()) => TokenStream::new(),
        Err(e) => e.to_compile_error(),
    };
    quote! {
        #errors
        #[allow(unused_variables)]
        #func

        #[doc(hidden)]
        #[macro_export]
        macro_rules! #hidden {
            ($($rest:tt)*) => {
                ::torchfn::__private::torch_function_checked! {
                    dispatcher = { #(#docs)* #original_sig }
                    $($rest)*
                }
            };
        }
        #[doc(hidden)]
        #[allow(unused_imports)]
        #vis use #hidden as #ident;
    }
}

/// Gives every reference among the parameters one lifetime, so a dispatcher can return
/// `[input, other]` (one array of references) without writing lifetimes.
fn share_one_lifetime(sig: &mut syn::Signature) {
    struct Share(syn::Lifetime);
    impl VisitMut for Share {
        fn visit_lifetime_mut(&mut self, lifetime: &mut syn::Lifetime) {
            if lifetime.ident == "_" {
                *lifetime = self.0.clone();
            }
        }
        fn visit_type_reference_mut(&mut self, r: &mut syn::TypeReference) {
            if r.lifetime.is_none() {
                r.lifetime = Some(self.0.clone());
            }
            syn::visit_mut::visit_type_reference_mut(self, r);
        }
    }
    let shared = syn::Lifetime::new("'__torchfn_relevant", proc_macro2::Span::call_site());
    let mut share = Share(shared.clone());
    for arg in sig.inputs.iter_mut() {
        if let syn::FnArg::Typed(t) = arg {
            share.visit_type_mut(&mut t.ty);
        }
    }
    sig.generics.params.insert(0, syn::GenericParam::Lifetime(syn::LifetimeParam::new(shared)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defines_the_function_and_a_macro_of_the_same_name() {
        let out = expand(
            quote!(),
            quote!(
                pub fn add_dispatcher(input: &Tensor, #[default(None)] alpha: Option<f64>) -> impl Relevant {
                    [input]
                }
            ),
            "abc",
        )
        .to_string();
        assert!(
            out.contains("pub fn add_dispatcher < '__torchfn_relevant > (input : & '__torchfn_relevant Tensor , alpha : Option < f64 >)"),
            "{out}"
        );
        assert!(out.contains("macro_rules ! __torchfn_dispatcher_add_dispatcher_abc"), "{out}");
        assert!(out.contains("# [default (None)] alpha"), "the macro keeps the marks for the check: {out}");
        assert!(out.contains("pub use __torchfn_dispatcher_add_dispatcher_abc as add_dispatcher"), "{out}");
    }

    #[test]
    fn rejects_non_none_defaults_and_receivers() {
        let out = expand(
            quote!(),
            quote!(
                fn d(&self, #[default(2)] alpha: i64) -> impl Relevant {
                    []
                }
            ),
            "x",
        )
        .to_string();
        assert!(out.contains("name the method's receiver `self_`"), "{out}");
        assert!(out.contains("dispatcher defaults must be `None`"), "{out}");
    }
}
