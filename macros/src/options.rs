//! The options of `#[torch_function(...)]`.

use syn::parse::{Parse, ParseStream};
use syn::{Ident, LitBool, LitStr, Path, Token};

/// Parsed `#[torch_function(dispatcher = path, module = "...", name = "...", verify = false,
/// docs_from_dispatcher, property, nowrap)]`.
#[derive(Default)]
pub struct Options {
    /// The dispatcher; `None` makes every parameter's tensor-likes relevant.
    pub dispatcher: Option<Path>,
    /// The registry namespace of a free function (default: the crate name).
    pub module: Option<LitStr>,
    /// The registry name (default: the Rust name; `x.__get__` for a property `x`).
    pub name: Option<LitStr>,
    /// Whether to check the dispatcher's signature against the implementation's.
    pub verify: bool,
    /// Whether to copy the dispatcher's documentation onto the public function.
    pub docs_from_dispatcher: bool,
    /// A property getter (`Tensor.x.__get__`).
    pub property: bool,
    /// An accessor whose result the default hook must return as is (the very same object).
    pub nowrap: bool,
    /// The handle of the function this one is another signature of.
    pub overload_of: Option<Path>,
    /// Why the function takes part in no dispatch: it gets a handle, callable by name, listed
    /// among the ignored functions.
    pub ignore: Option<LitStr>,
    /// The user's class whose methods these are (`Meters.to_feet`): on an `impl Trait for
    /// Tensor` block, or on an associated function of the class taking `self_: &Tensor` first.
    pub class: Option<Path>,
}

const KNOWN: &str =
    "dispatcher, module, name, verify, docs_from_dispatcher, property, nowrap, overload_of, ignore, class";

impl Parse for Options {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut options = Options { verify: true, ..Options::default() };
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            let has_value = input.peek(Token![=]);
            if has_value {
                input.parse::<Token![=]>()?;
            }
            let flag = |input: ParseStream| -> syn::Result<bool> {
                if has_value { Ok(input.parse::<LitBool>()?.value) } else { Ok(true) }
            };
            match key.to_string().as_str() {
                "dispatcher" if has_value => options.dispatcher = Some(input.parse()?),
                "module" if has_value => options.module = Some(input.parse()?),
                "name" if has_value => options.name = Some(input.parse()?),
                "overload_of" if has_value => options.overload_of = Some(input.parse()?),
                "ignore" if has_value => options.ignore = Some(input.parse()?),
                "class" if has_value => options.class = Some(input.parse()?),
                "verify" => options.verify = flag(input)?,
                "docs_from_dispatcher" => options.docs_from_dispatcher = flag(input)?,
                "property" => options.property = flag(input)?,
                "nowrap" => options.nowrap = flag(input)?,
                "dispatcher" | "module" | "name" | "overload_of" | "ignore" | "class" => {
                    return Err(syn::Error::new(key.span(), format!("`{key}` needs a value: `{key} = ...`")));
                }
                other => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!("unknown option `{other}` of #[torch_function]; expected one of: {KNOWN}"),
                    ));
                }
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_options() {
        let o: Options =
            syn::parse_quote!(dispatcher = a::b, module = "mylib", name = "n", verify = false, docs_from_dispatcher);
        assert!(o.dispatcher.is_some() && !o.verify && o.docs_from_dispatcher && !o.property);
        assert_eq!(o.module.unwrap().value(), "mylib");
    }

    #[test]
    fn verify_defaults_to_true() {
        let o: Options = syn::parse_quote!();
        assert!(o.verify && o.dispatcher.is_none());
    }

    #[test]
    fn unknown_options_list_the_known_ones() {
        let err = syn::parse2::<Options>(quote::quote!(dispatch = x)).err().unwrap();
        assert!(err.to_string().contains("unknown option `dispatch`"), "{err}");
    }
}
