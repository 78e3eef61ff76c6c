//! Layer 5's contract: the few kernel families every backend implements, the memory tensors
//! live in, and the table of backends.
//!
//! Operations (layer 2) check their arguments and work out shapes and dtypes; their primitives
//! (layer 3) call an operator of the dispatch layer (layer 4, `torchfn::dispatch`), which runs
//! one of the families below on the [`Backend`] of the operands' [`Device`]. A backend sees
//! [`Array`]s only (a storage, a layout and a dtype), never tensors, classes or hooks, as
//! ATen's kernels do. The CPU, wgpu and meta backends register themselves in [`BACKENDS`], a
//! [`linkme`] distributed slice, and a separate crate can add a backend the same way:
//!
//! ```text
//! #[linkme::distributed_slice(torchfn::backend::BACKENDS)]
//! static MINE: &dyn torchfn::backend::Backend = &MyBackend; // MyBackend: impl Backend
//! ```
//!
//! (`linkme` works on Linux, macOS, Windows, iOS, Android and the BSDs; not on wasm.)
//!
//! Every family takes its inputs as arrays of any layout (strided, expanded, offset) and
//! returns a fresh contiguous array, except where it says otherwise. Inputs are read as the
//! `dtype` the operation computes in (converted on the fly); results are of that dtype unless
//! the family says otherwise (comparisons give bool, `argmax` the device's index dtype).
//!
//! A backend that cannot hold a dtype (64-bit types on most GPUs) says so through
//! [`Backend::supports`]; operations then refuse such tensors with an error, or compute
//! integer results PyTorch gives as int64 (indices, integer sums) in int32 (see
//! [`Device::index_dtype`]).

mod array;
mod device;
pub mod host;
mod kernel;
mod storage;

pub use array::Array;
pub use device::Device;
pub use kernel::{
    AdamArrays, AdamHyperparameters, AdamStep, Binary, LstmSaved, Reduce, Scan, SgdArrays, SgdHyperparameters, SgdStep,
    Unary, Window,
};
pub use storage::{Buffer, Storage, live_storages};

pub use crate::types::{Layout, Strides};

use crate::error::Result;
use crate::types::{DType, Scalar, Shape};

/// Every backend linked into the program: torchfn's CPU and wgpu backends, and any a
/// dependency adds with `#[linkme::distributed_slice(BACKENDS)]`.
#[linkme::distributed_slice]
pub static BACKENDS: [&'static dyn Backend];

/// The backend registered under `name` (`"cpu"`, `"wgpu"`).
pub fn backend(name: &str) -> Option<&'static dyn Backend> {
    BACKENDS.iter().copied().find(|b| b.name() == name)
}

