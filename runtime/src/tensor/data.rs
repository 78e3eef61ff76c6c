//! Nested Rust data (`[[1.0, 2.0], [3.0, 4.0]]`, `vec![...]`) as tensor contents.

use crate::error::{Error, Result};

use crate::types::Element;

/// Data [`tensor`](crate::tensor()) accepts: an element, or arrays, slices and vectors of data,
/// nested to any depth. The element type decides the dtype (`f32` is float32, `i64` is int64).
pub trait TensorData {
    /// The element type at the leaves.
    type Elem: Element;

    /// Appends the elements in row-major order to `out`, recording the size of each dimension
    /// in `dims` (from `depth` on) and checking that nested sequences are not ragged.
    fn flatten_into(&self, depth: usize, dims: &mut Vec<usize>, out: &mut Vec<Self::Elem>) -> Result<()>;
}

macro_rules! element_data {
    ($($t:ty),*) => {$(
        impl TensorData for $t {
            type Elem = $t;
            fn flatten_into(&self, _: usize, _: &mut Vec<usize>, out: &mut Vec<$t>) -> Result<()> {
                out.push(*self);
                Ok(())
            }
        }
    )*};
}
element_data!(f32, f64, i32, i64, bool);

impl<D: TensorData> TensorData for [D] {
    type Elem = D::Elem;
    fn flatten_into(&self, depth: usize, dims: &mut Vec<usize>, out: &mut Vec<D::Elem>) -> Result<()> {
        match dims.get(depth) {
            None => dims.push(self.len()),
            Some(&expected) if expected != self.len() => {
                return Err(Error::value_error(format!(
                    "tensor(): expected sequence of length {expected} at dim {depth} (got {})",
                    self.len()
                )));
            }
            Some(_) => {}
        }
        self.iter().try_for_each(|d| d.flatten_into(depth + 1, dims, out))
    }
}

impl<D: TensorData, const N: usize> TensorData for [D; N] {
    type Elem = D::Elem;
    fn flatten_into(&self, depth: usize, dims: &mut Vec<usize>, out: &mut Vec<D::Elem>) -> Result<()> {
        self.as_slice().flatten_into(depth, dims, out)
    }
}

impl<D: TensorData> TensorData for Vec<D> {
    type Elem = D::Elem;
    fn flatten_into(&self, depth: usize, dims: &mut Vec<usize>, out: &mut Vec<D::Elem>) -> Result<()> {
        self.as_slice().flatten_into(depth, dims, out)
    }
}

impl<D: TensorData + ?Sized> TensorData for &D {
    type Elem = D::Elem;
    fn flatten_into(&self, depth: usize, dims: &mut Vec<usize>, out: &mut Vec<D::Elem>) -> Result<()> {
        (**self).flatten_into(depth, dims, out)
    }
}
