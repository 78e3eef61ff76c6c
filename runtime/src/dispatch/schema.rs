//! Operator schemas in PyTorch's text format (`native_functions.yaml`'s `func:` lines), parsed
//! into argument names and types, defaults, aliasing and mutation, and the binding of a call's
//! positional and keyword values to them.

use std::fmt;

use smallvec::SmallVec;

use crate::error::{Error, Result};
use crate::tensor::{Scalar, Tensor};
use crate::value::{FromValue, Kwargs, Value};

/// An operator's signature: `add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor`.
#[derive(Clone, Debug)]
pub struct Schema {
    name: String,
    overload: String,
    arguments: Vec<Argument>,
    returns: Vec<Return>,
}

/// A call's values, one for each argument of its schema, in order (on the stack: binding
/// happens on every operator call under a dispatch mode).
pub(crate) type Bound = SmallVec<[Value; 12]>;

/// One argument of a [`Schema`].
#[derive(Clone, Debug)]
pub struct Argument {
    name: String,
    ty: String,
    alias: Option<Alias>,
    kwarg_only: bool,
    default: Option<Value>,
}

/// One result of a [`Schema`].
#[derive(Clone, Debug, PartialEq)]
pub struct Return {
    ty: String,
    alias: Option<Alias>,
}

/// An alias annotation, `Tensor(a)` or `Tensor(a!)`: the alias set a tensor belongs to, and
/// whether the operator writes into it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alias {
    set: String,
    write: bool,
}

impl Alias {
    /// The alias set's name (`a`).
    pub fn set(&self) -> &str {
        &self.set
    }

    /// Whether the operator writes into tensors of this set (`!`).
    pub fn is_write(&self) -> bool {
        self.write
    }
}

impl Schema {
    /// Parses PyTorch's schema text; an error says what is malformed.
    pub fn parse(text: &str) -> Result<Schema> {
        let malformed = |why: &str| Error::value_error(format!("malformed operator schema '{text}': {why}"));
        let open = text.find('(').ok_or_else(|| malformed("no '('"))?;
        let close = text.rfind(") ->").ok_or_else(|| malformed("no ') ->'"))?;
        let (name, overload) = match text[..open].split_once('.') {
            Some((n, o)) => (n.to_string(), o.to_string()),
            None => (text[..open].to_string(), String::new()),
        };
        if name.is_empty() {
            return Err(malformed("no name"));
        }
        let mut arguments = Vec::new();
        let mut kwarg_only = false;
        for part in split_top(&text[open + 1..close]) {
            if part == "*" {
                kwarg_only = true;
                continue;
            }
            let (declaration, default) = match part.split_once('=') {
                Some((d, v)) => (d.trim(), Some(parse_default(v.trim()).ok_or_else(|| malformed(part))?)),
                None => (part, None),
            };
            let (ty, name) = declaration.rsplit_once(' ').ok_or_else(|| malformed(part))?;
            let (ty, alias) = parse_type(ty);
            arguments.push(Argument { name: name.to_string(), ty, alias, kwarg_only, default });
        }
        let ret = text[close + 4..].trim();
        let ret = ret.strip_prefix('(').and_then(|r| r.strip_suffix(')')).unwrap_or(ret);
        let returns = split_top(ret)
            .map(|r| {
                let (ty, alias) = parse_type(r.split(' ').next().unwrap_or(r));
                Return { ty, alias }
            })
            .collect();
        Ok(Schema { name, overload, arguments, returns })
    }

    /// The operator's name without namespace or overload (`add`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The overload's name (`Tensor`), empty for the default overload.
    pub fn overload(&self) -> &str {
        &self.overload
    }

    /// The arguments, in order.
    pub fn arguments(&self) -> &[Argument] {
        &self.arguments
    }

    /// The results, in order.
    pub fn returns(&self) -> &[Return] {
        &self.returns
    }

    /// Whether the operator writes into one of its arguments (`Tensor(a!)`).
    pub fn is_mutable(&self) -> bool {
        self.arguments.iter().any(Argument::is_write)
    }

    /// The argument result `index` aliases (shares memory with), by position: a view's result
    /// aliases its input, an in-place operator's result is the tensor it wrote.
    pub fn aliased_argument(&self, index: usize) -> Option<usize> {
        let set = &self.returns.get(index)?.alias.as_ref()?.set;
        self.arguments.iter().position(|a| a.alias.as_ref().is_some_and(|x| &x.set == set))
    }

