//! `#[derive(TensorSubclass)]` and `#[derive(DuckTensor)]`: a static class per type.

use proc_macro2::TokenStream;
use quote::quote;
use syn::spanned::Spanned;
use syn::{DeriveInput, Path};

/// Which derive.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A tensor subclass: descends from `Tensor` (or the `parent` subclass).
    Subclass,
    /// A duck type: not a tensor; may have a duck `parent`.
    Duck,
}

/// `#[torchfn(parent = Path, disable_torch_function)]`.
struct ClassOptions {
    parent: Option<Path>,
    disabled: bool,
}

fn options(input: &DeriveInput) -> syn::Result<ClassOptions> {
    let mut options = ClassOptions { parent: None, disabled: false };
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("torchfn")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("parent") {
                options.parent = Some(meta.value()?.parse()?);
                Ok(())
            } else if meta.path.is_ident("disable_torch_function") {
                options.disabled = true;
                Ok(())
            } else {
                Err(meta.error("expected `parent = Type` or `disable_torch_function`"))
            }
        })?;
    }
    Ok(options)
}

/// The derive's output: `TensorLike` with a static `Class`, and the marker trait.
pub fn derive(input: TokenStream, kind: Kind) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    match expand(&input, kind) {
        Ok(out) => out,
        Err(e) => e.to_compile_error(),
    }
}

fn expand(input: &DeriveInput, kind: Kind) -> syn::Result<TokenStream> {
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new(
            input.generics.span(),
            "a tensor class cannot be generic: each class is one static",
        ));
    }
    let options = options(input)?;
    let ident = &input.ident;
    let name = ident.to_string();
    let hook = if options.disabled {
        quote!(::core::option::Option::None)
    } else {
        quote!(::core::option::Option::Some(<#ident as ::torchfn::TorchFunction>::torch_function))
    };
    let (class, marker, parent_check) = match (kind, &options.parent) {
        (Kind::Subclass, parent) => {
            let parent = parent.clone().unwrap_or_else(|| syn::parse_quote!(::torchfn::Tensor));
            (
                quote!(::torchfn::Class::__subclass(#name, <#parent as ::torchfn::TensorLike>::class, #hook)),
                quote!(impl ::torchfn::TensorSubclass for #ident {}),
                quote!(const _: fn() = || {
                    fn tensor_class<T: ::torchfn::TensorLike>() {}
                    tensor_class::<#parent>();
                };),
            )
        }
        (Kind::Duck, parent) => {
            let parent = match parent {
                Some(p) => quote!(::core::option::Option::Some(<#p as ::torchfn::TensorLike>::class)),
                None => quote!(::core::option::Option::None),
            };
            (
                quote!(::torchfn::Class::__duck(#name, #parent, #hook)),
                quote!(impl ::torchfn::DuckTensor for #ident {}),
                quote!(),
            )
        }
    };
    Ok(quote! {
        impl ::torchfn::TensorLike for #ident {
            fn class() -> &'static ::torchfn::Class {
                static CLASS: ::torchfn::Class = #class;
                &CLASS
            }
        }
        #marker
        #parent_check
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subclasses_descend_from_tensor_by_default() {
        let out = derive(
            quote!(
                struct Meters {
                    scale: f64,
                }
            ),
            Kind::Subclass,
        )
        .to_string();
        assert!(
            out.contains(
                "Class :: __subclass (\"Meters\" , < :: torchfn :: Tensor as :: torchfn :: TensorLike > :: class"
            ),
            "{out}"
        );
        assert!(out.contains("impl :: torchfn :: TensorSubclass for Meters"), "{out}");
    }

    #[test]
    fn parents_and_disabled_hooks() {
        let out = derive(
            quote!(
                #[torchfn(parent = Base, disable_torch_function)]
                struct Sub;
            ),
            Kind::Subclass,
        )
        .to_string();
        assert!(
            out.contains("< Base as :: torchfn :: TensorLike > :: class , :: core :: option :: Option :: None"),
            "{out}"
        );
    }

    #[test]
    fn ducks_have_no_parent_unless_given() {
        let out = derive(
            quote!(
                #[derive(Debug)]
                struct ScalarTensor;
            ),
            Kind::Duck,
        )
        .to_string();
        assert!(out.contains("Class :: __duck (\"ScalarTensor\" , :: core :: option :: Option :: None"), "{out}");
    }

    #[test]
    fn generic_classes_are_refused() {
        let out = derive(
            quote!(
                struct W<T>(T);
            ),
            Kind::Duck,
        )
        .to_string();
        assert!(out.contains("cannot be generic"), "{out}");
    }
}
