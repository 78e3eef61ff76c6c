//! Sliding-window kernels on the GPU (`gpu-shaders/conv2d.wgsl` and `max_pool2d.wgsl`): 2-D
//! convolution and max pooling over the last two dimensions, one thread per output element,
//! reading their inputs through any layout. Both compute in float32 or int32 (the element type
//! of their inputs); pooling's indices are int32, the GPU's index dtype.

use std::sync::Arc;

use crate::backend::{Array, Device, Window};
use crate::error::Result;
use crate::types::{DType, Shape};

use super::context::Context;
use super::elementwise::Kind;
use super::launch::{GROUP, Kernel, groups_for, unsupported, word, words};
use super::memory::{memory_of, storage};

/// The conv2d shader.
const CONV2D: &str = include_str!("../../../gpu-shaders/conv2d.wgsl");

/// The max_pool2d shader.
const MAX_POOL2D: &str = include_str!("../../../gpu-shaders/max_pool2d.wgsl");

/// The two window operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// 2-D convolution (cross-correlation), with an optional bias.
    Conv2d,
    /// 2-D max pooling, with the positions of the maxima.
    MaxPool2d,
}

impl Op {
    /// The operation's kernel for elements of `kind` (float32 or int32): its shader, and its
    /// bindings (conv2d: input, weight, bias, out; max_pool2d: input, values, indices).
    fn kernel(self, kind: Kind) -> Kernel {
        let float = kind == Kind::F32;
        let mut defines = vec![("ELEMENT", kind.stored().to_string())];
        let (name, template, writes) = match self {
            Op::Conv2d => ("conv2d", CONV2D, vec![false, false, false, true]),
            Op::MaxPool2d => {
                defines.push(("LOWEST", if float { "-infinity()" } else { "i32(-2147483647 - 1)" }.to_string()));
                defines.push(("NAN_WINS", if float { "|| is_nan(v)" } else { "" }.to_string()));
                ("max_pool2d", MAX_POOL2D, vec![false, true, true])
            }
        };
        Kernel { name, template, defines, writes }
    }
}

/// The words of `win`: input size, output size, kernel size, stride, padding and dilation.
fn window_words(win: &Window) -> Result<Vec<u32>> {
    words([win.input, win.out, win.kernel, win.stride, win.padding, win.dilation].into_iter().flatten())
}

/// The kind `x` computes in, float32 or int32, which `others` must share (the operation made
/// them of one dtype); an error for bools.
fn kind_of(func: &str, x: &Array, others: &[&Array]) -> Result<Kind> {
    let kind = Kind::of(x.dtype);
    if kind == Kind::Bool || others.iter().any(|o| Kind::of(o.dtype) != kind) {
        let dtypes: Vec<DType> = std::iter::once(x).chain(others.iter().copied()).map(|a| a.dtype).collect();
        return Err(unsupported(func, format!("inputs of dtypes {dtypes:?}")));
    }
    Ok(kind)
}

/// The words of `x`'s strides and offset.
fn layout_words(x: &Array) -> Result<Vec<u32>> {
    words(x.layout.strides.iter().copied().chain([x.layout.offset]))
}

/// The 2-D cross-correlation of `input` (`[n, c, h, w]`) with `weight`
/// (`[o, c / groups, kh, kw]`) plus `bias` (`[o]`), in float32 or int32: a new `[n, o, out_h, out_w]`
/// array.
pub fn conv2d(
    context: &Arc<Context>,
    device: Device,
    input: &Array,
    weight: &Array,
    bias: Option<&Array>,
    groups: usize,
    win: &Window,
) -> Result<Array> {
    let func = "conv2d";
    let others: Vec<&Array> = std::iter::once(weight).chain(bias).collect();
    let kind = kind_of(func, input, &others)?;
    let mismatch = || {
        let (i, w) = (&input.layout.shape, &weight.layout.shape);
        unsupported(func, format!("{groups} groups of input {i:?} and weight {w:?} with the window {win:?}"))
    };
    let (&[n, c, h, w], &[o, per_group, kh, kw]) = (&input.layout.shape[..], &weight.layout.shape[..]) else {
        return Err(mismatch());
    };
    let fits = groups > 0 && per_group.checked_mul(groups) == Some(c) && o % groups == 0;
    if !fits || [h, w] != win.input || [kh, kw] != win.kernel {
        return Err(mismatch());
    }
    let shape = Shape::from([n, o, win.out[0], win.out[1]]);
    let total = shape.checked_numel().ok_or_else(|| unsupported(func, "a result too large"))?;
    let memory = context.alloc(func, total)?;
    if total > 0 {
        let (bias_buffer, bias_words) = match bias {
            Some(bias) => (memory_of(&bias.storage)?.buffer(), layout_words(bias)?),
            None => (memory_of(&weight.storage)?.buffer(), vec![0, 0]),
        };
        let mut params = words([total, c, o, per_group, o / groups])?;
        params.extend(window_words(win)?);
        params.extend(layout_words(input)?);
        params.extend(layout_words(weight)?);
        params.extend(bias_words);
        params.push(u32::from(bias.is_some()));
        let buffers =
            [memory_of(&input.storage)?.buffer(), memory_of(&weight.storage)?.buffer(), bias_buffer, memory.buffer()];
        context.launch(&Op::Conv2d.kernel(kind), &params, &buffers, groups_for(total, GROUP)?)?;
    }
    Ok(Array::contiguous(storage(device, memory), shape, kind.dtype()))
}