    /// A call's values, one per argument in the schema's order (PyTorch's rules: positional
    /// arguments up to `*`, keywords by name, defaults for the rest; a number where a tensor
    /// goes becomes a zero-dimensional tensor), each value's type checked: how a hook reads an
    /// argument by name whether it came positionally, by keyword or not at all.
    ///
    /// ```
    /// use torchfn::dispatch::aten;
    /// let x = torchfn::tensor([1.0f32])?;
    /// let schema = aten::SUM_DIM_INTLIST.schema();
    /// let values = schema.bind_values(&"sum", &[x.into(), torchfn::Value::List(vec![0i64.into()])], &Default::default())?;
    /// let names: Vec<&str> = schema.arguments().iter().map(|a| a.name()).collect();
    /// assert_eq!(names[2], "keepdim");
    /// assert!(values[2].is_same_constant(&false.into())); // the default
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    pub fn bind_values(&self, op: &dyn fmt::Display, args: &[Value], kwargs: &Kwargs) -> Result<Vec<Value>> {
        Ok(self.bind(op, args, kwargs)?.into_vec())
    }

    /// Binds a call's values to the arguments (PyTorch's rules: positional arguments up to
    /// `*`, keywords by name, defaults for the rest), checking each value's type.
    pub(crate) fn bind(&self, op: &dyn fmt::Display, args: &[Value], kwargs: &Kwargs) -> Result<Bound> {
        let positional = self.arguments.iter().take_while(|a| !a.kwarg_only).count();
        if args.len() > positional {
            return Err(Error::type_error(format!(
                "{op}() takes {positional} positional arguments but {} were given",
                args.len()
            )));
        }
        if let Some((name, _)) = kwargs.iter().find(|(k, _)| !self.arguments.iter().any(|a| a.name == *k)) {
            return Err(Error::type_error(format!("{op}() got an unexpected keyword argument '{name}'")));
        }
        let mut bound = Bound::new();
        for (i, arg) in self.arguments.iter().enumerate() {
            let given = match (args.get(i), kwargs.get(&arg.name)) {
                (Some(_), Some(_)) => {
                    return Err(Error::type_error(format!("{op}() got multiple values for argument '{}'", arg.name)));
                }
                (Some(v), None) | (None, Some(v)) => v.clone(),
                (None, None) => match &arg.default {
                    Some(v) => v.clone(),
                    None => {
                        return Err(Error::type_error(format!("{op}() missing required argument '{}'", arg.name)));
                    }
                },
            };
            // A Python number where a tensor goes is a wrapped number (`x + 2` calls
            // `aten::add.Tensor(x, 2)`), as PyTorch's dispatcher shows it.
            let given = match (arg.ty.as_str(), Scalar::from_value(&given)) {
                ("Tensor" | "Tensor?", Some(number)) => Value::Tensor(Tensor::scalar(number)),
                _ => given,
            };
            if !accepts(&arg.ty, &given) {
                return Err(Error::type_error(format!(
                    "{op}() expected a value of type '{}' for argument '{}' but instead found type '{}'",
                    arg.ty,
                    arg.name,
                    given.type_name()
                )));
            }
            bound.push(given);
        }
        Ok(bound)
    }
}

impl Argument {
    /// The argument's name (`self`, `other`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its type as the schema writes it, without the alias annotation (`Tensor`, `int[]`,
    /// `ScalarType?`).
    pub fn ty(&self) -> &str {
        &self.ty
    }

    /// Its alias annotation, for a tensor that aliases a result or is written.
    pub fn alias(&self) -> Option<&Alias> {
        self.alias.as_ref()
    }

    /// Whether the operator writes into it (`Tensor(a!)`).
    pub fn is_write(&self) -> bool {
        self.alias.as_ref().is_some_and(|a| a.write)
    }

    /// Whether it can only be passed by keyword (after `*`).
    pub fn kwarg_only(&self) -> bool {
        self.kwarg_only
    }

    /// Its default value, if it has one.
    pub fn default_value(&self) -> Option<&Value> {
        self.default.as_ref()
    }
}

impl Return {
    /// The result's type (`Tensor`).
    pub fn ty(&self) -> &str {
        &self.ty
    }

    /// Its alias annotation, when it shares memory with an argument.
    pub fn alias(&self) -> Option<&Alias> {
        self.alias.as_ref()
    }
}

/// The comma-separated parts of `text` outside brackets, trimmed.
fn split_top(text: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0i32;
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts.into_iter().map(str::trim).filter(|p| !p.is_empty())
}

/// A type with its alias annotation taken out: `Tensor(a!)` is `Tensor` in set `a`, written.
fn parse_type(text: &str) -> (String, Option<Alias>) {
    let Some(open) = text.find('(') else { return (text.to_string(), None) };
    let close = text[open..].find(')').map_or(text.len(), |c| open + c);
    let inner = &text[open + 1..close];
    let (set, write) = match inner.strip_suffix('!') {
        Some(set) => (set, true),
        None => (inner, false),
    };
    let ty = format!("{}{}", &text[..open], text.get(close + 1..).unwrap_or(""));
    (ty, Some(Alias { set: set.to_string(), write }))
}

