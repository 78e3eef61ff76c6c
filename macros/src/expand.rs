//! The expansion of `#[torch_function]`.
//!
//! Without a dispatcher to check, the attribute expands at once. With one, it expands to a call
//! of the dispatcher's hidden macro (written by `#[dispatcher]`, named like the dispatcher), which
//! hands the dispatcher's signature back to [`checked`]: that is how the check of
//! docs/protocol.md section 7 sees a dispatcher in another module or crate.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Attribute, Block, Ident, ItemFn, Path, ReturnType, Signature, Type, Visibility, braced, parse_quote};

use crate::options::Options;
use crate::signature::{Errors, Param, erase_lifetimes, mentions_self_type, parse_params, static_lifetimes};
use crate::verify;

/// The name of a class method's first parameter, its instance.
pub const CLASS_RECEIVER: &str = "self_";

/// The type a method's receiver has.
pub fn tensor_type() -> Type {
    parse_quote!(&::torchfn::Tensor)
}

/// `#[torch_function(args)] item`.
pub fn torch_function(args: TokenStream, item: TokenStream) -> TokenStream {
    if let Ok(block) = syn::parse2::<syn::ItemImpl>(item.clone()) {
        return match syn::parse2::<Options>(args.clone()) {
            Ok(Options { class: Some(class), .. }) => {
                crate::methods::expand(args, &class, block).unwrap_or_else(|err| with_original(err, item))
            }
            Ok(_) => with_original(
                syn::Error::new(block.self_ty.span(), "#[torch_function] on an impl block needs `class = YourClass`"),
                item,
            ),
            Err(err) => with_original(err, item),
        };
    }
    let parsed = syn::parse2::<Options>(args.clone()).and_then(|o| Function::parse(item.clone(), &o).map(|f| (o, f)));
    let (options, function) = match parsed {
        Ok(parsed) => parsed,
        Err(err) => return with_original(err, item),
    };
    match &options.dispatcher {
        Some(path) if options.verify || options.docs_from_dispatcher => {
            quote_spanned! {path.span()=> #path! { args = { #args } item = { #item } } }
        }
        _ => generate(&options, &function, &[], options.dispatcher.as_ref()),
    }
}

/// The second stage: `dispatcher = { <its attributes and signature> } args = { .. } item = { .. }`,
/// invoked by the dispatcher's hidden macro.
pub fn checked(input: TokenStream) -> TokenStream {
    let checked: Checked = match syn::parse2(input) {
        Ok(c) => c,
        Err(err) => return err.to_compile_error(),
    };
    let parsed =
        syn::parse2::<Options>(checked.args).and_then(|o| Function::parse(checked.item.clone(), &o).map(|f| (o, f)));
    let (options, function) = match parsed {
        Ok(parsed) => parsed,
        Err(err) => return with_original(err, checked.item),
    };
    let mut dispatcher_sig = checked.dispatcher_sig;
    let dispatcher_params = match parse_params(&mut dispatcher_sig, &tensor_type()) {
        Ok(p) => p,
        Err(err) => return with_original(err, checked.item),
    };
    let docs: Vec<Attribute> = if options.docs_from_dispatcher {
        checked.dispatcher_attrs.into_iter().filter(|a| a.path().is_ident("doc")).collect()
    } else {
        Vec::new()
    };
    let verified = if options.verify {
        verify::check(&function.sig.ident, &function.params, &dispatcher_sig.ident, &dispatcher_params)
    } else {
        Ok(())
    };
    match verified {
        Ok(()) => generate(&options, &function, &docs, options.dispatcher.as_ref()),
        // Still define everything, without the mismatched dispatcher, so that one mistake gives
        // one set of errors rather than a cascade at every use.
        Err(err) => {
            let mut out = err.to_compile_error();
            out.extend(generate(&options, &function, &docs, None));
            out
        }
    }
}

struct Checked {
    dispatcher_attrs: Vec<Attribute>,
    dispatcher_sig: Signature,
    args: TokenStream,
    item: TokenStream,
}

impl Parse for Checked {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let section = |input: ParseStream, key: &str| -> syn::Result<TokenStream> {
            let ident: Ident = input.parse()?;
            if ident != key {
                return Err(syn::Error::new(ident.span(), format!("expected `{key}`")));
            }
            input.parse::<syn::Token![=]>()?;
            let content;
            braced!(content in input);
            content.parse()
        };
        let dispatcher = section(input, "dispatcher")?;
        let args = section(input, "args")?;
        let item = section(input, "item")?;
        let (dispatcher_attrs, dispatcher_sig) = syn::parse::Parser::parse2(
            |input: ParseStream| Ok((input.call(Attribute::parse_outer)?, input.parse::<Signature>()?)),
            dispatcher,
        )?;
        Ok(Checked { dispatcher_attrs, dispatcher_sig, args, item })
    }
}

