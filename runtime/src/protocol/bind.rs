//! Binding positional and keyword arguments to a signature, with Python's error messages.

use smallvec::SmallVec;

use crate::error::{Error, Result};
use crate::protocol::{Func, Param};
use crate::value::{FromValue, Kwargs, Value};

/// Arguments matched to parameters, ready to convert one by one.
#[doc(hidden)]
pub struct Bound<'v> {
    func: &'static Func,
    params: &'static [Param],
    strict: bool,
    /// Each parameter's argument; the variadic one's is `rest`.
    slots: SmallVec<[Option<&'v Value>; 6]>,
    /// Bit `i` is set when parameter `i` was given by keyword.
    by_keyword: u64,
    rest: Option<Box<Value>>,
}

/// Matches `args` and `kwargs` to `params`, a signature of `func`, as Python does: positionals
/// fill the parameters before the keyword-only ones in order (a variadic parameter takes the
/// rest), keywords fill by name (or by NumPy's name for it, as PyTorch's argument parser
/// accepts: `axis`, `keepdims`, `x`), defaults fill the gaps. Errors read like Python's. `strict` converts as overload resolution
/// first tries.
#[doc(hidden)]
pub fn bind<'v>(
    func: &'static Func,
    params: &'static [Param],
    args: &'v [Value],
    kwargs: &'v Kwargs,
    strict: bool,
) -> Result<Bound<'v>> {
    let name = func.name();
    let variadic = params.iter().position(|p| p.is_variadic());
    let positional = params.iter().position(|p| p.is_variadic() || p.is_keyword_only()).unwrap_or(params.len());

    if args.len() > positional && variadic.is_none() {
        let required = params[..positional].iter().filter(|p| p.default().is_none()).count();
        let takes = if required == positional {
            format!("{positional} positional argument{}", plural(positional))
        } else {
            format!("from {required} to {positional} positional arguments")
        };
        let given = args.len();
        let was = if given == 1 { "was" } else { "were" };
        return Err(Error::type_error(format!("{name}() takes {takes} but {given} {was} given")));
    }
    let mut slots: SmallVec<[Option<&'v Value>; 6]> = args.iter().take(positional).map(Some).collect();
    slots.resize(params.len(), None);
    let rest = variadic.map(|_| Box::new(Value::Tuple(args.get(positional..).unwrap_or_default().to_vec())));

    let mut by_keyword = 0u64;
    for (key, value) in kwargs.iter() {
        let named = |name: &str| params.iter().position(|p| p.name() == name && !p.is_variadic());
        let index = named(key).or_else(|| numpy_name_of(key).and_then(named));
        let Some(index) = index else {
            return Err(Error::type_error(format!("{name}() got an unexpected keyword argument '{key}'")));
        };
        if slots[index].is_some() {
            return Err(Error::type_error(format!("{name}() got multiple values for argument '{key}'")));
        }
        slots[index] = Some(value);
        by_keyword |= 1 << index.min(63);
    }

    let missing = |i: usize| slots[i].is_none() && Some(i) != variadic && params[i].default().is_none();
    if (0..params.len()).any(missing) {
        for (keyword_only, what) in [(false, "positional"), (true, "keyword-only")] {
            let names: Vec<&str> = (0..params.len())
                .filter(|&i| missing(i) && keyword_only == (i >= positional && Some(i) != variadic))
                .map(|i| params[i].name())
                .collect();
            if let n @ 1.. = names.len() {
                return Err(Error::type_error(format!(
                    "{name}() missing {n} required {what} argument{}: {}",
                    plural(n),
                    python_list(&names)
                )));
            }
        }
    }
    Ok(Bound { func, params, strict, slots, by_keyword, rest })
}

impl Bound<'_> {
    /// Converts argument `index` to `T`, or takes the parameter's default.
    pub fn arg<T: FromValue>(&self, index: usize, default: Option<fn() -> T>) -> Result<T> {
        let value = match (self.slots[index], &self.rest) {
            (Some(v), _) => v,
            (None, Some(rest)) if self.params[index].is_variadic() => rest,
            (None, _) => {
                let param = self.params[index].name();
                return default.map(|d| d()).ok_or_else(|| {
                    Error::type_error(format!("{}() missing required argument '{param}'", self.func.name()))
                });
            }
        };
        // A method's `self` is the tensor itself, never a number made one (PyTorch refuses
        // `Tensor.logical_not_(-2)`), so it always converts strictly.
        let strict = self.strict || (index == 0 && self.params[0].name() == "self");
        let converted = if strict { T::from_value_strict(value) } else { T::from_value(value) };
        converted.ok_or_else(|| {
            let by_keyword = self.by_keyword & (1 << index.min(63)) != 0;
            let at = if by_keyword { String::new() } else { format!(" (position {})", index + 1) };
            Error::type_error(format!(
                "{}(): argument '{}'{at} must be {}, not {}",
                self.func.name(),
                self.params[index].name(),
                T::type_name(),
                value.type_name()
            ))
        })
    }
}

/// The parameter that PyTorch's argument parser lets a NumPy name stand for
/// (`numpy_compatibility_arg_names` in `python_arg_parser.cpp`): `torch.sum(t, axis=0)`.
fn numpy_name_of(key: &str) -> Option<&'static str> {
    match key {
        "axis" => Some("dim"),
        "keepdims" => Some("keepdim"),
        "x" | "a" | "x1" => Some("input"),
        "x2" => Some("other"),
        _ => None,
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
