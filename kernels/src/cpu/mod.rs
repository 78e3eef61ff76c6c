//! The CPU backend: the kernel families of [`Backend`] on host memory, with ndarray for
//! layouts and rayon for large loops. Registered in [`BACKENDS`](crate::backend::BACKENDS)
//! like any other backend.

mod binary;
mod elementwise;
mod indexing;
mod map;
mod number;
mod optim;
pub mod pool;
mod random;
mod recurrent;
mod reduce;
#[cfg(target_arch = "x86_64")]
mod sgemm;
mod softmax;
mod strided;
mod unary;
mod vector_math;
mod window;
mod write;

use ndarray::{ArrayD, ArrayViewD, Dimension, IxDyn, ShapeBuilder};
use smallvec::SmallVec;

use crate::backend::{
    AdamArrays, AdamStep, Array, Backend, Binary, Buffer, Device, LstmSaved, Reduce, Scan, SgdArrays, SgdStep, Storage,
    Unary, Window,
};
use crate::error::{Error, Result};
use crate::types::{DType, Element, Layout, Scalar, Shape, with_dtype};

pub use elementwise::Float;
pub use number::Number;
pub use random::{Distribution, sample};

/// The vector instructions the CPU kernels are compiled for, widest last (see [`instructions`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Instructions {
    /// Baseline x86-64 (SSE2, 128-bit vectors), or a processor of another architecture.
    Baseline,
    /// AVX2 and FMA: 256-bit vectors and fused multiply-adds.
    Avx2,
    /// AVX-512 (F, VL, BW and DQ) besides AVX2 and FMA: 512-bit vectors.
    Avx512,
}

/// The environment variable that caps [`instructions`]: `baseline`, `avx2` or `avx512`.
pub const INSTRUCTIONS_VARIABLE: &str = "TORCHFN_CPU";

/// The widest vector instructions the CPU kernels use on this processor: detected once, at the
/// first call, and capped by the environment variable [`INSTRUCTIONS_VARIABLE`] when it is set
/// (`TORCHFN_CPU=avx2` runs the AVX2 path on an AVX-512 processor, to test or time it; a value
/// wider than the processor has, or one it does not know, leaves the detected set, with a
/// warning on standard error for an unknown one).
///
/// ```
/// use torchfn_kernels::cpu::{Instructions, instructions};
/// if cfg!(target_arch = "x86_64") {
///     assert!(instructions() >= Instructions::Baseline);
/// }
/// ```
pub fn instructions() -> Instructions {
    static CHOSEN: std::sync::OnceLock<Instructions> = std::sync::OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let detected = detect_instructions();
        let cap = match std::env::var(INSTRUCTIONS_VARIABLE).as_deref() {
            Err(_) => detected,
            Ok("baseline") => Instructions::Baseline,
            Ok("avx2") => Instructions::Avx2,
            Ok("avx512") => Instructions::Avx512,
            Ok(other) => {
                eprintln!(
                    "torchfn: {INSTRUCTIONS_VARIABLE}={other:?} is not one of baseline, avx2, avx512; using {detected:?}"
                );
                detected
            }
        };
        detected.min(cap)
    })
}

/// What the processor has, of [`Instructions`].
fn detect_instructions() -> Instructions {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") && has!("fma") {
            let avx512 = has!("avx512f") && has!("avx512vl") && has!("avx512bw") && has!("avx512dq");
            return if avx512 { Instructions::Avx512 } else { Instructions::Avx2 };
        }
    }
    Instructions::Baseline
}

/// The CPU backend.
pub struct Cpu;

/// The one CPU backend; [`Device::CPU`] points here.
pub static CPU: Cpu = Cpu;

#[linkme::distributed_slice(crate::backend::BACKENDS)]
static REGISTERED: &'static dyn Backend = &CPU;

/// The error of a CPU kernel handed memory that is not on the host.
#[cold]
fn not_host(x: &Array) -> Error {
    Error::runtime_error(format!("the CPU backend was given a tensor on {}: move it to the CPU first", x.device()))
}