/// The error, followed by the item without its helper attributes, so that code using the
/// function still compiles and only this error is shown.
pub fn with_original(err: syn::Error, item: TokenStream) -> TokenStream {
    let mut out = err.to_compile_error();
    match syn::parse2::<ItemFn>(item.clone()) {
        Ok(mut f) => {
            let _ = parse_params(&mut f.sig, &tensor_type());
            out.extend(f.into_token_stream());
        }
        Err(_) => out.extend(item),
    }
    out
}

/// An overridable function or method, parsed and checked.
pub struct Function {
    attrs: Vec<Attribute>,
    vis: Visibility,
    /// The signature without helper attributes (`impl Into<X>` parameters kept).
    pub sig: Signature,
    block: Box<Block>,
    /// The parameters as the protocol sees them.
    pub params: Vec<Param>,
    is_method: bool,
}

impl Function {
    /// Parses and checks the item; all problems are reported together.
    pub fn parse(item: TokenStream, options: &Options) -> syn::Result<Function> {
        let ItemFn { attrs, vis, mut sig, block } = syn::parse2(item)?;
        let mut errors = Errors::default();
        let params = match parse_params(&mut sig, &tensor_type()) {
            Ok(p) => p,
            Err(e) => {
                errors.add(e);
                Vec::new()
            }
        };
        if let Some(t) = &sig.constness {
            errors.push(t.span(), "overridable functions cannot be `const`");
        }
        if let Some(t) = &sig.asyncness {
            errors.push(t.span(), "overridable functions cannot be `async`");
        }
        if let Some(t) = &sig.unsafety {
            errors.push(t.span(), "overridable functions cannot be `unsafe`");
        }
        if let Some(abi) = &sig.abi {
            errors.push(abi.span(), "overridable functions use the Rust ABI");
        }
        if let Some(p) = sig.generics.type_params().next() {
            errors
                .push(p.span(), "overridable functions cannot be generic; take `impl Into<T>` for flexible arguments");
        }
        if let Some(p) = sig.generics.const_params().next() {
            errors.push(p.span(), "overridable functions cannot be generic");
        }
        match &sig.output {
            ReturnType::Default => {
                errors.push(sig.ident.span(), "overridable functions return `Result<T>` (torchfn::Result)")
            }
            ReturnType::Type(_, ty) if mentions_self_type(ty) => {
                errors.push(ty.span(), "write the type's name instead of `Self` in an overridable signature")
            }
            ReturnType::Type(..) => {}
        }
        let mut params = params;
        if options.class.is_some() {
            // A class's method is an associated function of the class whose first parameter,
            // `self_: &Tensor`, is the instance: Python's `self`.
            match params.first_mut() {
                Some(p) if p.ident == CLASS_RECEIVER => {
                    p.is_receiver = true;
                    p.name = "self".into();
                }
                _ => errors.push(
                    sig.ident.span(),
                    "a class's method takes `self_: &Tensor` first (or `&self` in an `impl Trait for Tensor` block)",
                ),
            }
        }
        let is_method = params.first().is_some_and(|p| p.is_receiver);
        if options.property && (!is_method || params.len() != 1) {
            errors.push(sig.ident.span(), "a property getter takes `&self` alone");
        }
        if options.ignore.is_some() && (options.dispatcher.is_some() || is_method) {
            errors.push(sig.ident.span(), "an ignored function is a free function without a dispatcher");
        }
        if options.overload_of.is_some() && (options.module.is_some() || options.name.is_some() || options.property) {
            errors.push(sig.ident.span(), "an overload takes its name and namespace from the function it overloads");
        }
        if is_method && options.module.is_some() {
            errors
                .push(sig.ident.span(), "`module` names the namespace of free functions; methods live in their class");
        }
        check_parameter_order(&params, &mut errors);
        errors.finish(Function { attrs, vis, sig, block, params, is_method })
    }
}

