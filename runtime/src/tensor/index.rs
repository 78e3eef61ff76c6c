//! Indexing (`t[0]`, `t[1:3]`, `t[..., None]`, `t[idx]`): basic indexing gives a view;
//! indexing by tensors (integer indices or bool masks) gives a copy (`ops/indexing.rs`).

use std::ops::{Range, RangeFrom, RangeFull, RangeInclusive, RangeTo};

use smallvec::SmallVec;

use crate::error::{Error, Result, bail};
use crate::protocol::Relevant;
use crate::value::{FromValue, Slice, ToValue, Value};

use super::Tensor;
use crate::types::{Layout, Shape, Strides};

/// One component of an index, as one item of a Python index tuple.
#[derive(Clone, Debug)]
pub enum IndexItem {
    /// `t[i]`: selects one position and removes the dimension; negative counts from the end.
    Int(i64),
    /// `t[start:stop:step]`: Python slice semantics (clamped bounds, negative from the end).
    Slice {
        /// First position, `None` for the beginning.
        start: Option<i64>,
        /// One past the last position, `None` for the end.
        stop: Option<i64>,
        /// Stride between positions; must be positive, as in PyTorch.
        step: i64,
    },
    /// `t[None]`: inserts a dimension of size one.
    NewAxis,
    /// `t[...]`: as many full slices as needed.
    Ellipsis,
    /// `t[idx]`: an integer tensor picks positions along one dimension (several such tensors
    /// broadcast together and pick jointly); a bool mask of `k` dimensions picks the positions
    /// where it is true along `k` dimensions. The result is a copy.
    Tensor(Tensor),
}

/// Items are equal when they are the same item (tensors: the very same tensor).
impl PartialEq for IndexItem {
    fn eq(&self, other: &IndexItem) -> bool {
        match (self, other) {
            (IndexItem::Tensor(a), IndexItem::Tensor(b)) => a.is(b),
            (IndexItem::Int(a), IndexItem::Int(b)) => a == b,
            (IndexItem::Slice { start, stop, step }, IndexItem::Slice { start: a, stop: b, step: c }) => {
                (start, stop, step) == (a, b, c)
            }
            (IndexItem::NewAxis, IndexItem::NewAxis) | (IndexItem::Ellipsis, IndexItem::Ellipsis) => true,
            _ => false,
        }
    }
}

impl From<Tensor> for IndexItem {
    fn from(t: Tensor) -> IndexItem {
        IndexItem::Tensor(t)
    }
}

impl From<&Tensor> for IndexItem {
    fn from(t: &Tensor) -> IndexItem {
        IndexItem::Tensor(t.clone())
    }
}

impl From<Tensor> for Index {
    fn from(t: Tensor) -> Index {
        IndexItem::Tensor(t).into()
    }
}

impl From<&Tensor> for Index {
    fn from(t: &Tensor) -> Index {
        IndexItem::Tensor(t.clone()).into()
    }
}

impl IndexItem {
    /// `start:stop:step`.
    pub fn slice(start: Option<i64>, stop: Option<i64>, step: i64) -> IndexItem {
        IndexItem::Slice { start, stop, step }
    }

    fn consumes_dim(&self) -> bool {
        matches!(self, IndexItem::Int(_) | IndexItem::Slice { .. })
    }
}

/// An index: one item or a tuple of items (`t.get((0, 1..3))` is `t[0, 1:3]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Index(SmallVec<[IndexItem; 4]>);

impl Index {
    /// The items, in order.
    pub fn items(&self) -> &[IndexItem] {
        &self.0
    }

    /// Whether an item is a tensor (advanced indexing, which copies).
    pub(crate) fn is_advanced(&self) -> bool {
        self.0.iter().any(|i| matches!(i, IndexItem::Tensor(_)))
    }

