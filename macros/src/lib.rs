//! Procedural macros of [torchfn](https://docs.rs/torchfn): `#[torch_function]`, `#[dispatcher]`,
//! `#[derive(TensorSubclass)]` and `#[derive(DuckTensor)]`.
//!
//! Use them through the `torchfn` crate, which documents them. The entry points here are thin:
//! the expansions live in ordinary modules that return `syn::Result` and are unit-tested
//! without a compiler round trip.

mod class;
mod dispatcher;
mod expand;
mod options;
mod signature;
mod verify;

use std::hash::{DefaultHasher, Hash, Hasher};

use proc_macro::TokenStream;

/// Makes a function or a `Tensor` method overridable. See `torchfn::torch_function`.
#[proc_macro_attribute]
pub fn torch_function(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::torch_function(args.into(), item.into()).into()
}

/// Marks a dispatcher so `#[torch_function]` can check its signature. See `torchfn::dispatcher`.
#[proc_macro_attribute]
pub fn dispatcher(args: TokenStream, item: TokenStream) -> TokenStream {
    let unique = unique_suffix(&item);
    dispatcher::expand(args.into(), item.into(), &unique).into()
}

/// The second stage of `#[torch_function]`, called by a dispatcher's hidden macro.
#[doc(hidden)]
#[proc_macro]
pub fn torch_function_checked(input: TokenStream) -> TokenStream {
    expand::checked(input.into()).into()
}

/// Declares a tensor subclass. See `torchfn::TensorSubclass`.
#[proc_macro_derive(TensorSubclass, attributes(torchfn))]
pub fn derive_tensor_subclass(input: TokenStream) -> TokenStream {
    class::derive(input.into(), class::Kind::Subclass).into()
}

/// Declares a duck tensor type. See `torchfn::DuckTensor`.
#[proc_macro_derive(DuckTensor, attributes(torchfn))]
pub fn derive_duck_tensor(input: TokenStream) -> TokenStream {
    class::derive(input.into(), class::Kind::Duck).into()
}

/// A name part unique to where `item` is written: `#[macro_export]` puts every dispatcher's hidden
/// macro at its crate's root, so two dispatchers of the same name in different modules must not
/// collide. Derived from the file, line and column, so it is the same on every build.
fn unique_suffix(item: &TokenStream) -> String {
    let span = item.clone().into_iter().next().map_or_else(proc_macro::Span::call_site, |t| t.span());
    let mut hasher = DefaultHasher::new();
    (span.file(), span.line(), span.column()).hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}