/// Python's rules: at most one variadic parameter, without a default, and at most one bare `*`
/// (`#[keyword_only]`), not after the variadic one (whose followers are keyword-only already);
/// before either, parameters without defaults come first.
pub fn check_parameter_order(params: &[Param], errors: &mut Errors) {
    let mut variadic_seen = false;
    let mut keyword_only_seen = false;
    let mut defaulted: Option<&Param> = None;
    for p in params {
        if let Some(span) = p.keyword_only {
            if keyword_only_seen {
                errors.push(span, "only one parameter can be #[keyword_only] (Python's bare `*`, written once)");
            }
            if variadic_seen || p.variadic.is_some() {
                errors.push(span, "the parameters after a #[variadic] one are keyword-only already");
            }
            keyword_only_seen = true;
        }
        if let Some(span) = p.variadic {
            if variadic_seen {
                errors.push(span, "only one parameter can be #[variadic]");
            }
            if p.default.is_some() {
                errors.push(p.span, "a #[variadic] parameter cannot have a default");
            }
            variadic_seen = true;
        } else if !variadic_seen && !keyword_only_seen {
            match (p.default.is_some(), defaulted) {
                (true, _) => defaulted = Some(p),
                (false, Some(d)) => errors.push(
                    p.span,
                    format!("parameter `{}` has no default but follows `{}`, which has one", p.name, d.name),
                ),
                (false, None) => {}
            }
        }
    }
}

/// The index of the first keyword-only parameter: the one after a variadic parameter, or the one
/// marked `#[keyword_only]`; the parameters before it (the variadic one included) are positional.
pub fn first_keyword_only(params: &[Param]) -> usize {
    params
        .iter()
        .position(|p| p.keyword_only.is_some())
        .or_else(|| params.iter().position(|p| p.variadic.is_some()).map(|v| v + 1))
        .unwrap_or(params.len())
}

/// The documentation text of `attrs`, one line per `#[doc]`, as rustdoc joins them.
pub fn doc_text(attrs: &[Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|l| l.strip_prefix(' ').map(str::to_string).unwrap_or(l))
        .collect();
    lines.join("\n").trim().to_string()
}

/// How a by-name call binds to a signature: the `__TORCHFN_PARAMS` static it is checked
/// against, the statements that bind `__bound`'s slots (defaults filled in) and convert them to
/// the parameter types, and the names of the converted arguments, in order.
pub struct Binding {
    /// `static __TORCHFN_PARAMS: [Param; n] = [...];`
    pub params_static: TokenStream,
    /// `let __argI: Owned = __bound.arg(I, default)?;` for each parameter.
    pub bind: TokenStream,
    /// `let __typedI = Arg::from_owned(&__argI);` for each parameter.
    pub convert: TokenStream,
    /// `__typed0`, `__typed1`, ...
    pub typed: Vec<Ident>,
}

