//! Sliding-window layers of `torch.nn.functional`: `conv2d`, `conv_transpose2d`, `max_pool2d`,
//! `max_pool2d_with_indices` and `avg_pool2d`, on `[N, C, H, W]` (batched) or `[C, H, W]` (unbatched)
//! input; and `conv1d`, on `[N, C, L]` or `[C, L]`, as `conv2d` over planes of height 1.

use crate::backend::{Binary, Window};
use crate::error::{Result, bail};
use crate::ops::device::device_of;
use crate::primitive;
use crate::tensor::{DType, Dense, Dims, Shape, Tensor};
use crate::testing::{f32s, sample};
use crate::torch_function;
use crate::value::Value;

/// The two values (height, width) of an int-or-pair argument; `None` for another length.
fn pair(dims: &Dims) -> Option<[i64; 2]> {
    match *dims.as_slice() {
        [d] => Some([d, d]),
        [a, b] => Some([a, b]),
        _ => None,
    }
}

/// The sizes of a 3-D or 4-D input as `[n, c, h, w]` (`n` is 1 unbatched), or `None`.
fn planes(x: &Dense) -> Option<[usize; 4]> {
    match x.layout.shape[..] {
        [n, c, h, w] => Some([n, c, h, w]),
        [c, h, w] => Some([1, c, h, w]),
        _ => None,
    }
}

/// A size the result of `func` can hold, as `usize`.
fn size(func: &str, n: i128) -> Result<usize> {
    match usize::try_from(n) {
        Ok(n) if i64::try_from(n).is_ok() => Ok(n),
        _ => bail!(Runtime, "{func}(): the padded input or the result is too large ({n} elements along a dimension)"),
    }
}

/// `x` seen with the contiguous layout of `shape` (a view when `x` is contiguous, else a copy).
fn reshaped(x: &Tensor, shape: Shape) -> Result<Tensor> {
    primitive::reshape(x, &shape)
}

/// The result shape: `[n, channels, out_h, out_w]`, without `n` for an unbatched input.
fn result_shape(x: &Dense, n: usize, channels: usize, out: [usize; 2]) -> Shape {
    let batched = x.layout.ndim() == 4;
    batched.then_some(n).into_iter().chain([channels, out[0], out[1]]).collect()
}

/// `stride`, `padding` and `dilation` as pairs (height, width), checked as PyTorch's
/// convolutions check them.
fn geometry(func: &str, stride: &Dims, padding: &Dims, dilation: &Dims) -> Result<[[i64; 2]; 3]> {
    let mut geometry = [[0i64; 2]; 3];
    for (slot, (name, dims)) in
        geometry.iter_mut().zip([("stride", stride), ("padding", padding), ("dilation", dilation)])
    {
        *slot = pair(dims).ok_or_else(|| {
            crate::Error::runtime_error(format!(
                "{func}(): expected {name} to be a single integer value or a list of 2 values to match the \
                 convolution dimensions, but got {name}={:?}",
                dims.as_slice()
            ))
        })?;
    }
    let [stride, padding, dilation] = geometry;
    if stride.iter().any(|&s| s <= 0) {
        bail!(Runtime, "{func}(): non-positive stride is not supported, got stride={stride:?}");
    }
    if padding.iter().any(|&p| p < 0) {
        bail!(Runtime, "{func}(): negative padding is not supported, got padding={padding:?}");
    }
    if dilation.iter().any(|&d| d <= 0) {
        bail!(Runtime, "{func}(): dilation should be greater than zero, got dilation={dilation:?}");
    }
    Ok(geometry)
}

/// A 2-D convolution's operands: the input (3-D or 4-D, as `[n, c, h, w]`), the weight (4-D,
/// its sizes as `layout` names them in the error) and the bias.
type Operands<'a> = (&'a Dense, &'a Dense, Option<&'a Dense>, [usize; 4], [usize; 4]);