    /// The layout of the view this basic index (no tensor items) selects from `layout`.
    pub(crate) fn apply(&self, layout: &Layout) -> Result<Layout> {
        let ndim = layout.ndim();
        let consumed = self.0.iter().filter(|i| i.consumes_dim()).count();
        if self.0.iter().filter(|i| **i == IndexItem::Ellipsis).count() > 1 {
            bail!(Index, "an index can only have a single ellipsis ('...')");
        }
        if consumed > ndim {
            bail!(Index, "too many indices for tensor of dimension {ndim}");
        }
        let (mut shape, mut strides) = (Vec::new(), Strides::new());
        let mut offset = layout.offset;
        let mut dim = 0;
        let full = |dim: &mut usize, shape: &mut Vec<usize>, strides: &mut Strides| {
            shape.push(layout.shape[*dim]);
            strides.push(layout.strides[*dim]);
            *dim += 1;
        };
        for item in &self.0 {
            match *item {
                IndexItem::Tensor(_) => bail!(Index, "a tensor index selects no view: it is indexed by copy"),
                IndexItem::Int(i) => {
                    let size = layout.shape[dim] as i64;
                    if i < -size || i >= size {
                        bail!(Index, "index {i} is out of bounds for dimension {dim} with size {size}");
                    }
                    offset += (if i < 0 { i + size } else { i }) as usize * layout.strides[dim];
                    dim += 1;
                }
                IndexItem::Slice { start, stop, step } => {
                    if step <= 0 {
                        return Err(Error::value_error("slice step must be positive"));
                    }
                    let size = layout.shape[dim] as i64;
                    let clamp = |v: i64| if v < 0 { v.saturating_add(size).max(0) } else { v.min(size) };
                    let (a, b) = (start.map_or(0, clamp), stop.map_or(size, clamp));
                    // ceil((b - a) / step) without overflow: 0 <= a < b <= size.
                    let len = if b > a { (b - a - 1) / step + 1 } else { 0 };
                    offset += a.min(size) as usize * layout.strides[dim];
                    shape.push(len as usize);
                    // With two or more elements, step < size, so the stride stays in the storage.
                    strides.push(if len > 1 { layout.strides[dim] * step as usize } else { layout.strides[dim] });
                    dim += 1;
                }
                IndexItem::NewAxis => {
                    shape.push(1);
                    strides.push(layout.strides.get(dim).copied().unwrap_or(1));
                }
                IndexItem::Ellipsis => {
                    for _ in 0..ndim - consumed {
                        full(&mut dim, &mut shape, &mut strides);
                    }
                }
            }
        }
        while dim < ndim {
            full(&mut dim, &mut shape, &mut strides);
        }
        Ok(Layout { shape: Shape::from(shape), strides, offset })
    }
}

impl From<IndexItem> for Index {
    fn from(item: IndexItem) -> Index {
        Index(SmallVec::from_iter([item]))
    }
}

impl From<Vec<IndexItem>> for Index {
    fn from(items: Vec<IndexItem>) -> Index {
        Index(items.into())
    }
}

macro_rules! index_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for IndexItem {
            fn from(i: $t) -> IndexItem {
                IndexItem::Int(position(i))
            }
        }
        impl From<Range<$t>> for IndexItem {
            fn from(r: Range<$t>) -> IndexItem {
                IndexItem::slice(Some(position(r.start)), Some(position(r.end)), 1)
            }
        }
        impl From<RangeInclusive<$t>> for IndexItem {
            fn from(r: RangeInclusive<$t>) -> IndexItem {
                IndexItem::slice(Some(position(*r.start())), Some(position(*r.end()).saturating_add(1)), 1)
            }
        }
        impl From<RangeFrom<$t>> for IndexItem {
            fn from(r: RangeFrom<$t>) -> IndexItem {
                IndexItem::slice(Some(position(r.start)), None, 1)
            }
        }
        impl From<RangeTo<$t>> for IndexItem {
            fn from(r: RangeTo<$t>) -> IndexItem {
                IndexItem::slice(None, Some(position(r.end)), 1)
            }
        }
        impl From<$t> for Index {
            fn from(i: $t) -> Index {
                IndexItem::from(i).into()
            }
        }
        impl From<Range<$t>> for Index {
            fn from(r: Range<$t>) -> Index {
                IndexItem::from(r).into()
            }
        }
        impl From<RangeInclusive<$t>> for Index {
            fn from(r: RangeInclusive<$t>) -> Index {
                IndexItem::from(r).into()
            }
        }
        impl From<RangeFrom<$t>> for Index {
            fn from(r: RangeFrom<$t>) -> Index {
                IndexItem::from(r).into()
            }
        }
        impl From<RangeTo<$t>> for Index {
            fn from(r: RangeTo<$t>) -> Index {
                IndexItem::from(r).into()
            }
        }
    )*};
}

/// A Rust integer as an index position; one beyond `i64` saturates, so it is out of bounds
/// rather than wrapping to a negative (from-the-end) position.
fn position<T: TryInto<i64>>(i: T) -> i64 {
    i.try_into().unwrap_or(i64::MAX)
}

index_from_int!(i32, i64, usize);

impl From<RangeFull> for IndexItem {
    fn from(_: RangeFull) -> IndexItem {
        IndexItem::slice(None, None, 1)
    }
}

impl From<RangeFull> for Index {
    fn from(_: RangeFull) -> Index {
        IndexItem::slice(None, None, 1).into()
    }
}

macro_rules! index_from_tuple {
    ($($name:ident)*) => {
        impl<$($name: Into<IndexItem>),*> From<($($name,)*)> for Index {
            #[allow(non_snake_case)]
            fn from(($($name,)*): ($($name,)*)) -> Index {
                Index(SmallVec::from_iter([$($name.into()),*]))
            }
        }
    };
}
index_from_tuple!(A B);
index_from_tuple!(A B C);
index_from_tuple!(A B C D);
index_from_tuple!(A B C D E);
index_from_tuple!(A B C D E F);