/// A kind of device and the kernels that run on it.
///
/// Each method is one kernel family. The operation calling it has checked every argument
/// (shapes broadcast, dims in range, indices in bounds, dtypes supported by this backend), so
/// a backend only fails when its device does (memory exhausted, a device lost, a shader that
/// does not compile): those errors must come back as [`Error`](torchfn_types::Error)s, never panics.
///
/// Arrays passed in are on this backend's device, except that a one-element host array may
/// stand for a scalar operand of `binary` and `select` (a Python number, a zero-dimensional
/// CPU tensor), as PyTorch allows with CUDA tensors.
pub trait Backend: Send + Sync + 'static {
    /// The device type's name, as in `Device`'s text (`"cpu"`, `"wgpu"`).
    fn name(&self) -> &'static str;

    /// For the memory of wrapper subclass tensors (which has no data), the backend of the
    /// devices they stand for; `None` for every backend with data.
    fn stands_for(&self) -> Option<&'static dyn Backend> {
        None
    }

    /// How many devices of this kind the machine has (adapters, for wgpu).
    fn device_count(&self) -> usize;

    /// The device used when none is named: its index.
    fn default_index(&self) -> Result<usize>;

    /// A description of device `index` for people (`"NVIDIA H100 (Vulkan)"`).
    fn describe(&self, index: usize) -> String;

    /// Whether tensors of `dtype` can live on this backend's devices.
    fn supports(&self, dtype: DType) -> bool;

    /// Waits until every kernel launched on device `index` has finished.
    fn synchronize(&self, index: usize) -> Result<()>;

    /// Host elements (row-major, of `shape`) copied to `device`.
    fn upload(&self, device: Device, data: Buffer, shape: Shape) -> Result<Array>;

    /// The elements of `x`, in row-major order of its layout, copied to host memory.
    fn download(&self, x: &Array) -> Result<Buffer>;

    /// A tensor of `shape` on `device` with every element `value`, converted to `dtype` as
    /// `Tensor.to` converts.
    fn fill(&self, device: Device, shape: &Shape, value: Scalar, dtype: DType) -> Result<Array>;

    /// A contiguous copy of `x` converted to `dtype` (floats truncate toward zero into integers,
    /// saturating; anything non-zero is `true`).
    fn copy(&self, x: &Array, dtype: DType) -> Result<Array>;

    /// Writes the elements of `src` (of `dst`'s shape) into `dst`'s memory through `dst`'s
    /// layout, converted to `dst`'s dtype. `src` is read completely first, so the two may
    /// share storage. `dst` addresses each element once (the operation checked it).
    fn assign(&self, dst: &Array, src: &Array) -> Result<()>;

    /// `op` on each element of `x`, computed in `dtype` (which `op` accepts). With `out` (an
    /// in-place operation's `self`, or `out=`), the result may be written straight into `out`
    /// when it is contiguous, of the result's shape and dtype, and does not share storage with
    /// `x` other than being `x` itself; `out` is then returned. Otherwise a fresh array.
    fn unary(&self, x: &Array, op: Unary, dtype: DType, out: Option<&Array>) -> Result<Array>;

    /// `op` on the elements of `a` and `b`, broadcast to `shape`, computed in `dtype`; `out` as
    /// for [`unary`](Backend::unary), with `a` in the role of `x` (`b` must not share `out`'s
    /// storage).
    fn binary(
        &self,
        a: &Array,
        b: &Array,
        shape: &Shape,
        op: Binary,
        dtype: DType,
        out: Option<&Array>,
    ) -> Result<Array>;

    /// `a` where `condition` (bool) is true, `b` elsewhere, all three broadcast to `shape`, in
    /// `dtype`.
    fn select(&self, condition: &Array, a: &Array, b: &Array, shape: &Shape, dtype: DType) -> Result<Array>;

    /// `op` over the dimensions `dims` (sorted, distinct) of `x`, read as `dtype`: the result
    /// has `x`'s other dimensions, in order. An empty lane gives the operation's identity
    /// (the operation refuses empty lanes for those that have none).
    fn reduce(&self, x: &Array, dims: &[usize], op: Reduce, dtype: DType) -> Result<Array>;

    /// The running `op` along `dim` of `x`, in `dtype`; the result has `x`'s shape.
    fn scan(&self, x: &Array, dim: usize, op: Scan, dtype: DType) -> Result<Array>;

    /// `a @ b` in `dtype` for `a` of shape `[..., n, k]` and `b` of shape `[..., k, m]`, both
    /// with `batch.len() + 2` dimensions whose leading sizes broadcast to `batch`; the result
    /// is `[*batch, n, m]`.
    fn matmul(&self, a: &Array, b: &Array, batch: &Shape, dtype: DType) -> Result<Array>;

    /// The positions `index` (an integer vector, each in range) of dimension `dim` of `x`.
    fn index_select(&self, x: &Array, dim: usize, index: &Array) -> Result<Array>;

    /// `out[i] = x[i with coordinate dim replaced by index[i]]` for every position `i` of
    /// `index` (integers in range, as many dimensions as `x`, no size larger than `x`'s
    /// except along `dim`); the result has `index`'s shape and `x`'s dtype.
    fn gather(&self, x: &Array, dim: usize, index: &Array) -> Result<Array>;

    /// A new contiguous array of `shape` (in `src`'s dtype), zero everywhere except that for
    /// every position `i` of `index`, `out[i with its dim-th coordinate replaced by index[i]]
    /// += src[i]` (PyTorch's `torch.zeros(shape).scatter_add_(dim, index, src)`, the reverse
    /// of [`gather`](Backend::gather)). `index` (an integer array, int64 or int32, any layout
    /// including stride-0 expanded dims, every value already checked to be in
    /// `0..shape[dim]`) and `src` have the same shape, with as many dimensions as `shape` and
    /// no size larger than `shape`'s except along `dim`. Repeated indices accumulate (bools
    /// as logical or). Contributions to one output element are added in increasing order of
    /// their coordinate along `dim` (so results are deterministic and the two backends agree).
    fn scatter_add(&self, shape: &Shape, dim: usize, index: &Array, src: &Array) -> Result<Array>;

    /// `pieces` (read as `dtype`) joined along `dim` into an array of `shape`: each piece has
    /// `shape`'s sizes except along `dim`, where the sizes add up.
    fn concat(&self, pieces: &[&Array], dim: usize, shape: &Shape, dtype: DType) -> Result<Array>;

    /// The softmax (`log` false) or log-softmax of `x` along `dim`, in the float `dtype`,
    /// stable (each lane's maximum subtracted first); a lane holding NaN or `+inf` is NaN.
    fn softmax(&self, x: &Array, dim: usize, log: bool, dtype: DType) -> Result<Array>;

    /// The 2-D cross-correlation of `input` (`[n, c, h, w]`) with `weight`
    /// (`[o, c / groups, kh, kw]`) plus `bias` (`[o]`), in the input's float dtype: the
    /// `[n, o, out_h, out_w]` result of `window`.
    fn conv2d(
        &self,
        input: &Array,
        weight: &Array,
        bias: Option<&Array>,
        groups: usize,
        window: &Window,
    ) -> Result<Array>;

    /// The gradients of [`conv2d`](Backend::conv2d)'s input and weight (each where `which`
    /// asks for it) from the gradient `grad` of its result, without history. `None` leaves
    /// them to the composite formulation every backend has (a transposed convolution, and a
    /// convolution of the input by `grad`).
    fn conv2d_backward(
        &self,
        input: &Array,
        weight: &Array,
        grad: &Array,
        groups: usize,
        window: &Window,
        which: [bool; 2],
    ) -> Result<Option<[Option<Array>; 2]>> {
        let _ = (input, weight, grad, groups, window, which);
        Ok(None)
    }

    /// One Adam or AdamW step of each parameter, in place (PyTorch's `_fused_adam_` and
    /// `_fused_adamw_` kernels), every parameter's arrays checked before any is written;
    /// `false` when this backend has no fused kernel.
    fn fused_adam(&self, params: &[AdamArrays<'_>], step: &AdamStep) -> Result<bool> {
        let _ = (params, step);
        Ok(false)
    }

    /// One SGD step of each parameter, in place (PyTorch's `_fused_sgd_` kernel), every
    /// parameter's arrays checked before any is written; `false` when this backend has no
    /// fused kernel.
    fn fused_sgd(&self, params: &[SgdArrays<'_>], step: &SgdStep) -> Result<bool> {
        let _ = (params, step);
        Ok(false)
    }

    /// One LSTM layer's recurrence in one direction, fused: from `gates` (`[T, N, 4H]`, the
    /// input's projection with both biases added, gates in PyTorch's order `i, f, g, o`), the
    /// initial states `h0` and `c0` (`[N, H]`) and `w_hh` (`[4H, H]`), each step adds
    /// `h @ w_hhᵀ` to its gates, then `c' = σ(f) c + σ(i) tanh(g)` and `h' = σ(o) tanh(c')`,
    /// from the first step to the last (from the last to the first when `reverse`). Returns the
    /// hidden states `[T, N, H]` and the cell states `[T, N, H]` (in time order), and the gates'
    /// activations `[T, N, 4H]` that [`lstm_layer_backward`](Backend::lstm_layer_backward)
    /// reads. A backend without it refuses; `torchfn.lstm` composes the layer there.
    fn lstm_layer(&self, gates: &Array, h0: &Array, c0: &Array, w_hh: &Array, reverse: bool) -> Result<[Array; 3]> {
        let _ = (gates, h0, c0, w_hh, reverse);
        Err(crate::error::Error::runtime_error(format!(
            "lstm_layer: the {} backend has no fused LSTM kernel",
            self.name()
        )))
    }

    /// The gradients of [`lstm_layer`](Backend::lstm_layer)'s `gates`, `h0` and `c0` from those
    /// of its hidden and cell states (`grad_hs`, `grad_cs`: `[T, N, H]`), without history. The
    /// gradient of `w_hh` is one product of the gates' gradient with the hidden states, which
    /// the caller makes.
    fn lstm_layer_backward(&self, grad_hs: &Array, grad_cs: &Array, saved: &LstmSaved<'_>) -> Result<[Array; 3]> {
        let _ = (grad_hs, grad_cs, saved);
        Err(crate::error::Error::runtime_error(format!(
            "lstm_layer_backward: the {} backend has no fused LSTM kernel",
            self.name()
        )))
    }

    /// Max pooling of `input` (`[planes, h, w]`, a float dtype): the largest element of each
    /// window (NaN wins) and its position in its plane (`row * w + column`, in the device's
    /// index dtype), both `[planes, out_h, out_w]`.
    fn max_pool2d(&self, input: &Array, window: &Window) -> Result<(Array, Array)>;
}
