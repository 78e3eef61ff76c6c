//! The GPU backend, on [wgpu](https://wgpu.rs): the same operations on Vulkan, Metal and DX12.
//!
//! ```
//! use torchfn::Device;
//! // On a machine with a GPU (or Mesa's software Vulkan driver), `wgpu` is its default adapter.
//! if let Ok(gpu) = Device::wgpu() {
//!     let x = torchfn::tensor([1.0f32, 2.0, 3.0])?.to_device(gpu, None, false, false)?;
//!     let y = (&x * &x)?.sum()?;
//!     assert_eq!(y.device()?, gpu);
//!     assert_eq!(y.item()?.to_f64(), 14.0);
//! }
//! # Ok::<(), torchfn::Error>(())
//! ```
//!
//! Tensors on a wgpu device hold float32, int32 or bool (one per 32-bit word), or float16,
//! bfloat16, int16, int8 and uint8 (packed two or four to a word, computed in 32 bits: see
//! `packed.rs`); moving a float64 or int64 tensor there is an error. Results PyTorch gives as
//! int64 (indices, integer sums) are int32 there. Each adapter gets one context, created on
//! first use, with a cache of compiled pipelines, a pool of freed buffers by size class, and a
//! batch that records many launches per submission ([`set_batch_limit`]). Reading elements back (`to_vec`, `item`,
//! printing) submits the batch and waits for it.
//!
//! The backend is the `wgpu` cargo feature, on by default. A build without it keeps this
//! module's API, so that code compiles either way: [`Device::wgpu`] and
//! [`Device::wgpu_preferring`] return an error saying that torchfn was built without the
//! feature, [`adapters`] is empty and [`set_batch_limit`] does nothing.

mod adapter;
mod along;
mod context;
mod elementwise;
mod expressions;
mod index;
mod launch;
mod matmul;
mod memory;
mod packed;
mod reduce;
#[cfg(test)]
mod shaders;
mod window;

use std::borrow::Cow;
use std::sync::Arc;

use crate::backend::{Array, Backend, Binary, Buffer, Device, Reduce, Scan, Unary, Window};
use crate::error::Result;
use crate::types::{DType, Scalar, Shape};

pub use adapter::{AdapterInfo, Preference};
pub use context::adapters;
pub use launch::set_batch_limit;

use context::{Context, adapter_count, context, preferred};
use memory::{buffer_of, memory_of, storage};
use packed::{Packed, computes_in, narrow, widen};

/// The wgpu backend.
pub struct Wgpu;

static WGPU: Wgpu = Wgpu;

#[linkme::distributed_slice(crate::backend::BACKENDS)]
static REGISTERED: &'static dyn Backend = &WGPU;

impl Device {
    /// The GPU wgpu prefers for `preference` (a discrete GPU for high performance, an
    /// integrated one for low power), unless `TORCHFN_WGPU_ADAPTER` names one.
    pub fn wgpu_preferring(preference: Preference) -> Result<Device> {
        Device::new("wgpu", Some(preferred(preference)?))
    }
}

/// The context of `device`'s adapter.
fn context_of(device: Device) -> Result<Arc<Context>> {
    context(device.index())
}

/// The wgpu device among `arrays` (the others are host scalars), and its context.
fn placed<'a>(arrays: impl IntoIterator<Item = &'a Array>) -> Result<(Device, Arc<Context>)> {
    let device = arrays.into_iter().map(Array::device).find(|d| !d.is_cpu()).ok_or_else(|| {
        crate::error::Error::runtime_error("internal error: the wgpu backend was given only host tensors")
    })?;
    Ok((device, context_of(device)?))
}