/// Checks that every array is in host memory.
fn host<'a>(arrays: impl IntoIterator<Item = &'a Array>) -> Result<()> {
    arrays.into_iter().find(|x| !x.device().is_cpu()).map_or(Ok(()), |x| Err(not_host(x)))
}

impl Backend for Cpu {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn device_count(&self) -> usize {
        1
    }

    fn default_index(&self) -> Result<usize> {
        Ok(0)
    }

    fn describe(&self, _: usize) -> String {
        format!("CPU ({} threads)", rayon::current_num_threads())
    }

    fn supports(&self, _: DType) -> bool {
        true
    }

    fn synchronize(&self, _: usize) -> Result<()> {
        Ok(())
    }

    fn upload(&self, _: Device, data: Buffer, shape: Shape) -> Result<Array> {
        let dtype = data.dtype();
        Ok(Array::contiguous(Storage::host(data), shape, dtype))
    }

    fn download(&self, x: &Array) -> Result<Buffer> {
        host([x])?;
        with_dtype!(x.dtype, T => Ok(Buffer::from_vec(elements::<T>("to", x)?)))
    }

    fn fill(&self, _: Device, shape: &Shape, value: Scalar, dtype: DType) -> Result<Array> {
        let n = shape.checked_numel().ok_or_else(|| too_large("full", shape))?;
        with_dtype!(dtype, T => {
            let mut data = alloc("full", n)?;
            data.resize(n, cast::<f64, T>(value.to_f64()));
            Ok(array(data, shape.clone()))
        })
    }

    fn copy(&self, x: &Array, dtype: DType) -> Result<Array> {
        host([x])?;
        with_dtype!(dtype, T => Ok(array(elements::<T>("copy", x)?, x.layout.shape.clone())))
    }

    fn assign(&self, dst: &Array, src: &Array) -> Result<()> {
        host([dst, src])?;
        write::assign(dst, src)
    }

    fn unary(&self, x: &Array, op: Unary, dtype: DType, out: Option<&Array>) -> Result<Array> {
        host([x].into_iter().chain(out))?;
        unary::unary(x, op, dtype, out)
    }

    fn binary(
        &self,
        a: &Array,
        b: &Array,
        shape: &Shape,
        op: Binary,
        dtype: DType,
        out: Option<&Array>,
    ) -> Result<Array> {
        host([a, b].into_iter().chain(out))?;
        binary::binary(a, b, shape, op, dtype, out)
    }

    fn select(&self, condition: &Array, a: &Array, b: &Array, shape: &Shape, dtype: DType) -> Result<Array> {
        host([condition, a, b])?;
        binary::select(condition, a, b, shape, dtype)
    }

    fn reduce(&self, x: &Array, dims: &[usize], op: Reduce, dtype: DType) -> Result<Array> {
        host([x])?;
        in_float32(x, dtype, |x, dtype| reduce::reduce(x, dims, op, dtype))
    }

    fn scan(&self, x: &Array, dim: usize, op: Scan, dtype: DType) -> Result<Array> {
        host([x])?;
        in_float32(x, dtype, |x, dtype| reduce::scan(x, dim, op, dtype))
    }

    fn matmul(&self, a: &Array, b: &Array, batch: &Shape, dtype: DType) -> Result<Array> {
        host([a, b])?;
        // Half precision on float32 copies, accumulated in float32 and rounded once; bfloat16's
        // large products on the AVX512_BF16 kernel where the processor has it.
        match dtype {
            DType::BFloat16 => narrow(matmul::<f32>(&widen(a)?, &widen(b)?, batch, bf16_matmul)?, dtype),
            DType::Float16 => narrow(matmul::<f32>(&widen(a)?, &widen(b)?, batch, f32::matmul)?, dtype),
            _ => with_dtype!(
                dtype,
                T => matmul::<T>(a, b, batch, T::matmul),
                bool => Err(internal("matmul of bools")),
                reduced => Err(internal("half-precision matmul widens first"))
            ),
        }
    }

