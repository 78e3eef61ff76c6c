//! `torch.nn.functional.interpolate` in its nearest, linear, bicubic and area modes: each
//! spatial dimension resampled in turn, by picking positions (`index_select`), for the linear
//! and cubic modes blending neighbours with constant weights, for the area mode averaging
//! windows with a constant matrix, so the gradient and the other transforms come from theirs.

use crate::error::{Result, bail};
use crate::ops::indexing::positions;
use crate::primitive;
use crate::tensor::{Shape, Tensor};
use crate::testing::{f32s, sample};
use crate::torch_function;
use crate::value::Value;

use crate::ops::args::{FloatList, IntList};

/// How the output positions read the input.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Nearest,
    NearestExact,
    Linear,
    /// Four neighbours blended by Keys' cubic convolution (`A = -0.75`, as PyTorch's), the
    /// positions beyond the edges reading the edge.
    Cubic,
    /// Each output position the mean of its window (`adaptive_avg_pool`'s: from
    /// `floor(i n / size)` to `ceil((i + 1) n / size)`).
    Area,
}

/// `input` `[N, C, *spatial]` resized to `size` (one per spatial dimension, or one for all) or by
/// `scale_factor` (the output sizes rounded down) (`torch.nn.functional.interpolate`). Modes:
/// `"nearest"` (the input position `floor(i * scale)`), `"nearest-exact"`
/// (`floor((i + 0.5) * scale)`), and `"linear"`, `"bilinear"`, `"trilinear"` for 1, 2 and 3
/// spatial dimensions (neighbours blended; with `align_corners` the corner pixels' centres
/// align), `"bicubic"` for 2 (Keys' cubic convolution of four neighbours, `A = -0.75`, the
/// edges repeated), and `"area"` (each output position the mean of its window, as adaptive
/// average pooling). As in PyTorch, a given `scale_factor` is the scale the positions are
/// computed with.
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([[[0.0f32, 1.0, 2.0, 3.0, 4.0]]])?;
/// let y = F::interpolate(&x, Some(vec![3i64].into()), None, "linear", None)?;
/// assert_eq!(y.to_vec::<f32>()?, [1.0 / 3.0, 2.0, 11.0 / 3.0]);
/// let z = F::interpolate(&x, None, Some(2.0.into()), "nearest", None)?;
/// assert_eq!(z.shape()?, [1, 1, 10]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn interpolate(
    input: &Tensor,
    #[default(None)] size: Option<IntList>,
    #[default(None)] scale_factor: Option<FloatList>,
    #[default("nearest")] mode: &str,
    #[default(None)] align_corners: Option<bool>,
) -> Result<Tensor> {
    const FUNC: &str = "interpolate";
    let x = input.data(FUNC, "input")?;
    let shape = x.layout.shape.clone();
    let spatial = shape.len().saturating_sub(2);
    let (mode, dims_needed) = match mode {
        "nearest" => (Mode::Nearest, None),
        "nearest-exact" => (Mode::NearestExact, None),
        "linear" => (Mode::Linear, Some(1)),
        "bilinear" => (Mode::Linear, Some(2)),
        "trilinear" => (Mode::Linear, Some(3)),
        "bicubic" => (Mode::Cubic, Some(2)),
        "area" => (Mode::Area, None),
        other => bail!(
            NotImplemented,
            "{FUNC}(): the {other} mode is not available; nearest, nearest-exact, linear, bilinear, bicubic, \
             trilinear and area are"
        ),
    };
    if let Some(n) = dims_needed
        && n != spatial
    {
        bail!(
            NotImplemented,
            "{FUNC}(): Got {}D input, but {} mode needs {}D input",
            shape.len(),
            if mode == Mode::Cubic { "bicubic" } else { ["linear", "bilinear", "trilinear"][n - 1] },
            n + 2
        );
    }
    if !(1..=3).contains(&spatial) {
        bail!(NotImplemented, "{FUNC}(): input of {} dimensions: expected 3, 4 or 5 ([N, C, *spatial])", shape.len());
    }
    if align_corners.is_some() && !matches!(mode, Mode::Linear | Mode::Cubic) {
        bail!(
            Value,
            "{FUNC}(): align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | trilinear"
        );
    }
    if !x.dtype.is_floating_point() && matches!(mode, Mode::Linear | Mode::Cubic | Mode::Area) {
        bail!(NotImplemented, "{FUNC}(): the linear, cubic and area modes need floating-point input, not {}", x.dtype);
    }
    // Each spatial dimension's output size, and the scale its positions are computed with.
    let per_dim = |values: &[f64], what: &str| -> Result<Vec<f64>> {
        match values.len() {
            1 => Ok(vec![values[0]; spatial]),
            n if n == spatial => Ok(values.to_vec()),
            n => bail!(
                Value,
                "{FUNC}(): Input and {what} must have the same number of spatial dimensions, but got input with spatial dimensions of {:?} and output size of {n} values",
                &shape[2..]
            ),
        }
    };
    let targets: Vec<(usize, f64)> = match (size, scale_factor) {
        (Some(_), Some(_)) => bail!(Value, "{FUNC}(): only one of size or scale_factor should be defined"),
        (None, None) => bail!(Value, "{FUNC}(): either size or scale_factor should be defined"),
        (Some(size), None) => {
            let sizes: Vec<f64> = size.as_slice().iter().map(|&s| s as f64).collect();
            let sizes = per_dim(&sizes, "output_size")?;
            if sizes.iter().any(|&s| s < 1.0) {
                bail!(Value, "{FUNC}(): output sizes must be positive, got {sizes:?}");
            }
            sizes.iter().zip(&shape[2..]).map(|(&out, &n)| (out as usize, n as f64 / out)).collect()
        }
        (None, Some(factors)) => {
            let factors = per_dim(factors.as_slice(), "scale_factor")?;
            let mut targets = Vec::new();
            for (&f, &n) in factors.iter().zip(&shape[2..]) {
                let out = (n as f64 * f).floor();
                if !(f > 0.0 && out >= 1.0 && out <= (1u64 << 40) as f64) {
                    bail!(Value, "{FUNC}(): scale_factor {f} gives an output size of {out} for an input size of {n}");
                }
                targets.push((out as usize, 1.0 / f));
            }
            targets
        }
    };
    let mut out = input.clone();
    for (i, &(size, scale)) in targets.iter().enumerate() {
        out = resample(&out, 2 + i, size, scale, mode, align_corners.unwrap_or(false))?;
    }
    Ok(out)
}

