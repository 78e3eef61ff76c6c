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

/// `#[torchfn(parent = Path, hook, disable_torch_function)]`.
struct ClassOptions {
    parent: Option<Path>,
    hook: bool,
    disabled: bool,
}

fn options(input: &DeriveInput) -> syn::Result<ClassOptions> {
    let mut options = ClassOptions { parent: None, hook: false, disabled: false };
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("torchfn")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("parent") {
                options.parent = Some(meta.value()?.parse()?);
                Ok(())
            } else if meta.path.is_ident("hook") {
                options.hook = true;
                Ok(())
            } else if meta.path.is_ident("disable_torch_function") {
                options.disabled = true;
                Ok(())
            } else {
                Err(meta.error("expected `parent = Type`, `hook` or `disable_torch_function`"))
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
    if options.hook && options.disabled {
        return Err(syn::Error::new(ident.span(), "a class with its hook disabled cannot have a hook of its own"));
    }
    if kind == Kind::Duck && options.hook {
        return Err(syn::Error::new(ident.span(), "a duck always implements its own hook: remove `#[torchfn(hook)]`"));
    }
    // A subclass without `hook` gets the default hook; a duck or a `hook` subclass implements it.
    let default_hook = kind == Kind::Subclass && !options.hook && !options.disabled;
    let hook = if options.disabled {
        quote!(::core::option::Option::None)
    } else {
        quote!(::core::option::Option::Some(<#ident as ::torchfn::TorchFunction>::torch_function))
    };
    let default_impl = if default_hook { quote!(impl ::torchfn::TorchFunction for #ident {}) } else { quote!() };
    let (class, marker, parent_check) = match (kind, &options.parent) {
        (Kind::Subclass, parent) => {
            let parent = parent.clone().unwrap_or_else(|| syn::parse_quote!(::torchfn::Tensor));
            (
                quote!(::torchfn::Class::__subclass(#name, <#parent as ::torchfn::TensorLike>::class, #hook, #default_hook)),
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
        #default_impl
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
        assert!(out.contains("impl :: torchfn :: TorchFunction for Meters { }"), "the default hook: {out}");
    }

    #[test]
    fn a_hook_of_its_own_is_declared() {
        let out = derive(
            quote!(
                #[torchfn(hook)]
                struct Logging;
            ),
            Kind::Subclass,
        )
        .to_string();
        assert!(!out.contains("impl :: torchfn :: TorchFunction"), "{out}");
        assert!(out.contains(":: class , :: core :: option :: Option :: Some (< Logging as :: torchfn :: TorchFunction > :: torch_function) , false"), "{out}");
        let out = derive(
            quote!(
                #[torchfn(hook)]
                #[derive(Debug)]
                struct D;
            ),
            Kind::Duck,
        )
        .to_string();
        assert!(out.contains("a duck always implements its own hook"), "{out}");
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
