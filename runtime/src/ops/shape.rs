//! Shapes and views: `reshape` and indexing.

use crate::error::{Result, bail};
use crate::ops::IntList;
use crate::tensor::{Index, Layout, Shape, Tensor};
use crate::testing::{f32s, sample};
use crate::torch_function;
use crate::value::Value;

/// `shape` with its `-1` (at most one) worked out for `numel` elements.
fn inferred(func: &str, numel: usize, shape: &[i64]) -> Result<Shape> {
    let shown = format!("{shape:?}");
    let mut inferred = None;
    let mut known: usize = 1;
    for (i, &d) in shape.iter().enumerate() {
        match d {
            -1 if inferred.is_some() => bail!(Runtime, "{func}(): only one dimension can be inferred"),
            -1 => inferred = Some(i),
            d if d < 0 => bail!(Runtime, "{func}(): invalid shape dimension {d}"),
            d => match known.checked_mul(d as usize) {
                Some(n) => known = n,
                None => bail!(Runtime, "{func}(): shape '{shown}' has more elements than memory can hold"),
            },
        }
    }
    let mut dims: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
    match inferred {
        // -1 among sizes whose product is 0 could be anything; among others it is the quotient
        // (0 for no elements).
        Some(_) if numel == 0 && known == 0 => bail!(
            Runtime,
            "{func}(): cannot reshape tensor of 0 elements into shape {shown} because the unspecified dimension size \
             -1 can be any value and is ambiguous"
        ),
        Some(i) if known != 0 && numel.is_multiple_of(known) => dims[i] = numel / known,
        None if known == numel => {}
        _ => bail!(Runtime, "{func}(): shape '{shown}' is invalid for input of size {numel}"),
    }
    let shape = Shape::from(dims);
    // An empty shape's other dimensions must fit too (PyTorch's "Stride calculation overflowed").
    if !shape.fits_in_memory(1) {
        bail!(Runtime, "{func}(): shape '{shown}' has more elements than memory can hold");
    }
    Ok(shape)
}

/// A view in the new shape when `t` is contiguous, else a copy in it (never a view of a
/// non-contiguous tensor, whatever the shape).
fn reshape_to(func: &str, (name, t): (&str, &Tensor), shape: &[i64]) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let shape = inferred(func, x.layout.numel(), shape)?;
    let make = |l: &Layout| Ok(Layout { offset: l.offset, ..Layout::contiguous(shape.clone()) });
    if x.layout.is_contiguous() {
        return crate::primitive::view(t, make);
    }
    crate::primitive::unsafe_view(&crate::primitive::copy(t, x.dtype)?, make)
}

fn view_as(func: &str, (name, t): (&str, &Tensor), shape: &[i64]) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let shape = inferred(func, x.layout.numel(), shape)?;
    if x.layout.is_contiguous() || shape == x.layout.shape {
        return crate::primitive::reshape(t, &shape);
    }
    if x.layout.viewed(&shape).is_none() {
        bail!(
            Runtime,
            "{func}(): view size is not compatible with input tensor's size and stride (at least one dimension \
             spans across two contiguous subspaces). Use .reshape(...) instead."
        );
    }
    crate::primitive::view(t, |l| {
        l.viewed(&shape).ok_or_else(|| crate::Error::runtime_error(format!("{func}(): view size is not compatible")))
    })
}

fn select(func: &str, t: &Tensor, index: &Index) -> Result<Tensor> {
    t.data(func, "self")?;
    if index.is_advanced() {
        return super::indexing::advanced_index(func, t, index);
    }
    crate::primitive::view(t, |l| index.apply(l))
}

/// The same elements in a new shape (`torch.reshape`); one dimension may be `-1`, inferred from
/// the others. A view of the same data when the input is contiguous, a copy otherwise.
///
/// ```
/// let t = torchfn::tensor([1i64, 2, 3, 4, 5, 6])?;
/// assert_eq!(torchfn::reshape(&t, &[2, -1])?.to_string(), "tensor([[1, 2, 3],\n        [4, 5, 6]])");
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn")]
pub fn reshape(input: &Tensor, shape: &[i64]) -> Result<Tensor> {
    reshape_to("reshape", ("input", input), shape)
}

