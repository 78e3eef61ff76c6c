//! Binding positional and keyword arguments to a signature, with Python's error messages.

use std::borrow::Cow;

use smallvec::SmallVec;

use crate::error::{Error, Result};
use crate::protocol::Func;
use crate::value::{FromValue, Kwargs, Value};

/// Where a bound argument came from, for error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    Missing,
    Position(usize),
    Keyword,
}

/// Arguments matched to parameters, ready to convert one by one.
#[doc(hidden)]
pub struct Bound<'v> {
    func: &'static Func,
    slots: SmallVec<[(Source, Option<Cow<'v, Value>>); 8]>,
}

/// Matches `args` and `kwargs` to the parameters of `func` as Python does: positionals fill
/// parameters in order (a variadic parameter takes the rest), keywords fill by name, defaults
/// fill the gaps. Errors read like Python's.
#[doc(hidden)]
pub fn bind<'v>(func: &'static Func, args: &'v [Value], kwargs: &'v Kwargs) -> Result<Bound<'v>> {
    let params = func.signature().params();
    let name = func.name();
    let variadic = params.iter().position(|p| p.is_variadic());
    let positional = variadic.unwrap_or(params.len());
    let mut slots: SmallVec<[(Source, Option<Cow<'v, Value>>); 8]> =
        params.iter().map(|_| (Source::Missing, None)).collect();

    if args.len() > positional && variadic.is_none() {
        let required = params.iter().filter(|p| p.default().is_none()).count();
        let takes = if required == positional {
            format!("{positional} positional argument{}", plural(positional))
        } else {
            format!("from {required} to {positional} positional arguments")
        };
        let given = args.len();
        let was = if given == 1 { "was" } else { "were" };
        return Err(Error::type_error(format!("{name}() takes {takes} but {given} {was} given")));
    }
    for (i, arg) in args.iter().take(positional).enumerate() {
        slots[i] = (Source::Position(i + 1), Some(Cow::Borrowed(arg)));
    }
    if let Some(v) = variadic {
        let rest = args.get(positional..).unwrap_or_default().to_vec();
        slots[v] = (Source::Position(v + 1), Some(Cow::Owned(Value::Tuple(rest))));
    }

    for (key, value) in kwargs.iter() {
        let index = params.iter().position(|p| p.name() == key && !p.is_variadic());
        let Some(index) = index else {
            return Err(Error::type_error(format!("{name}() got an unexpected keyword argument '{key}'")));
        };
        if slots[index].1.is_some() {
            return Err(Error::type_error(format!("{name}() got multiple values for argument '{key}'")));
        }
        slots[index] = (Source::Keyword, Some(Cow::Borrowed(value)));
    }

    let missing = |keyword_only: bool| -> Vec<&str> {
        params
            .iter()
            .enumerate()
            .filter(|&(i, p)| {
                slots[i].1.is_none() && p.default().is_none() && keyword_only == (variadic.is_some_and(|v| i > v))
            })
            .map(|(_, p)| p.name())
            .collect()
    };
    for (keyword_only, what) in [(false, "positional"), (true, "keyword-only")] {
        let names = missing(keyword_only);
        if !names.is_empty() {
            let n = names.len();
            return Err(Error::type_error(format!(
                "{name}() missing {n} required {what} argument{}: {}",
                plural(n),
                python_list(&names)
            )));
        }
    }
    Ok(Bound { func, slots })
}

impl Bound<'_> {
    /// Converts argument `index` to `T`, or takes the parameter's default.
    pub fn arg<T: FromValue>(&self, index: usize, default: Option<fn() -> T>) -> Result<T> {
        let param = &self.func.signature().params()[index];
        match &self.slots[index] {
            (source, Some(value)) => T::from_value(value).ok_or_else(|| {
                let at = match source {
                    Source::Position(p) => format!(" (position {p})"),
                    _ => String::new(),
                };
                Error::type_error(format!(
                    "{}(): argument '{}'{at} must be {}, not {}",
                    self.func.name(),
                    param.name(),
                    T::type_name(),
                    value.type_name()
                ))
            }),
            (_, None) => default.map(|d| d()).ok_or_else(|| {
                Error::type_error(format!("{}() missing required argument '{}'", self.func.name(), param.name()))
            }),
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `'a'`, `'a' and 'b'`, `'a', 'b', and 'c'`, as Python lists missing arguments.
fn python_list(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    match quoted.as_slice() {
        [one] => one.clone(),
        [a, b] => format!("{a} and {b}"),
        [init @ .., last] => format!("{}, and {last}", init.join(", ")),
        [] => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_names_are_listed_like_python() {
        assert_eq!(python_list(&["a"]), "'a'");
        assert_eq!(python_list(&["a", "b"]), "'a' and 'b'");
        assert_eq!(python_list(&["a", "b", "c"]), "'a', 'b', and 'c'");
    }
}