/// Max pooling of `input` (`[planes, h, w]`, float32 or int32): the largest element of each window and
/// its position in its plane (int32), both new `[planes, out_h, out_w]` arrays.
pub fn max_pool2d(context: &Arc<Context>, device: Device, input: &Array, win: &Window) -> Result<(Array, Array)> {
    let func = "max_pool2d";
    let kind = kind_of(func, input, &[])?;
    let &[planes, h, w] = &input.layout.shape[..] else {
        return Err(unsupported(func, format!("an input of shape {:?}", input.layout.shape)));
    };
    if [h, w] != win.input {
        return Err(unsupported(func, format!("an input of shape {:?} for the window {win:?}", input.layout.shape)));
    }
    let shape = Shape::from([planes, win.out[0], win.out[1]]);
    let total = shape.checked_numel().ok_or_else(|| unsupported(func, "a result too large"))?;
    let values = context.alloc(func, total)?;
    let indices = context.alloc(func, total)?;
    if total > 0 {
        let mut params = vec![word(total)?];
        params.extend(window_words(win)?);
        params.extend(layout_words(input)?);
        let buffers = [memory_of(&input.storage)?.buffer(), values.buffer(), indices.buffer()];
        context.launch(&Op::MaxPool2d.kernel(kind), &params, &buffers, groups_for(total, GROUP)?)?;
    }
    Ok((
        Array::contiguous(storage(device, values), shape.clone(), kind.dtype()),
        Array::contiguous(storage(device, indices), shape, DType::Int32),
    ))
}

/// Every specialisation this family can make, for the shader validation test: one per
/// operation.
#[cfg(test)]
pub fn variants() -> Vec<Kernel> {
    [Op::Conv2d, Op::MaxPool2d].into_iter().flat_map(|op| [op.kernel(Kind::F32), op.kernel(Kind::I32)]).collect()
}

#[cfg(test)]
mod tests {
    use super::super::WGPU;
    use super::super::testing::{gpu, to_gpu, values};
    use super::*;
    use crate::backend::{Backend, Layout};