impl Tensor {
    /// The same elements in a new shape: the method form of [`reshape`](crate::reshape()).
    #[torch_function]
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        reshape_to("reshape", ("self", self), shape)
    }

    /// The same data seen in a new shape (`Tensor.view(*shape)`); one dimension may be `-1`.
    /// Unlike [`reshape`](Tensor::reshape) it never copies: a tensor that is not contiguous is
    /// an error (unless the shape stays the same).
    ///
    /// ```
    /// let t = torchfn::zeros([2, 3, 4], None, None)?;
    /// assert_eq!(t.view([-1, 4])?.shape()?, [6, 4]);
    /// assert!(t.transpose(0, 1)?.view([24]).is_err());
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn view(&self, #[variadic] shape: impl Into<IntList>) -> Result<Tensor> {
        view_as("view", ("self", self), shape.into().as_slice())
    }

    /// Indexing, `t[index]` (`Tensor.__getitem__`): integers select and drop a dimension,
    /// ranges slice, tuples index several dimensions; the result is a view of the same data.
    /// Integer tensors and bool masks among the items index by copy, as PyTorch's advanced
    /// indexing (see [`IndexItem::Tensor`](crate::IndexItem::Tensor)).
    ///
    /// ```
    /// use torchfn::IndexItem;
    /// let t = torchfn::tensor([[1i64, 2, 3], [4, 5, 6]])?;
    /// assert_eq!(t.get(1)?.to_vec::<i64>()?, [4, 5, 6]);
    /// assert_eq!(t.get((.., 1..))?.to_vec::<i64>()?, [2, 3, 5, 6]);
    /// assert_eq!(t.get((0, IndexItem::slice(None, None, 2)))?.to_vec::<i64>()?, [1, 3]);
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function(name = "__getitem__")]
    pub fn get(&self, index: impl Into<Index>) -> Result<Tensor> {
        select("__getitem__", self, &index.into())
    }

    /// Assignment through an index, `t[index] = value` (`Tensor.__setitem__`), in place: the
    /// elements [`get`](Tensor::get) would select are overwritten with `value`, a number (a
    /// Rust number converts, see [`Tensor::scalar`]) or a tensor that broadcasts to them.
    /// Writes go to this tensor's memory, so through a view into its base, and count as an
    /// in-place operation for autograd: on a leaf that requires grad (or a view of one) they
    /// are an error, on a tensor with history they are recorded.
    ///
    /// With integers, slices, `None` and `...` only, the value is copied into the view they
    /// select, converted to this tensor's dtype as [`copy_`](Tensor::copy_) does. With index
    /// tensors among the items (integer positions or bool masks, as `get` takes them) the
    /// assignment is [`index_put_`](Tensor::index_put_)'s: a number is converted, a tensor
    /// value must have this tensor's dtype, and where positions repeat the last write wins.
    ///
    /// Dispatched as `Tensor.__setitem__`: tensor-likes in the index (a tuple's items too) and
    /// the value take part, so a duck used as an index reaches its hook, and when a hook answers
    /// nothing is written (what it returns is discarded, as Python does).
    ///
    /// ```
    /// use torchfn::IndexItem;
    /// let t = torchfn::zeros([2, 3], None, None)?;
    /// t.set(0, 1.0)?; // t[0] = 1
    /// t.set((.., 2), &torchfn::tensor([5.0f32, 6.0])?)?; // t[:, 2] = tensor([5., 6.])
    /// let mask = torchfn::tensor([[false, true, false], [false, false, false]])?;
    /// t.set(&mask, -1)?; // t[mask] = -1
    /// assert_eq!(t.to_vec::<f32>()?, [1.0, -1.0, 5.0, 0.0, 0.0, 6.0]);
    /// let rows = torchfn::tensor([1i64, 1])?;
    /// t.set(IndexItem::Tensor(rows), &torchfn::tensor([[7.0f32], [8.0]])?)?; // the last write wins
    /// assert_eq!(t.get(1)?.to_vec::<f32>()?, [8.0, 8.0, 8.0]);
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function(name = "__setitem__")]
    pub fn set(&self, index: impl Into<Index>, value: impl Into<Tensor>) -> Result<()> {
        super::indexing::assign("__setitem__", self, &index.into(), &value.into())
    }
}

crate::samples! {
    RESHAPE => [sample([f32s(&[2, 3]), Value::Tuple(vec![3.into(), (-1).into()])])],
    Tensor::RESHAPE => [sample([f32s(&[2, 3]), Value::Tuple(vec![6.into()])])],
    Tensor::VIEW => [sample([f32s(&[2, 3]), Value::Int(3), Value::Int(2)]), sample([f32s(&[2, 3]), Value::List(vec![(-1).into()])])],
    Tensor::GET => [
        sample([f32s(&[4, 3]), Value::Tensor(Tensor::from_vec(vec![2i64, 0, -1], [3]).expect("three indices"))]),
        sample([f32s(&[2, 3]), crate::testing::bools(&[2, 3])]),
        sample([f32s(&[2, 3]), Value::Int(1)]), sample([f32s(&[2, 3]), Value::Tuple(vec![Value::Int(0), Value::Slice(Box::new(crate::value::Slice { start: Some(1), stop: None, step: None }))])])],
    Tensor::SET => [
        sample([f32s(&[2, 3]), Value::Int(0), Value::Float(1.5)]),
        sample([f32s(&[2, 3]), Value::Tuple(vec![Value::Slice(Box::default()), Value::Int(1)]), f32s(&[2])]),
        sample([f32s(&[4, 3]), Value::Tensor(Tensor::from_vec(vec![2i64, 0, -1], [3]).expect("three indices")), f32s(&[3])]),
        sample([f32s(&[2, 3]), Value::Tuple(vec![Value::Int(1), Value::Tensor(Tensor::from_vec(vec![2i64, 0], [2]).expect("two indices"))]), f32s(&[2])]),
        sample([f32s(&[2, 3]), crate::testing::bools(&[2, 3]), Value::Int(-1)])],
}
