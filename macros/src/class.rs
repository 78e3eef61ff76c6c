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

/// `#[torchfn(parent = Path, hook, disable_torch_function, data_error = Path)]`.
struct ClassOptions {
    parent: Option<Path>,
    hook: bool,
    disabled: bool,
    data_error: Option<Path>,
}

fn options(input: &DeriveInput) -> syn::Result<ClassOptions> {
    let mut options = ClassOptions { parent: None, hook: false, disabled: false, data_error: None };
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
            } else if meta.path.is_ident("data_error") {
                options.data_error = Some(meta.value()?.parse()?);
                Ok(())
            } else {
                Err(meta.error("expected `parent = Type`, `hook`, `disable_torch_function` or `data_error = function`"))
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
    if kind == Kind::Subclass && options.data_error.is_some() {
        return Err(syn::Error::new(
            ident.span(),
            "only a duck has no data: `data_error` is for `#[derive(DuckTensor)]`",
        ));
    }
    if kind == Kind::Duck && options.hook {
        return Err(syn::Error::new(ident.span(), "a duck always implements its own hook: remove `#[torchfn(hook)]`"));
    }
    if options.parent.as_ref().is_some_and(|p| p.is_ident("Self") || p.is_ident(ident)) {
        return Err(syn::Error::new(ident.span(), "a class cannot be its own parent"));
    }
    let own_hook = quote!(::core::option::Option::Some(<#ident as ::torchfn::TorchFunction>::torch_function));
    let none = quote!(::core::option::Option::None);
    Ok(match kind {
        Kind::Subclass => {
            let parent = options.parent.clone().unwrap_or_else(|| syn::parse_quote!(::torchfn::Tensor));
            // The hook: its own, none, or (the default) its parent's, as Python inherits it.
            let (hook, default_hook, torch_function) = if options.hook {
                (own_hook, quote!(false), quote!())
            } else if options.disabled {
                (none.clone(), quote!(false), quote!())
            } else {
                (
                    quote!(<#parent as ::torchfn::TensorLike>::__HOOK),
                    quote!(<#parent as ::torchfn::TensorLike>::__DEFAULT_HOOK),
                    quote! {
                        /// The parent's hook, inherited.
                        impl ::torchfn::TorchFunction for #ident {
                            fn torch_function(
                                cls: &'static ::torchfn::Class,
                                func: &'static ::torchfn::Func,
                                types: &::torchfn::Types,
                                args: &[::torchfn::Value],
                                kwargs: &::torchfn::Kwargs,
                            ) -> ::torchfn::Outcome {
                                match <#parent as ::torchfn::TensorLike>::__HOOK {
                                    ::core::option::Option::Some(hook) => hook(cls, func, types, args, kwargs),
                                    ::core::option::Option::None => ::core::result::Result::Ok(::torchfn::Value::NotImplemented),
                                }
                            }
                        }
                    },
                )
            };
            quote! {
                impl ::torchfn::TensorLike for #ident {
                    const __HOOK: ::core::option::Option<::torchfn::Hook> = #hook;
                    const __DEFAULT_HOOK: bool = #default_hook;
                    fn class() -> &'static ::torchfn::Class {
                        static CLASS: ::torchfn::Class = ::torchfn::Class::__subclass(
                            #name,
                            <#parent as ::torchfn::TensorLike>::class,
                            <#ident as ::torchfn::TensorLike>::__HOOK,
                            <#ident as ::torchfn::TensorLike>::__DEFAULT_HOOK,
                        );
                        &CLASS
                    }
                }
                impl ::torchfn::TensorParent for #ident {}
                impl ::torchfn::TensorSubclass for #ident {}
                #torch_function
                const _: fn() = || {
                    fn tensor_parent<T: ::torchfn::TensorParent>() {}
                    tensor_parent::<#parent>();
                };
            }
        }
        Kind::Duck => {
            let (parent, parent_check) = match &options.parent {
                Some(p) => (
                    quote!(::core::option::Option::Some(<#p as ::torchfn::TensorLike>::class)),
                    quote!(const _: fn() = || {
                        fn duck_parent<T: ::torchfn::DuckTensor>() {}
                        duck_parent::<#p>();
                    };),
                ),
                None => (none, quote!()),
            };
            let data_error = options.data_error.as_ref().map(|f| {
                quote! {
                    fn data_error(&self, what: &str) -> ::core::option::Option<::torchfn::Error> {
                        ::core::option::Option::Some(#f(self, what))
                    }
                }
            });
            quote! {
                impl ::torchfn::TensorLike for #ident {
                    const __HOOK: ::core::option::Option<::torchfn::Hook> = #own_hook;
                    const __DEFAULT_HOOK: bool = false;
                    fn class() -> &'static ::torchfn::Class {
                        static CLASS: ::torchfn::Class =
                            ::torchfn::Class::__duck(#name, #parent, <#ident as ::torchfn::TensorLike>::__HOOK);
                        &CLASS
                    }
                }
                impl ::torchfn::DuckTensor for #ident {
                    #data_error
                }
                #parent_check
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subclasses_inherit_their_parents_hook() {
        let out = derive(
            quote!(
                struct Meters {
                    scale: f64,
                }
            ),
            Kind::Subclass,
        )
        .to_string();
        assert!(out.contains("const __HOOK : :: core :: option :: Option < :: torchfn :: Hook > = < :: torchfn :: Tensor as :: torchfn :: TensorLike > :: __HOOK"), "{out}");
        assert!(out.contains("impl :: torchfn :: TorchFunction for Meters"), "{out}");
        assert!(out.contains("impl :: torchfn :: TensorSubclass for Meters"), "{out}");
        let child = derive(
            quote!(
                #[torchfn(parent = Logging)]
                struct Child;
            ),
            Kind::Subclass,
        )
        .to_string();
        assert!(child.contains("< Logging as :: torchfn :: TensorLike > :: __HOOK"), "{child}");
        assert!(child.contains("tensor_parent :: < Logging >"), "the parent must be a tensor class: {child}");
    }

    #[test]
    fn a_hook_of_its_own_or_none() {
        let out = derive(
            quote!(
                #[torchfn(hook)]
                struct Logging;
            ),
            Kind::Subclass,
        )
        .to_string();
        assert!(!out.contains("impl :: torchfn :: TorchFunction"), "{out}");
        assert!(out.contains("Some (< Logging as :: torchfn :: TorchFunction > :: torch_function)"), "{out}");
        let out = derive(
            quote!(
                #[torchfn(disable_torch_function)]
                struct Quiet;
            ),
            Kind::Subclass,
        )
        .to_string();
        assert!(
            out.contains(
                "__HOOK : :: core :: option :: Option < :: torchfn :: Hook > = :: core :: option :: Option :: None"
            ),
            "{out}"
        );
    }

    #[test]
    fn ducks_implement_their_hook_and_have_duck_parents() {
        let out = derive(
            quote!(
                #[derive(Debug)]
                struct ScalarTensor;
            ),
            Kind::Duck,
        )
        .to_string();
        assert!(out.contains("Class :: __duck (\"ScalarTensor\" , :: core :: option :: Option :: None"), "{out}");
        let out = derive(
            quote!(
                #[torchfn(parent = Duck)]
                struct Duckling;
            ),
            Kind::Duck,
        )
        .to_string();
        assert!(out.contains("duck_parent :: < Duck >"), "{out}");
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
    fn refused_classes() {
        let out = derive(
            quote!(
                struct W<T>(T);
            ),
            Kind::Duck,
        )
        .to_string();
        assert!(out.contains("cannot be generic"), "{out}");
        let out = derive(
            quote!(
                #[torchfn(parent = Self)]
                struct S;
            ),
            Kind::Subclass,
        )
        .to_string();
        assert!(out.contains("cannot be its own parent"), "{out}");
        let out = derive(
            quote!(
                #[torchfn(data_error = S::read)]
                struct S;
            ),
            Kind::Subclass,
        )
        .to_string();
        assert!(out.contains("only a duck has no data"), "{out}");
    }

    #[test]
    fn a_duck_may_say_what_reading_its_data_means() {
        let out = derive(
            quote!(
                #[torchfn(data_error = Remote::unreachable)]
                struct Remote;
            ),
            Kind::Duck,
        )
        .to_string();
        assert!(
            out.contains("fn data_error (& self , what : & str) -> :: core :: option :: Option < :: torchfn :: Error > { :: core :: option :: Option :: Some (Remote :: unreachable (self , what)) }"),
            "{out}"
        );
        let plain = derive(
            quote!(
                struct Quack;
            ),
            Kind::Duck,
        )
        .to_string();
        assert!(plain.contains("impl :: torchfn :: DuckTensor for Quack { }"), "{plain}");
    }
}
