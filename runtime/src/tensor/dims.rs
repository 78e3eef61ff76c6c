//! Dimension arguments: one dimension or several, negative counting from the end.

use smallvec::SmallVec;

use crate::error::{Result, bail};
use crate::protocol::Relevant;
use crate::value::{Arg, FromValue, ToValue, Value};

use super::Tensor;

/// The `dim` argument of reductions: one dimension (`1`, `-1`) or several (`[0, 2]`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Dims(SmallVec<[i64; 4]>);

impl Dims {
    /// The dimensions as given.
    pub fn as_slice(&self) -> &[i64] {
        &self.0
    }

    /// The dimensions wrapped into `0..ndim`, sorted; an `IndexError` for one out of range, a
    /// `RuntimeError` for one given twice. A zero-dimensional tensor accepts `0` and `-1`, as
    /// PyTorch's do, and has no dimension to give back for them: the list is then empty.
    pub(crate) fn resolve(&self, ndim: usize, func: &str) -> Result<SmallVec<[usize; 4]>> {
        let mut dims: SmallVec<[usize; 4]> = SmallVec::new();
        for &d in &self.0 {
            let d = normalize_dim(d, ndim, func)?;
            if dims.contains(&d) {
                bail!(Runtime, "{func}(): dim {d} appears multiple times in the list of dims");
            }
            dims.push(d);
        }
        if ndim == 0 {
            dims.clear();
        }
        dims.sort_unstable();
        Ok(dims)
    }
}

/// Wraps a possibly negative dimension into `0..ndim` (a zero-dimensional tensor takes `0` and
/// `-1`), or explains why it cannot.
pub(crate) fn normalize_dim(dim: i64, ndim: usize, func: &str) -> Result<usize> {
    let n = ndim.max(1) as i64;
    if dim < -n || dim >= n {
        bail!(
            Index,
            "{func}(): dimension out of range (expected to be in range of [{}, {}], but got {dim})",
            -n,
            n - 1
        );
    }
    Ok(if dim < 0 { (dim + n) as usize } else { dim as usize }.min(ndim.saturating_sub(1)))
}

impl From<i64> for Dims {
    fn from(d: i64) -> Self {
        Dims(SmallVec::from_slice(&[d]))
    }
}

impl From<i32> for Dims {
    fn from(d: i32) -> Self {
        Dims::from(i64::from(d))
    }
}

impl<const N: usize> From<[i64; N]> for Dims {
    fn from(dims: [i64; N]) -> Self {
        Dims(SmallVec::from_slice(&dims))
    }
}

impl From<&[i64]> for Dims {
    fn from(dims: &[i64]) -> Self {
        Dims(SmallVec::from_slice(dims))
    }
}

impl From<Vec<i64>> for Dims {
    fn from(dims: Vec<i64>) -> Self {
        Dims(dims.into())
    }
}

impl ToValue for Dims {
    fn to_value(&self) -> Value {
        match self.0.as_slice() {
            [d] => Value::Int(*d),
            dims => Value::Tuple(dims.iter().map(|&d| Value::Int(d)).collect()),
        }
    }
}

impl FromValue for Dims {
    fn type_name() -> String {
        "int or tuple of ints".into()
    }
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Int(d) => Some(Dims::from(*d)),
            v => Vec::<i64>::from_value(v).map(Dims::from),
        }
    }
}