/// A default as the schema writes it: `None`, `True`, `1`, `1.0`, `[]`, `[0, 1]`, `"mean"`.
fn parse_default(text: &str) -> Option<Value> {
    Some(match text {
        "None" => Value::None,
        "True" => Value::Bool(true),
        "False" => Value::Bool(false),
        _ if text.starts_with('[') => {
            let inner = text.strip_prefix('[')?.strip_suffix(']')?;
            Value::List(split_top(inner).map(parse_default).collect::<Option<_>>()?)
        }
        _ if text.starts_with('"') || text.starts_with('\'') => Value::Str(text[1..text.len() - 1].to_string()),
        _ => match text.parse::<i64>() {
            Ok(i) => Value::Int(i),
            Err(_) => Value::Float(text.parse().ok()?),
        },
    })
}

/// Whether `value` fits the schema type `ty`.
fn accepts(ty: &str, value: &Value) -> bool {
    if let Some(inner) = ty.strip_suffix('?') {
        return value.is_none() || accepts(inner, value);
    }
    if let Some(open) = ty.find('[') {
        let element = &ty[..open];
        // `int[2] padding=0`: one number stands for every element; `int[1] dim` takes any
        // number of them.
        let fixed = ty[open + 1..ty.len() - 1].parse::<usize>().ok();
        let fixed_len = fixed.filter(|&n| n > 1);
        return match value {
            Value::List(items) | Value::Tuple(items) => {
                fixed_len.is_none_or(|n| items.len() == n) && items.iter().all(|v| accepts(element, v))
            }
            single => fixed.is_some() && !matches!(single, Value::Tensor(_)) && accepts(element, single),
        };
    }
    match ty {
        "Tensor" => matches!(value, Value::Tensor(_)),
        "int" | "SymInt" => matches!(value, Value::Int(_)),
        "float" => matches!(value, Value::Int(_) | Value::Float(_)),
        "bool" => matches!(value, Value::Bool(_)),
        "Scalar" => matches!(value, Value::Bool(_) | Value::Int(_) | Value::Float(_)),
        "ScalarType" => matches!(value, Value::DType(_)),
        "Device" => matches!(value, Value::Device(_)),
        "str" => matches!(value, Value::Str(_)),
        "Generator" => matches!(value, Value::Generator(_)),
        _ => false,
    }
}

/// The tensors of a value: itself, or those in its lists and tuples, nested ones too.
pub(crate) fn tensors_in(value: &Value) -> Box<dyn Iterator<Item = &Tensor> + '_> {
    match value {
        Value::Tensor(t) => Box::new(std::iter::once(t)),
        Value::List(items) | Value::Tuple(items) => Box::new(items.iter().flat_map(tensors_in)),
        _ => Box::new(std::iter::empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_parse_names_types_defaults_and_aliases() {
        let s = Schema::parse("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor").unwrap();
        assert_eq!((s.name(), s.overload()), ("add", "Tensor"));
        let names: Vec<&str> = s.arguments().iter().map(Argument::name).collect();
        assert_eq!(names, ["self", "other", "alpha"]);
        assert!(s.arguments()[2].kwarg_only());
        assert!(matches!(s.arguments()[2].default_value(), Some(Value::Int(1))));
        assert!(!s.is_mutable());

        let s = Schema::parse("copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)").unwrap();
        assert!(s.is_mutable());
        assert_eq!(s.arguments()[0].ty(), "Tensor");
        assert_eq!(s.aliased_argument(0), Some(0));

        let s = Schema::parse(
            "max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0) -> \
             (Tensor, Tensor)",
        )
        .unwrap();
        assert_eq!(s.returns().len(), 2);
        assert!(matches!(s.arguments()[2].default_value(), Some(Value::List(l)) if l.is_empty()));
        assert!(Schema::parse("exp Tensor self").is_err());
    }

    #[test]
    fn binding_checks_counts_names_and_types() {
        let s = Schema::parse("sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False) -> Tensor").unwrap();
        let t = Value::Tensor(Tensor::from_vec(vec![1.0f32], [1]).unwrap());
        let bound = s.bind(&"aten::sum.dim_IntList", &[t.clone(), Value::None], &Kwargs::new()).unwrap();
        assert!(matches!(bound[2], Value::Bool(false)));
        let err = s.bind(&"aten::sum.dim_IntList", &["x".into()], &Kwargs::new()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "aten::sum.dim_IntList() expected a value of type 'Tensor' for argument 'self' but instead found type \
             'str'"
        );
        let err = s.bind(&"aten::sum.dim_IntList", std::slice::from_ref(&t), &Kwargs::new()).unwrap_err();
        assert!(err.to_string().contains("missing required argument 'dim'"), "{err}");
        let err = s.bind(&"op", &[t.clone(), Value::None], &Kwargs::from([("keep", true)])).unwrap_err();
        assert!(err.to_string().contains("unexpected keyword argument 'keep'"), "{err}");
    }
}