/// `x` as the kernels read it in `device`'s memory: itself, a host tensor (a scalar joining the
/// operation) moved there, or a packed tensor widened to its 32-bit dtype.
fn resident<'a>(context: &Arc<Context>, device: Device, x: &'a Array) -> Result<Cow<'a, Array>> {
    if !x.device().is_cpu() {
        return widen(context, device, x);
    }
    let data = match Kind::of(x.dtype) {
        Kind::F32 => Buffer::Float32(crate::backend::host::elements::<f32>("to", x)?),
        Kind::I32 => Buffer::Int32(crate::backend::host::elements::<i32>("to", x)?),
        Kind::Bool => Buffer::Bool(crate::backend::host::elements::<bool>("to", x)?),
    };
    Ok(Cow::Owned(WGPU.upload(device, data, x.layout.shape.clone())?))
}

use elementwise::Kind;

/// Helpers for the kernel tests of this module: a GPU to run on, moving arrays to and from it,
/// deterministic test data, views of it, and comparisons with the CPU's results. Without an
/// adapter the tests return early (`gpu()` is `None`), unless `TORCHFN_REQUIRE_GPU=1` asks for
/// one.
#[cfg(test)]
pub mod testing {
    use super::*;
    use crate::types::Layout;

    /// The default wgpu device, or `None` (with one line saying why) on a machine without one.
    /// Built without the backend table, which this test binary cannot read (see `Device::on`).
    pub fn gpu() -> Option<Device> {
        match preferred(Preference::HighPerformance) {
            Ok(index) => Some(Device::with_backend(&WGPU, index)),
            Err(e) if std::env::var("TORCHFN_REQUIRE_GPU").is_ok_and(|v| v == "1") => {
                panic!("TORCHFN_REQUIRE_GPU=1 but there is no GPU: {e}")
            }
            Err(e) => {
                eprintln!("skipping a GPU test: {e}");
                None
            }
        }
    }

    /// A host array copied to `device` (float32, int32 or bool).
    pub fn to_gpu(device: Device, x: &Array) -> Array {
        let data = crate::cpu::CPU.download(x).expect("a host array reads");
        WGPU.upload(device, data, x.layout.shape.clone()).expect("the GPU takes the array")
    }

    /// A GPU array copied to the host.
    pub fn to_host(x: &Array) -> Array {
        let data = WGPU.download(x).expect("the GPU array reads back");
        crate::cpu::CPU.upload(Device::CPU, data, x.layout.shape.clone()).expect("host memory")
    }

    /// The elements of a host or GPU array as `f64`, in row-major order.
    pub fn values(x: &Array) -> Vec<f64> {
        let host = if x.device().is_cpu() { x.clone() } else { to_host(x) };
        crate::backend::host::elements::<f64>("test", &host).expect("host elements")
    }

    /// A deterministic pseudo-random sequence of `n` integers in `0..m`.
    pub fn draws(n: usize, m: u64, seed: u64) -> Vec<u64> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 11) % m
            })
            .collect()
    }

    /// Small integers as floats, so that sums are exact in any order; many ties.
    pub fn small_floats(n: usize, seed: u64) -> Vec<f32> {
        draws(n, 8, seed).into_iter().map(|d| d as f32 - 3.0).collect()
    }

    /// Small integers, many of them equal.
    pub fn small_ints(n: usize, seed: u64) -> Vec<i32> {
        draws(n, 8, seed).into_iter().map(|d| d as i32 - 3).collect()
    }

    /// Bools, false once in `one_in` draws on average.
    pub fn bools(n: usize, seed: u64, one_in: u64) -> Vec<bool> {
        draws(n, one_in, seed).into_iter().map(|d| d != 0).collect()
    }

    /// Factors whose products stay exact and in range whatever the order: mostly ±1, with at
    /// most `scarce` twos and `scarce` halves in all.
    pub fn gentle_floats(n: usize, seed: u64, scarce: usize) -> Vec<f32> {
        let (mut twos, mut halves) = (0, 0);
        draws(n, 64, seed)
            .into_iter()
            .map(|d| match d {
                0 if twos < scarce => {
                    twos += 1;
                    2.0
                }
                1 if halves < scarce => {
                    halves += 1;
                    0.5
                }
                d if d < 24 => -1.0,
                _ => 1.0,
            })
            .collect()
    }

    /// Each pair equal (NaN to NaN, infinities to themselves) or within `tol`, relative to the
    /// larger magnitude (at least 1).
    pub fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: lengths");
        for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
            let same = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol * g.abs().max(w.abs()).max(1.0);
            assert!(same, "{what}: element {k} is {g}, the CPU gives {w}");
        }
    }

    /// The same view (`layout`) of `base` on the host and on `device`.
    pub fn views(device: Device, base: &Array, layout: &Layout) -> (Array, Array) {
        (base.with_layout(layout.clone()), to_gpu(device, base).with_layout(layout.clone()))
    }

    /// The layout of `shape` with `strides`, its first element at `offset`.
    pub fn layout(shape: &[usize], strides: &[usize], offset: usize) -> Layout {
        Layout { shape: Shape::new(shape), strides: strides.iter().copied().collect(), offset }
    }
}

