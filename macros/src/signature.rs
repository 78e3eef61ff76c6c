//! Parameters of an implementation or a dispatcher, with their `#[default]` and `#[variadic]`
//! marks, which are removed from the Rust signature.

use proc_macro2::Span;
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Expr, FnArg, GenericArgument, Ident, Pat, PathArguments, Signature, Type, TypeParamBound};

/// One parameter as the protocol sees it.
pub struct Param {
    /// The name Python would show: `self` for a receiver.
    pub name: String,
    /// The Rust identifier (a receiver's `self` keyword, with its span).
    pub ident: Ident,
    /// The type the implementation receives (`X` for an `impl Into<X>` parameter).
    pub ty: Type,
    /// True for a parameter written `impl Into<X>`, converted once on entry.
    pub converts: bool,
    /// The default from `#[default(expr)]`.
    pub default: Option<Expr>,
    /// Where `#[variadic]` was written, if it was.
    pub variadic: Option<Span>,
    /// Where `#[keyword_only]` was written, if it was: Python's bare `*` before this parameter,
    /// which makes it and the parameters after it keyword-only.
    pub keyword_only: Option<Span>,
    /// True for `&self`.
    pub is_receiver: bool,
    /// The whole parameter, for error messages.
    pub span: Span,
}

impl Param {
    /// The default as Python prints it in a signature: `1`, `None`, `'floor'`, `True`.
    pub fn default_text(&self) -> Option<String> {
        let expr = self.default.as_ref()?;
        Some(match expr {
            Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => format!("'{}'", s.value()),
            Expr::Lit(syn::ExprLit { lit: syn::Lit::Bool(b), .. }) => if b.value { "True" } else { "False" }.into(),
            other => other.to_token_stream().to_string().replace(' ', ""),
        })
    }

    /// True when the default is the literal `None`.
    pub fn default_is_none(&self) -> bool {
        matches!(&self.default, Some(Expr::Path(p)) if p.path.is_ident("None"))
    }
}

/// Reads the parameters of `sig`, removing the helper attributes from it. Every problem is
/// reported, combined into one error.
pub fn parse_params(sig: &mut Signature, tensor_type: &Type) -> syn::Result<Vec<Param>> {
    let mut params = Vec::new();
    let mut errors = Errors::default();
    for arg in sig.inputs.iter_mut() {
        match arg {
            FnArg::Receiver(r) => {
                if r.reference.is_none() || r.mutability.is_some() || r.colon_token.is_some() {
                    errors.push(r.span(), "overridable methods take `&self`");
                }
                let (default, variadic, keyword_only) = take_marks(&mut r.attrs, &mut errors);
                if default.is_some() || variadic.is_some() || keyword_only.is_some() {
                    errors.push(r.span(), "`self` cannot have a default or be variadic or keyword-only");
                }
                params.push(Param {
                    name: "self".into(),
                    ident: Ident::new("self", r.self_token.span),
                    ty: tensor_type.clone(),
                    converts: false,
                    default: None,
                    variadic: None,
                    keyword_only: None,
                    is_receiver: true,
                    span: r.span(),
                });
            }
            FnArg::Typed(t) => {
                let (default, variadic, keyword_only) = take_marks(&mut t.attrs, &mut errors);
                let Pat::Ident(pat) = &*t.pat else {
                    errors.push(t.pat.span(), "overridable function parameters must be plain names");
                    continue;
                };
                if pat.by_ref.is_some() || pat.subpat.is_some() {
                    errors.push(t.pat.span(), "overridable function parameters must be plain names");
                }
                if mentions_self_type(&t.ty) {
                    errors.push(t.ty.span(), "write the type's name instead of `Self` in an overridable signature");
                }
                let (ty, converts) = match into_target(&t.ty) {
                    Some(target) => (target, true),
                    None => ((*t.ty).clone(), false),
                };
                if matches!(ty, Type::ImplTrait(_)) {
                    errors.push(
                        t.ty.span(),
                        "the only `impl Trait` parameter an overridable function takes is `impl Into<T>`",
                    );
                }
                let name = pat.ident.to_string();
                params.push(Param {
                    name: name.strip_prefix("r#").unwrap_or(&name).to_string(),
                    ident: pat.ident.clone(),
                    ty,
                    converts,
                    default,
                    variadic,
                    keyword_only,
                    is_receiver: false,
                    span: t.span(),
                });
            }
        }
    }
    errors.finish(params)
}

/// Removes `#[default(expr)]`, `#[variadic]` and `#[keyword_only]` from a parameter's attributes.
fn take_marks(attrs: &mut Vec<syn::Attribute>, errors: &mut Errors) -> (Option<Expr>, Option<Span>, Option<Span>) {
    let (mut default, mut variadic, mut keyword_only) = (None, None, None);
    attrs.retain(|attr| {
        if attr.path().is_ident("default") {
            match attr.parse_args::<Expr>() {
                Ok(expr) => default = Some(expr),
                Err(_) => errors.push(attr.span(), "write a default as `#[default(value)]`"),
            }
            false
        } else if attr.path().is_ident("variadic") {
            if !matches!(attr.meta, syn::Meta::Path(_)) {
                errors.push(attr.span(), "`#[variadic]` takes no arguments");
            }
            variadic = Some(attr.span());
            false
        } else if attr.path().is_ident("keyword_only") {
            if !matches!(attr.meta, syn::Meta::Path(_)) {
                errors.push(attr.span(), "`#[keyword_only]` takes no arguments");
            }
            keyword_only = Some(attr.span());
            false
        } else {
            true
        }
    });
    (default, variadic, keyword_only)
}

