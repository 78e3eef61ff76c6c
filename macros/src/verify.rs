//! The compile-time signature check of docs/protocol.md section 7 (NumPy's
//! `verify_matching_signatures`): the dispatcher and the implementation must have the same
//! parameter names in the same order, the same variadic and keyword-only parameters, and defaults on the same
//! parameters; the dispatcher's defaults must be `None`.

use syn::Ident;

use crate::signature::{Errors, Param};

/// The name a dispatcher gives a method's receiver, since a free function cannot name it `self`.
pub const RECEIVER_IN_DISPATCHER: &str = "self_";

/// Compares the implementation `imp` of `func` with the dispatcher `disp` named `dispatcher`.
/// Every mismatch is reported at the implementation's parameter (or at the function name when
/// the parameter exists only in the dispatcher).
pub fn check(func: &Ident, imp: &[Param], dispatcher: &Ident, disp: &[Param]) -> syn::Result<()> {
    let mut errors = Errors::default();
    let names = |ps: &[Param]| -> Vec<String> {
        ps.iter()
            .map(|p| if p.name == RECEIVER_IN_DISPATCHER || p.is_receiver { "self".into() } else { p.name.clone() })
            .collect()
    };
    let (imp_names, disp_names) = (names(imp), names(disp));

    if imp_names != disp_names {
        let mut sorted_imp = imp_names.clone();
        let mut sorted_disp = disp_names.clone();
        sorted_imp.sort();
        sorted_disp.sort();
        if sorted_imp == sorted_disp {
            for (i, (a, b)) in imp_names.iter().zip(&disp_names).enumerate() {
                if a != b {
                    let there = disp_names.iter().position(|n| n == a).map_or(0, |j| j + 1);
                    errors.push(
                        imp[i].span,
                        format!(
                            "parameter `{a}` is parameter {} of `{func}` but parameter {there} of its dispatcher \
                             `{dispatcher}`: the dispatcher must take the same parameters in the same order",
                            i + 1
                        ),
                    );
                }
            }
        } else {
            for (i, (a, b)) in imp_names.iter().zip(&disp_names).enumerate() {
                if a != b {
                    errors.push(
                        imp[i].span,
                        format!("parameter {} is named `{a}` here but `{b}` in the dispatcher `{dispatcher}`", i + 1),
                    );
                }
            }
            count_mismatch(&mut errors, func, imp, dispatcher, disp);
        }
    }

    for (i, p) in imp.iter().enumerate() {
        let Some(d) = disp.iter().zip(&disp_names).find(|(_, n)| **n == imp_names[i]).map(|(d, _)| d) else {
            continue;
        };
        match (p.variadic.is_some(), d.variadic.is_some()) {
            (true, false) => errors.push(
                p.span,
                format!("parameter `{}` is #[variadic] here but not in the dispatcher `{dispatcher}`", p.name),
            ),
            (false, true) => errors.push(
                p.span,
                format!("parameter `{}` is #[variadic] in the dispatcher `{dispatcher}` but not here", p.name),
            ),
            _ => {}
        }
        match (p.keyword_only.is_some(), d.keyword_only.is_some()) {
            (true, false) => errors.push(
                p.span,
                format!("parameter `{}` is #[keyword_only] here but not in the dispatcher `{dispatcher}`", p.name),
            ),
            (false, true) => errors.push(
                p.span,
                format!("parameter `{}` is #[keyword_only] in the dispatcher `{dispatcher}` but not here", p.name),
            ),
            _ => {}
        }
        match (p.default.is_some(), d.default.is_some()) {
            (true, false) => errors.push(
                p.span,
                format!(
                    "parameter `{}` has a default here but not in the dispatcher `{dispatcher}`; \
                     mark it `#[default(None)]` there",
                    p.name
                ),
            ),
            (false, true) => errors.push(
                p.span,
                format!("parameter `{}` has a default in the dispatcher `{dispatcher}` but not here", p.name),
            ),
            _ => {}
        }
    }
    errors.finish(())
}

