//! The dynamic values hooks, modes and the by-name call work with.
//!
//! Typed Rust calls stay typed: `torchfn::add(&a, &b, 1)` never builds a [`Value`] on the fast
//! path. Only when a hook or a mode must see the call are the arguments converted, positional
//! into `&[Value]` and keyword into [`Kwargs`], as PyTorch hands `args` and `kwargs` to
//! `__torch_function__`.

use std::borrow::Cow;
use std::fmt;

use smallvec::SmallVec;

use crate::backend::Device;
use crate::error::{Error, Result};
use crate::protocol::dispatch::Args;
use crate::protocol::{Func, Relevant};
use crate::tensor::{DType, Generator, Scalar, Shape, Tensor};

/// A dynamically typed argument or result, mirroring the Python objects PyTorch passes around.
// The tag takes a whole word, so every payload starts at offset 8 and a value moves as four
// words; with a one-byte tag, `Bool` and `DType` sit in bytes 1-7, and every move of a value
// copies those bytes piecewise (same size either way: 32 bytes).
#[derive(Clone, Debug, Default)]
#[repr(u64)]
pub enum Value {
    /// Python's `None`.
    #[default]
    None,
    /// Python's `NotImplemented`: what a hook returns to let the next one try.
    NotImplemented,
    /// A `bool`.
    Bool(bool),
    /// An `int`.
    Int(i64),
    /// A `float`.
    Float(f64),
    /// A `str`.
    Str(String),
    /// A `torch.dtype`.
    DType(DType),
    /// A `torch.device`.
    Device(Device),
    /// A `torch.Generator`.
    Generator(Generator),
    /// A tensor, a tensor subclass instance or a duck tensor.
    Tensor(Tensor),
    /// A `list`.
    List(Vec<Value>),
    /// A `tuple` (also PyTorch's named tuples such as `max`'s `(values, indices)`).
    Tuple(Vec<Value>),
    /// A `slice(start, stop, step)`, as indexing passes it.
    Slice(Box<Slice>),
    /// Python's `...`, as indexing passes it.
    Ellipsis,
    /// Any other Python object: an autograd graph node (`Tensor.grad_fn`), a hook function
    /// (`Tensor.register_hook`'s argument). Hooks pass it on or read it with
    /// [`Object::downcast_ref`].
    Object(Object),
}

/// A Python object that is none of the other values: what a hook sees of a graph node or of a
/// hook function. Cheap to clone (shared), compared by identity.
///
/// ```
/// use torchfn::{Object, Value};
/// let o = Object::new(7u8, "counter", "<counter 7>");
/// let v = Value::Object(o.clone());
/// assert_eq!((v.type_name(), v.to_string()), ("counter", "<counter 7>".to_string()));
/// assert_eq!(o.downcast_ref::<u8>(), Some(&7));
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(Clone)]
pub struct Object(std::sync::Arc<ObjectInner>);

struct ObjectInner {
    type_name: &'static str,
    repr: String,
    value: Box<dyn std::any::Any + Send + Sync>,
}

impl Object {
    /// Wraps `value`, of Python type `type_name`, printed as `repr`.
    pub fn new<T: std::any::Any + Send + Sync>(value: T, type_name: &'static str, repr: impl Into<String>) -> Object {
        Object(std::sync::Arc::new(ObjectInner { type_name, repr: repr.into(), value: Box::new(value) }))
    }

    /// The wrapped value, if it is a `T`.
    pub fn downcast_ref<T: std::any::Any>(&self) -> Option<&T> {
        self.0.value.downcast_ref()
    }

    /// The Python type name given at creation.
    pub fn type_name(&self) -> &'static str {
        self.0.type_name
    }

    /// Whether both are the very same object (Python's `is`).
    pub fn is(&self, other: &Object) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.repr)
    }
}