fn operands<'a>(
    func: &str,
    input: &'a Tensor,
    weight: &'a Tensor,
    bias: Option<&'a Tensor>,
    kind: &str,
    layout: &str,
) -> Result<Operands<'a>> {
    let (x, w) = (input.data(func, "input")?, weight.data(func, "weight")?);
    let b = bias.map(|b| b.data(func, "bias")).transpose()?;
    let Some(planes) = planes(x) else {
        bail!(
            Runtime,
            "{func}(): expected 3D (unbatched) or 4D (batched) input to {kind}, but got input of size: {:?}",
            &x.layout.shape[..]
        );
    };
    let &[a, bb, kh, kw] = &w.layout.shape[..] else {
        bail!(Runtime, "{func}(): expected a 4-D weight {layout}, but got weight of size {:?}", &w.layout.shape[..]);
    };
    Ok((x, w, b, planes, [a, bb, kh, kw]))
}

/// A `NotImplementedError` for bool tensors, which no convolution or pooling takes.
fn numeric(func: &str, dtype: DType) -> Result<()> {
    if dtype == DType::Bool {
        bail!(NotImplemented, "{func}(): not implemented for {dtype} inputs; expected a numeric tensor");
    }
    Ok(())
}

/// Checks that a convolution's input is numeric (PyTorch's CPU convolutions take integers too)
/// and its weight and bias of its dtype.
fn same_numeric_dtype(func: &str, x: &Dense, w: &Dense, b: Option<&Dense>) -> Result<()> {
    numeric(func, x.dtype)?;
    for (name, d) in [("weight", Some(w)), ("bias", b)] {
        if let Some(d) = d
            && d.dtype != x.dtype
        {
            bail!(Runtime, "{func}(): input type ({}) and {name} type ({}) should be the same", x.dtype, d.dtype);
        }
    }
    Ok(())
}

/// The shared body of `conv2d`.
#[allow(clippy::too_many_arguments)]
fn convolve(
    func: &str,
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    stride: &Dims,
    padding: &Dims,
    dilation: &Dims,
    groups: i64,
) -> Result<Tensor> {
    let (x, w, b, [n, c, h, wd], [o, cg, kh, kw]) =
        operands(func, input, weight, bias, "conv2d", "[out_channels, in_channels / groups, kH, kW]")?;
    if kh == 0 || kw == 0 {
        bail!(Runtime, "{func}(): the kernel must not be empty, but got weight of size {:?}", &w.layout.shape[..]);
    }
    let [stride, padding, dilation] = geometry(func, stride, padding, dilation)?;
    if groups <= 0 {
        bail!(Runtime, "{func}(): non-positive groups is not supported, got groups={groups}");
    }
    let groups = size(func, i128::from(groups))?;
    if o % groups != 0 {
        bail!(
            Runtime,
            "{func}(): given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got \
             weight of size {:?} instead",
            &w.layout.shape[..]
        );
    }
    if cg.checked_mul(groups) != Some(c) {
        bail!(
            Runtime,
            "{func}(): given groups={groups}, weight of size {:?}, expected input {:?} to have {} channels, but got \
             {c} channels instead",
            &w.layout.shape[..],
            &x.layout.shape[..],
            cg.saturating_mul(groups)
        );
    }
    if let Some(b) = b
        && b.layout.shape != [o]
    {
        bail!(
            Runtime,
            "{func}(): given weight of size {:?}, expected bias to be 1-dimensional with {o} elements, but got bias \
             of size {:?} instead",
            &w.layout.shape[..],
            &b.layout.shape[..]
        );
    }
    same_numeric_dtype(func, x, w, b)?;
    let kernel = [kh, kw];
    let mut out = [0usize; 2];
    let mut padded = [0i128; 2];
    let mut reach = [0i128; 2];
    for axis in 0..2 {
        padded[axis] = [h, wd][axis] as i128 + 2 * i128::from(padding[axis]);
        reach[axis] = i128::from(dilation[axis]) * (kernel[axis] as i128 - 1) + 1;
        size(func, padded[axis])?;
    }
    if padded[0] < reach[0] || padded[1] < reach[1] {
        bail!(
            Runtime,
            "{func}(): calculated padded input size per channel: ({} x {}). Kernel size: ({} x {}). Kernel size \
             can't be greater than actual input size",
            padded[0],
            padded[1],
            reach[0],
            reach[1]
        );
    }
    for axis in 0..2 {
        out[axis] = size(func, (padded[axis] - reach[axis]) / i128::from(stride[axis]) + 1)?;
    }
    let as_usize = |v: [i64; 2]| v.map(|x| x.unsigned_abs() as usize);
    let win = Window {
        kernel,
        stride: as_usize(stride),
        padding: as_usize(padding),
        dilation: as_usize(dilation),
        input: [h, wd],
        out,
    };
    let mut operands = vec![("input", x), ("weight", w)];
    operands.extend(b.map(|b| ("bias", b)));
    device_of(func, &operands)?;
    let batched = reshaped(input, Shape::from([n, c, h, wd]))?;
    let result = primitive::conv2d(&batched, weight, bias, groups, &win)?;
    reshaped(&result, result_shape(x, n, o, out))
}

