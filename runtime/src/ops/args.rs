//! Argument types of the shape operations: lists of integers given one by one or as one
//! sequence (`t.expand(3, 4)` and `t.expand((3, 4))`), and `split`'s size or sections.

use smallvec::SmallVec;

use crate::protocol::Relevant;
use crate::tensor::{Shape, Tensor};
use crate::value::{Arg, FromValue, ToValue, Value};

/// A list of integers: the `*sizes` of [`Tensor::expand`], the `*repeats` of
/// [`Tensor::repeat`], the `dims` of [`permute`](crate::permute()), the `shifts` of
/// [`roll`](crate::roll()).
///
/// Called by name it takes what PyTorch takes for such a parameter: the integers one by one
/// (`t.expand(3, 4)`), one sequence of them (`t.expand((3, 4))`), or one integer. From Rust,
/// any array, slice or vector of `i64` converts, and so does a [`Shape`].
///
/// ```
/// let t = torchfn::tensor([[1i64], [2]])?;
/// assert_eq!(t.expand([2, 3])?.to_vec::<i64>()?, [1, 1, 1, 2, 2, 2]);
/// assert_eq!(t.expand(vec![-1, 2])?.shape()?, [2, 2]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct IntList(SmallVec<[i64; 6]>);

impl IntList {
    /// The integers, in order.
    pub fn as_slice(&self) -> &[i64] {
        &self.0
    }
}

impl From<i64> for IntList {
    fn from(i: i64) -> Self {
        IntList(SmallVec::from_slice(&[i]))
    }
}

impl From<i32> for IntList {
    fn from(i: i32) -> Self {
        IntList::from(i64::from(i))
    }
}

impl<const N: usize> From<[i64; N]> for IntList {
    fn from(items: [i64; N]) -> Self {
        IntList(SmallVec::from_slice(&items))
    }
}

impl<const N: usize> From<&[i64; N]> for IntList {
    fn from(items: &[i64; N]) -> Self {
        IntList(SmallVec::from_slice(items))
    }
}

impl From<&[i64]> for IntList {
    fn from(items: &[i64]) -> Self {
        IntList(SmallVec::from_slice(items))
    }
}

impl From<Vec<i64>> for IntList {
    fn from(items: Vec<i64>) -> Self {
        IntList(items.into())
    }
}

/// A shape's sizes (a size beyond `i64::MAX` saturates, which no tensor has).
impl From<&Shape> for IntList {
    fn from(shape: &Shape) -> Self {
        IntList(shape.iter().map(|&d| i64::try_from(d).unwrap_or(i64::MAX)).collect())
    }
}

impl From<Shape> for IntList {
    fn from(shape: Shape) -> Self {
        IntList::from(&shape)
    }
}

fn ints(items: &[Value]) -> Option<SmallVec<[i64; 6]>> {
    items.iter().map(Value::as_int).collect()
}

impl ToValue for IntList {
    fn to_value(&self) -> Value {
        Value::Tuple(self.0.iter().map(|&i| Value::Int(i)).collect())
    }
}

impl FromValue for IntList {
    fn type_name() -> String {
        "tuple of ints".into()
    }
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Int(i) => Some(IntList::from(*i)),
            // One sequence given where the integers could come one by one: `expand((3, 4))`.
            Value::Tuple(items) | Value::List(items) => match items.as_slice() {
                [Value::Tuple(inner) | Value::List(inner)] => ints(inner).map(IntList),
                items => ints(items).map(IntList),
            },
            _ => None,
        }
    }
}