impl Value {
    /// True when both are the same constant: `None`, a bool, a number of the same kind and
    /// value, a string, a dtype or a device (`1 == 1`, `None == None`; never two tensors, and
    /// `NaN` is no constant it equals).
    pub fn is_same_constant(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::None, Value::None) | (Value::Ellipsis, Value::Ellipsis) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Float(a), Value::Float(b)) => a == b,
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::DType(a), Value::DType(b)) => a == b,
            (Value::Device(a), Value::Device(b)) => a == b,
            _ => false,
        }
    }

    /// This value with each tensor in it (in lists and tuples too) replaced by what `f` makes
    /// of it (PyTorch's `tree_map` over tensors): how a wrapper subclass's hook unwraps its
    /// arguments and wraps its results.
    ///
    /// ```
    /// use torchfn::Value;
    /// let v = Value::Tuple(vec![torchfn::ones([2], None, None)?.into(), 3.into()]);
    /// let doubled = v.map_tensors(&|t| t * 2.0)?;
    /// assert_eq!(doubled.as_slice().unwrap()[0].as_tensor().unwrap().to_vec::<f32>()?, [2.0, 2.0]);
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    pub fn map_tensors(&self, f: &dyn Fn(&Tensor) -> Result<Tensor>) -> Result<Value> {
        self.map(f, &|d| d)
    }

    /// This value with its tensors and devices replaced by what `tensor` and `device` make of
    /// them.
    pub(crate) fn map(
        &self,
        tensor: &dyn Fn(&Tensor) -> Result<Tensor>,
        device: &dyn Fn(crate::Device) -> crate::Device,
    ) -> Result<Value> {
        let all = |items: &[Value]| items.iter().map(|v| v.map(tensor, device)).collect::<Result<Vec<_>>>();
        Ok(match self {
            Value::Tensor(t) => Value::Tensor(tensor(t)?),
            Value::List(items) => Value::List(all(items)?),
            Value::Tuple(items) => Value::Tuple(all(items)?),
            Value::Device(d) => Value::Device(device(*d)),
            other => other.clone(),
        })
    }

    /// The Python type name of this value (`"int"`, `"Tensor"`, or a subclass's or duck's name).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "NoneType",
            Value::NotImplemented => "NotImplementedType",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::DType(_) => "torch.dtype",
            Value::Device(_) => "torch.device",
            Value::Generator(_) => "torch.Generator",
            Value::Tensor(t) => t.class_of().name(),
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Slice(..) => "slice",
            Value::Ellipsis => "ellipsis",
            Value::Object(o) => o.type_name(),
        }
    }

    /// Drops the value, without calling its drop glue when it owns nothing (numbers, dtypes,
    /// devices): what a converted result costs.
    #[inline]
    fn discard(self) {
        use Value::*;
        if matches!(self, None | NotImplemented | Bool(_) | Int(_) | Float(_) | DType(_) | Device(_) | Ellipsis) {
            std::mem::forget(self);
        }
    }

    /// True for `Value::None`.
    pub fn is_none(&self) -> bool {
        matches!(self, Value::None)
    }

    /// True for `Value::NotImplemented`.
    pub fn is_not_implemented(&self) -> bool {
        matches!(self, Value::NotImplemented)
    }

    /// The tensor (plain, subclass or duck) this value holds.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The duck of type `T` this value holds.
    pub fn duck<T: 'static>(&self) -> Option<&T> {
        self.as_tensor()?.duck::<T>()
    }

    /// The integer this value holds.
    pub fn as_int(&self) -> Option<i64> {
        match *self {
            Value::Int(i) => Some(i),
            _ => None,
        }
    }

    /// The number this value holds, as `f64` (ints and bools convert).
    pub fn as_f64(&self) -> Option<f64> {
        Scalar::from_value(self).map(Scalar::to_f64)
    }

    /// The string this value holds.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The items of a list or tuple.
    pub fn as_slice(&self) -> Option<&[Value]> {
        match self {
            Value::List(v) | Value::Tuple(v) => Some(v),
            _ => None,
        }
    }

    /// Converts to a typed Rust value, or explains what was expected.
    pub fn to<T: FromValue>(&self) -> Result<T> {
        T::from_value(self)
            .ok_or_else(|| Error::type_error(format!("expected {}, not {}", T::type_name(), self.type_name())))
    }
}