/// The [`Binding`] of `params`.
pub fn binding(params: &[Param]) -> Binding {
    let private = quote!(::torchfn::__private);
    let n = params.len();
    let keyword_from = first_keyword_only(params);
    let owned: Vec<TokenStream> = params
        .iter()
        .map(|p| {
            let ty = static_lifetimes(&p.ty);
            quote!(<#ty as #private::Arg<'static>>::Owned)
        })
        .collect();
    let bound: Vec<Ident> = (0..n).map(|i| format_ident!("__arg{}", i)).collect();
    let defaults = params.iter().zip(&owned).map(|(p, o)| match &p.default {
        Some(expr) => quote!(::core::option::Option::Some((|| ::core::convert::Into::into(#expr)) as fn() -> #o)),
        None => quote!(::core::option::Option::None),
    });
    let indices = 0..n;
    let from_owned = params.iter().zip(&bound).map(|(p, b)| {
        let ty = erase_lifetimes(&p.ty);
        quote!(<#ty as #private::Arg<'_>>::from_owned(&#b))
    });
    let typed: Vec<Ident> = (0..n).map(|i| format_ident!("__typed{}", i)).collect();
    let param_entries = params.iter().zip(&owned).enumerate().map(|(i, (p, o))| {
        let pname = &p.name;
        let variadic = p.variadic.is_some();
        let keyword_only = if i >= keyword_from { quote!(.keyword_only()) } else { quote!() };
        let default = match (&p.default, p.default_text()) {
            (Some(expr), Some(text)) => quote! {
                ::core::option::Option::Some(::torchfn::ParamDefault::__new(#text, || {
                    let __value: #o = ::core::convert::Into::into(#expr);
                    ::torchfn::ToValue::to_value(&__value)
                }))
            },
            _ => quote!(::core::option::Option::None),
        };
        quote!(::torchfn::Param::new(#pname, <#o as ::torchfn::FromValue>::type_name, #default, #variadic) #keyword_only)
    });
    Binding {
        params_static: quote!(static __TORCHFN_PARAMS: [::torchfn::Param; #n] = [#(#param_entries),*];),
        bind: quote!(#(let #bound: #owned = __bound.arg(#indices, #defaults)?;)*),
        convert: quote!(#(let #typed = #from_owned;)*),
        typed,
    }
}

/// Writes the public function, its implementation and its handle.
pub fn generate(
    options: &Options,
    f: &Function,
    dispatcher_docs: &[Attribute],
    dispatcher: Option<&Path>,
) -> TokenStream {
    let ident = &f.sig.ident;
    let rust_name = ident.to_string().trim_start_matches("r#").to_string();
    let handle = Ident::new(&rust_name.to_uppercase(), ident.span());
    let impl_ident = format_ident!("__impl_{}", ident);
    let tensor = quote!(::torchfn::Tensor);
    let private = quote!(::torchfn::__private);
    // Methods live in their class: `Tensor`, or the user's class.
    let owner = match &options.class {
        Some(class) => class.to_token_stream(),
        None => tensor.clone(),
    };
    let owner_name = match &options.class {
        Some(class) => class.segments.last().map(|s| s.ident.to_string()).unwrap_or_default(),
        None => "Tensor".to_string(),
    };
    let (impl_path, mut handle_path) = if f.is_method {
        (quote!(#owner::#impl_ident), quote!(#owner::#handle))
    } else {
        (quote!(#impl_ident), quote!(#handle))
    };
    if let Some(of) = &options.overload_of {
        handle_path = quote!(#of);
    }
    let name = match (&options.name, options.property) {
        (Some(n), _) => n.value(),
        (None, true) => format!("{rust_name}.__get__"),
        (None, false) => rust_name.clone(),
    };
    let namespace = match (&options.module, f.is_method) {
        (_, true) => quote!(#owner_name),
        (Some(m), false) => quote!(#m),
        (None, false) => quote!(::core::env!("CARGO_CRATE_NAME")),
    };
    let kind = match (f.is_method, options.property, name.starts_with("__") && name.ends_with("__")) {
        (false, ..) => quote!(Function),
        (true, true, _) => quote!(Property),
        (true, false, true) => quote!(Operator),
        (true, false, false) => quote!(Method),
    };

    let (doc_attrs, other_attrs): (Vec<&Attribute>, Vec<&Attribute>) =
        f.attrs.iter().partition(|a| a.path().is_ident("doc"));
    let cfg_attrs: Vec<&&Attribute> = other_attrs.iter().filter(|a| a.path().is_ident("cfg")).collect();
    let all_docs: Vec<Attribute> =
        dispatcher_docs.iter().cloned().chain(doc_attrs.iter().map(|a| (*a).clone())).collect();
    let doc = doc_text(&all_docs);
    let qualified_doc = match (&options.module, f.is_method) {
        (_, true) => quote!(::core::concat!(#owner_name, ".", #name)),
        (Some(m), false) => quote!(::core::concat!(#m, ".", #name)),
        (None, false) => quote!(::core::concat!(::core::env!("CARGO_CRATE_NAME"), ".", #name)),
    };
    let handle_link = match &options.overload_of {
        Some(of) => of.to_token_stream().to_string().replace(' ', ""),
        None if f.is_method => format!("{owner_name}::{handle}"),
        None => handle.to_string(),
    };
    let public_note = match (&options.overload_of, &options.ignore) {
        (Some(_), _) => {
            format!(" Another signature of [`{handle_link}`]: hooks and modes see the call as that `func`.")
        }
        (None, Some(_)) => {
            format!(" Not overridable (see `get_ignored_functions`); its handle [`{handle_link}`] calls it by name.")
        }
        (None, None) => format!(" Its handle is [`{handle_link}`]; hooks and modes see the call as `func`."),
    };

    // The public function.
    let vis = &f.vis;
    let sig = &f.sig;
    let generics = &f.sig.generics;
    let output = &f.sig.output;
    let idents: Vec<&Ident> = f.params.iter().map(|p| &p.ident).collect();
    let conversions = f.params.iter().filter(|p| p.converts).map(|p| {
        let (id, ty) = (&p.ident, &p.ty);
        quote!(let #id: #ty = ::core::convert::Into::into(#id);)
    });
    let fast_impl_call =
        if f.is_method { quote!(Self::#impl_ident(#(#idents),*)) } else { quote!(#impl_ident(#(#idents),*)) };

    let slow_idents: Vec<Ident> = f
        .params
        .iter()
        .map(|p| if p.is_receiver { Ident::new("__torchfn_self", p.ident.span()) } else { p.ident.clone() })
        .collect();
    let slow_params = f.params.iter().zip(&slow_idents).map(|(p, id)| {
        let ty = &p.ty;
        quote!(#id: #ty)
    });
    let ref_params = f.params.iter().zip(&slow_idents).map(|(p, id)| {
        let ty = &p.ty;
        quote!(#id: &#ty)
    });
    // Constructors take part in no subclass or duck dispatch (no tensor to dispatch on), but
    // modes see them: their relevant arguments are none, so only an active mode leaves the
    // fast path.
    let ignored = options.ignore.is_some();
    let relevant = match (dispatcher, ignored) {
        (_, true) => quote!(()),
        (Some(path), false) => {
            quote!(#path(#(::core::convert::Into::into(::core::clone::Clone::clone(#slow_idents))),*))
        }
        (None, false) => relevant_tuple(slow_idents.iter().map(|id| quote!(#id)).collect()),
    };
    let typed_params = if ignored {
        quote!(&())
    } else {
        let tuple = relevant_tuple(slow_idents.iter().map(|id| quote!(#id)).collect());
        quote!(&#tuple)
    };
    let rerun_relevant = typed_params.clone();
    let variadic_at = f.params.iter().position(|p| p.variadic.is_some());
    let keyword_from = first_keyword_only(&f.params);
    let positional = f.params.iter().zip(&slow_idents).enumerate().take(keyword_from);
    let push_args = positional.map(|(i, (_, id))| {
        if Some(i) == variadic_at {
            quote!(__args.extend(#private::splat(::torchfn::ToValue::to_value(#id)));)
        } else {
            quote!(::torchfn::ToValue::push_arg(#id, __args);)
        }
    });
    // Keyword-only parameters reach hooks as keywords, and only when they differ from their
    // default: what a Python caller who left them out would pass.
    let push_kwargs = f.params.iter().zip(&slow_idents).skip(keyword_from).map(|(p, id)| {
        let n = &p.name;
        let default = match &p.default {
            Some(expr) => {
                let ty = static_lifetimes(&p.ty);
                let o = quote!(<#ty as #private::Arg<'static>>::Owned);
                quote!(::core::option::Option::Some(|| {
                    let __value: #o = ::core::convert::Into::into(#expr);
                    ::torchfn::ToValue::to_value(&__value)
                }))
            }
            None => quote!(::core::option::Option::None),
        };
        quote!(#private::push_keyword(__kwargs, #n, ::torchfn::ToValue::to_value(#id), #default);)
    });
    let clones = quote!(#(::core::clone::Clone::clone(#slow_idents)),*);

    // Steps 3-6 of a call that left the fast path, shared by the typed call and the by-name
    // call: `__torchfn_raw` holds the by-name call's own arguments, which hooks and modes then
    // see as given; a typed call converts its parameters instead. `Some` is the value an
    // override returned, unchanged; `None` means nothing dispatched.
    let dispatch_ident = format_ident!("__dispatch_{}", ident);
    let dispatch_path = if f.is_method { quote!(#owner::#dispatch_ident) } else { quote!(#dispatch_ident) };
    let dispatch_fn = quote! {
        #[doc(hidden)]
        #[allow(non_snake_case, clippy::too_many_arguments)]
        #[inline]
        #(#cfg_attrs)*
        #vis fn #dispatch_ident #generics (
            #(#ref_params,)*
            __torchfn_raw: ::core::option::Option<(&[::torchfn::Value], &::torchfn::Kwargs)>,
        ) -> ::torchfn::Result<::core::option::Option<::torchfn::Value>> {
            let __torchfn_relevant = #relevant;
            let __torchfn_rerun = |__route: #private::Route| -> ::torchfn::Result<::torchfn::Value> {
                if __route != #private::Route::Implementation
                    && !#private::fast_path(#rerun_relevant)
                    && let ::core::option::Option::Some(__value) = #dispatch_path(#(#slow_idents,)* __torchfn_raw)?
                {
                    return ::core::result::Result::Ok(__value);
                }
                #private::Returns::into_value(#impl_path(#clones))
            };
            let mut __torchfn_args = #private::Args::new();
            let mut __torchfn_kwargs = ::torchfn::Kwargs::new();
            let (__given, __given_kwargs) = match __torchfn_raw {
                ::core::option::Option::Some(__raw) => __raw,
                ::core::option::Option::None => {
                    #[allow(unused_variables)]
                    let (__args, __kwargs) = (&mut __torchfn_args, &mut __torchfn_kwargs);
                    #(#push_args)*
                    #(#push_kwargs)*
                    (&*__torchfn_args, &__torchfn_kwargs)
                }
            };
            #private::dispatch(
                #handle_path,
                &__torchfn_relevant,
                __given,
                __given_kwargs,
                ::core::option::Option::Some(#private::Typed { params: #typed_params, rerun: &__torchfn_rerun }),
            )
        }
    };
    let fast_relevant = if ignored {
        quote!(&())
    } else {
        let tuple = relevant_tuple(idents.iter().map(|id| quote!(&#id)).collect());
        quote!(&#tuple)
    };

    let public_fn = quote! {
        #(#doc_attrs)*
        #[doc = ""]
        #[doc = #public_note]
        #(#other_attrs)*
        #[inline]
        #vis #sig {
            #(#conversions)*
            if #private::fast_path(#fast_relevant) {
                return #fast_impl_call;
            }
            #[cold]
            #[inline(never)]
            fn __torchfn_dispatch #generics (#(#slow_params),*) #output {
                match #dispatch_path(#(&#slow_idents,)* ::core::option::Option::None) {
                    ::core::result::Result::Ok(::core::option::Option::Some(__value)) => {
                        #private::Returns::from_value(__value, #handle_path)
                    }
                    ::core::result::Result::Ok(::core::option::Option::None) => #impl_path(#(#slow_idents),*),
                    ::core::result::Result::Err(__error) => ::core::result::Result::Err(__error),
                }
            }
            __torchfn_dispatch(#(#idents),*)
        }
    };

    // The implementation: the original signature and body. An `impl Into<X>` parameter stays
    // generic, so the body sees it as written; callers pass the converted `X`.
    let mut impl_sig = f.sig.clone();
    impl_sig.ident = impl_ident.clone();
    let block = &f.block;
    let impl_fn = quote! {
        #[doc(hidden)]
        #[allow(non_snake_case)]
        #(#other_attrs)*
        #vis #impl_sig #block
    };

    // The handle: signature, by-name entry point, registration.
    let Binding { params_static, bind, convert, typed } = binding(&f.params);
    let entry_relevant = if ignored {
        quote!(&())
    } else {
        let tuple = relevant_tuple(typed.iter().map(|t| quote!(&#t)).collect());
        quote!(&#tuple)
    };
    let nowrap = options.nowrap;
    let handle_doc = format!(
        " The handle of the overridable function [`{}`]: compare a hook's `func` with it, call it by name, read its signature.",
        if f.is_method { format!("{owner_name}::{rust_name}") } else { rust_name.clone() }
    );
    let (ignored, ignored_entry) = match &options.ignore {
        Some(reason) if options.overload_of.is_none() => (
            quote!(::core::option::Option::Some(#reason)),
            quote!(#private::inventory::submit! { ::torchfn::overrides::IgnoredFunction::__new(#qualified_doc, #reason) }),
        ),
        _ => (quote!(::core::option::Option::None), quote!()),
    };
    let entry_fn = |bind_func: TokenStream| {
        quote! {
            fn __torchfn_entry(
                args: &[::torchfn::Value],
                kwargs: &::torchfn::Kwargs,
                route: #private::Route,
            ) -> ::torchfn::Result<::torchfn::Value> {
                let __bound = #private::bind(#bind_func, &__TORCHFN_PARAMS, args, kwargs, route.strict())?;
                #bind
                if let #private::Route::Bind { .. } = route {
                    return ::core::result::Result::Ok(::torchfn::Value::None);
                }
                #convert
                // The by-name call hands hooks and modes its own arguments and returns what an
                // override returned unchanged.
                if route == #private::Route::Public
                    && !#private::fast_path(#entry_relevant)
                    && let ::core::option::Option::Some(__value) =
                        #dispatch_path(#(&#typed,)* ::core::option::Option::Some((args, kwargs)))?
                {
                    return ::core::result::Result::Ok(__value);
                }
                #private::Returns::into_value(#impl_path(#(#typed),*))
            }
            #params_static
        }
    };
    let handle_const = match &options.overload_of {
        Some(of) => {
            let entry = entry_fn(quote!(#of));
            let hidden = format_ident!("__TORCHFN_OVERLOAD_{}", rust_name.to_uppercase());
            quote_spanned! {Span::call_site()=>
                #[doc(hidden)]
                #(#cfg_attrs)*
                #[allow(non_upper_case_globals)]
                #vis const #hidden: () = {
                    #entry
                    static __TORCHFN_OVERLOAD: #private::Overload =
                        #private::Overload::__new(#of, #rust_name, &__TORCHFN_PARAMS, __torchfn_entry);
                    #private::inventory::submit! { #private::RegisteredOverload(&__TORCHFN_OVERLOAD) }
                };
            }
        }
        None => {
            let entry = entry_fn(quote!(&__TORCHFN_FUNC));
            quote_spanned! {Span::call_site()=>
                #[doc = #handle_doc]
                #[doc = ""]
                #[doc = " Registered as"]
                #[doc = #qualified_doc]
                #(#cfg_attrs)*
                #vis const #handle: &'static ::torchfn::Func = {
                    #entry
                    static __TORCHFN_FUNC: ::torchfn::Func = ::torchfn::Func::__generated(
                        #namespace,
                        #name,
                        ::torchfn::FuncKind::#kind,
                        &__TORCHFN_PARAMS,
                        #doc,
                        #nowrap,
                        #ignored,
                        __torchfn_entry,
                    );
                    #private::inventory::submit! { #private::Registered(&__TORCHFN_FUNC) }
                    #ignored_entry
                    &__TORCHFN_FUNC
                };
            }
        }
    };

    quote! {
        #public_fn
        #impl_fn
        #dispatch_fn
        #handle_const
    }
}

/// A tuple of `items` that is `Relevant` however many there are: tuples of at most eight
/// (the largest the runtime implements `Relevant` for), nested.
fn relevant_tuple(items: Vec<TokenStream>) -> TokenStream {
    if items.len() <= 8 {
        return quote!((#(#items,)*));
    }
    let chunks: Vec<TokenStream> = items.chunks(8).map(|c| relevant_tuple(c.to_vec())).collect();
    relevant_tuple(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(args: TokenStream, item: TokenStream) -> String {
        torch_function(args, item).to_string()
    }

    #[test]
    fn without_a_dispatcher_the_function_expands_at_once() {
        let out = expand(
            quote!(module = "mylib"),
            quote!(
                pub fn scale(input: &Tensor, #[default(2.0)] factor: f64) -> Result<Tensor> {
                    todo!()
                }
            ),
        );
        assert!(out.contains("pub fn scale (input : & Tensor , factor : f64) -> Result < Tensor >"), "{out}");
        assert!(out.contains("pub const SCALE : & 'static :: torchfn :: Func"), "{out}");
        assert!(out.contains("fn __impl_scale"), "{out}");
        assert!(out.contains("\"mylib\""), "{out}");
        assert!(!out.contains("# [default"), "{out}");
    }

    #[test]
    fn a_dispatcher_to_check_goes_through_its_macro() {
        let out = expand(
            quote!(dispatcher = other::d),
            quote!(
                fn f(x: &Tensor) -> Result<Tensor> {
                    todo!()
                }
            ),
        );
        assert!(out.starts_with("other :: d ! { args = { dispatcher = other :: d } item = {"), "{out}");
        let unchecked = expand(
            quote!(dispatcher = other::d, verify = false),
            quote!(
                fn f(x: &Tensor) -> Result<Tensor> {
                    todo!()
                }
            ),
        );
        assert!(unchecked.contains("other :: d (:: core :: convert :: Into :: into"), "{unchecked}");
    }

    #[test]
    fn methods_live_in_the_tensor_namespace() {
        let out = expand(
            quote!(),
            quote!(
                pub fn __add__(&self, other: &Tensor) -> Result<Tensor> {
                    todo!()
                }
            ),
        );
        assert!(out.contains("\"Tensor\""), "{out}");
        assert!(out.contains("FuncKind :: Operator"), "{out}");
        assert!(out.contains("Self :: __impl___add__ (self , other)"), "{out}");
    }

    #[test]
    fn properties_are_named_like_python_getters() {
        let out = expand(
            quote!(property),
            quote!(
                pub fn shape(&self) -> Result<Shape> {
                    todo!()
                }
            ),
        );
        assert!(out.contains("\"shape.__get__\"") && out.contains("FuncKind :: Property"), "{out}");
    }

    #[test]
    fn item_errors_come_together_and_keep_the_item() {
        let out = expand(
            quote!(),
            quote!(
                async fn f<T>(x: T, #[default(1)] y: i64, z: i64) {}
            ),
        );
        for message in
            ["cannot be `async`", "cannot be generic", "return `Result<T>`", "`z` has no default but follows `y`"]
        {
            assert!(out.contains(message), "missing {message:?} in {out}");
        }
        assert!(out.contains("async fn f < T > (x : T , y : i64 , z : i64) { }"), "{out}");
    }

    #[test]
    fn checked_stage_reports_mismatches_and_still_defines_the_function() {
        let input = quote! {
            dispatcher = { #[doc = " Dispatcher docs."] fn d(input: &Tensor) }
            args = { dispatcher = d, docs_from_dispatcher }
            item = { fn f(input: &Tensor, other: &Tensor) -> Result<Tensor> { todo!() } }
        };
        let out = checked(input).to_string();
        assert!(out.contains("`other` is missing from the dispatcher"), "{out}");
        assert!(out.contains("const F"), "{out}");
        assert!(out.contains("Dispatcher docs."), "{out}");
    }
}