impl Relevant for IntList {
    fn each_tensor<'s>(&'s self, _: &mut dyn FnMut(&'s Tensor)) {}
    #[inline(always)]
    fn all_plain(&self) -> bool {
        true
    }
}

impl<'a> Arg<'a> for IntList {
    type Owned = IntList;
    fn from_owned(owned: &'a IntList) -> IntList {
        owned.clone()
    }
}

impl<'a> Arg<'a> for Option<IntList> {
    type Owned = Option<IntList>;
    fn from_owned(owned: &'a Option<IntList>) -> Option<IntList> {
        owned.clone()
    }
}

/// One float or several, as PyTorch's `float or tuple of floats` parameters take them
/// (`interpolate`'s `scale_factor=2.0` or `(2.0, 1.5)`).
///
/// ```
/// use torchfn::FloatList;
/// assert_eq!(FloatList::from(2.0).as_slice(), [2.0]);
/// assert_eq!(FloatList::from(vec![2.0, 1.5]).as_slice(), [2.0, 1.5]);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct FloatList(SmallVec<[f64; 4]>);

impl FloatList {
    /// The floats, in order.
    pub fn as_slice(&self) -> &[f64] {
        &self.0
    }
}

impl From<f64> for FloatList {
    fn from(x: f64) -> Self {
        FloatList(SmallVec::from_slice(&[x]))
    }
}

impl From<Vec<f64>> for FloatList {
    fn from(items: Vec<f64>) -> Self {
        FloatList(items.into())
    }
}

impl<const N: usize> From<[f64; N]> for FloatList {
    fn from(items: [f64; N]) -> Self {
        FloatList(SmallVec::from_slice(&items))
    }
}

impl ToValue for FloatList {
    fn to_value(&self) -> Value {
        match self.0.as_slice() {
            [one] => Value::Float(*one),
            many => Value::Tuple(many.iter().map(|&x| Value::Float(x)).collect()),
        }
    }
}

impl FromValue for FloatList {
    fn type_name() -> String {
        "float or tuple of floats".into()
    }
    fn from_value(value: &Value) -> Option<Self> {
        let float = |v: &Value| f64::from_value(v);
        match value {
            Value::Tuple(items) | Value::List(items) => items.iter().map(float).collect::<Option<_>>().map(FloatList),
            other => float(other).map(FloatList::from),
        }
    }
}

impl Relevant for FloatList {
    fn each_tensor<'s>(&'s self, _: &mut dyn FnMut(&'s Tensor)) {}
    #[inline(always)]
    fn all_plain(&self) -> bool {
        true
    }
}

impl<'a> Arg<'a> for Option<FloatList> {
    type Owned = Option<FloatList>;
    fn from_owned(owned: &'a Option<FloatList>) -> Option<FloatList> {
        owned.clone()
    }
}

/// How [`split`](crate::split()) cuts a dimension: into pieces of one size (the last one
/// possibly smaller), or into sections of the sizes listed, which must add up to the
/// dimension's size. Called by name, an integer is a size and a list or tuple the sections.
///
/// ```
/// use torchfn::SplitSize;
/// assert_eq!(SplitSize::from(2), SplitSize::Size(2));
/// assert_eq!(SplitSize::from([1, 4]), SplitSize::Sections(vec![1, 4]));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SplitSize {
    /// Pieces of this many elements along the dimension (`split_size`).
    Size(i64),
    /// One piece per entry, of that many elements (`split_sizes`).
    Sections(Vec<i64>),
}

impl From<i64> for SplitSize {
    fn from(size: i64) -> Self {
        SplitSize::Size(size)
    }
}

impl From<i32> for SplitSize {
    fn from(size: i32) -> Self {
        SplitSize::Size(i64::from(size))
    }
}

impl<const N: usize> From<[i64; N]> for SplitSize {
    fn from(sections: [i64; N]) -> Self {
        SplitSize::Sections(sections.to_vec())
    }
}

impl From<&[i64]> for SplitSize {
    fn from(sections: &[i64]) -> Self {
        SplitSize::Sections(sections.to_vec())
    }
}

impl From<Vec<i64>> for SplitSize {
    fn from(sections: Vec<i64>) -> Self {
        SplitSize::Sections(sections)
    }
}

impl ToValue for SplitSize {
    fn to_value(&self) -> Value {
        match self {
            SplitSize::Size(size) => Value::Int(*size),
            SplitSize::Sections(sections) => Value::List(sections.iter().map(|&s| Value::Int(s)).collect()),
        }
    }
}

impl FromValue for SplitSize {
    fn type_name() -> String {
        "int or tuple of ints".into()
    }
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Int(size) => Some(SplitSize::Size(*size)),
            v => Vec::<i64>::from_value(v).map(SplitSize::Sections),
        }
    }
}

impl Relevant for SplitSize {
    fn each_tensor<'s>(&'s self, _: &mut dyn FnMut(&'s Tensor)) {}
    #[inline(always)]
    fn all_plain(&self) -> bool {
        true
    }
}

impl<'a> Arg<'a> for SplitSize {
    type Owned = SplitSize;
    fn from_owned(owned: &'a SplitSize) -> SplitSize {
        owned.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_lists_accept_integers_one_by_one_or_in_one_sequence() {
        let expected = Some(IntList::from([3, 4]));
        assert_eq!(IntList::from_value(&Value::Tuple(vec![3.into(), 4.into()])), expected);
        let nested = Value::Tuple(vec![Value::List(vec![3.into(), 4.into()])]);
        assert_eq!(IntList::from_value(&nested), expected);
        assert_eq!(IntList::from_value(&Value::Int(2)), Some(IntList::from(2)));
        assert_eq!(IntList::from_value(&Value::Tuple(vec![Value::Float(1.0)])), None);
        assert_eq!(IntList::from_value(&IntList::from([1, -1]).to_value()), Some(IntList::from([1, -1])));
    }

    #[test]
    fn split_sizes_tell_a_size_from_sections() {
        assert_eq!(SplitSize::from_value(&Value::Int(2)), Some(SplitSize::Size(2)));
        assert_eq!(SplitSize::from_value(&Value::List(vec![2.into()])), Some(SplitSize::Sections(vec![2])));
        let sections = SplitSize::from([1, 2]);
        assert_eq!(SplitSize::from_value(&sections.to_value()), Some(sections));
    }
}

/// The order of a norm, as `torch.linalg.norm` and `matrix_norm` take it: a number (`2`,
/// `f64::INFINITY`...), a name (`"fro"`, `"nuc"`), or none given (Python's `None`: the
/// function's default).
///
/// ```
/// use torchfn::NormOrder;
/// assert_eq!(NormOrder::from(1.0), NormOrder::Number(1.0));
/// assert_eq!(NormOrder::from("fro"), NormOrder::Name("fro".into()));
/// ```
#[derive(Clone, Debug, PartialEq, Default)]
pub enum NormOrder {
    /// None given.
    #[default]
    Default,
    /// A number: `p`, or ±infinity.
    Number(f64),
    /// A named matrix norm: `"fro"` or `"nuc"`.
    Name(String),
}

impl From<f64> for NormOrder {
    fn from(p: f64) -> Self {
        NormOrder::Number(p)
    }
}

impl From<&str> for NormOrder {
    fn from(name: &str) -> Self {
        NormOrder::Name(name.to_string())
    }
}

impl From<Option<f64>> for NormOrder {
    fn from(p: Option<f64>) -> Self {
        p.map_or(NormOrder::Default, NormOrder::Number)
    }
}

impl<'a> Arg<'a> for NormOrder {
    type Owned = NormOrder;
    fn from_owned(owned: &'a NormOrder) -> NormOrder {
        owned.clone()
    }
}
