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

use std::cell::Cell;
use std::sync::OnceLock;

use crate::backend::{Array, Backend, Binary, Buffer, Device, LstmSaved, Reduce, Scan, Storage, Unary, Window};
use crate::error::{Error, Result};
use crate::types::{DType, Scalar, Shape};

/// The meta backend.
pub struct Meta;

/// The one meta backend; [`Device::META`] points here.
pub static META: Meta = Meta;

#[linkme::distributed_slice(crate::backend::BACKENDS)]
static REGISTERED: &'static dyn Backend = &META;

thread_local! {
    /// The bytes the meta tensors alive on this thread would hold, and the most they held
    /// since [`reset_peak_bytes`].
    static BYTES: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// What stands for a meta tensor's memory: its size, counted while it lives, and, for a fake
/// tensor, the device it stands for (set once, by the fake tensor mode).
struct Phantom {
    bytes: usize,
    stands_for: OnceLock<Device>,
}

impl Phantom {
    fn new(bytes: usize) -> Phantom {
        BYTES.with(|b| {
            let (live, peak) = b.get();
            let live = live.saturating_add(bytes);
            b.set((live, peak.max(live)));
        });
        Phantom { bytes, stands_for: OnceLock::new() }
    }
}

impl Drop for Phantom {
    fn drop(&mut self) {
        // `try_with`: a tensor kept in a thread-local may be dropped after the counter.
        let _ = BYTES.try_with(|b| {
            let (live, peak) = b.get();
            b.set((live.saturating_sub(self.bytes), peak));
        });
    }
}

/// The device the fake tensor `x` stands for; `None` for any other array (a plain meta tensor
/// stands for nothing but itself).
pub fn stands_for(x: &Array) -> Option<Device> {
    x.storage.memory::<Phantom>()?.stands_for.get().copied()
}

/// Makes the meta array `x` stand for `device`, unless it already stands for one (a view of a
/// fake tensor stands for its base's device).
pub fn set_stands_for(x: &Array, device: Device) {
    if let Some(p) = x.storage.memory::<Phantom>()
        && !device.is_meta()
    {
        let _ = p.stands_for.set(device);
    }
}

/// The most bytes the meta tensors alive on this thread held at once since the last
/// [`reset_peak_bytes`].
pub fn peak_bytes() -> usize {
    BYTES.with(|b| b.get().1)
}

/// Starts measuring the peak again from the bytes alive now.
pub fn reset_peak_bytes() {
    BYTES.with(|b| b.set((b.get().0, b.get().0)));
}

/// A result of `shape` and `dtype` on the meta device: contiguous, with no memory behind it
/// (only its size, counted).
fn empty(shape: Shape, dtype: DType) -> Array {
    let bytes = shape.checked_numel().unwrap_or(usize::MAX).saturating_mul(dtype.itemsize());
    Array::contiguous(Storage::new(Device::META, Phantom::new(bytes)), shape, dtype)
}

/// A meta array with `x`'s layout and dtype, over memory as large as `x`'s layout reaches (a
/// fake tensor standing for `x`).
pub fn like(x: &Array) -> Array {
    let reach = x.layout.span().map_or(0, |(_, last)| last.saturating_add(1));
    let storage = Storage::new(Device::META, Phantom::new(reach.saturating_mul(x.dtype.itemsize())));
    Array { storage, layout: x.layout.clone(), dtype: x.dtype }
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

    fn lstm_layer(&self, gates: &Array, h0: &Array, _: &Array, _: &Array, _: bool) -> Result<[Array; 3]> {
        let (s, h) = (&gates.layout.shape, h0.layout.shape.last().copied().unwrap_or(0));
        let at = |i: usize| s.get(i).copied().unwrap_or(0);
        let states = Shape::from([at(0), at(1), h]);
        Ok([empty(states.clone(), gates.dtype), empty(states, gates.dtype), empty(s.clone(), gates.dtype)])
    }

    fn lstm_layer_backward(&self, _: &Array, _: &Array, saved: &LstmSaved<'_>) -> Result<[Array; 3]> {
        let like = |x: &Array| empty(x.layout.shape.clone(), x.dtype);
        Ok([like(saved.workspace), like(saved.c0), like(saved.c0)])
    }

    fn max_pool2d(&self, input: &Array, window: &Window) -> Result<(Array, Array)> {
        let shape = Shape::from([input.layout.shape[0], window.out[0], window.out[1]]);
        Ok((empty(shape.clone(), input.dtype), empty(shape, DType::Int64)))
    }
}