    fn index_select(&self, x: &Array, dim: usize, index: &Array) -> Result<Array> {
        host([x, index])?;
        indexing::index_select(x, dim, index)
    }

    fn gather(&self, x: &Array, dim: usize, index: &Array) -> Result<Array> {
        host([x, index])?;
        indexing::gather(x, dim, index)
    }

    fn scatter_add(&self, shape: &Shape, dim: usize, index: &Array, src: &Array) -> Result<Array> {
        host([index, src])?;
        in_float32(src, src.dtype, |src, _| indexing::scatter_add(shape, dim, index, src))
    }

    fn concat(&self, pieces: &[&Array], dim: usize, shape: &Shape, dtype: DType) -> Result<Array> {
        host(pieces.iter().copied())?;
        with_dtype!(dtype, T => indexing::concat::<T>(pieces, dim, shape))
    }

    fn softmax(&self, x: &Array, dim: usize, log: bool, dtype: DType) -> Result<Array> {
        host([x])?;
        in_float32(x, dtype, |x, dtype| softmax::softmax(x, dim, log, dtype))
    }

    fn conv2d(
        &self,
        input: &Array,
        weight: &Array,
        bias: Option<&Array>,
        groups: usize,
        win: &Window,
    ) -> Result<Array> {
        host([input, weight].into_iter().chain(bias))?;
        let dtype = input.dtype;
        if dtype.is_reduced_float() {
            let bias = bias.map(widen).transpose()?;
            let y = window::conv2d::<f32>(&widen(input)?, &widen(weight)?, bias.as_ref(), groups, win)?;
            return narrow(y, dtype);
        }
        with_dtype!(
            dtype,
            T => window::conv2d::<T>(input, weight, bias, groups, win),
            bool => Err(undefined("conv2d", dtype)),
            reduced => Err(internal("half-precision conv2d widens first"))
        )
    }

