//! Shapes, strides and offsets: where each element of a tensor lives in its storage.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use smallvec::SmallVec;

use crate::error::Result;

/// Dimensions inline before a shape spills to the heap: five, as PyTorch's `DimVector`. An
/// array (storage, shape, strides, offset, dtype) then weighs 120 bytes, which the compiler
/// moves with a few vector stores; with six it weighed 136 and every move called `memcpy`
/// (measured: the copies were 12% of a one-element `add`).
const INLINE_DIMS: usize = 5;

/// The sizes of a tensor's dimensions (`torch.Size`). Cheap for up to five dimensions.
#[derive(Eq, Default)]
pub struct Shape(SmallVec<[usize; INLINE_DIMS]>);

/// Copies the sizes (`SmallVec`'s own `clone` goes through a generic iterator).
impl Clone for Shape {
    #[inline]
    fn clone(&self) -> Self {
        Shape::new(self)
    }
}

/// Compares sizes one by one: shapes are short, and a call to `memcmp` costs more than the
/// loop.
impl PartialEq for Shape {
    #[inline]
    fn eq(&self, other: &Shape) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

/// Hashes the sizes as a slice, agreeing with `eq`.
impl Hash for Shape {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.as_slice().hash(state)
    }
}

impl Shape {
    /// A shape from its dimension sizes.
    #[inline]
    pub fn new(dims: &[usize]) -> Self {
        Shape(SmallVec::from_slice(dims))
    }

    /// The number of elements (1 for a zero-dimensional tensor).
    #[inline]
    pub fn numel(&self) -> usize {
        self.checked_numel().unwrap_or(usize::MAX)
    }

    /// The number of elements, or `None` when it does not fit in a `usize` (a shape with a
    /// zero dimension has none, however large the others).
    #[inline]
    pub fn checked_numel(&self) -> Option<usize> {
        if self.0.contains(&0) {
            return Some(0);
        }
        self.0.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
    }

    /// Whether a tensor of this shape with elements of `itemsize` bytes could be laid out in
    /// memory: its dimensions other than zeros multiply to at most `isize::MAX` bytes (PyTorch's
    /// "storage size calculation overflowed"). An empty tensor must pass too: its strides,
    /// views and copies multiply the other dimensions.
    pub fn fits_in_memory(&self, itemsize: usize) -> bool {
        let bytes = self.0.iter().filter(|&&d| d != 0).try_fold(itemsize, |n, &d| n.checked_mul(d));
        bytes.is_some_and(|n| isize::try_from(n).is_ok())
    }

    /// The row-major (C-contiguous) strides of this shape, in elements.
    #[inline]
    pub fn contiguous_strides(&self) -> Strides {
        let n = self.0.len();
        let mut strides =
            if n <= INLINE_DIMS { Strides::from_buf_and_len([0; INLINE_DIMS], n) } else { Strides::from_elem(0, n) };
        let mut step = 1;
        for (s, &d) in strides.iter_mut().zip(&self.0).rev() {
            *s = step;
            // Saturating: only a shape with a zero dimension can get this far, and its strides
            // address nothing.
            step = step.saturating_mul(d.max(1));
        }
        strides
    }
}

impl Deref for Shape {
    type Target = [usize];
    #[inline]
    fn deref(&self) -> &[usize] {
        &self.0
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    #[inline]
    fn from(dims: [usize; N]) -> Self {
        Shape::new(&dims)
    }
}

impl From<&[usize]> for Shape {
    #[inline]
    fn from(dims: &[usize]) -> Self {
        Shape::new(dims)
    }
}

impl From<Vec<usize>> for Shape {
    #[inline]
    fn from(dims: Vec<usize>) -> Self {
        Shape::new(&dims)
    }
}

impl FromIterator<usize> for Shape {
    #[inline]
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> Self {
        Shape(iter.into_iter().collect())
    }
}

impl<const N: usize> PartialEq<[usize; N]> for Shape {
    #[inline]
    fn eq(&self, other: &[usize; N]) -> bool {
        self.0.as_slice() == other
    }
}

impl PartialEq<[usize]> for Shape {
    #[inline]
    fn eq(&self, other: &[usize]) -> bool {
        self.0.as_slice() == other
    }
}

/// Prints like PyTorch: `torch.Size([2, 3])`.
impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "torch.Size({:?})", self.0.as_slice())
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Element strides, one per dimension. Never negative, as in PyTorch.
pub type Strides = SmallVec<[usize; INLINE_DIMS]>;

/// Shape, strides and offset of a dense tensor: which elements of a storage it is, in what
/// order. Element `[i, j, ...]` lives at `offset + i * strides[0] + j * strides[1] + ...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The size of each dimension.
    pub shape: Shape,
    /// The step in storage, in elements, between neighbours along each dimension (0 for an
    /// expanded dimension).
    pub strides: Strides,
    /// Where element `[0, 0, ...]` lives in storage.
    pub offset: usize,
}