impl Backend for Wgpu {
    fn name(&self) -> &'static str {
        "wgpu"
    }

    fn device_count(&self) -> usize {
        adapter_count()
    }

    fn default_index(&self) -> Result<usize> {
        preferred(Preference::HighPerformance)
    }

    fn describe(&self, index: usize) -> String {
        adapters().get(index).map_or_else(|| "no such adapter".into(), |a| format!("{} ({})", a.name, a.api))
    }

    fn supports(&self, dtype: DType) -> bool {
        !matches!(dtype, DType::Float64 | DType::Int64)
    }

    fn synchronize(&self, index: usize) -> Result<()> {
        let context = context(index)?;
        context.flush()?;
        context.idle()
    }

    fn upload(&self, device: Device, data: Buffer, shape: Shape) -> Result<Array> {
        let context = context_of(device)?;
        let dtype = data.dtype();
        let memory = context.upload("to", &data)?;
        Ok(Array::contiguous(storage(device, memory), shape, dtype))
    }

    fn download(&self, x: &Array) -> Result<Buffer> {
        let (_, context) = placed([x])?;
        let contiguous;
        let x = if x.layout.is_contiguous() {
            x
        } else {
            contiguous = self.copy(x, x.dtype)?;
            &contiguous
        };
        let memory = memory_of(&x.storage)?;
        match Packed::of(x.dtype) {
            Some(packed) => {
                let (first, count, skip) = packed.word_range(&x.layout);
                Ok(packed.buffer_of(&context.download(memory, first, count)?, skip, x.numel()))
            }
            None => buffer_of(context.download(memory, x.layout.offset, x.numel())?, x.dtype),
        }
    }

    fn fill(&self, device: Device, shape: &Shape, value: Scalar, dtype: DType) -> Result<Array> {
        let context = context_of(device)?;
        let filled = elementwise::fill(&context, device, shape, value, computes_in(dtype))?;
        narrow(&context, device, filled, dtype)
    }

    fn copy(&self, x: &Array, dtype: DType) -> Result<Array> {
        let (device, context) = placed([x])?;
        let copied = elementwise::copy(&context, device, &*widen(&context, device, x)?, computes_in(dtype))?;
        narrow(&context, device, copied, dtype)
    }

    fn assign(&self, dst: &Array, src: &Array) -> Result<()> {
        let (device, context) = placed([dst])?;
        packed::store(&context, device, dst, src)
    }

    fn unary(&self, x: &Array, op: Unary, dtype: DType, out: Option<&Array>) -> Result<Array> {
        let (device, context) = placed([x])?;
        let x = widen(&context, device, x)?;
        let out = out.filter(|o| Packed::of(o.dtype).is_none());
        let result = elementwise::unary(&context, device, &x, op, computes_in(dtype), out)?;
        narrow(&context, device, result, dtype)
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
        let (device, context) = placed([a, b])?;
        let (a, b) = (widen(&context, device, a)?, widen(&context, device, b)?);
        let out = out.filter(|o| Packed::of(o.dtype).is_none());
        let result = elementwise::binary(&context, device, (&a, &b), shape, op, computes_in(dtype), out)?;
        narrow(&context, device, result, dtype)
    }

    fn select(&self, condition: &Array, a: &Array, b: &Array, shape: &Shape, dtype: DType) -> Result<Array> {
        let (device, context) = placed([condition, a, b])?;
        let (a, b) = (widen(&context, device, a)?, widen(&context, device, b)?);
        let result = elementwise::select(&context, device, (condition, &a, &b), shape, computes_in(dtype))?;
        narrow(&context, device, result, dtype)
    }

    fn reduce(&self, x: &Array, dims: &[usize], op: Reduce, dtype: DType) -> Result<Array> {
        let (device, context) = placed([x])?;
        let x = widen(&context, device, x)?;
        let result = reduce::reduce(&context, device, &x, dims, op, computes_in(dtype))?;
        narrow(&context, device, result, op.output(dtype, device.index_dtype()))
    }

    fn scan(&self, x: &Array, dim: usize, op: Scan, dtype: DType) -> Result<Array> {
        let (device, context) = placed([x])?;
        let x = widen(&context, device, x)?;
        let result = along::scan(&context, device, &x, dim, op, computes_in(dtype))?;
        narrow(&context, device, result, dtype)
    }

    fn matmul(&self, a: &Array, b: &Array, batch: &Shape, dtype: DType) -> Result<Array> {
        let (device, context) = placed([a, b])?;
        let (a, b) = (resident(&context, device, a)?, resident(&context, device, b)?);
        let result = matmul::matmul(&context, device, &a, &b, batch, computes_in(dtype))?;
        narrow(&context, device, result, dtype)
    }

    fn index_select(&self, x: &Array, dim: usize, index: &Array) -> Result<Array> {
        let (device, context) = placed([x, index])?;
        let (wide, index) = (resident(&context, device, x)?, resident(&context, device, index)?);
        let result = index::index_select(&context, device, &wide, dim, &index)?;
        narrow(&context, device, result, x.dtype)
    }

    fn gather(&self, x: &Array, dim: usize, index: &Array) -> Result<Array> {
        let (device, context) = placed([x, index])?;
        let (wide, index) = (resident(&context, device, x)?, resident(&context, device, index)?);
        let result = index::gather(&context, device, &wide, dim, &index)?;
        narrow(&context, device, result, x.dtype)
    }

    fn scatter_add(&self, shape: &Shape, dim: usize, index: &Array, src: &Array) -> Result<Array> {
        let (device, context) = placed([index, src])?;
        let (index, wide) = (resident(&context, device, index)?, resident(&context, device, src)?);
        let result = index::scatter_add(&context, device, shape, dim, (&index, &wide))?;
        narrow(&context, device, result, src.dtype)
    }

    fn concat(&self, pieces: &[&Array], dim: usize, shape: &Shape, dtype: DType) -> Result<Array> {
        let (device, context) = placed(pieces.iter().copied())?;
        let pieces: Vec<Cow<'_, Array>> =
            pieces.iter().map(|p| resident(&context, device, p)).collect::<Result<_>>()?;
        let pieces: Vec<&Array> = pieces.iter().map(|p| &**p).collect();
        let result = elementwise::concat(&context, device, &pieces, dim, shape, computes_in(dtype))?;
        narrow(&context, device, result, dtype)
    }

    fn softmax(&self, x: &Array, dim: usize, log: bool, dtype: DType) -> Result<Array> {
        let (device, context) = placed([x])?;
        let x = widen(&context, device, x)?;
        let result = along::softmax(&context, device, &x, dim, log, computes_in(dtype))?;
        narrow(&context, device, result, dtype)
    }

    fn conv2d(
        &self,
        input: &Array,
        weight: &Array,
        bias: Option<&Array>,
        groups: usize,
        win: &Window,
    ) -> Result<Array> {
        let (device, context) = placed([input, weight].into_iter().chain(bias))?;
        let (wide, weight) = (resident(&context, device, input)?, resident(&context, device, weight)?);
        let bias = bias.map(|b| resident(&context, device, b)).transpose()?;
        let result = window::conv2d(&context, device, &wide, &weight, bias.as_deref(), groups, win)?;
        narrow(&context, device, result, input.dtype)
    }

    fn max_pool2d(&self, input: &Array, win: &Window) -> Result<(Array, Array)> {
        let (device, context) = placed([input])?;
        let (values, indices) = window::max_pool2d(&context, device, &*widen(&context, device, input)?, win)?;
        Ok((narrow(&context, device, values, input.dtype)?, indices))
    }
}