/// A 2-D convolution (`torch.nn.functional.conv2d`; a cross-correlation, as in PyTorch) of
/// `input` (`[N, C, H, W]`, or `[C, H, W]` unbatched) with `weight`
/// (`[out_channels, C / groups, kH, kW]`), plus `bias` (`[out_channels]`).
///
/// `stride`, `padding` (zeros) and `dilation` are one integer for both dimensions or a pair
/// (height, width); the input channels split into `groups` groups. The result is
/// `[N, out_channels, H_out, W_out]` with `H_out = (H + 2 * padding - dilation * (kH - 1) - 1)
/// / stride + 1`. Floating-point tensors of one dtype; bad shapes and arguments are
/// `RuntimeError`s. The string paddings `"same"` and `"valid"` are not supported yet.
///
/// ```
/// use torchfn::nn::functional as F;
/// // A 1x1x3x3 image of ones, a 1x1x2x2 kernel of ones: each output sums a 2x2 window.
/// let x = torchfn::ones([1, 1, 3, 3], None, None)?;
/// let w = torchfn::ones([1, 1, 2, 2], None, None)?;
/// let y = F::conv2d(&x, &w, None, 1, 0, 1, 1)?;
/// assert_eq!(y.shape()?, [1, 1, 2, 2]);
/// assert_eq!(y.to_vec::<f32>()?, [4.0; 4]);
/// // With padding 1 and stride 2, the corners see one element of the image.
/// let y = F::conv2d(&x, &w, None, 2, 1, 1, 1)?;
/// assert_eq!(y.to_vec::<f32>()?, [1.0, 2.0, 2.0, 4.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
#[torch_function(module = "torchfn.nn.functional")]
pub fn conv2d(
    input: &Tensor,
    weight: &Tensor,
    #[default(None)] bias: Option<&Tensor>,
    #[default(1)] stride: impl Into<Dims>,
    #[default(0)] padding: impl Into<Dims>,
    #[default(1)] dilation: impl Into<Dims>,
    #[default(1)] groups: i64,
) -> Result<Tensor> {
    convolve("conv2d", input, weight, bias, &stride.into(), &padding.into(), &dilation.into(), groups)
}

/// A 1-D convolution (`torch.nn.functional.conv1d`) of `input` (`[N, C, L]`, or `[C, L]`
/// unbatched) with `weight` (`[out_channels, C / groups, k]`), plus `bias`
/// (`[out_channels]`): [`conv2d`] over planes of height 1, with PyTorch's arguments (each of
/// `stride`, `padding` and `dilation` one integer). The result is `[N, out_channels, L_out]`.
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([[[1.0f32, 2.0, 3.0, 4.0]]])?;
/// let w = torchfn::tensor([[[1.0f32, -1.0]]])?;
/// assert_eq!(F::conv1d(&x, &w, None, 1, 0, 1, 1)?.to_vec::<f32>()?, [-1.0, -1.0, -1.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
#[torch_function(module = "torchfn.nn.functional")]
pub fn conv1d(
    input: &Tensor,
    weight: &Tensor,
    #[default(None)] bias: Option<&Tensor>,
    #[default(1)] stride: impl Into<Dims>,
    #[default(0)] padding: impl Into<Dims>,
    #[default(1)] dilation: impl Into<Dims>,
    #[default(1)] groups: i64,
) -> Result<Tensor> {
    const FUNC: &str = "conv1d";
    let (x, w) = (input.data(FUNC, "input")?, weight.data(FUNC, "weight")?);
    if !matches!(x.layout.ndim(), 2 | 3) {
        bail!(
            Runtime,
            "{FUNC}(): expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: {:?}",
            &x.layout.shape[..]
        );
    }
    if w.layout.ndim() != 3 {
        bail!(
            Runtime,
            "{FUNC}(): expected a 3-D weight [out_channels, in_channels / groups, kW], but got weight of size {:?}",
            &w.layout.shape[..]
        );
    }
    // Each of stride, padding and dilation along the length; height 1 with no padding.
    let along = |dims: Dims, height: i64| -> Result<Dims> {
        match *dims.as_slice() {
            [d] => Ok(Dims::from(vec![height, d])),
            _ => bail!(Runtime, "{FUNC}(): expected stride, padding and dilation to be single integers for conv1d"),
        }
    };
    let (stride, padding, dilation) = (along(stride.into(), 1)?, along(padding.into(), 0)?, along(dilation.into(), 1)?);
    let planar = |t: &Tensor, shape: &Shape| -> Result<Tensor> {
        let at = shape.len() - 1;
        reshaped(t, shape[..at].iter().copied().chain([1, shape[at]]).collect())
    };
    let result = convolve(
        FUNC,
        &planar(input, &x.layout.shape)?,
        &planar(weight, &w.layout.shape)?,
        bias,
        &stride,
        &padding,
        &dilation,
        groups,
    )?;
    let shape = result.shape()?;
    let at = shape.len() - 2;
    reshaped(&result, shape[..at].iter().copied().chain([shape[at + 1]]).collect())
}