    fn fused_adam(&self, params: &[AdamArrays<'_>], step: &AdamStep) -> Result<bool> {
        optim::fused_adam(params, step)?;
        Ok(true)
    }

    fn fused_sgd(&self, params: &[SgdArrays<'_>], step: &SgdStep) -> Result<bool> {
        optim::fused_sgd(params, step)?;
        Ok(true)
    }

    fn conv2d_backward(
        &self,
        input: &Array,
        weight: &Array,
        grad: &Array,
        groups: usize,
        win: &Window,
        which: [bool; 2],
    ) -> Result<Option<[Option<Array>; 2]>> {
        host([input, weight, grad])?;
        let dtype = input.dtype;
        if dtype.is_reduced_float() {
            let (input, weight, grad) = (widen(input)?, widen(weight)?, widen(grad)?);
            let grads = window::conv2d_backward::<f32>(&input, &weight, &grad, groups, win, which)?;
            let [gi, gw] = grads.map(|g| g.map(|g| narrow(g, dtype)).transpose());
            return Ok(Some([gi?, gw?]));
        }
        // Integers too: a transposed convolution is the input gradient of one.
        with_dtype!(
            dtype,
            T => Ok(Some(window::conv2d_backward::<T>(input, weight, grad, groups, win, which)?)),
            bool => Err(undefined("conv2d_backward", dtype)),
            reduced => Err(internal("half-precision conv2d_backward widens first"))
        )
    }

    fn lstm_layer(&self, gates: &Array, h0: &Array, c0: &Array, w_hh: &Array, reverse: bool) -> Result<[Array; 3]> {
        recurrent::lstm_layer(gates, h0, c0, w_hh, reverse)
    }

    fn lstm_layer_backward(&self, grad_hs: &Array, grad_cs: &Array, saved: &LstmSaved<'_>) -> Result<[Array; 3]> {
        recurrent::lstm_layer_backward(grad_hs, grad_cs, saved)
    }

    fn max_pool2d(&self, input: &Array, win: &Window) -> Result<(Array, Array)> {
        host([input])?;
        // Comparisons only: every dtype pools in its own type.
        with_dtype!(input.dtype, T => window::max_pool2d::<T>(input, win))
    }
}

/// `x` in float32 when it is float16 or bfloat16, else `x` itself: half precision computes in
/// float32 (PyTorch's "opmath" type), so a kernel of several steps runs on widened inputs and
/// its result is rounded once by [`narrow`].
fn widen(x: &Array) -> Result<Array> {
    if x.dtype.is_reduced_float() { CPU.copy(x, DType::Float32) } else { Ok(x.clone()) }
}

/// `f` of `x` in `dtype`: for float16 and bfloat16, on a float32 copy in float32, its result
/// rounded back once; any other dtype as it is.
fn in_float32(x: &Array, dtype: DType, f: impl FnOnce(&Array, DType) -> Result<Array>) -> Result<Array> {
    if dtype.is_reduced_float() { narrow(f(&widen(x)?, DType::Float32)?, dtype) } else { f(x, dtype) }
}

/// A float32 result of a kernel run on [`widen`]ed inputs, rounded once to the half-precision
/// `dtype` it stands for; results of other dtypes (indices, bools) as they are.
fn narrow(y: Array, dtype: DType) -> Result<Array> {
    if y.dtype == DType::Float32 && dtype.is_reduced_float() { CPU.copy(&y, dtype) } else { Ok(y) }
}

/// A fresh contiguous host array holding `data`, of `shape`.
pub fn array<T: Element>(data: Vec<T>, shape: Shape) -> Array {
    Array::contiguous(Storage::host(Buffer::from_vec(data)), shape, T::DTYPE)
}

/// Runs `f` on an ndarray view of the host array `x`, whose dtype must be `T`. Every layout
/// torchfn makes reads correctly, expanded (stride-0) and permuted ones included; only
/// overlapping layouts that ndarray refuses are gathered into a copy first, which fails when
/// memory runs out.
pub fn read<T: Element, R>(x: &Array, f: impl FnOnce(ArrayViewD<'_, T>) -> R) -> Result<R> {
    let buffer = x.storage.read().ok_or_else(|| not_host(x))?;
    let data = buffer.as_slice::<T>().ok_or_else(|| internal("a tensor's dtype is not its storage's"))?;
    let layout = &x.layout;
    // An empty view is given in standard layout: ndarray's `mapv` and `to_owned` assume
    // (in debug builds) that an empty view with other strides could index its slice.
    if layout.numel() == 0 {
        return Ok(f(gathered(data, layout)?.view()));
    }
    // A stride-0 (expanded) dimension of two or more elements makes the view overlap, which
    // ndarray 0.16.0 refuses (0.16.1 accepts it for read-only views): such a dimension is viewed
    // with size one, then broadcast back. The dimensions left address distinct elements, as in
    // every layout torchfn makes.
    let expanded = |(&n, &s): (&usize, &usize)| s == 0 && n > 1;
    let collapsed: SmallVec<[usize; 6]> =
        layout.shape.iter().zip(&layout.strides).map(|d| if expanded(d) { 1 } else { *d.0 }).collect();
    let any_expanded = collapsed.as_slice() != &layout.shape[..];
    let start = &data[layout.offset.min(data.len())..];
    match ArrayViewD::from_shape(IxDyn(&collapsed).strides(IxDyn(&layout.strides)), start) {
        Ok(view) if !any_expanded => Ok(f(view)),
        Ok(view) => match view.broadcast(IxDyn(&layout.shape)) {
            Some(view) => Ok(f(view)),
            None => Err(internal("an expanded layout does not broadcast")),
        },
        // Other overlapping strides (refused by ndarray 0.16.0), or an empty tensor whose
        // strides ndarray cannot offset by: the elements are gathered one by one.
        Err(_) => Ok(f(gathered(data, layout)?.view())),
    }
}

/// The elements `layout` addresses in `data`, copied into a standard-layout array.
fn gathered<T: Element>(data: &[T], layout: &Layout) -> Result<ArrayD<T>> {
    let shape = IxDyn(&layout.shape);
    let n = layout.shape.checked_numel().ok_or_else(|| too_large("read", &layout.shape))?;
    let mut elements = alloc("read", n)?;
    if n > 0 {
        for index in ndarray::indices(shape.clone()) {
            let position = index.slice().iter().zip(&layout.strides).fold(layout.offset, |p, (&i, &s)| p + i * s);
            elements.push(*data.get(position).ok_or_else(|| internal("a layout leaves its storage"))?);
        }
    }
    ArrayD::from_shape_vec(shape, elements).map_err(|_| internal("one element per position"))
}

/// Runs `f` on a view of `x` as `T`, converting (into a temporary) when its dtype differs.
pub fn read_as<T: Element, R>(x: &Array, f: impl FnOnce(ArrayViewD<'_, T>) -> R) -> Result<R> {
    if x.dtype == T::DTYPE {
        return read(x, f);
    }
    let converted = array(elements::<T>("read", x)?, x.layout.shape.clone());
    read(&converted, f)
}

/// The elements of `x` converted to `T`, in row-major order, in a fresh vector.
pub fn elements<T: Element>(func: &str, x: &Array) -> Result<Vec<T>> {
    with_dtype!(x.dtype, S => map::with_input(x, |data: &[S], layout| map::gather::<S, T>(func, data, layout))?)
}

/// Runs `f` on the elements of `x` as `T`, in row-major order: in place when `x` is
/// contiguous and of dtype `T`, else through a converted copy.
pub fn with_elements<T: Element, R>(x: &Array, f: impl FnOnce(&[T]) -> R) -> Result<R> {
    with_all_elements([x], |[data]| f(data))
}

/// [`with_elements`] of several arrays at once: `f` on the elements of each, as `T`.
pub fn with_all_elements<T: Element, R, const N: usize>(xs: [&Array; N], f: impl FnOnce([&[T]; N]) -> R) -> Result<R> {
    /// One array's elements: its storage, read-locked, where they lie there in order, else a
    /// converted copy.
    enum Held<'a, T> {
        Locked(parking_lot::RwLockReadGuard<'a, Buffer>, std::ops::Range<usize>),
        Copied(Vec<T>),
    }
    fn hold<T: Element>(x: &Array) -> Result<Held<'_, T>> {
        if x.dtype == T::DTYPE && x.layout.is_contiguous() {
            let buffer = x.storage.read().ok_or_else(|| not_host(x))?;
            let range = x.layout.offset..x.layout.offset + x.layout.numel();
            if buffer.as_slice::<T>().is_some_and(|d| d.get(range.clone()).is_some()) {
                return Ok(Held::Locked(buffer, range));
            }
        }
        Ok(Held::Copied(elements::<T>("read", x)?))
    }
    let held: Vec<Held<'_, T>> = xs.into_iter().map(hold).collect::<Result<_>>()?;
    let mut slices = [&[][..]; N];
    for (slice, held) in slices.iter_mut().zip(&held) {
        *slice = match held {
            Held::Locked(buffer, range) => {
                &buffer.as_slice::<T>().ok_or_else(|| internal("a checked buffer"))?[range.clone()]
            }
            Held::Copied(data) => data,
        };
    }
    Ok(f(slices))
}

/// An empty vector with room for `n` elements, or an error naming `func` when memory runs out
/// (a huge expanded tensor copied, say): never an abort.
pub fn alloc<T>(func: &str, n: usize) -> Result<Vec<T>> {
    let mut data = Vec::new();
    reserve_exact(&mut data, n).map_err(|_| {
        Error::runtime_error(format!("{func}(): not enough memory: you tried to allocate {n} elements"))
    })?;
    Ok(data)
}

/// The refusal of [`reserve_exact`]: the elements asked for cannot be had.
#[derive(Debug)]
pub struct OutOfMemory;

/// Room for exactly `n` more elements in `data` (`Vec::try_reserve_exact`), refused beforehand
/// when the vector would outgrow the machine's memory and swap together. Every buffer torchfn
/// allocates is written at once (zeroed, filled or computed), so such an allocation could never
/// complete: on Linux with `vm.overcommit_memory=1` the system grants any size and then ends
/// the process when the pages are touched, where this gives an error instead.
pub fn reserve_exact<T>(data: &mut Vec<T>, n: usize) -> std::result::Result<(), OutOfMemory> {
    fits(data, n)?;
    data.try_reserve_exact(n).map_err(|_| OutOfMemory)
}

/// [`reserve_exact`] for a vector that grows a piece at a time (`Vec::try_reserve`, which
/// keeps the growth amortised).
pub fn reserve<T>(data: &mut Vec<T>, n: usize) -> std::result::Result<(), OutOfMemory> {
    fits(data, n)?;
    data.try_reserve(n).map_err(|_| OutOfMemory)
}

/// Refuses `n` more elements in `data` when the vector would outgrow the machine's memory and
/// swap together.
fn fits<T>(data: &[T], n: usize) -> std::result::Result<(), OutOfMemory> {
    let bytes = data.len().saturating_add(n).saturating_mul(std::mem::size_of::<T>());
    if bytes > host_memory() { Err(OutOfMemory) } else { Ok(()) }
}

/// The machine's memory and swap together in bytes (`MemTotal` plus `SwapTotal` of
/// `/proc/meminfo`), read once; unlimited where that file is not there (other systems).
fn host_memory() -> usize {
    static BYTES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| {
        let Ok(info) = std::fs::read_to_string("/proc/meminfo") else { return usize::MAX };
        let kib = |key: &str| {
            let line = info.lines().find_map(|l| l.strip_prefix(key))?;
            line.trim_start_matches(':').split_whitespace().next()?.parse::<usize>().ok()
        };
        match (kib("MemTotal"), kib("SwapTotal")) {
            (Some(memory), swap) => memory.saturating_add(swap.unwrap_or(0)).saturating_mul(1024),
            (None, _) => usize::MAX,
        }
    })
}

/// The error for a result with more elements than a `usize` counts.
fn too_large(func: &str, shape: &Shape) -> Error {
    Error::runtime_error(format!("{func}(): a tensor of shape {:?} is too large to allocate", shape.as_ref()))
}

/// The element of a one-element host array as a Python number.
pub fn read_scalar(x: &Array) -> Result<Scalar> {
    with_dtype!(x.dtype, T => read(x, |v: ArrayViewD<'_, T>| v.iter().next().copied().unwrap_or_default().to_scalar()))
}

/// Converts one element as `tensor.to(dtype)` does: floats truncate toward zero into integers,
/// anything non-zero is `true`.
#[inline(always)]
pub fn cast<S: Element, T: Element>(x: S) -> T {
    if T::DTYPE.is_floating_point() || T::DTYPE == DType::Bool {
        T::from_f64(x.to_f64())
    } else {
        T::from_i64(x.to_i64())
    }
}

fn internal(what: &str) -> Error {
    Error::runtime_error(format!("internal error in a CPU kernel: {what}"))
}

/// The error for a kernel asked for an operation its dtype does not have (layer 2 checks
/// dtypes first, so reaching this is a bug).
#[cold]
fn undefined(op: impl std::fmt::Debug, dtype: DType) -> Error {
    internal(&format!("{op:?} is not defined for {dtype}"))
}

/// The batch dimensions of a matmul operand's layout (all but the last two).
fn batch_part(l: &Layout) -> Layout {
    let outer = l.ndim() - 2;
    Layout { shape: l.shape[..outer].iter().copied().collect(), strides: l.strides[..outer].into(), offset: l.offset }
}

/// The matrix (the last two dimensions of `l`) whose first element is `data[start]`.
fn matrix_at<'a, T>(data: &'a [T], l: &Layout, start: usize) -> Result<ndarray::ArrayView2<'a, T>> {
    let (rows, cols) = (l.shape[l.ndim() - 2], l.shape[l.ndim() - 1]);
    // An empty matrix addresses nothing: any strides do.
    let strides = if rows * cols == 0 { (0, 0) } else { (l.strides[l.ndim() - 2], l.strides[l.ndim() - 1]) };
    ndarray::ArrayView2::from_shape((rows, cols).strides(strides), data.get(start..).unwrap_or_default())
        .map_err(|_| internal("a matmul operand outside its storage"))
}

/// `out = a @ b` for two matrices.
type Product<T> = fn(ndarray::ArrayView2<'_, T>, ndarray::ArrayView2<'_, T>, &mut ndarray::ArrayViewMut2<'_, T>);

/// Products of at least this many multiply-adds (`m·n·k`) of bfloat16 values run on the
/// AVX512_BF16 kernel: below it, pairing the operands' values costs more than the kernel saves.
const BF16_KERNEL_MIN: usize = 1 << 26;

/// `out = a @ b` for matrices of bfloat16 values held as float32: a large product on the
/// AVX512_BF16 kernel (two products per lane and instruction) where the processor has it, else
/// on the float32 one.
fn bf16_matmul(
    a: ndarray::ArrayView2<'_, f32>,
    b: ndarray::ArrayView2<'_, f32>,
    out: &mut ndarray::ArrayViewMut2<'_, f32>,
) {
    let ((m, k), n) = (a.dim(), b.dim().1);
    #[cfg(target_arch = "x86_64")]
    if m.saturating_mul(n).saturating_mul(k) >= BF16_KERNEL_MIN && sgemm::matmul_bf16(a, b, out) {
        return;
    }
    let _ = (m, n, k);
    Number::matmul(a, b, out)
}

/// Batched products of at least this many multiply-adds in all run their matrices on several
/// threads.
const BATCH_PARALLEL_MIN: usize = 1 << 20;

/// `a @ b` for `a` of shape `[..batch_a, n, k]` and `b` of shape `[..batch_b, k, m]`, with the
/// batch dimensions broadcast to `batch`: one product per batch position, each operand's
/// matrix read in place through its strides (found by walking the batch dimensions).
/// `product` multiplies two matrices.
fn matmul<T: Element>(a: &Array, b: &Array, batch: &Shape, product: Product<T>) -> Result<Array> {
    let n = a.layout.shape[a.layout.ndim() - 2];
    let m = b.layout.shape[b.layout.ndim() - 1];
    let shape: Shape = batch.iter().copied().chain([n, m]).collect();
    let total = shape.checked_numel().ok_or_else(|| too_large("matmul", &shape))?;
    let count = batch.numel();
    // A pooled buffer: every product below writes each element of its matrix.
    let mut out = map::output::<T>("matmul", total)?;
    map::with_input(a, |x: &[T], la| {
        map::with_input(b, |y: &[T], lb| -> Result<()> {
            let walk = strided::Walk::new(batch, [&batch_part(la), &batch_part(lb)])
                .ok_or_else(|| internal("matmul batch does not broadcast"))?;
            let mut starts = alloc::<[usize; 2]>("matmul", count)?;
            walk.runs(0..count, |[p, q], len, [s, t]| starts.extend((0..len).map(|i| [p + i * s, q + i * t])));
            let product = |(&[p, q], o): (&[usize; 2], &mut [T])| -> Result<()> {
                let mut o = ndarray::ArrayViewMut2::from_shape((n, m), o).map_err(|_| internal("matmul output"))?;
                product(matrix_at(x, la, p)?, matrix_at(y, lb, q)?, &mut o);
                Ok(())
            };
            // Many small products (attention's scores, per head) go to the threads a few at a
            // time; one large product splits itself.
            let k = a.layout.shape[a.layout.ndim() - 1];
            let chunk = (n * m).max(1);
            if count > 1 && count.saturating_mul(n * m).saturating_mul(k) >= BATCH_PARALLEL_MIN {
                use rayon::prelude::*;
                starts.par_iter().zip(out.par_chunks_exact_mut(chunk)).try_for_each(product)
            } else {
                starts.iter().zip(out.chunks_exact_mut(chunk)).try_for_each(product)
            }
        })
    })???;
    Ok(array(out, shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without the check, a machine that overcommits memory (`vm.overcommit_memory=1`) grants
    /// the first reservation, and the buffer's first writes end the process.
    #[test]
    fn allocations_beyond_the_machine_s_memory_are_refused_before_they_are_tried() {
        let memory = host_memory();
        if cfg!(target_os = "linux") {
            assert!((1 << 28..usize::MAX / 2).contains(&memory), "{memory} bytes of memory and swap");
        }
        let mut bytes: Vec<u8> = Vec::new();
        assert!(reserve_exact(&mut bytes, memory.saturating_add(1)).is_err());
        let mut words: Vec<f32> = vec![0.0; 4];
        assert!(reserve_exact(&mut words, memory / 4).is_err(), "the elements already held count too");
        assert!(reserve_exact(&mut words, 1024).is_ok() && words.capacity() >= 1028);
    }

    /// `0..n` as int64, viewed through `shape`, `strides` and `offset`.
    fn viewed(n: i64, shape: &[usize], strides: &[usize], offset: usize) -> Array {
        let base = array((0..n).collect::<Vec<_>>(), Shape::from([n as usize]));
        base.with_layout(Layout { shape: Shape::new(shape), strides: strides.iter().copied().collect(), offset })
    }

    fn values(x: &Array) -> Vec<i64> {
        elements::<i64>("test", x).unwrap()
    }

    #[test]
    fn expanded_dimensions_repeat_their_elements() {
        // A row [0, 1, 2] repeated twice, a column [1, 2] repeated three times, a scalar as 2 x 2.
        assert_eq!(values(&viewed(3, &[2, 3], &[0, 1], 0)), [0, 1, 2, 0, 1, 2]);
        assert_eq!(values(&viewed(3, &[2, 3], &[1, 0], 1)), [1, 1, 1, 2, 2, 2]);
        assert_eq!(values(&viewed(3, &[2, 2], &[0, 0], 2)), [2, 2, 2, 2]);
        assert_eq!(values(&viewed(3, &[0, 3], &[0, 1], 0)), [] as [i64; 0]);
    }

    #[test]
    fn permuted_and_overlapping_layouts_read_in_logical_order() {
        assert_eq!(values(&viewed(6, &[3, 2], &[1, 3], 0)), [0, 3, 1, 4, 2, 5]);
        // Sliding windows of two: rows overlap in storage.
        assert_eq!(values(&viewed(4, &[3, 2], &[1, 1], 0)), [0, 1, 1, 2, 2, 3]);
    }

    #[test]
    fn the_element_by_element_fallback_reads_any_layout() {
        let data: Vec<i64> = (0..6).collect();
        let layout = |shape: &[usize], strides: &[usize], offset| Layout {
            shape: Shape::new(shape),
            strides: strides.iter().copied().collect(),
            offset,
        };
        let read_back = |l: Layout| gathered(&data, &l).unwrap().iter().copied().collect::<Vec<_>>();
        assert_eq!(read_back(layout(&[3, 2], &[1, 1], 1)), [1, 2, 2, 3, 3, 4]);
        assert_eq!(read_back(layout(&[2, 3], &[0, 2], 0)), [0, 2, 4, 0, 2, 4]);
        assert_eq!(read_back(layout(&[0, 4], &[4, 1], 6)), [] as [i64; 0]);
    }

    #[test]
    fn copies_of_huge_expanded_views_fail_instead_of_aborting() {
        let huge = viewed(1, &[1 << 40, 1 << 20], &[0, 0], 0);
        let err = CPU.copy(&huge, DType::Int64).unwrap_err();
        assert!(err.to_string().starts_with("copy(): not enough memory"), "{err}");
        let err = CPU.unary(&huge, Unary::Neg, DType::Int64, None).unwrap_err();
        assert!(err.to_string().contains("not enough memory"), "{err}");
    }

    #[test]
    fn memory_of_another_device_is_refused() {
        assert!(host([&viewed(3, &[3], &[1], 0)]).is_ok());
    }
}
