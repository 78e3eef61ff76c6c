//! `#[derive(WrapperTensor)]`: a struct around one inner tensor becomes a wrapper tensor type:
//! the field of type `Tensor` (or the one marked `#[wrapper(inner)]`) is the inner tensor, and
//! the other fields are cloned into each wrapped result.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Fields, Index, Type};

/// The derive's output: `WrapperTensor`'s `inner` and `with_inner`.
pub fn derive(input: TokenStream) -> TokenStream {
    match syn::parse2(input).and_then(|input| expand(&input)) {
        Ok(out) => out,
        Err(e) => e.to_compile_error(),
    }
}

fn is_tensor(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "Tensor"))
}

fn marked_inner(field: &syn::Field) -> syn::Result<bool> {
    let mut inner = false;
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("wrapper")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("inner") {
                inner = true;
                Ok(())
            } else {
                Err(meta.error("expected `inner`"))
            }
        })?;
    }
    Ok(inner)
}

fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let ident = &input.ident;
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(ident, "#[derive(WrapperTensor)] works on structs"));
    };
    let fields: Vec<&syn::Field> = match &data.fields {
        Fields::Named(f) => f.named.iter().collect(),
        Fields::Unnamed(f) => f.unnamed.iter().collect(),
        Fields::Unit => Vec::new(),
    };
    let marked: Vec<usize> = fields
        .iter()
        .enumerate()
        .filter_map(|(i, f)| marked_inner(f).map(|m| m.then_some(i)).transpose())
        .collect::<syn::Result<_>>()?;
    let tensors: Vec<usize> = fields.iter().enumerate().filter(|(_, f)| is_tensor(&f.ty)).map(|(i, _)| i).collect();
    let inner = match (marked.as_slice(), tensors.as_slice()) {
        ([i], _) => *i,
        ([], [i]) => *i,
        ([], []) => {
            return Err(syn::Error::new_spanned(
                ident,
                "#[derive(WrapperTensor)] needs a field of type `Tensor`: the inner tensor",
            ));
        }
        _ => {
            return Err(syn::Error::new_spanned(
                ident,
                "#[derive(WrapperTensor)]: mark the inner tensor with #[wrapper(inner)] (one field)",
            ));
        }
    };
    let access = |i: usize| match &fields[i].ident {
        Some(name) => quote!(#name),
        None => {
            let index = Index::from(i);
            quote!(#index)
        }
    };
    let inner_access = access(inner);
    let values: Vec<TokenStream> = (0..fields.len())
        .map(|i| {
            if i == inner {
                quote!(inner)
            } else {
                let a = access(i);
                quote!(::core::clone::Clone::clone(&self.#a))
            }
        })
        .collect();
    let construct = match &data.fields {
        Fields::Named(_) => {
            let names = fields.iter().map(|f| &f.ident);
            quote!(#ident { #(#names: #values),* })
        }
        _ => quote!(#ident(#(#values),*)),
    };
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_generics ::torchfn::dispatch::WrapperTensor for #ident #ty_generics #where_clause {
            fn inner(&self) -> &::torchfn::Tensor {
                &self.#inner_access
            }
            fn with_inner(&self, inner: ::torchfn::Tensor) -> Self {
                #construct
            }
        }
    })
}