/// Prints like Python's `repr`: `None`, `True`, `3`, `2.5`, `'floor'`, `[1, 2]`, `(a, b)`.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn seq(f: &mut fmt::Formatter<'_>, items: &[Value], open: &str, close: &str) -> fmt::Result {
            f.write_str(open)?;
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{v}")?;
            }
            if close == ")" && items.len() == 1 {
                f.write_str(",")?;
            }
            f.write_str(close)
        }
        let opt = |v: &Option<i64>| v.map_or("None".to_string(), |i| i.to_string());
        match self {
            Value::None => f.write_str("None"),
            Value::NotImplemented => f.write_str("NotImplemented"),
            Value::Bool(b) => write!(f, "{}", Scalar::Bool(*b)),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{}", Scalar::Float(*x)),
            Value::Str(s) => write!(f, "'{s}'"),
            Value::DType(d) => write!(f, "{d}"),
            Value::Device(d) => write!(f, "device(type='{d}')"),
            Value::Generator(g) => write!(f, "{g:?}"),
            Value::Tensor(t) => write!(f, "{t}"),
            Value::List(items) => seq(f, items, "[", "]"),
            Value::Tuple(items) => seq(f, items, "(", ")"),
            Value::Slice(s) => write!(f, "slice({}, {}, {})", opt(&s.start), opt(&s.stop), opt(&s.step)),
            Value::Ellipsis => f.write_str("Ellipsis"),
            Value::Object(o) => write!(f, "{o:?}"),
        }
    }
}

/// A Python `slice(start, stop, step)`; `None` parts are the defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slice {
    /// The first position.
    pub start: Option<i64>,
    /// One past the last position.
    pub stop: Option<i64>,
    /// The step.
    pub step: Option<i64>,
}

impl From<Slice> for Value {
    fn from(slice: Slice) -> Value {
        Value::Slice(Box::new(slice))
    }
}

/// Keyword arguments: names and values, in the order given.
#[derive(Clone, Debug, Default)]
pub struct Kwargs(SmallVec<[(Cow<'static, str>, Value); 2]>);

impl Kwargs {
    /// No keyword arguments.
    pub const fn new() -> Self {
        Kwargs(SmallVec::new_const())
    }

    /// The value passed for `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// Sets `name` to `value`, replacing an earlier value.
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<Value>) {
        self.set(Cow::Owned(name.into()), value.into())
    }

    /// Adds `name`, not given yet, with a name that needs no allocation or comparison (the
    /// dispatch layer's calls, made on every operator call under a mode).
    pub(crate) fn insert_static(&mut self, name: &'static str, value: impl Into<Value>) {
        debug_assert!(self.get(name).is_none(), "keyword argument {name} given twice");
        self.0.push((Cow::Borrowed(name), value.into()))
    }

    fn set(&mut self, name: Cow<'static, str>, value: Value) {
        match self.0.iter_mut().find(|(k, _)| *k == name) {
            Some(slot) => slot.1 = value,
            None => self.0.push((name, value)),
        }
    }

    /// The names and values, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }

    /// How many keyword arguments there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<K: Into<String>, V: Into<Value>> FromIterator<(K, V)> for Kwargs {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut kwargs = Kwargs::new();
        for (k, v) in iter {
            kwargs.insert(k, v);
        }
        kwargs
    }
}

impl<K: Into<String>, V: Into<Value>, const N: usize> From<[(K, V); N]> for Kwargs {
    fn from(pairs: [(K, V); N]) -> Self {
        pairs.into_iter().collect()
    }
}

/// Prints like a Python dict: `{'alpha': 2}`.
impl fmt::Display for Kwargs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (k, v)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "'{k}': {v}")?;
        }
        f.write_str("}")
    }
}

/// Converts a Rust value into a [`Value`] (how typed arguments reach hooks).
pub trait ToValue {
    /// The dynamic form of `self`.
    fn to_value(&self) -> Value;

