//! The CPU backend: the kernel families of [`Backend`] on host memory, with ndarray for
//! layouts and [`threads`] for large loops. Registered in [`BACKENDS`](crate::backend::BACKENDS)
//! like any other backend.

mod binary;
mod elementwise;
mod f16c;
mod indexing;
pub(crate) mod map;
mod number;
mod optim;
pub mod pool;
mod recurrent;
mod reduce;
#[cfg(target_arch = "x86_64")]
mod sgemm;
mod softmax;
mod strided;
pub mod threads;
mod unary;
mod vector_math;
mod window;
mod write;

use ndarray::ShapeBuilder;

use crate::backend::host::{
    alloc, array, cast, elements, not_host, read, read_as, reserve_exact, too_large, with_all_elements, with_elements,
};
use crate::backend::{
    AdamArrays, AdamStep, Array, Backend, Binary, Buffer, Device, LstmSaved, Reduce, Scan, SgdArrays, SgdStep, Storage,
    Unary, Window,
};
use crate::error::{Error, Result};
use crate::types::half::{bf16, f16};
use crate::types::{DType, Element, Layout, Scalar, Shape, with_dtype};

pub use elementwise::Float;
use elementwise::Stored;
use number::MatmulOperand;
pub use number::Number;

/// The vector instructions the CPU kernels are compiled for, widest last (see [`instructions`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Instructions {
    /// Baseline x86-64 (SSE2, 128-bit vectors), or a processor of another architecture.
    Baseline,
    /// AVX2, FMA and F16C: 256-bit vectors, fused multiply-adds and float16 conversions.
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
        // Every processor with AVX2 has F16C (float16 conversions) too; asked for all the same.
        if has!("avx2") && has!("fma") && has!("f16c") {
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
        format!("CPU ({} threads)", threads::get_num_threads())
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
            // A pooled buffer where one fits: its pages are mapped, where a fresh one's fault
            // in one by one (zeros for gradients and optimizer states, a few percent of a
            // training step).
            let mut data = map::output::<T>("full", n)?;
            data.fill(cast::<f64, T>(value.to_f64()));
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
        // Half precision accumulated in float32 and rounded once, its operands widened as the
        // kernel packs them; bfloat16's large products on the AVX512_BF16 kernel where the
        // processor has it.
        match dtype {
            DType::BFloat16 => narrow(matmul::<bf16, f32>(a, b, batch, bf16_matmul)?, dtype),
            DType::Float16 => narrow(matmul::<f16, f32>(a, b, batch, half_matmul::<f16>)?, dtype),
            _ => with_dtype!(
                dtype,
                T => matmul::<T, T>(a, b, batch, T::matmul),
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

/// `out = a @ b` for two matrices of `T`, into one of `O`.
type Product<T, O> = fn(ndarray::ArrayView2<'_, T>, ndarray::ArrayView2<'_, T>, &mut ndarray::ArrayViewMut2<'_, O>);

/// Products of at least this many multiply-adds (`m·n·k`) of bfloat16 values run on the
/// AVX512_BF16 kernel: below it, pairing the operands' values costs more than the kernel saves.
/// (gpt_small's products, 128 rows by 128 by 384, gain: its bfloat16 autocast step went from
/// 19.7-22.0 to 16.6-18.5 ms, alternated in one sitting, when this fell from 2^26.)
const BF16_KERNEL_MIN: usize = 1 << 20;

/// `out = a @ b` in float32 for bfloat16 matrices: a large product on the AVX512_BF16 kernel
/// (two products per lane and instruction, on float32 copies of the operands, which it pairs)
/// where the processor has it and runs it faster ([`sgemm::bf16_kernel_pays`]), else
/// [`half_matmul`].
fn bf16_matmul(
    a: ndarray::ArrayView2<'_, bf16>,
    b: ndarray::ArrayView2<'_, bf16>,
    out: &mut ndarray::ArrayViewMut2<'_, f32>,
) {
    let ((m, k), n) = (a.dim(), b.dim().1);
    #[cfg(target_arch = "x86_64")]
    if m.saturating_mul(n).saturating_mul(k) >= BF16_KERNEL_MIN
        && sgemm::bf16_kernel_pays()
        && sgemm::matmul_bf16(a.mapv(Stored::widen).view(), b.mapv(Stored::widen).view(), out)
    {
        return;
    }
    let _ = (m, n, k);
    half_matmul(a, b, out)
}

/// `out = a @ b` in float32 for float16 or bfloat16 matrices: on torchfn's float32 kernel,
/// which widens the operands as it packs them, where the processor has AVX2 and FMA; products
/// of a single step, row or column (which float32's [`Number::matmul`] computes without the
/// kernel) and other processors on float32 copies.
fn half_matmul<E: MatmulOperand>(
    a: ndarray::ArrayView2<'_, E>,
    b: ndarray::ArrayView2<'_, E>,
    out: &mut ndarray::ArrayViewMut2<'_, f32>,
) {
    let ((m, k), n) = (a.dim(), b.dim().1);
    #[cfg(target_arch = "x86_64")]
    if k > 1 && m > 1 && n > 1 && sgemm::matmul(a, b, out) {
        return;
    }
    let _ = (m, n, k);
    Number::matmul(a.mapv(E::widen).view(), b.mapv(E::widen).view(), out)
}

/// Batched products of at least this many multiply-adds in all run their matrices on several
/// threads.
const BATCH_PARALLEL_MIN: usize = 1 << 20;

/// `a @ b` for `a` of shape `[..batch_a, n, k]` and `b` of shape `[..batch_b, k, m]`, with the
/// batch dimensions broadcast to `batch`: one product per batch position, each operand's
/// matrix read in place through its strides (found by walking the batch dimensions).
/// `product` multiplies two matrices of `T` into one of `O`.
fn matmul<T: Element, O: Element>(a: &Array, b: &Array, batch: &Shape, product: Product<T, O>) -> Result<Array> {
    let n = a.layout.shape[a.layout.ndim() - 2];
    let m = b.layout.shape[b.layout.ndim() - 1];
    let shape: Shape = batch.iter().copied().chain([n, m]).collect();
    let total = shape.checked_numel().ok_or_else(|| too_large("matmul", &shape))?;
    let count = batch.numel();
    // A pooled buffer: every product below writes each element of its matrix.
    let mut out = map::output::<O>("matmul", total)?;
    map::with_input(a, |x: &[T], la| {
        map::with_input(b, |y: &[T], lb| -> Result<()> {
            let walk = strided::Walk::new(batch, [&batch_part(la), &batch_part(lb)])
                .ok_or_else(|| internal("matmul batch does not broadcast"))?;
            let mut starts = alloc::<[usize; 2]>("matmul", count)?;
            walk.runs(0..count, |[p, q], len, [s, t]| starts.extend((0..len).map(|i| [p + i * s, q + i * t])));
            let product = |(&[p, q], o): (&[usize; 2], &mut [O])| -> Result<()> {
                let mut o = ndarray::ArrayViewMut2::from_shape((n, m), o).map_err(|_| internal("matmul output"))?;
                product(matrix_at(x, la, p)?, matrix_at(y, lb, q)?, &mut o);
                Ok(())
            };
            // Many small products (attention's scores, per head) go to the threads a few at a
            // time; one large product splits itself.
            let k = a.layout.shape[a.layout.ndim() - 1];
            let chunk = (n * m).max(1);
            if count > 1 && count.saturating_mul(n * m).saturating_mul(k) >= BATCH_PARALLEL_MIN {
                let results = threads::map(starts.iter().zip(out.chunks_exact_mut(chunk)), product);
                results.into_iter().collect()
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