impl Layout {
    /// This layout's elements seen in `shape` without copying, when the strides allow it
    /// (PyTorch's `computeStride`): dimensions may be split or merged only within runs that
    /// are contiguous with each other. `None` when a new dimension would span two such runs.
    pub fn viewed(&self, shape: &Shape) -> Option<Layout> {
        let (old, strides) = (&self.shape, &self.strides);
        let numel: usize = old.iter().product();
        if numel == 0 || old.is_empty() {
            return (shape.iter().product::<usize>() == numel)
                .then(|| Layout { offset: self.offset, ..Layout::contiguous(shape.clone()) });
        }
        let mut new_strides: Strides = shape.iter().map(|_| 0).collect();
        let mut view_d = shape.len() as isize - 1;
        let mut chunk_base = strides[old.len() - 1];
        let (mut tensor_numel, mut view_numel) = (1usize, 1usize);
        for tensor_d in (0..old.len()).rev() {
            tensor_numel *= old[tensor_d];
            let run_ends =
                tensor_d == 0 || (old[tensor_d - 1] != 1 && strides[tensor_d - 1] != tensor_numel * chunk_base);
            if run_ends {
                while view_d >= 0 && (view_numel < tensor_numel || shape[view_d as usize] == 1) {
                    new_strides[view_d as usize] = view_numel * chunk_base;
                    view_numel *= shape[view_d as usize];
                    view_d -= 1;
                }
                if view_numel != tensor_numel {
                    return None;
                }
                if tensor_d > 0 {
                    chunk_base = strides[tensor_d - 1];
                    tensor_numel = 1;
                    view_numel = 1;
                }
            }
        }
        (view_d == -1).then(|| Layout { shape: shape.clone(), strides: new_strides, offset: self.offset })
    }
    /// The contiguous layout of a fresh tensor of this shape.
    #[inline]
    pub fn contiguous(shape: Shape) -> Self {
        let strides = shape.contiguous_strides();
        Layout { shape, strides, offset: 0 }
    }

    /// The number of elements.
    #[inline]
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }

    /// The number of dimensions.
    #[inline]
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The positions in storage of the first and the last element the layout addresses (`None`
    /// with no elements): its elements lie between them.
    pub fn span(&self) -> Option<(usize, usize)> {
        if self.numel() == 0 {
            return None;
        }
        let reach = self.shape.iter().zip(&self.strides).map(|(&n, &s)| (n - 1).saturating_mul(s));
        Some((self.offset, reach.fold(self.offset, usize::saturating_add)))
    }

    /// True when the elements fill the first `numel` places of the storage, each once, in some
    /// order of the dimensions (a permutation of a contiguous layout). False with no elements.
    pub fn is_dense_from_start(&self) -> bool {
        if self.offset != 0 || self.numel() == 0 {
            return false;
        }
        let mut dims: Vec<(usize, usize)> =
            self.shape.iter().zip(&self.strides).filter(|(n, _)| **n != 1).map(|(&n, &s)| (s, n)).collect();
        dims.sort_unstable();
        let mut expected = 1usize;
        for (stride, n) in dims {
            if stride != expected {
                return false;
            }
            expected = expected.saturating_mul(n);
        }
        true
    }

    /// True when the elements are laid out row-major without gaps (always, with no elements).
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        if self.numel() == 0 {
            return true;
        }
        let mut expected = 1;
        for (&d, &s) in self.shape.iter().zip(&self.strides).rev() {
            if d != 1 && s != expected {
                return false;
            }
            expected *= d;
        }
        true
    }
}

/// The shape two shapes broadcast to, NumPy style, or an error naming both.
/// An error unless `a` and `b` broadcast together ([`broadcast_shapes`] without building the
/// shape when they are equal).
#[doc(hidden)]
#[inline]
pub fn check_broadcast(a: &Shape, b: &Shape, func: &str) -> Result<()> {
    if a == b {
        return Ok(());
    }
    broadcast_shapes(a, b, func).map(drop)
}

#[doc(hidden)]
#[inline]
pub fn broadcast_shapes(a: &Shape, b: &Shape, func: &str) -> Result<Shape> {
    if a == b {
        return Ok(a.clone());
    }
    let n = a.len().max(b.len());
    let dim = |s: &Shape, i: usize| if i + s.len() >= n { s[i + s.len() - n] } else { 1 };
    (0..n)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y || y == 1 => Ok(x),
            (1, y) => Ok(y),
            (x, y) => Err(crate::Error::runtime_error(format!(
                "{func}(): the size of tensor a ({x}) must match the size of tensor b ({y}) at non-singleton dimension {i} \
                 (shapes {:?} and {:?} do not broadcast)",
                a.as_ref(),
                b.as_ref()
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_strides_are_row_major() {
        assert_eq!(Shape::from([2, 3, 4]).contiguous_strides().as_slice(), &[12, 4, 1]);
        assert_eq!(Shape::from([]).contiguous_strides().as_slice(), &[] as &[usize]);
        assert!(Layout::contiguous(Shape::from([2, 3])).is_contiguous());
    }

    #[test]
    fn transposed_layout_is_not_contiguous() {
        let l = Layout { shape: Shape::from([3, 2]), strides: [1, 3].into_iter().collect(), offset: 0 };
        assert!(!l.is_contiguous());
    }

    #[test]
    fn broadcasting_follows_numpy() {
        let s = |d: &[usize]| Shape::new(d);
        assert_eq!(broadcast_shapes(&s(&[2, 1, 3]), &s(&[4, 1]), "add").unwrap(), s(&[2, 4, 3]));
        assert_eq!(broadcast_shapes(&s(&[]), &s(&[5]), "add").unwrap(), s(&[5]));
        let err = broadcast_shapes(&s(&[2, 3]), &s(&[4]), "add").unwrap_err();
        assert!(err.to_string().contains("size of tensor a (3) must match the size of tensor b (4)"), "{err}");
    }

    #[test]
    fn a_zero_dimension_means_no_elements_however_large_the_others() {
        assert_eq!(Shape::from([1 << 62, 1 << 62, 0]).checked_numel(), Some(0));
        assert_eq!(Shape::from([1 << 62, 1 << 62]).checked_numel(), None);
        let l = Layout { shape: Shape::from([1 << 62, 0]), strides: [1, 1].into_iter().collect(), offset: 0 };
        assert!(l.is_contiguous());
    }

    #[test]
    fn shape_prints_like_torch_size() {
        assert_eq!(format!("{:?}", Shape::from([2, 3])), "torch.Size([2, 3])");
    }
}