    /// Appends `self` to the positional arguments of a dispatched call as hooks see it: its
    /// [`to_value`](ToValue::to_value), except that tensors are lent rather than cloned (see
    /// [`Args`]). Used by the code `#[torch_function]` writes.
    #[doc(hidden)]
    #[inline]
    fn push_arg<'s>(&'s self, args: &mut Args<'s>) {
        args.push(self.to_value());
    }
}

/// Converts a [`Value`] back into a Rust value (how the by-name call binds arguments).
pub trait FromValue: Sized {
    /// The Python-style name of the accepted type, for error messages (`"Tensor"`, `"int"`).
    fn type_name() -> String;
    /// The Rust value, or `None` when `value` is of another type.
    fn from_value(value: &Value) -> Option<Self>;

    /// As [`from_value`](FromValue::from_value), but refusing what a Python argument parser
    /// would only accept in a signature made for it: a number for a tensor. Overload
    /// resolution tries every signature strictly first.
    fn from_value_strict(value: &Value) -> Option<Self> {
        Self::from_value(value)
    }

    /// The Rust value, taking `value` (no clone where a type can move out of it), or `value`
    /// back when it is of another type.
    fn take_value(value: Value) -> Result<Self, Value> {
        match Self::from_value(&value) {
            Some(taken) => {
                value.discard();
                Ok(taken)
            }
            None => Err(value),
        }
    }
}

/// A parameter type of an overridable function: how the macro turns dynamic arguments into the
/// typed ones (`Owned` holds what a borrowed parameter such as `&Tensor` borrows from).
pub trait Arg<'a>: ToValue + Relevant + Clone + Sized {
    /// What binding produces; the parameter borrows from it.
    type Owned: FromValue;
    /// The parameter value, borrowed from what binding produced.
    fn from_owned(owned: &'a Self::Owned) -> Self;
}

/// The return type of an overridable function: `Result<T>` for a `T` that converts both ways.
pub trait Returns: Sized {
    /// Converts what a hook returned; a value of the wrong type is a `TypeError` naming `func`.
    fn from_value(value: Value, func: &'static Func) -> Self;
    /// Converts what the implementation returned.
    fn into_value(self) -> Result<Value>;
}

impl<T: FromValue + ToValue> Returns for Result<T> {
    #[inline]
    fn from_value(value: Value, func: &'static Func) -> Self {
        T::take_value(value).map_err(|value| wrong_return(func, &value, T::type_name()))
    }

    fn into_value(self) -> Result<Value> {
        self.map(|v| v.to_value())
    }
}

/// The error of an override that returned `value` where the callers of `func` expect `expected`.
#[cold]
#[inline(never)]
fn wrong_return(func: &'static Func, value: &Value, expected: String) -> Error {
    let what = format!("{func} must give its caller a {expected} now");
    if let Some(error) = value.as_tensor().and_then(|t| t.duck_data_error(&what)) {
        return error;
    }
    Error::type_error(format!(
        "'{}' returned {} from an override, but its callers expect {expected}",
        func.qualified_name(),
        value.type_name(),
    ))
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
    #[inline(always)]
    fn push_arg<'s>(&'s self, args: &mut Args<'s>) {
        (**self).push_arg(args)
    }
}

impl ToValue for Value {
    fn to_value(&self) -> Value {
        self.clone()
    }
}

impl FromValue for Value {
    fn type_name() -> String {
        "object".into()
    }
    fn from_value(value: &Value) -> Option<Self> {
        Some(value.clone())
    }
}

impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value {
        self.as_ref().map_or(Value::None, ToValue::to_value)
    }
    #[inline]
    fn push_arg<'s>(&'s self, args: &mut Args<'s>) {
        match self {
            Some(v) => v.push_arg(args),
            None => args.push(Value::None),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn type_name() -> String {
        T::type_name()
    }
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::None => Some(None),
            v => T::from_value(v).map(Some),
        }
    }
    fn from_value_strict(value: &Value) -> Option<Self> {
        match value {
            Value::None => Some(None),
            v => T::from_value_strict(v).map(Some),
        }
    }
}