#[cfg(test)]
mod tests {
    use super::launch::Kernel;
    use super::testing::gpu;
    use super::*;

    #[test]
    fn a_shader_that_does_not_compile_is_an_error_and_the_device_goes_on() {
        let Some(device) = gpu() else { return };
        let context = Context::separate(device.index()).unwrap();
        let template = "@compute @workgroup_size(1) fn main() { let x: f32 = 1u; }";
        let kernel = Kernel { name: "broken", template, defines: Vec::new(), writes: Vec::new() };
        let err = context.launch(&kernel, &[0], &[], 1).unwrap_err();
        assert!(err.to_string().contains("failed building the broken kernel"), "{err}");
        let memory = context.upload("test", &Buffer::Float32(vec![1.0, 2.0])).unwrap();
        assert_eq!(context.download(&memory, 0, 2).unwrap(), [1.0f32.to_bits(), 2.0f32.to_bits()]);
    }

    #[test]
    fn a_lost_device_makes_every_operation_fail_with_an_error() {
        let Some(device) = gpu() else { return };
        let context = Context::separate(device.index()).unwrap();
        let memory = context.upload("test", &Buffer::Int32(vec![1, 2])).unwrap();
        context.simulate_loss("the driver was reset");
        let err = context.download(&memory, 0, 2).unwrap_err();
        assert!(err.to_string().contains("was lost (the driver was reset)"), "{err}");
        assert!(context.alloc("test", 4).is_ok(), "allocation needs no device round trip");
        assert!(context.upload("test", &Buffer::Int32(vec![1])).is_err());
    }

