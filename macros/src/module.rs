//! `#[derive(Module)]`: a struct of parameters, buffers, flags and submodules becomes a module.
//! Each field shows itself to the visitor through `ModuleField` (by its type), except those
//! marked `#[module(skip)]` (configuration); `#[module(extra_repr = method)]` on the struct
//! names the method giving the repr's inside.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Fields, Ident, Index};

/// The derive's output: `Module` and `Display` (the module's repr).
pub fn derive(input: TokenStream) -> TokenStream {
    match syn::parse2(input).and_then(|input| expand(&input)) {
        Ok(out) => out,
        Err(e) => e.to_compile_error(),
    }
}

fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(&input.ident, "#[derive(Module)] works on structs"));
    };
    let mut extra_repr: Option<Ident> = None;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("module")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("extra_repr") {
                extra_repr = Some(meta.value()?.parse()?);
                Ok(())
            } else {
                Err(meta.error("expected `extra_repr = method`"))
            }
        })?;
    }
    let mut names = Vec::new();
    let mut accessors = Vec::new();
    let fields: Vec<_> = match &data.fields {
        Fields::Named(f) => f.named.iter().collect(),
        Fields::Unnamed(f) => f.unnamed.iter().collect(),
        Fields::Unit => Vec::new(),
    };
    for (i, field) in fields.iter().enumerate() {
        if skipped(field)? {
            continue;
        }
        match &field.ident {
            Some(ident) => {
                names.push(ident.to_string());
                accessors.push(quote!(#ident));
            }
            None => {
                names.push(i.to_string());
                let index = Index::from(i);
                accessors.push(quote!(#index));
            }
        }
    }
    let ident = &input.ident;
    let type_name = ident.to_string();
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let extra = match extra_repr {
        Some(method) => quote!(fn extra_repr(&self) -> ::std::string::String { self.#method() }),
        None => quote!(),
    };
    Ok(quote! {
        impl #impl_generics ::torchfn::nn::Module for #ident #ty_generics #where_clause {
            fn visit<'m>(&'m self, visitor: &mut dyn ::torchfn::nn::Visitor<'m>) {
                #(::torchfn::nn::ModuleField::visit_field(&self.#accessors, #names, visitor);)*
            }
            fn visit_mut(&mut self, visitor: &mut dyn ::torchfn::nn::VisitorMut) {
                #(::torchfn::nn::ModuleField::visit_field_mut(&mut self.#accessors, #names, visitor);)*
            }
            fn type_name(&self) -> &'static str {
                #type_name
            }
            fn as_dyn(&self) -> &dyn ::torchfn::nn::Module {
                self
            }
            fn as_layer(&self) -> ::core::option::Option<&dyn ::torchfn::nn::Layer> {
                #[allow(unused_imports)]
                use ::torchfn::nn::__layer_probe::{HasForward as _, NoForward as _};
                (&&::torchfn::nn::__layer_probe::LayerProbe(self)).probe_layer()
            }
            fn rust_path(&self) -> &'static str {
                ::core::module_path!()
            }
            #extra
        }

        impl #impl_generics ::core::fmt::Display for #ident #ty_generics #where_clause {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(&::torchfn::nn::Module::repr(self))
            }
        }
    })
}

/// Whether the field is marked `#[module(skip)]`.
fn skipped(field: &syn::Field) -> syn::Result<bool> {
    let mut skip = false;
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("module")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("skip") {
                skip = true;
                Ok(())
            } else {
                Err(meta.error("expected `skip`"))
            }
        })?;
    }
    Ok(skip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_visited_in_order_and_skipped_ones_left_out() {
        let out = derive(quote! {
            struct Block { ln: LayerNorm, #[module(skip)] width: usize, mlp: Mlp }
        })
        .to_string();
        assert!(out.contains("visit_field (& self . ln , \"ln\" , visitor)"), "{out}");
        assert!(out.contains("visit_field (& self . mlp , \"mlp\" , visitor)"), "{out}");
        assert!(!out.contains("width"), "{out}");
        assert!(out.contains("\"Block\""), "{out}");
    }

    #[test]
    fn tuple_structs_name_fields_by_position_and_enums_are_refused() {
        let out = derive(quote!(
            struct Pair(Linear, Linear);
        ))
        .to_string();
        assert!(out.contains("\"1\""), "{out}");
        let err = derive(quote!(
            enum E {
                A,
            }
        ))
        .to_string();
        assert!(err.contains("works on structs"), "{err}");
        let err = derive(quote!(
            #[module(bogus)]
            struct S;
        ))
        .to_string();
        assert!(err.contains("expected `extra_repr = method`"), "{err}");
    }
}