impl<T: ToValue> ToValue for [T] {
    fn to_value(&self) -> Value {
        Value::List(self.iter().map(ToValue::to_value).collect())
    }
}

impl<T: ToValue, const N: usize> ToValue for [T; N] {
    fn to_value(&self) -> Value {
        self.as_slice().to_value()
    }
}

/// An array as a list, nested arrays as nested lists, as Python writes them: `[[1, 2], [3, 4]]`
/// (the data of [`Tensor::new_tensor`]).
impl<T: ToValue, const N: usize> From<[T; N]> for Value {
    fn from(items: [T; N]) -> Value {
        items.to_value()
    }
}

/// A slice as a list, as an array is.
impl<T: ToValue> From<&[T]> for Value {
    fn from(items: &[T]) -> Value {
        items.to_value()
    }
}

impl<T: ToValue> ToValue for Vec<T> {
    fn to_value(&self) -> Value {
        self.as_slice().to_value()
    }
}

impl<T: FromValue> FromValue for Vec<T> {
    fn type_name() -> String {
        format!("tuple of {}s", T::type_name())
    }
    fn from_value(value: &Value) -> Option<Self> {
        value.as_slice()?.iter().map(T::from_value).collect()
    }
    fn from_value_strict(value: &Value) -> Option<Self> {
        value.as_slice()?.iter().map(T::from_value_strict).collect()
    }
}

/// Tuples of values convert item by item (the results of `max(dim)`, attention, `lstm`).
macro_rules! tuple_value {
    ($($t:ident $v:ident),+) => {
        impl<$($t: ToValue),+> ToValue for ($($t,)+) {
            fn to_value(&self) -> Value {
                let ($($v,)+) = self;
                Value::Tuple(vec![$($v.to_value()),+])
            }
        }

        impl<$($t: FromValue),+> FromValue for ($($t,)+) {
            fn type_name() -> String {
                let names: Vec<String> = vec![$($t::type_name()),+];
                format!("tuple of ({})", names.join(", "))
            }
            fn from_value(value: &Value) -> Option<Self> {
                match value.as_slice()? {
                    [$($v),+] => Some(($($t::from_value($v)?,)+)),
                    _ => None,
                }
            }
        }
    };
}

tuple_value!(A a, B b);
tuple_value!(A a, B b, C c);
tuple_value!(A a, B b, C c, D d);

