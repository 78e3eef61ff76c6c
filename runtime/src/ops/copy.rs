//! Copies and contiguity: `clone` (the function and the method) and the methods `contiguous`
//! and `is_contiguous`.

use crate::error::Result;
use crate::primitive;
use crate::tensor::{Layout, Tensor};
use crate::testing::{f32s, sample};
use crate::torch_function;

use super::view::dims_of;

/// True when `layout` addresses each element of one gap-free block of storage exactly once,
/// in some order of dimensions (PyTorch's "non-overlapping and dense").
fn dense_block(layout: &Layout) -> bool {
    let mut dims: Vec<(usize, usize)> = dims_of(layout).filter(|&(n, _)| n != 1).collect();
    dims.sort_by_key(|&(_, s)| s);
    let mut expected = 1usize;
    for (n, s) in dims {
        if n == 0 || s != expected {
            return false;
        }
        expected = expected.saturating_mul(n);
    }
    true
}

/// A copy with its own storage. As PyTorch's `preserve_format`, a layout that covers one block
/// of storage densely (a transposed matrix, say) keeps its strides; any other becomes
/// contiguous.
fn clone_impl(func: &str, (name, t): (&str, &Tensor)) -> Result<Tensor> {
    let x = t.data(func, name)?;
    if x.layout.is_contiguous() || !dense_block(&x.layout) {
        return primitive::copy(t, x.dtype);
    }
    // The block's elements in storage order: the copy, read back through the same strides.
    let mut order: Vec<usize> = (0..x.layout.ndim()).collect();
    order.sort_by_key(|&d| std::cmp::Reverse(x.layout.strides[d]));
    let permuted = primitive::view(t, |l| {
        Ok(Layout {
            shape: order.iter().map(|&d| l.shape[d]).collect(),
            strides: order.iter().map(|&d| l.strides[d]).collect(),
            offset: l.offset,
        })
    })?;
    let block = primitive::copy(&permuted, x.dtype)?;
    let layout = x.layout.clone();
    primitive::unsafe_view(&block, |l| Ok(Layout { offset: l.offset, ..layout.clone() }))
}

/// A copy of `input` with its own storage (`torch.clone`); see [`Tensor::copy`].
#[torch_function(module = "torchfn")]
pub fn clone(input: &Tensor) -> Result<Tensor> {
    clone_impl("clone", ("input", input))
}

impl Tensor {
    /// This tensor when it is contiguous, else a contiguous copy of it (`Tensor.contiguous`).
    ///
    /// ```
    /// let t = torchfn::tensor([[1i64, 2], [3, 4]])?.t()?;
    /// assert!(!t.is_contiguous()?);
    /// let c = t.contiguous()?;
    /// assert!(c.is_contiguous()? && c.is(&c.contiguous()?));
    /// assert_eq!(c.to_vec::<i64>()?, [1, 3, 2, 4]);
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn contiguous(&self) -> Result<Tensor> {
        let x = self.data("contiguous", "self")?;
        if x.layout.is_contiguous() {
            return Ok(self.clone());
        }
        primitive::copy(self, x.dtype)
    }

    /// A copy with its own storage (`Tensor.clone`, registered under that name; Rust's
    /// [`Clone::clone`] shares the data instead). A layout that covers its storage densely (a
    /// transposed matrix, say) keeps its strides, as PyTorch's `preserve_format`; any other
    /// becomes contiguous.
    ///
    /// ```
    /// use torchfn::Tensor;
    /// let t = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]])?;
    /// let c = t.copy()?;
    /// assert_ne!(c.data_ptr()?, t.data_ptr()?);
    /// assert_eq!(c.to_vec::<f32>()?, [1.0, 2.0, 3.0, 4.0]);
    /// assert!(!t.t()?.copy()?.is_contiguous()?); // strides preserved
    /// assert_eq!(Tensor::COPY.qualified_name(), "Tensor.clone");
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function(name = "clone")]
    pub fn copy(&self) -> Result<Tensor> {
        clone_impl("clone", ("self", self))
    }

    /// True when the elements lie in storage row-major without gaps, sizes of one and empty
    /// tensors not counting (`Tensor.is_contiguous`).
    #[torch_function]
    pub fn is_contiguous(&self) -> Result<bool> {
        Ok(self.data("is_contiguous", "self")?.layout.is_contiguous())
    }
}

crate::samples! {
    CLONE => [sample([f32s(&[2, 3])])],
    Tensor::CONTIGUOUS => [sample([f32s(&[2, 3])])],
    Tensor::COPY => [sample([f32s(&[2, 3])])],
    Tensor::IS_CONTIGUOUS => [sample([f32s(&[2, 3])])],
}