/// A 2-D transposed convolution (`torch.nn.functional.conv_transpose2d`, sometimes called a
/// deconvolution): the adjoint of [`conv2d`] in its input, which upsamples. `input` is
/// `[N, C_in, H, W]` (or `[C_in, H, W]`), `weight` `[C_in, C_out / groups, kH, kW]`, `bias`
/// `[C_out]`; the result is `[N, C_out, H_out, W_out]` with
/// `H_out = (H - 1) * stride - 2 * padding + dilation * (kH - 1) + output_padding + 1`.
/// `stride`, `padding`, `output_padding` and `dilation` are one integer or a pair;
/// `output_padding` must be smaller than the stride or the dilation. Computed as a
/// convolution of the input spread by the stride, so its gradients and the other transforms
/// come from the primitives'.
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([[[[1.0f32, 2.0]]]])?; // [1, 1, 1, 2]
/// let w = torchfn::ones([1, 1, 1, 2], None, None)?;
/// let y = F::conv_transpose2d(&x, &w, None, 2, 0, 0, 1, 1)?;
/// assert_eq!(y.to_vec::<f32>()?, [1.0, 1.0, 2.0, 2.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
#[torch_function(module = "torchfn.nn.functional")]
pub fn conv_transpose2d(
    input: &Tensor,
    weight: &Tensor,
    #[default(None)] bias: Option<&Tensor>,
    #[default(1)] stride: impl Into<Dims>,
    #[default(0)] padding: impl Into<Dims>,
    #[default(0)] output_padding: impl Into<Dims>,
    #[default(1)] groups: i64,
    #[default(1)] dilation: impl Into<Dims>,
) -> Result<Tensor> {
    const FUNC: &str = "conv_transpose2d";
    let (x, w, b, [n, c, h, wd], [cin, og, kh, kw]) =
        operands(FUNC, input, weight, bias, FUNC, "[in_channels, out_channels / groups, kH, kW]")?;
    let [stride, padding, dilation] = geometry(FUNC, &stride.into(), &padding.into(), &dilation.into())?;
    let output_padding = output_padding.into();
    let Some(extra) = pair(&output_padding).filter(|p| p.iter().all(|&p| p >= 0)) else {
        bail!(
            Runtime,
            "{FUNC}(): expected output_padding to be one or two non-negative integers, got {:?}",
            output_padding.as_slice()
        );
    };
    if (0..2).any(|a| extra[a] >= stride[a] && extra[a] >= dilation[a]) {
        bail!(
            Runtime,
            "{FUNC}(): output padding must be smaller than either stride or dilation, but got output_padding={extra:?}, \
             stride={stride:?} and dilation={dilation:?}"
        );
    }
    if groups <= 0 {
        bail!(Runtime, "{FUNC}(): non-positive groups is not supported, got groups={groups}");
    }
    let groups = size(FUNC, i128::from(groups))?;
    if cin != c || c % groups != 0 {
        bail!(
            Runtime,
            "{FUNC}(): given groups={groups}, weight of size {:?}, expected input {:?} to have {cin} channels (a \
             multiple of groups), but got {c} channels instead",
            &w.layout.shape[..],
            &x.layout.shape[..]
        );
    }
    let out_channels = og * groups;
    if let Some(b) = b
        && b.layout.shape != [out_channels]
    {
        bail!(
            Runtime,
            "{FUNC}(): given weight of size {:?}, expected bias to be 1-dimensional with {out_channels} elements, but \
             got bias of size {:?} instead",
            &w.layout.shape[..],
            &b.layout.shape[..]
        );
    }
    same_numeric_dtype(FUNC, x, w, b)?;
    let kernel = [kh, kw];
    let mut out = [0usize; 2];
    for a in 0..2 {
        let full = (i128::from([h, wd][a] as i64) - 1) * i128::from(stride[a]) - 2 * i128::from(padding[a])
            + i128::from(dilation[a]) * (kernel[a] as i128 - 1)
            + i128::from(extra[a])
            + 1;
        if full <= 0 || kernel[a] == 0 || [h, wd][a] == 0 {
            bail!(
                Runtime,
                "{FUNC}(): given input size per channel: ({h} x {wd}). Calculated output size per channel is not \
                 positive. Output size is too small"
            );
        }
        out[a] = size(FUNC, full)?;
    }
    let mut operands = vec![("input", x), ("weight", w)];
    operands.extend(b.map(|b| ("bias", b)));
    device_of(FUNC, &operands)?;
    let as_usize = |v: [i64; 2]| v.map(|x| x.unsigned_abs() as usize);
    // The convolution whose input gradient this is: from the result's plane to the input's.
    let win = Window {
        kernel,
        stride: as_usize(stride),
        padding: as_usize(padding),
        dilation: as_usize(dilation),
        input: out,
        out: [h, wd],
    };
    let batched = reshaped(input, Shape::from([n, c, h, wd]))?;
    let mut result = primitive::conv_transpose2d(&batched, weight, groups, &win)?;
    if let Some(bias) = bias {
        let column = reshaped(bias, Shape::from([out_channels, 1, 1]))?;
        result = primitive::binary(&result, &column, crate::backend::Binary::Add(1.into()), x.dtype, None)?;
    }
    reshaped(&result, result_shape(x, n, out_channels, out))
}