/// `x` resampled along `dim` to `size` positions.
fn resample(x: &Tensor, dim: usize, size: usize, scale: f64, mode: Mode, align_corners: bool) -> Result<Tensor> {
    let data = x.data("interpolate", "input")?;
    let (n, dtype, device) = (data.layout.shape[dim], data.dtype, data.device());
    let last = n.saturating_sub(1) as f64;
    // The positions come straight from iterators: an output size is only allocated once
    // checked (an index vector as long as a huge size is an error, not an abort).
    // The shape of per-position constants along `dim`, broadcasting over the other dimensions.
    let along: Shape = (0..data.layout.ndim()).map(|d| if d == dim { size } else { 1 }).collect();
    // Constants computed on the host, in `x`'s dtype on its device; collected into a fallible
    // buffer, so a huge size is an error rather than an abort.
    let constants = |values: &mut dyn Iterator<Item = f64>, shape: Shape| -> Result<Tensor> {
        let mut host = crate::backend::host::alloc("interpolate", shape.checked_numel().unwrap_or(usize::MAX))?;
        host.extend(values);
        primitive::transfer(&primitive::copy(&Tensor::from_vec(host, shape)?, dtype)?, device, dtype)
    };
    let pick = |index: &mut dyn ExactSizeIterator<Item = i64>| -> Result<Tensor> {
        primitive::index_select(x, dim, &positions(device, index)?)
    };
    match mode {
        Mode::Nearest | Mode::NearestExact => {
            let offset = if mode == Mode::Nearest { 0.0 } else { 0.5 };
            pick(&mut (0..size).map(|i| (((i as f64 + offset) * scale).floor()).min(last) as i64))
        }
        Mode::Linear => {
            // Output position i reads `low + weight * (high - low)` of the input.
            let at = |i: usize| -> (f64, f64, f64) {
                let s = if align_corners {
                    if size > 1 { i as f64 * last / (size - 1) as f64 } else { 0.0 }
                } else {
                    ((i as f64 + 0.5) * scale - 0.5).max(0.0)
                };
                let low = s.min(last).floor();
                (low, (low + 1.0).min(last), s.min(last) - low)
            };
            let (low, high) =
                (pick(&mut (0..size).map(|i| at(i).0 as i64))?, pick(&mut (0..size).map(|i| at(i).1 as i64))?);
            let weights = constants(&mut (0..size).map(|i| at(i).2), along.clone())?;
            crate::ops::blend::lerp_impl("interpolate", &low, &high, &weights, None)
        }
        Mode::Cubic => {
            // Output position i reads input positions floor(s) - 1 ..= floor(s) + 2 (clamped to
            // the edges) with Keys' weights of the distance t = s - floor(s).
            let a = -0.75;
            let near = |x: f64| ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
            let far = |x: f64| ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
            let source = |i: usize| -> f64 {
                if align_corners {
                    if size > 1 { i as f64 * last / (size - 1) as f64 } else { 0.0 }
                } else {
                    (i as f64 + 0.5) * scale - 0.5
                }
            };
            let mut total: Option<Tensor> = None;
            for tap in 0..4 {
                let read = |i: usize| (source(i).floor() as i64 - 1 + tap as i64).clamp(0, n as i64 - 1);
                let picked = pick(&mut (0..size).map(read))?;
                let weight = |i: usize| {
                    let s = source(i);
                    let t = s - s.floor();
                    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)][tap]
                };
                let weights = constants(&mut (0..size).map(weight), along.clone())?;
                let term = picked.mul(&weights)?;
                total = Some(match total {
                    Some(sum) => sum.add(&term, 1)?,
                    None => term,
                });
            }
            Ok(total.expect("four taps"))
        }
        Mode::Area => {
            // The windows' means as a [size, n] matrix that the positions along `dim` multiply.
            let mut means = Vec::new();
            for i in 0..size {
                let (start, end) = ((i * n) / size, ((i + 1) * n).div_ceil(size));
                means.push(
                    (0..n).map(move |j| if (start..end).contains(&j) { 1.0 / (end - start) as f64 } else { 0.0 }),
                );
            }
            let matrix = constants(&mut means.into_iter().flatten(), Shape::from([size, n]))?;
            let last = data.layout.ndim() as i64 - 1;
            x.transpose(dim as i64, last)?.matmul(&matrix.t()?)?.transpose(dim as i64, last)
        }
    }
}

crate::samples! {
    INTERPOLATE => [
        sample([f32s(&[1, 2, 3, 4])]).kw("size", Value::List(vec![5.into(), 3.into()])),
        sample([f32s(&[1, 2, 3])]).kw("scale_factor", Value::List(vec![2.0.into()])),
        sample([f32s(&[1, 1, 3, 4])]).kw("size", Value::List(vec![5.into(), 3.into()])).kw("mode", "bilinear"),
        sample([f32s(&[2, 1, 4])]).kw("size", Value::List(vec![6.into()])).kw("mode", "linear").kw("align_corners", true),
        sample([f32s(&[1, 1, 3, 4])]).kw("size", Value::List(vec![5.into(), 3.into()])).kw("mode", "nearest-exact"),
        sample([f32s(&[1, 2, 5, 4])]).kw("size", Value::List(vec![2.into(), 3.into()])).kw("mode", "area"),
        sample([f32s(&[1, 1, 3, 4])]).kw("size", Value::List(vec![5.into(), 3.into()])).kw("mode", "bicubic"),
    ],
}
