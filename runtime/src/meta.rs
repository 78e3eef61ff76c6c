//! The meta backend (PyTorch's `meta` device): tensors with a shape, a dtype and strides and
//! no data. Every kernel family gives its result's shape and dtype, and allocates nothing; what
//! needs values (reading a tensor back to the host) is an error saying there is no data.
//!
//! ```
//! use torchfn::Device;
//!
//! let x = torchfn::ones([8, 1024, 768], None, Device::META)?;
//! let w = torchfn::ones([768, 3072], None, Device::META)?;
//! let y = x.matmul(&w)?.softmax(-1, None)?;
//! assert_eq!(y.shape()?, [8, 1024, 3072]);
//! assert_eq!(y.device()?, Device::META);
//! assert_eq!(y.to_string(), "tensor(..., device='meta', size=(8, 1024, 3072))");
//! let err = y.sum()?.item().unwrap_err();
//! assert_eq!(err.to_string(), "Tensor.item() cannot be called on meta tensors");
//! # Ok::<(), torchfn::Error>(())
//! ```

use crate::backend::{Array, Backend, Binary, Buffer, Device, Reduce, Scan, Storage, Unary, Window};
use crate::error::{Error, Result};
use crate::types::{DType, Scalar, Shape};

/// The meta backend.
pub(crate) struct Meta;

pub(crate) static META: Meta = Meta;

#[linkme::distributed_slice(crate::backend::BACKENDS)]
static REGISTERED: &'static dyn Backend = &META;

/// A result of `shape` and `dtype` on the meta device: contiguous, with no memory behind it.
fn empty(shape: Shape, dtype: DType) -> Array {
    Array::contiguous(Storage::new(Device::META, ()), shape, dtype)
}

/// The shape of `x` with the dimensions `dims` dropped.
fn without(x: &Array, dims: &[usize]) -> Shape {
    x.layout.shape.iter().enumerate().filter(|(d, _)| !dims.contains(d)).map(|(_, &n)| n).collect()
}

impl Backend for Meta {
    fn name(&self) -> &'static str {
        "meta"
    }

    fn device_count(&self) -> usize {
        1
    }

    fn default_index(&self) -> Result<usize> {
        Ok(0)
    }

    fn describe(&self, _: usize) -> String {
        "meta (shapes and dtypes, no data)".into()
    }

    fn supports(&self, _: DType) -> bool {
        true
    }

    fn synchronize(&self, _: usize) -> Result<()> {
        Ok(())
    }

    fn upload(&self, _: Device, data: Buffer, shape: Shape) -> Result<Array> {
        Ok(empty(shape, data.dtype()))
    }

    fn download(&self, _: &Array) -> Result<Buffer> {
        Err(Error::not_implemented("Cannot copy out of meta tensor; no data!"))
    }

    fn fill(&self, _: Device, shape: &Shape, _: Scalar, dtype: DType) -> Result<Array> {
        Ok(empty(shape.clone(), dtype))
    }

    fn copy(&self, x: &Array, dtype: DType) -> Result<Array> {
        Ok(empty(x.layout.shape.clone(), dtype))
    }

    fn assign(&self, _: &Array, _: &Array) -> Result<()> {
        Ok(())
    }

    fn unary(&self, x: &Array, op: Unary, dtype: DType, _: Option<&Array>) -> Result<Array> {
        Ok(empty(x.layout.shape.clone(), op.output(dtype)))
    }

    fn binary(
        &self,
        _: &Array,
        _: &Array,
        shape: &Shape,
        op: Binary,
        dtype: DType,
        _: Option<&Array>,
    ) -> Result<Array> {
        Ok(empty(shape.clone(), op.output(dtype)))
    }

    fn select(&self, _: &Array, _: &Array, _: &Array, shape: &Shape, dtype: DType) -> Result<Array> {
        Ok(empty(shape.clone(), dtype))
    }

    fn reduce(&self, x: &Array, dims: &[usize], op: Reduce, dtype: DType) -> Result<Array> {
        Ok(empty(without(x, dims), op.output(dtype, DType::Int64)))
    }

    fn scan(&self, x: &Array, _: usize, _: Scan, dtype: DType) -> Result<Array> {
        Ok(empty(x.layout.shape.clone(), dtype))
    }

    fn matmul(&self, a: &Array, b: &Array, batch: &Shape, dtype: DType) -> Result<Array> {
        let (n, m) = (a.layout.shape[a.layout.ndim() - 2], b.layout.shape[b.layout.ndim() - 1]);
        Ok(empty(batch.iter().copied().chain([n, m]).collect(), dtype))
    }

    fn index_select(&self, x: &Array, dim: usize, index: &Array) -> Result<Array> {
        let mut shape = x.layout.shape.to_vec();
        if let Some(size) = shape.get_mut(dim) {
            *size = index.numel();
        }
        Ok(empty(Shape::from(shape), x.dtype))
    }

    fn gather(&self, x: &Array, _: usize, index: &Array) -> Result<Array> {
        Ok(empty(index.layout.shape.clone(), x.dtype))
    }

    fn scatter_add(&self, shape: &Shape, _: usize, _: &Array, src: &Array) -> Result<Array> {
        Ok(empty(shape.clone(), src.dtype))
    }

    fn concat(&self, _: &[&Array], _: usize, shape: &Shape, dtype: DType) -> Result<Array> {
        Ok(empty(shape.clone(), dtype))
    }

    fn softmax(&self, x: &Array, _: usize, _: bool, dtype: DType) -> Result<Array> {
        Ok(empty(x.layout.shape.clone(), dtype))
    }

    fn conv2d(&self, input: &Array, weight: &Array, _: Option<&Array>, _: usize, window: &Window) -> Result<Array> {
        let shape = Shape::from([input.layout.shape[0], weight.layout.shape[0], window.out[0], window.out[1]]);
        Ok(empty(shape, input.dtype))
    }

    fn conv2d_backward(
        &self,
        input: &Array,
        weight: &Array,
        _: &Array,
        _: usize,
        _: &Window,
        which: [bool; 2],
    ) -> Result<Option<[Option<Array>; 2]>> {
        let like = |x: &Array| empty(x.layout.shape.clone(), x.dtype);
        Ok(Some([which[0].then(|| like(input)), which[1].then(|| like(weight))]))
    }

    fn max_pool2d(&self, input: &Array, window: &Window) -> Result<(Array, Array)> {
        let shape = Shape::from([input.layout.shape[0], window.out[0], window.out[1]]);
        Ok((empty(shape.clone(), input.dtype), empty(shape, DType::Int64)))
    }
}