/// Conversions for plain values that carry no tensors: `ToValue`, `FromValue`, `From` for
/// `Value`, `Arg` (the parameter is its own owned form) and an empty `Relevant`.
macro_rules! plain_value {
    ($t:ty, $name:literal, |$s:ident| $to:expr, |$v:ident| $from:expr) => {
        impl ToValue for $t {
            fn to_value(&self) -> Value {
                let $s = self;
                $to
            }
        }
        impl FromValue for $t {
            fn type_name() -> String {
                $name.into()
            }
            fn from_value($v: &Value) -> Option<Self> {
                $from
            }
        }
        impl From<$t> for Value {
            fn from(v: $t) -> Value {
                v.to_value()
            }
        }
        impl Relevant for $t {
            fn each_tensor<'s>(&'s self, _: &mut dyn FnMut(&'s Tensor)) {}
            #[inline(always)]
            fn all_plain(&self) -> bool {
                true
            }
        }
    };
}

plain_value!(bool, "bool", |s| Value::Bool(*s), |v| match v {
    Value::Bool(b) => Some(*b),
    _ => None,
});
plain_value!(i64, "int", |s| Value::Int(*s), |v| v.as_int());
plain_value!(i32, "int", |s| Value::Int(i64::from(*s)), |v| v.as_int().and_then(|i| i32::try_from(i).ok()));
plain_value!(usize, "int", |s| Value::Int(i64::try_from(*s).unwrap_or(i64::MAX)), |v| {
    v.as_int().and_then(|i| usize::try_from(i).ok())
});
plain_value!(f64, "float", |s| Value::Float(*s), |v| match v {
    Value::Int(i) => Some(*i as f64),
    Value::Float(x) => Some(*x),
    _ => None,
});
plain_value!(f32, "float", |s| Value::Float(f64::from(*s)), |v| f64::from_value(v).map(|x| x as f32));
plain_value!(
    Scalar,
    "Number",
    |s| match *s {
        Scalar::Bool(b) => Value::Bool(b),
        Scalar::Int(i) => Value::Int(i),
        Scalar::Float(x) => Value::Float(x),
    },
    |v| match v {
        Value::Bool(b) => Some(Scalar::Bool(*b)),
        Value::Int(i) => Some(Scalar::Int(*i)),
        Value::Float(x) => Some(Scalar::Float(*x)),
        _ => None,
    }
);
impl ToValue for () {
    fn to_value(&self) -> Value {
        Value::None
    }
}
impl FromValue for () {
    fn type_name() -> String {
        "None".into()
    }
    fn from_value(v: &Value) -> Option<Self> {
        matches!(v, Value::None).then_some(())
    }
    /// What a hook answers for a function that returns nothing is discarded, whatever it is,
    /// as Python discards what `__setitem__`'s override returns.
    fn take_value(_: Value) -> Result<Self, Value> {
        Ok(())
    }
}
plain_value!(String, "str", |s| Value::Str(s.clone()), |v| v.as_str().map(str::to_owned));
plain_value!(
    crate::ops::NormOrder,
    "int, float, str or None",
    |s| match s {
        crate::ops::NormOrder::Default => Value::None,
        crate::ops::NormOrder::Number(p) => Value::Float(*p),
        crate::ops::NormOrder::Name(name) => Value::Str(name.clone()),
    },
    |v| match v {
        Value::None => Some(crate::ops::NormOrder::Default),
        Value::Str(name) => Some(crate::ops::NormOrder::Name(name.clone())),
        other => f64::from_value(other).map(crate::ops::NormOrder::Number),
    }
);
plain_value!(DType, "torch.dtype", |s| Value::DType(*s), |v| match v {
    Value::DType(d) => Some(*d),
    _ => None,
});
plain_value!(Device, "torch.device", |s| Value::Device(*s), |v| match v {
    Value::Device(d) => Some(*d),
    Value::Str(s) => Device::parse(s).ok(),
    _ => None,
});
plain_value!(Generator, "torch.Generator", |s| Value::Generator(s.clone()), |v| match v {
    Value::Generator(g) => Some(g.clone()),
    _ => None,
});
plain_value!(Shape, "tuple of ints", |s| Value::Tuple(s.iter().map(|&d| Value::Int(d as i64)).collect()), |v| {
    v.as_slice()?.iter().map(usize::from_value).collect()
});

plain_value!(
    crate::autograd::GradFn,
    "torch.autograd.graph.Node",
    |s| Value::Object(Object::new(s.clone(), "torch.autograd.graph.Node", format!("{s:?}"))),
    |v| match v {
        Value::Object(o) => o.downcast_ref::<crate::autograd::GradFn>().cloned(),
        _ => None,
    }
);
plain_value!(
    crate::autograd::GradHook,
    "function",
    |s| Value::Object(Object::new(s.clone(), "function", "<function>")),
    |v| match v {
        Value::Object(o) => o.downcast_ref::<crate::autograd::GradHook>().cloned(),
        _ => None,
    }
);

impl ToValue for str {
    fn to_value(&self) -> Value {
        Value::Str(self.to_owned())
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.to_owned())
    }
}

impl From<Vec<Value>> for Value {
    fn from(items: Vec<Value>) -> Value {
        Value::List(items)
    }
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Value {
        t.to_value()
    }
}

impl From<&Tensor> for Value {
    fn from(t: &Tensor) -> Value {
        t.to_value()
    }
}