/// The window of a pooling (`max_pool2d`, `avg_pool2d`) from its arguments, checked as
/// PyTorch's, and the input's `[n, c, h, w]`.
fn pool_window(
    func: &str,
    x: &Dense,
    kernel_size: &Dims,
    stride: Option<&Dims>,
    padding: &Dims,
    dilation: &Dims,
    ceil_mode: bool,
) -> Result<(Window, [usize; 4])> {
    let Some(kernel) = pair(kernel_size) else {
        bail!(Runtime, "{func}(): kernel_size must either be a single int, or a tuple of two ints");
    };
    let stride = match stride.map(Dims::as_slice) {
        None | Some([]) => kernel,
        Some(_) => match stride.and_then(pair) {
            Some(s) => s,
            None => bail!(Runtime, "{func}(): stride must either be omitted, a single int, or a tuple of two ints"),
        },
    };
    let Some(padding) = pair(padding) else {
        bail!(Runtime, "{func}(): padding must either be a single int, or a tuple of two ints");
    };
    let Some(dilation) = pair(dilation) else {
        bail!(Runtime, "{func}(): dilation must be either a single int, or a tuple of two ints");
    };
    if kernel.iter().any(|&k| k <= 0) {
        bail!(
            Runtime,
            "{func}(): kernel size should be greater than zero, but got kH: {} kW: {}",
            kernel[0],
            kernel[1]
        );
    }
    if stride.iter().any(|&s| s <= 0) {
        bail!(Runtime, "{func}(): stride should be greater than zero, but got dH: {} dW: {}", stride[0], stride[1]);
    }
    if dilation.iter().any(|&d| d <= 0) {
        bail!(
            Runtime,
            "{func}(): dilation should be greater than zero, but got dilationH: {} dilationW: {}",
            dilation[0],
            dilation[1]
        );
    }
    let reach: [i128; 2] = [0, 1].map(|a| i128::from(dilation[a]) * (i128::from(kernel[a]) - 1) + 1);
    for a in 0..2 {
        if padding[a] < 0 || i128::from(padding[a]) > reach[a] / 2 {
            bail!(
                Runtime,
                "{func}(): pad should be at least zero and at most half of effective kernel size, but got pad={}, \
                 kernel_size={} and dilation={}",
                padding[a],
                kernel[a],
                dilation[a]
            );
        }
    }
    let dims = planes(x).filter(|[_, c, h, w]| *c > 0 && *h > 0 && *w > 0);
    let Some([n, c, h, w]) = dims else {
        bail!(
            Runtime,
            "{func}(): expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got: {:?}",
            &x.layout.shape[..]
        );
    };
    numeric(func, x.dtype)?;
    let mut out = [0i128; 2];
    for (a, &extent) in [h, w].iter().enumerate() {
        let (extent, pad, s) = (extent as i128, i128::from(padding[a]), i128::from(stride[a]));
        let padded = extent + 2 * pad;
        size(func, padded)?;
        let span = padded - reach[a] + if ceil_mode { s - 1 } else { 0 };
        let mut o = span.div_euclid(s) + 1;
        // With ceil_mode, the last window must start inside the input or its left padding.
        if ceil_mode && (o - 1) * s >= extent + pad {
            o -= 1;
        }
        out[a] = o;
    }
    if out[0] < 1 || out[1] < 1 {
        bail!(
            Runtime,
            "{func}(): given input size: ({c}x{h}x{w}). Calculated output size: ({c}x{}x{}). Output size is too small",
            out[0],
            out[1]
        );
    }
    let out = [size(func, out[0])?, size(func, out[1])?];
    let as_usize = |v: [i64; 2]| v.map(|x| x.unsigned_abs() as usize);
    let win = Window {
        kernel: as_usize(kernel),
        stride: as_usize(stride),
        padding: as_usize(padding),
        dilation: as_usize(dilation),
        input: [h, w],
        out,
    };
    Ok((win, [n, c, h, w]))
}