fn count_mismatch(errors: &mut Errors, func: &Ident, imp: &[Param], dispatcher: &Ident, disp: &[Param]) {
    let (n, m) = (imp.len(), disp.len());
    if n == m {
        return;
    }
    let summary = format!("`{func}` has {n} parameter{} but its dispatcher `{dispatcher}` has {m}", plural(n));
    for p in imp.iter().skip(m) {
        errors.push(p.span, format!("{summary}: `{}` is missing from the dispatcher", p.name));
    }
    for d in disp.iter().skip(n) {
        errors.push(func.span(), format!("{summary}: the dispatcher's `{}` is missing here", d.name));
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The dispatcher's own rule: its defaults must be `None`.
pub fn check_dispatcher_defaults(disp: &[Param]) -> syn::Result<()> {
    let mut errors = Errors::default();
    for p in disp.iter().filter(|p| p.default.is_some() && !p.default_is_none()) {
        let span = p.default.as_ref().map_or(p.span, syn::spanned::Spanned::span);
        errors.push(
            span,
            format!(
                "dispatcher defaults must be `None`, but `{}` defaults to `{}`; the implementation holds the real default",
                p.name,
                p.default_text().unwrap_or_default()
            ),
        );
    }
    errors.finish(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::parse_params;
    use syn::{Signature, Type, parse_quote};

    fn ps(mut sig: Signature) -> (Ident, Vec<Param>) {
        let tensor: Type = parse_quote!(&Tensor);
        let p = parse_params(&mut sig, &tensor).unwrap();
        (sig.ident, p)
    }

    fn messages(imp: Signature, disp: Signature) -> Vec<String> {
        let ((f, i), (d, dp)) = (ps(imp), ps(disp));
        match check(&f, &i, &d, &dp) {
            Ok(()) => vec![],
            Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn matching_signatures_pass_with_different_default_values() {
        let m = messages(
            parse_quote!(fn add(input: &Tensor, other: &Tensor, #[default(1)] alpha: f64)),
            parse_quote!(fn d(input: &Tensor, other: &Tensor, #[default(None)] alpha: Option<f64>)),
        );
        assert!(m.is_empty(), "{m:?}");
    }

    #[test]
    fn receivers_match_self_underscore() {
        let m =
            messages(parse_quote!(fn add(&self, other: &Tensor)), parse_quote!(fn d(self_: &Tensor, other: &Tensor)));
        assert!(m.is_empty(), "{m:?}");
    }

    #[test]
    fn different_names_are_reported_per_parameter() {
        let m = messages(
            parse_quote!(fn add(input: &Tensor, other: &Tensor)),
            parse_quote!(fn d(input: &Tensor, othr: &Tensor)),
        );
        assert_eq!(m, ["parameter 2 is named `other` here but `othr` in the dispatcher `d`"]);
    }

    #[test]
    fn different_order_names_both_positions() {
        let m = messages(
            parse_quote!(fn add(input: &Tensor, other: &Tensor)),
            parse_quote!(fn d(other: &Tensor, input: &Tensor)),
        );
        assert_eq!(m.len(), 2, "{m:?}");
        assert!(m[0].starts_with("parameter `input` is parameter 1 of `add` but parameter 2 of its dispatcher `d`"));
    }

    #[test]
    fn different_counts_name_the_missing_parameter() {
        let m = messages(parse_quote!(fn add(input: &Tensor, other: &Tensor)), parse_quote!(fn d(input: &Tensor)));
        assert_eq!(m, ["`add` has 2 parameters but its dispatcher `d` has 1: `other` is missing from the dispatcher"]);
        let m = messages(parse_quote!(fn add(input: &Tensor)), parse_quote!(fn d(input: &Tensor, out: &Tensor)));
        assert_eq!(m, ["`add` has 1 parameter but its dispatcher `d` has 2: the dispatcher's `out` is missing here"]);
    }

    #[test]
    fn variadic_and_default_mismatches_are_all_reported() {
        let m = messages(
            parse_quote!(fn cat(#[variadic] tensors: &[Tensor], #[default(0)] dim: i64)),
            parse_quote!(fn d(tensors: &[Tensor], dim: i64)),
        );
        assert_eq!(m.len(), 2, "{m:?}");
        assert!(m[0].contains("is #[variadic] here but not in the dispatcher"));
        assert!(m[1].contains("has a default here but not in the dispatcher `d`; mark it `#[default(None)]` there"));
    }

    #[test]
    fn dispatcher_defaults_must_be_none() {
        let (_, p) =
            ps(parse_quote!(fn d(input: &Tensor, #[default(2)] alpha: i64, #[default(None)] out: Option<&Tensor>)));
        let err = check_dispatcher_defaults(&p).unwrap_err();
        assert_eq!(
            err.to_string(),
            "dispatcher defaults must be `None`, but `alpha` defaults to `2`; the implementation holds the real default"
        );
    }
}