impl Relevant for str {
    fn each_tensor<'s>(&'s self, _: &mut dyn FnMut(&'s Tensor)) {}
    #[inline(always)]
    fn all_plain(&self) -> bool {
        true
    }
}

/// Parameters that are their own owned form (numbers, dtypes, shapes, ...).
macro_rules! owned_arg {
    ($($t:ty),*) => {$(
        impl<'a> Arg<'a> for $t {
            type Owned = $t;
            #[inline(always)]
            fn from_owned(owned: &'a $t) -> $t {
                owned.clone()
            }
        }
    )*};
}
owned_arg!(
    bool,
    i64,
    i32,
    usize,
    f64,
    f32,
    Scalar,
    String,
    DType,
    Device,
    Generator,
    Shape,
    Value,
    Tensor,
    Option<i64>,
    Option<usize>,
    Option<bool>,
    Option<f64>,
    Option<Scalar>,
    Option<DType>,
    Option<Device>,
    Option<Generator>,
    Option<String>,
    Option<Tensor>,
    Vec<i64>,
    Vec<Tensor>,
    Option<Vec<Tensor>>,
    crate::autograd::GradHook
);

impl<'a> Arg<'a> for &'a Tensor {
    type Owned = Tensor;
    #[inline(always)]
    fn from_owned(owned: &'a Tensor) -> Self {
        owned
    }
}

impl<'a> Arg<'a> for Option<&'a Tensor> {
    type Owned = Option<Tensor>;
    #[inline(always)]
    fn from_owned(owned: &'a Option<Tensor>) -> Self {
        owned.as_ref()
    }
}

impl<'a> Arg<'a> for &'a [Tensor] {
    type Owned = Vec<Tensor>;
    #[inline(always)]
    fn from_owned(owned: &'a Vec<Tensor>) -> Self {
        owned
    }
}

impl<'a> Arg<'a> for &'a [i64] {
    type Owned = Vec<i64>;
    #[inline(always)]
    fn from_owned(owned: &'a Vec<i64>) -> Self {
        owned
    }
}

impl<'a> Arg<'a> for &'a str {
    type Owned = String;
    #[inline(always)]
    fn from_owned(owned: &'a String) -> Self {
        owned
    }
}

impl<'a> Arg<'a> for Option<&'a str> {
    type Owned = Option<String>;
    #[inline(always)]
    fn from_owned(owned: &'a Option<String>) -> Self {
        owned.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_stay_small() {
        assert_eq!(std::mem::size_of::<Value>(), 32);
        assert_eq!(std::mem::size_of::<Result<Value>>(), 32);
        assert_eq!(std::mem::size_of::<Result<usize>>(), 16);
    }

    #[test]
    fn values_print_like_python() {
        let v = Value::List(vec![Value::Int(1), Value::Float(2.0), Value::Str("a".into()), Value::None]);
        assert_eq!(v.to_string(), "[1, 2.0, 'a', None]");
        assert_eq!(Value::Tuple(vec![Value::Bool(true)]).to_string(), "(True,)");
        assert_eq!(Value::from(Slice { start: Some(1), stop: None, step: None }).to_string(), "slice(1, None, None)");
    }

    #[test]
    fn conversions_accept_what_python_accepts() {
        assert_eq!(f64::from_value(&Value::Int(2)), Some(2.0));
        assert_eq!(i64::from_value(&Value::Float(2.0)), None);
        assert_eq!(Option::<i64>::from_value(&Value::None), Some(None));
        assert_eq!(Vec::<i64>::from_value(&Value::Tuple(vec![Value::Int(1), Value::Int(2)])), Some(vec![1, 2]));
        assert_eq!(usize::from_value(&Value::Int(-1)), None);
        assert_eq!(Vec::<i64>::type_name(), "tuple of ints");
    }

    #[test]
    fn kwargs_keep_order_and_replace() {
        let mut k = Kwargs::from([("alpha", Value::Int(2)), ("out", Value::None)]);
        k.insert("alpha", 3i64);
        assert_eq!(k.len(), 2);
        assert_eq!(k.get("alpha").and_then(Value::as_int), Some(3));
        assert_eq!(k.to_string(), "{'alpha': 3, 'out': None}");
    }
}