/// The shared body of `max_pool2d` and `max_pool2d_with_indices`: the values and the indices.
fn pool(
    func: &str,
    input: &Tensor,
    kernel_size: &Dims,
    stride: Option<&Dims>,
    padding: &Dims,
    dilation: &Dims,
    ceil_mode: bool,
) -> Result<(Tensor, Tensor)> {
    let x = input.data(func, "input")?;
    let (win, [n, c, h, w]) = pool_window(func, x, kernel_size, stride, padding, dilation, ceil_mode)?;
    let out = win.out;
    let planes = reshaped(input, Shape::from([n * c, h, w]))?;
    let (values, indices) = primitive::max_pool2d(&planes, &win)?;
    let shape = result_shape(x, n, c, out);
    Ok((reshaped(&values, shape.clone())?, reshaped(&indices, shape)?))
}

/// 2-D average pooling (`torch.nn.functional.avg_pool2d`): the mean of each `kernel_size`
/// window of each channel of `input` (`[N, C, H, W]` or `[C, H, W]`), the windows `stride`
/// apart (`kernel_size` when `None`), over an input padded with zeros by `padding` (at most
/// half the kernel). The mean divides by the window's size counting the padding
/// (`count_include_pad`, PyTorch's default) or not, or by `divisor_override`; with `ceil_mode`
/// the last partial window counts, divided by the part of it over the (padded) input.
/// Computed as a convolution of each channel with a kernel of ones, so its gradients and the
/// other transforms come from the convolution's.
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([[[1.0f32, 2.0, 5.0, 0.0], [3.0, 4.0, 1.0, 1.0]]])?; // 1 x 2 x 4
/// let y = F::avg_pool2d(&x, 2, None, 0, false, true, None)?;
/// assert_eq!(y.to_vec::<f32>()?, [2.5, 1.75]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
#[torch_function(module = "torchfn.nn.functional")]
pub fn avg_pool2d(
    input: &Tensor,
    kernel_size: impl Into<Dims>,
    #[default(None)] stride: Option<Dims>,
    #[default(0)] padding: impl Into<Dims>,
    #[default(false)] ceil_mode: bool,
    #[default(true)] count_include_pad: bool,
    #[default(None)] divisor_override: Option<i64>,
) -> Result<Tensor> {
    const FUNC: &str = "avg_pool2d";
    let x = input.data(FUNC, "input")?;
    let (kernel, padding) = (kernel_size.into(), padding.into());
    let (win, [n, c, h, w]) = pool_window(FUNC, x, &kernel, stride.as_ref(), &padding, &Dims::from(1), ceil_mode)?;
    if divisor_override == Some(0) {
        bail!(Runtime, "{FUNC}(): divisor must be not zero");
    }
    let dtype = x.dtype;
    // Zeros around each plane: the padding, and past it what ceil_mode's last windows reach.
    let reach = |a: usize| (win.out[a] - 1) * win.stride[a] + win.kernel[a];
    let extra = |a: usize| reach(a).saturating_sub([h, w][a] + 2 * win.padding[a]);
    let (ph, pw) = (win.padding[0] as i64, win.padding[1] as i64);
    let around = vec![pw, pw + extra(1) as i64, ph, ph + extra(0) as i64];
    let padded = |t: &Tensor| super::pad::zero_padded(FUNC, t, &around);
    let (hp, wp) = (h + 2 * win.padding[0] + extra(0), w + 2 * win.padding[1] + extra(1));
    let ones = primitive::ones(&Shape::from([1, 1, win.kernel[0], win.kernel[1]]), dtype, x.device())?;
    let window = Window { padding: [0, 0], input: [hp, wp], ..win };
    let summed = |t: &Tensor| primitive::conv2d(t, &ones, None, 1, &window);
    let planes = reshaped(input, Shape::from([n * c, 1, h, w]))?;
    let sums = summed(&padded(&planes)?)?;
    let divisor = match divisor_override {
        Some(d) if dtype.is_floating_point() => Tensor::scalar(d as f64),
        Some(d) => Tensor::scalar(d),
        None => {
            // How many elements of each window count: the input's, and the padding's with
            // count_include_pad (never ceil_mode's zeros past it).
            let counted = if count_include_pad { [h + 2 * win.padding[0], w + 2 * win.padding[1]] } else { [h, w] };
            let mask = primitive::ones(&Shape::from([1, 1, counted[0], counted[1]]), dtype, x.device())?;
            let offset = if count_include_pad { [0, 0] } else { [ph, pw] };
            let (below, right) = (hp - counted[0] - offset[0] as usize, wp - counted[1] - offset[1] as usize);
            let mask = super::pad::zero_padded(FUNC, &mask, &[offset[1], right as i64, offset[0], below as i64])?;
            summed(&mask)?
        }
    };
    // Integers average with a division that truncates, as PyTorch's kernel's.
    let op = if dtype.is_floating_point() { Binary::Div } else { Binary::DivTrunc };
    let means = primitive::binary(&sums, &divisor, op, dtype, None)?;
    reshaped(&means, result_shape(x, n, c, win.out))
}