fn item_value(item: &IndexItem) -> Value {
    match *item {
        IndexItem::Int(i) => Value::Int(i),
        IndexItem::Slice { start, stop, step } => Slice { start, stop, step: (step != 1).then_some(step) }.into(),
        IndexItem::NewAxis => Value::None,
        IndexItem::Ellipsis => Value::Ellipsis,
        IndexItem::Tensor(ref t) => Value::Tensor(t.clone()),
    }
}

fn item_from_value(value: &Value) -> Option<IndexItem> {
    match value {
        Value::Int(i) => Some(IndexItem::Int(*i)),
        Value::Slice(s) => Some(IndexItem::slice(s.start, s.stop, s.step.unwrap_or(1))),
        Value::None => Some(IndexItem::NewAxis),
        Value::Ellipsis => Some(IndexItem::Ellipsis),
        Value::Tensor(t) => Some(IndexItem::Tensor(t.clone())),
        _ => None,
    }
}

/// A single item is passed to hooks as itself, several as a tuple, as Python does.
impl ToValue for Index {
    fn to_value(&self) -> Value {
        match self.0.as_slice() {
            [one] => item_value(one),
            items => Value::Tuple(items.iter().map(item_value).collect()),
        }
    }
}

impl FromValue for Index {
    fn type_name() -> String {
        "int, slice, None, Ellipsis, Tensor or a tuple of them".into()
    }
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Tuple(items) => items.iter().map(item_from_value).collect::<Option<Vec<_>>>().map(Index::from),
            v => item_from_value(v).map(Index::from),
        }
    }
}

/// Tensors in an index take part in dispatch (a duck used as an index reaches its hook).
impl Relevant for Index {
    fn each_tensor<'s>(&'s self, f: &mut dyn FnMut(&'s Tensor)) {
        for item in &self.0 {
            if let IndexItem::Tensor(t) = item {
                f(t);
            }
        }
    }
    #[inline(always)]
    fn all_plain(&self) -> bool {
        self.0.iter().all(|i| match i {
            IndexItem::Tensor(t) => t.all_plain(),
            _ => true,
        })
    }
}

impl<'a> crate::value::Arg<'a> for Index {
    type Owned = Index;
    #[inline(always)]
    fn from_owned(owned: &'a Index) -> Index {
        owned.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(shape: &[usize]) -> Layout {
        Layout::contiguous(Shape::new(shape))
    }

    #[test]
    fn ints_drop_dims_and_move_the_offset() {
        let l = Index::from((1, -1)).apply(&layout(&[2, 3])).unwrap();
        assert_eq!((l.shape.as_ref(), l.offset), (&[][..], 5));
    }

    #[test]
    fn slices_follow_python() {
        let l = Index::from(IndexItem::slice(Some(1), None, 2)).apply(&layout(&[6])).unwrap();
        assert_eq!((l.shape.as_ref(), l.strides.as_slice(), l.offset), (&[3][..], &[2][..], 1));
        let clamped = Index::from(IndexItem::slice(Some(-10), Some(100), 1)).apply(&layout(&[4])).unwrap();
        assert_eq!(clamped.shape.as_ref(), &[4]);
        let empty = Index::from(IndexItem::slice(Some(3), Some(1), 1)).apply(&layout(&[4])).unwrap();
        assert_eq!(empty.shape.as_ref(), &[0]);
    }

    #[test]
    fn ellipsis_and_new_axis() {
        let idx = Index::from(vec![IndexItem::Ellipsis, IndexItem::NewAxis, IndexItem::Int(0)]);
        let l = idx.apply(&layout(&[2, 3, 4])).unwrap();
        assert_eq!(l.shape.as_ref(), &[2, 3, 1]);
    }

    #[test]
    fn out_of_range_is_an_index_error() {
        let err = Index::from(3).apply(&layout(&[3])).unwrap_err();
        assert_eq!(err.to_string(), "index 3 is out of bounds for dimension 0 with size 3");
        let err = Index::from((0, 0)).apply(&layout(&[3])).unwrap_err();
        assert_eq!(err.to_string(), "too many indices for tensor of dimension 1");
    }

    #[test]
    fn huge_steps_and_positions_neither_overflow_nor_wrap() {
        let l = Index::from(IndexItem::slice(None, None, i64::MAX)).apply(&layout(&[4])).unwrap();
        assert_eq!(l.shape.as_ref(), &[1], "a huge step still takes the first element");
        assert_eq!(Index::from(0..=i64::MAX).apply(&layout(&[4])).unwrap().shape.as_ref(), &[4]);
        assert!(Index::from(usize::MAX).apply(&layout(&[4])).is_err(), "usize::MAX is not -1");
        assert_eq!(Index::from(i64::MIN..2).apply(&layout(&[4])).unwrap().shape.as_ref(), &[2]);
    }

    #[test]
    fn values_round_trip() {
        let idx = Index::from((0, 1..3));
        assert_eq!(Index::from_value(&idx.to_value()), Some(idx));
    }
}