impl Relevant for Dims {
    fn each_tensor<'s>(&'s self, _: &mut dyn FnMut(&'s Tensor)) {}
    #[inline(always)]
    fn all_plain(&self) -> bool {
        true
    }
}

impl<'a> Arg<'a> for Dims {
    type Owned = Dims;
    fn from_owned(owned: &'a Dims) -> Dims {
        owned.clone()
    }
}

impl<'a> Arg<'a> for Option<Dims> {
    type Owned = Option<Dims>;
    fn from_owned(owned: &'a Option<Dims>) -> Option<Dims> {
        owned.clone()
    }
}

/// The `dim` argument of the reductions that also take `None` (`sum`, `mean`, `amax`, `amin`,
/// `all`, `any`): `None` for every dimension, or the [`Dims`] given. It converts from what
/// `Dims` converts from (`1`, `[0, 2]`, `vec![]`), and from `None::<Dims>`.
///
/// ```
/// use torchfn::{Dims, ReduceDims};
/// let t = torchfn::tensor([[1i64, 2], [3, 4]])?;
/// assert_eq!(torchfn::sum_dim(&t, None::<Dims>, true)?.to_vec::<i64>()?, [10]);
/// assert_eq!(torchfn::sum_dim(&t, ReduceDims::from(1), false)?.to_vec::<i64>()?, [3, 7]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ReduceDims(pub Option<Dims>);

impl ReduceDims {
    /// The dimensions given, or `None` for every dimension.
    pub fn as_dims(&self) -> Option<&Dims> {
        self.0.as_ref()
    }
}

impl<T: Into<Dims>> From<T> for ReduceDims {
    fn from(dims: T) -> Self {
        ReduceDims(Some(dims.into()))
    }
}

impl From<Option<Dims>> for ReduceDims {
    fn from(dims: Option<Dims>) -> Self {
        ReduceDims(dims)
    }
}

impl ToValue for ReduceDims {
    fn to_value(&self) -> Value {
        self.0.as_ref().map_or(Value::None, Dims::to_value)
    }
}

impl FromValue for ReduceDims {
    fn type_name() -> String {
        Dims::type_name()
    }
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::None => Some(ReduceDims(None)),
            v => Dims::from_value(v).map(|d| ReduceDims(Some(d))),
        }
    }
}

impl Relevant for ReduceDims {
    fn each_tensor<'s>(&'s self, _: &mut dyn FnMut(&'s Tensor)) {}
    #[inline(always)]
    fn all_plain(&self) -> bool {
        true
    }
}

impl<'a> Arg<'a> for ReduceDims {
    type Owned = ReduceDims;
    fn from_owned(owned: &'a ReduceDims) -> ReduceDims {
        owned.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_wrap_sort_and_refuse_repeats() {
        assert_eq!(Dims::from([-1, 0]).resolve(3, "sum").unwrap().as_slice(), &[0, 2]);
        let err = Dims::from([1, -2]).resolve(3, "sum").unwrap_err();
        assert_eq!(err.to_string(), "sum(): dim 1 appears multiple times in the list of dims");
        let err = Dims::from(3).resolve(3, "sum").unwrap_err();
        assert_eq!(err.to_string(), "sum(): dimension out of range (expected to be in range of [-3, 2], but got 3)");
    }

    #[test]
    fn a_zero_dimensional_tensor_accepts_dim_0_and_has_no_dimension_to_give_back() {
        assert!(Dims::from(0).resolve(0, "sum").unwrap().is_empty());
        assert!(Dims::from(-1).resolve(0, "sum").unwrap().is_empty());
        let err = Dims::from([0, -1]).resolve(0, "sum").unwrap_err();
        assert_eq!(err.to_string(), "sum(): dim 0 appears multiple times in the list of dims");
        assert!(Dims::from(1).resolve(0, "sum").is_err());
    }

    #[test]
    fn values_convert_both_ways() {
        assert_eq!(Dims::from_value(&Value::Int(2)), Some(Dims::from(2)));
        let two = Dims::from([0, 2]);
        assert_eq!(Dims::from_value(&two.to_value()), Some(two));
    }

    #[test]
    fn reduce_dims_take_none_for_every_dimension() {
        assert_eq!(ReduceDims::from_value(&Value::None), Some(ReduceDims(None)));
        assert_eq!(ReduceDims::from_value(&Value::Int(1)), Some(ReduceDims::from(1)));
        let two = ReduceDims::from([0, 2]);
        assert_eq!(ReduceDims::from_value(&two.to_value()), Some(two));
        assert!(matches!(ReduceDims(None).to_value(), Value::None));
        assert_eq!(ReduceDims::from_value(&Value::Float(1.0)), None);
    }
}