    #[test]
    fn buffers_larger_than_the_device_allows_are_an_error() {
        let Some(device) = gpu() else { return };
        let context = context_of(device).unwrap();
        let too_many = (context.max_bytes() / memory::WORD + 1) as usize;
        let err = context.alloc("zeros", too_many).unwrap_err();
        assert!(err.to_string().starts_with("zeros(): a tensor of"), "{err}");
        assert!(err.to_string().contains("is larger than wgpu"), "{err}");
        // Whole words (Vulkan reports an odd binding limit), each position a u32.
        assert_eq!(context.max_bytes() % memory::WORD, 0);
        assert!(context.max_bytes() <= u64::from(u32::MAX) * memory::WORD);
    }

    #[test]
    fn launches_with_too_many_parameters_are_an_error() {
        let Some(device) = gpu() else { return };
        let context = context_of(device).unwrap();
        let template = "@compute @workgroup_size(1) fn main() {}";
        let kernel = Kernel { name: "wide", template, defines: Vec::new(), writes: Vec::new() };
        let err = context.launch(&kernel, &vec![0; 20_000], &[], 1).unwrap_err();
        assert!(err.to_string().contains("bytes of parameters are more than"), "{err}");
        assert!(context.launch(&kernel, &[0], &[], 1).is_ok(), "the device goes on");
    }
}
