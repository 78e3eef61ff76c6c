//! The expansion of `#[implements(func, table = TABLE)]`: the function stays as written, and gets
//! a handle of its own (for binding a call's arguments to its signature) registered in `TABLE`
//! as the implementation of `func`.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Expr, Ident, ItemFn, Path, Token};

use crate::expand::{Binding, binding, check_parameter_order, doc_text, tensor_type, with_original};
use crate::signature::{Errors, parse_params};

/// `func, table = TABLE`.
struct Args {
    func: Expr,
    table: Path,
}

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let func: Expr = input.parse()?;
        if input.is_empty() {
            return Err(
                input.error("name the table: #[implements(func, table = TABLE)], TABLE a static HandledFunctions")
            );
        }
        input.parse::<Token![,]>()?;
        let key: Ident = input.parse()?;
        if key != "table" {
            return Err(syn::Error::new(key.span(), "expected `table = TABLE`, the `HandledFunctions` to register in"));
        }
        input.parse::<Token![=]>()?;
        let table: Path = input.parse()?;
        input.parse::<Option<Token![,]>>()?;
        Ok(Args { func, table })
    }
}

/// `#[implements(args)] item`.
pub fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    match try_expand(args, item.clone()) {
        Ok(out) => out,
        Err(err) => with_original(err, item),
    }
}

fn try_expand(args: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let Args { func, table } = syn::parse2(args)?;
    let mut f: ItemFn = syn::parse2(item)?;
    let params = parse_params(&mut f.sig, &tensor_type())?;
    let mut errors = Errors::default();
    if let Some(p) = params.iter().find(|p| p.is_receiver) {
        errors.push(p.span, "an implementation is a free function: take the tensor as an argument");
    }
    if let Some(p) = f.sig.generics.type_params().next() {
        errors.push(p.span(), "implementations cannot be generic; take `impl Into<T>` for flexible arguments");
    }
    if let syn::ReturnType::Default = f.sig.output {
        errors.push(f.sig.ident.span(), "implementations return `Result<T>` (torchfn::Result)");
    }
    check_parameter_order(&params, &mut errors);
    errors.finish(())?;

    let ident = &f.sig.ident;
    let name = ident.to_string().trim_start_matches("r#").to_string();
    let doc = doc_text(&f.attrs);
    let private = quote!(::torchfn::__private);
    let Binding { params_static, bind, convert, typed } = binding(&params);
    let reason = format!("an implementation of {} registered with #[implements]", func.to_token_stream());
    Ok(quote! {
        #f
        const _: () = {
            fn __torchfn_entry(
                args: &[::torchfn::Value],
                kwargs: &::torchfn::Kwargs,
                route: #private::Route,
            ) -> ::torchfn::Result<::torchfn::Value> {
                let __bound = #private::bind(&__TORCHFN_FUNC, &__TORCHFN_PARAMS, args, kwargs, route.strict())?;
                #bind
                if let #private::Route::Bind { .. } = route {
                    return ::core::result::Result::Ok(::torchfn::Value::None);
                }
                #convert
                #private::Returns::into_value(#ident(#(#typed),*))
            }
            #params_static
            static __TORCHFN_FUNC: ::torchfn::Func = ::torchfn::Func::__generated(
                ::core::env!("CARGO_CRATE_NAME"),
                #name,
                ::torchfn::FuncKind::Function,
                &__TORCHFN_PARAMS,
                #doc,
                false,
                ::core::option::Option::Some(#reason),
                __torchfn_entry,
            );
            #private::inventory::submit! { #private::Implements::__new(&#table, #func, &__TORCHFN_FUNC) }
        };
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_function_stays_and_registers_its_own_handle() {
        let out = expand(
            quote!(torchfn::ADD, table = HANDLED),
            quote!(
                fn add(input: &Tensor, #[default(1)] other: i64) -> Result<Tensor> {
                    todo!()
                }
            ),
        )
        .to_string();
        assert!(out.starts_with("fn add (input : & Tensor , other : i64) -> Result < Tensor >"), "{out}");
        assert!(out.contains("Implements :: __new (& HANDLED , torchfn :: ADD , & __TORCHFN_FUNC)"), "{out}");
        assert!(out.contains("\"add\""), "{out}");
    }

    #[test]
    fn methods_and_a_missing_table_are_refused() {
        let out = expand(
            quote!(torchfn::ADD, table = T),
            quote!(
                fn add(&self) -> Result<Tensor> {
                    todo!()
                }
            ),
        );
        assert!(out.to_string().contains("an implementation is a free function"), "{out}");
        let out = expand(
            quote!(torchfn::ADD),
            quote!(
                fn add(x: &Tensor) -> Result<Tensor> {
                    todo!()
                }
            ),
        );
        assert!(out.to_string().contains("name the table"), "{out}");
    }
}