    /// `count` numbers in [-1, 1), the same every run.
    fn numbers(count: usize) -> Vec<f32> {
        let mut state = 0x9e37_79b9_u32;
        (0..count)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// The same view of `data`, `shape` with `strides` from `offset`, on the host and the GPU.
    fn viewed(device: Device, data: Vec<f32>, shape: &[usize], strides: &[usize], offset: usize) -> (Array, Array) {
        let count = data.len();
        let host = crate::backend::host::array(data, Shape::from([count]));
        let layout = Layout { shape: Shape::new(shape), strides: strides.iter().copied().collect(), offset };
        (host.with_layout(layout.clone()), to_gpu(device, &host).with_layout(layout))
    }

    /// A contiguous view of fresh numbers, from `offset` on.
    fn fresh(device: Device, shape: &[usize], offset: usize) -> (Array, Array) {
        let shape = Shape::new(shape);
        viewed(device, numbers(offset + shape.numel()), &shape, &shape.contiguous_strides(), offset)
    }

    /// The window of `kernel`, `stride`, `padding` and `dilation` over an `input`-sized plane.
    fn window(
        input: [usize; 2],
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
    ) -> Window {
        let out = [0, 1].map(|a| (input[a] + 2 * padding[a] - dilation[a] * (kernel[a] - 1) - 1) / stride[a] + 1);
        Window { kernel, stride, padding, dilation, input, out }
    }

    /// Checks the GPU's convolution against the CPU's.
    fn check_conv(
        input: &(Array, Array),
        weight: &(Array, Array),
        bias: Option<&(Array, Array)>,
        groups: usize,
        win: &Window,
    ) {
        let expected = crate::cpu::CPU.conv2d(&input.0, &weight.0, bias.map(|b| &b.0), groups, win).unwrap();
        let got = WGPU.conv2d(&input.1, &weight.1, bias.map(|b| &b.1), groups, win).unwrap();
        assert_eq!(got.layout.shape, expected.layout.shape);
        for (i, (g, e)) in values(&got).into_iter().zip(values(&expected)).enumerate() {
            assert!((g - e).abs() <= 1e-5 * (1.0 + e.abs()), "element {i}: {g} != {e}");
        }
    }

    #[test]
    fn convolutions_match_the_cpu() {
        let Some(device) = gpu() else { return };
        let (n, c, h, w) = (2, 4, 9, 11);
        let input = fresh(device, &[n, c, h, w], 3);
        // Stride, padding, dilation, two groups and a bias.
        let win = window([h, w], [3, 2], [2, 1], [1, 2], [1, 2]);
        let weight = fresh(device, &[6, 2, 3, 2], 1);
        let bias = fresh(device, &[6], 0);
        check_conv(&input, &weight, Some(&bias), 2, &win);
        // One group, no bias, a 1 x 1 kernel; depthwise (a group per channel).
        check_conv(&input, &fresh(device, &[5, 4, 1, 1], 0), None, 1, &window([h, w], [1, 1], [1, 1], [0, 0], [1, 1]));
        let win = window([h, w], [3, 3], [1, 1], [1, 1], [1, 1]);
        check_conv(&input, &fresh(device, &[8, 1, 3, 3], 0), Some(&fresh(device, &[8], 2)), 4, &win);
    }

    #[test]
    fn convolutions_read_any_layout() {
        let Some(device) = gpu() else { return };
        let (c, h, w) = (3, 6, 7);
        // A channels-last input of one image, a transposed kernel, a strided bias.
        let input = viewed(device, numbers(1 + h * w * c), &[1, c, h, w], &[h * w * c, 1, w * c, c], 1);
        let weight = viewed(device, numbers(4 * c * 4), &[4, c, 2, 2], &[c * 4, 4, 1, 2], 0);
        let bias = viewed(device, numbers(9), &[4], &[2], 1);
        check_conv(&input, &weight, Some(&bias), 1, &window([h, w], [2, 2], [1, 2], [0, 1], [2, 1]));
        // An expanded input (every channel the same plane) and an empty batch.
        let input = viewed(device, numbers(h * w), &[2, c, h, w], &[0, 0, w, 1], 0);
        check_conv(&input, &weight, None, 1, &window([h, w], [2, 2], [1, 1], [1, 1], [1, 1]));
        let empty = fresh(device, &[0, c, h, w], 0);
        check_conv(&empty, &weight, Some(&bias), 1, &window([h, w], [2, 2], [1, 1], [0, 0], [1, 1]));
    }

    /// Checks the GPU's max pooling against the CPU's: the same values (NaN where it is NaN)
    /// and the same indices.
    fn check_pool(input: &(Array, Array), win: &Window) {
        let (values_cpu, indices_cpu) = crate::cpu::CPU.max_pool2d(&input.0, win).unwrap();
        let (got, indices) = WGPU.max_pool2d(&input.1, win).unwrap();
        assert_eq!(got.layout.shape, values_cpu.layout.shape);
        assert_eq!(indices.dtype, DType::Int32);
        for (g, e) in values(&got).into_iter().zip(values(&values_cpu)) {
            assert!(g == e || (g.is_nan() && e.is_nan()), "{g} != {e}");
        }
        assert_eq!(values(&indices), values(&indices_cpu));
    }

    #[test]
    fn max_pooling_matches_the_cpu() {
        let Some(device) = gpu() else { return };
        let (planes, h, w) = (3, 9, 8);
        let input = fresh(device, &[planes, h, w], 2);
        check_pool(&input, &window([h, w], [3, 3], [2, 2], [1, 1], [1, 1]));
        check_pool(&input, &window([h, w], [2, 3], [1, 2], [1, 0], [2, 3]));
        // A transposed (strided) input, and an empty one.
        let transposed = viewed(device, numbers(planes * h * w), &[planes, w, h], &[h * w, 1, w], 0);
        check_pool(&transposed, &window([w, h], [2, 2], [2, 2], [0, 1], [1, 1]));
        check_pool(&fresh(device, &[0, h, w], 0), &window([h, w], [2, 2], [2, 2], [0, 0], [1, 1]));
    }

    #[test]
    fn pooling_keeps_the_first_maximum_and_lets_nan_win() {
        let Some(device) = gpu() else { return };
        let mut data = vec![1.0f32; 16];
        data[5] = f32::NAN;
        data[10] = f32::NAN;
        data[15] = f32::INFINITY;
        let input = viewed(device, data, &[1, 4, 4], &[16, 4, 1], 0);
        let win = window([4, 4], [2, 2], [2, 2], [1, 1], [1, 1]);
        check_pool(&input, &win);
        let (got, indices) = WGPU.max_pool2d(&input.1, &win).unwrap();
        // Windows of ties give their first position; NaN wins (the later of two), inf over ones.
        assert_eq!(values(&indices), [0.0, 1.0, 3.0, 4.0, 10.0, 7.0, 12.0, 13.0, 15.0]);
        assert!(values(&got)[4].is_nan());
        assert_eq!(values(&got)[8], f64::INFINITY);
    }

    /// The same integer view (`[n, c, h, w]` or `[planes, h, w]`, contiguous) on the host and the GPU:
    /// integers in -40..40, so that sums stay exact.
    fn integers(device: Device, shape: &[usize], seed: u32) -> (Array, Array) {
        let n: usize = shape.iter().product();
        let data: Vec<i32> = (0..n as u32).map(|k| ((k * 37 + seed * 11) % 80) as i32 - 40).collect();
        let host = crate::backend::host::array(data, Shape::new(shape));
        (host.clone(), to_gpu(device, &host))
    }

    #[test]
    fn integer_windows_match_the_cpu_exactly() {
        let Some(device) = gpu() else { return };
        let input = integers(device, &[2, 4, 7, 6], 1);
        let win = window([7, 6], [3, 2], [2, 1], [1, 1], [1, 2]);
        let (weight, bias) = (integers(device, &[6, 2, 3, 2], 2), integers(device, &[6], 3));
        let expected = crate::cpu::CPU.conv2d(&input.0, &weight.0, Some(&bias.0), 2, &win).unwrap();
        let got = WGPU.conv2d(&input.1, &weight.1, Some(&bias.1), 2, &win).unwrap();
        assert_eq!(got.dtype, DType::Int32);
        assert_eq!(values(&got), values(&expected));
        let planes = integers(device, &[3, 7, 6], 4);
        let (values_cpu, indices_cpu) = crate::cpu::CPU.max_pool2d(&planes.0, &win).unwrap();
        let (values_gpu, indices_gpu) = WGPU.max_pool2d(&planes.1, &win).unwrap();
        assert_eq!(values_gpu.dtype, DType::Int32);
        assert_eq!(values(&values_gpu), values(&values_cpu));
        assert_eq!(values(&indices_gpu), values(&indices_cpu));
    }

    #[test]
    fn bool_inputs_and_mismatched_windows_are_errors() {
        let Some(device) = gpu() else { return };
        let host = crate::backend::host::array(vec![true; 4], Shape::from([1, 2, 2]));
        let win = window([2, 2], [1, 1], [1, 1], [0, 0], [1, 1]);
        let err = WGPU.max_pool2d(&to_gpu(device, &host), &win).unwrap_err();
        assert!(err.to_string().contains("internal error in the wgpu max_pool2d kernel: inputs of dtypes"), "{err}");
        let (_, input) = fresh(device, &[1, 2, 2, 2], 0);
        let (_, weight) = fresh(device, &[1, 2, 2, 2], 0);
        let err = WGPU.conv2d(&input, &weight, None, 1, &win).unwrap_err();
        assert!(err.to_string().contains("internal error in the wgpu conv2d kernel"), "{err}");
        let err = WGPU.conv2d(&input, &weight, None, 2, &window([2, 2], [2, 2], [1, 1], [0, 0], [1, 1])).unwrap_err();
        assert!(err.to_string().contains("2 groups of input torch.Size([1, 2, 2, 2])"), "{err}");
    }
}