/// `X` for a type written `impl Into<X>`.
fn into_target(ty: &Type) -> Option<Type> {
    let Type::ImplTrait(it) = ty else { return None };
    let [TypeParamBound::Trait(bound)] = it.bounds.iter().collect::<Vec<_>>()[..] else { return None };
    let last = bound.path.segments.last()?;
    if last.ident != "Into" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else { return None };
    match args.args.first()? {
        GenericArgument::Type(target) if args.args.len() == 1 => Some(target.clone()),
        _ => None,
    }
}

/// True when `tokens` name the `Self` type anywhere.
pub fn mentions_self_type(tokens: impl ToTokens) -> bool {
    fn scan(tokens: proc_macro2::TokenStream) -> bool {
        tokens.into_iter().any(|t| match t {
            proc_macro2::TokenTree::Ident(i) => i == "Self",
            proc_macro2::TokenTree::Group(g) => scan(g.stream()),
            _ => false,
        })
    }
    scan(tokens.into_token_stream())
}

/// `ty` with every lifetime replaced by `'_`, for use inside generated bodies.
pub fn erase_lifetimes(ty: &Type) -> Type {
    relifetime(ty, "'_", false)
}

/// `ty` with every lifetime, elided ones included, made `'static`: for types that must be
/// written out in full, as the return type of a function pointer.
pub fn static_lifetimes(ty: &Type) -> Type {
    relifetime(ty, "'static", true)
}

fn relifetime(ty: &Type, name: &str, fill_elided: bool) -> Type {
    struct Relifetime<'a>(&'a str, bool);
    impl VisitMut for Relifetime<'_> {
        fn visit_lifetime_mut(&mut self, lifetime: &mut syn::Lifetime) {
            *lifetime = syn::Lifetime::new(self.0, lifetime.span());
        }
        fn visit_type_reference_mut(&mut self, r: &mut syn::TypeReference) {
            if self.1 && r.lifetime.is_none() {
                r.lifetime = Some(syn::Lifetime::new(self.0, r.and_token.span));
            }
            syn::visit_mut::visit_type_reference_mut(self, r);
        }
    }
    let mut ty = ty.clone();
    Relifetime(name, fill_elided).visit_type_mut(&mut ty);
    ty
}

/// Collects errors so that all of them are reported together.
#[derive(Default)]
pub struct Errors(Option<syn::Error>);

impl Errors {
    /// Adds an error at `span`.
    pub fn push(&mut self, span: Span, message: impl std::fmt::Display) {
        self.add(syn::Error::new(span, message));
    }

    /// Adds an error.
    pub fn add(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    /// `Ok(value)` when there were no errors.
    pub fn finish<T>(self, value: T) -> syn::Result<T> {
        match self.0 {
            Some(err) => Err(err),
            None => Ok(value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn params(mut sig: Signature) -> syn::Result<(Vec<Param>, Signature)> {
        let tensor: Type = parse_quote!(&::torchfn::Tensor);
        let p = parse_params(&mut sig, &tensor)?;
        Ok((p, sig))
    }

    #[test]
    fn reads_defaults_and_variadics_and_strips_them() {
        let (p, sig) =
            params(parse_quote!(fn f(&self, #[variadic] xs: &[Tensor], #[default("floor")] mode: &str))).unwrap();
        assert_eq!(p.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["self", "xs", "mode"]);
        assert!(p[0].is_receiver && p[1].variadic.is_some());
        assert_eq!(p[2].default_text().as_deref(), Some("'floor'"));
        assert_eq!(sig.to_token_stream().to_string(), "fn f (& self , xs : & [Tensor] , mode : & str)");
    }

    #[test]
    fn impl_into_parameters_convert_to_their_target() {
        let (p, _) = params(parse_quote!(fn get(&self, index: impl Into<Index>))).unwrap();
        assert!(p[1].converts);
        assert_eq!(p[1].ty.to_token_stream().to_string(), "Index");
    }

    #[test]
    fn reports_every_bad_parameter_at_once() {
        let err = params(parse_quote!(fn f(self, (a, b): (i32, i32), x: Self))).err().unwrap();
        let messages: Vec<String> = err.into_iter().map(|e| e.to_string()).collect();
        assert_eq!(messages.len(), 3, "{messages:?}");
    }

    #[test]
    fn lifetimes_are_erased_or_made_static() {
        let ty: Type = parse_quote!(Option<&'a Cow<'b, str>>);
        assert_eq!(erase_lifetimes(&ty).to_token_stream().to_string(), "Option < & '_ Cow < '_ , str > >");
        let ty: Type = parse_quote!(&[Tensor]);
        assert_eq!(static_lifetimes(&ty).to_token_stream().to_string(), "& 'static [Tensor]");
    }

    #[test]
    fn default_texts_read_like_python() {
        let (p, _) = params(
            parse_quote!(fn f(#[default(-1)] a: i64, #[default(None)] b: Option<i64>, #[default(false)] c: bool)),
        )
        .unwrap();
        let texts: Vec<_> = p.iter().map(|p| p.default_text().unwrap()).collect();
        assert_eq!(texts, ["-1", "None", "False"]);
        assert!(p[1].default_is_none() && !p[0].default_is_none());
    }
}