/// 2-D max pooling (`torch.nn.functional.max_pool2d`): the largest element of each
/// `kernel_size` window of each channel of `input` (`[N, C, H, W]` or `[C, H, W]`), the
/// windows `stride` apart (`kernel_size` when `None`), over an input padded with `-inf` by
/// `padding` (at most half the kernel), its taps `dilation` apart. With `ceil_mode`, the output
/// size rounds up so the last partial window counts. NaN wins over every number.
///
/// `kernel_size`, `padding` and `dilation` are one integer or a pair (height, width), and so
/// is `stride` when given (`Dims::from(2)`, `Dims::from([2, 1])`). Floating-point tensors only.
///
/// `return_indices=True` makes PyTorch's `max_pool2d` return a pair, which a function returning
/// one tensor cannot: call [`max_pool2d_with_indices`] for `(values, indices)` (asking for it
/// here is a `NotImplementedError` that says so).
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([[[1.0f32, 2.0, 5.0, 0.0], [3.0, 4.0, 1.0, 1.0]]])?; // 1 x 2 x 4
/// let y = F::max_pool2d(&x, 2, None, 0, 1, false, false)?;
/// assert_eq!(y.shape()?, [1, 1, 2]);
/// assert_eq!(y.to_vec::<f32>()?, [4.0, 5.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
#[torch_function(module = "torchfn.nn.functional")]
pub fn max_pool2d(
    input: &Tensor,
    kernel_size: impl Into<Dims>,
    #[default(None)] stride: impl Into<Option<Dims>>,
    #[default(0)] padding: impl Into<Dims>,
    #[default(1)] dilation: impl Into<Dims>,
    #[default(false)] ceil_mode: bool,
    #[default(false)] return_indices: bool,
) -> Result<Tensor> {
    const FUNC: &str = "max_pool2d";
    let stride = stride.into();
    let (values, _) =
        pool(FUNC, input, &kernel_size.into(), stride.as_ref(), &padding.into(), &dilation.into(), ceil_mode)?;
    if return_indices {
        bail!(
            NotImplemented,
            "{FUNC}(): return_indices=True asks for a (values, indices) pair, which max_pool2d returns as one \
             tensor only; call max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode) \
             for the pair"
        );
    }
    Ok(values)
}

/// 2-D max pooling with the positions of the maxima (`torch.nn.functional.max_pool2d_with_indices`):
/// `(values, indices)` as [`max_pool2d`], where each index is `row * W + column` in the
/// unpadded input plane (int64).
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([[[1.0f32, 2.0, 5.0, 0.0], [3.0, 4.0, 1.0, 1.0]]])?;
/// let (values, indices) = F::max_pool2d_with_indices(&x, 2, None, 0, 1, false)?;
/// assert_eq!(values.to_vec::<f32>()?, [4.0, 5.0]);
/// assert_eq!(indices.to_vec::<i64>()?, [5, 2]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn max_pool2d_with_indices(
    input: &Tensor,
    kernel_size: impl Into<Dims>,
    #[default(None)] stride: impl Into<Option<Dims>>,
    #[default(0)] padding: impl Into<Dims>,
    #[default(1)] dilation: impl Into<Dims>,
    #[default(false)] ceil_mode: bool,
) -> Result<(Tensor, Tensor)> {
    let stride = stride.into();
    let (values, indices) = pool(
        "max_pool2d_with_indices",
        input,
        &kernel_size.into(),
        stride.as_ref(),
        &padding.into(),
        &dilation.into(),
        ceil_mode,
    )?;
    Ok((values, indices))
}

crate::samples! {
    CONV2D => [
        sample([f32s(&[1, 2, 5, 5]), f32s(&[3, 2, 3, 3]), f32s(&[3])]),
        sample([f32s(&[2, 1, 4, 4]), f32s(&[2, 1, 2, 2])]).kw("stride", 2).kw("padding", 1),
        sample([f32s(&[4, 5, 6]), f32s(&[2, 2, 3, 2])])
            .kw("groups", 2)
            .kw("dilation", Value::Tuple(vec![1.into(), 2.into()])),
    ],
    CONV1D => [
        sample([f32s(&[2, 3, 7]), f32s(&[4, 3, 3]), f32s(&[4])]),
        sample([f32s(&[4, 6]), f32s(&[2, 2, 2])]).kw("stride", 2).kw("padding", 1).kw("groups", 2),
    ],
    CONV_TRANSPOSE2D => [
        sample([f32s(&[1, 2, 3, 3]), f32s(&[2, 3, 3, 3]), f32s(&[3])]).kw("stride", 2).kw("padding", 1),
        sample([f32s(&[4, 2, 3]), f32s(&[4, 1, 2, 2])])
            .kw("groups", 2)
            .kw("stride", Value::Tuple(vec![2.into(), 1.into()]))
            .kw("output_padding", Value::Tuple(vec![1.into(), 0.into()])),
    ],
    MAX_POOL2D => [
        sample([f32s(&[1, 2, 4, 4]), Value::Int(2)]),
        sample([f32s(&[2, 5, 5]), Value::Int(3)]).kw("stride", 2).kw("padding", 1).kw("ceil_mode", true),
    ],
    AVG_POOL2D => [
        sample([f32s(&[1, 2, 4, 4]), Value::Int(2)]),
        sample([f32s(&[2, 5, 5]), Value::Int(3)]).kw("stride", 2).kw("padding", 1).kw("ceil_mode", true),
        sample([f32s(&[1, 1, 5, 4]), Value::Tuple(vec![3.into(), 2.into()])])
            .kw("padding", 1)
            .kw("count_include_pad", false)
            .kw("ceil_mode", true),
    ],
    MAX_POOL2D_WITH_INDICES => [sample([f32s(&[1, 2, 4, 4]), Value::Tuple(vec![2.into(), 1.into()])])],
}
