//! `torch.nn.functional.pad`: constant, reflect, replicate and circular padding, composed of
//! narrowing, flipping, expanding and joining, so its gradient and its other transforms come
//! from theirs.

use crate::error::{Result, bail};
use crate::ops::indexing::flip_impl;
use crate::ops::join::cat_impl;
use crate::ops::view::{expand_impl, narrow_impl};
use crate::tensor::{Dims, Scalar, Shape, Tensor};
use crate::testing::{f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

/// How the new positions are filled.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Constant,
    Reflect,
    Replicate,
    Circular,
}

/// `input` padded by `pad`, pairs (before, after) for the last dimension first, then the one
/// before it, ... (`torch.nn.functional.pad`). `mode` is `"constant"` (with `value`, default 0),
/// `"reflect"` (mirrored without repeating the edge), `"replicate"` (the edge repeated) or
/// `"circular"` (wrapping around). A negative amount removes positions (constant, replicate and
/// circular). The non-constant modes pad the last 1 to 3 dimensions of an input with one or
/// two more (a batch and channels), as PyTorch's.
///
/// ```
/// use torchfn::nn::functional as F;
/// let x = torchfn::tensor([[0.0f32, 1.0, 2.0]])?;
/// assert_eq!(F::pad(&x, vec![2, 1], "constant", None)?.to_vec::<f32>()?, [0.0, 0.0, 0.0, 1.0, 2.0, 0.0]);
/// assert_eq!(F::pad(&x, vec![2, 1], "reflect", None)?.to_vec::<f32>()?, [2.0, 1.0, 0.0, 1.0, 2.0, 1.0]);
/// assert_eq!(F::pad(&x, vec![2, 1], "replicate", None)?.to_vec::<f32>()?, [0.0, 0.0, 0.0, 1.0, 2.0, 2.0]);
/// assert_eq!(F::pad(&x, vec![2, 1], "circular", None)?.to_vec::<f32>()?, [1.0, 2.0, 0.0, 1.0, 2.0, 0.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn.nn.functional")]
pub fn pad(
    input: &Tensor,
    pad: Vec<i64>,
    #[default("constant")] mode: &str,
    #[default(None)] value: Option<f64>,
) -> Result<Tensor> {
    let func = "pad";
    let x = input.data(func, "input")?;
    let ndim = x.layout.ndim();
    let mode = match mode {
        "constant" => Mode::Constant,
        "reflect" => Mode::Reflect,
        "replicate" => Mode::Replicate,
        "circular" => Mode::Circular,
        other => bail!(NotImplemented, "{func}(): Unrecognised padding mode {other}"),
    };
    if !pad.len().is_multiple_of(2) {
        bail!(Runtime, "{func}(): Padding length must be divisible by 2");
    }
    if pad.len() > 2 * ndim {
        bail!(
            Runtime,
            "{func}(): Padding length should be less than or equal to two times the input dimension but got padding \
             length {} and input of dimension {ndim}",
            pad.len()
        );
    }
    let padded = pad.len() / 2;
    if mode != Mode::Constant && (!(1..=3).contains(&padded) || !(padded + 1..=padded + 2).contains(&ndim)) {
        bail!(
            NotImplemented,
            "{func}(): Padding size {} is not supported for {ndim}D input tensor: non-constant padding pads the last \
             1, 2 or 3 dimensions (padding size 2, 4 or 6) of an input with one or two more",
            pad.len()
        );
    }
    pad_all(func, input, &pad, mode, value.unwrap_or(0.0))
}

/// `input` padded by `pad` (PyTorch's order: the last dimension's before and after amounts
/// first), its arguments already checked.
fn pad_all(func: &str, input: &Tensor, pad: &[i64], mode: Mode, value: f64) -> Result<Tensor> {
    let ndim = input.shape()?.len();
    let mut out = input.clone();
    for (i, amounts) in pad.chunks(2).enumerate() {
        out = pad_dim(func, &out, ndim - 1 - i, (amounts[0], amounts[1]), mode, value)?;
    }
    Ok(out)
}

/// `input` padded with zeros by `pad` (non-negative amounts, in `pad`'s order), for the
/// operations built on it (`avg_pool2d`).
pub(super) fn zero_padded(func: &str, input: &Tensor, pad: &[i64]) -> Result<Tensor> {
    pad_all(func, input, pad, Mode::Constant, 0.0)
}

/// `t` padded along dimension `d` by `before` and `after` positions.
fn pad_dim(func: &str, t: &Tensor, d: usize, (before, after): (i64, i64), mode: Mode, value: f64) -> Result<Tensor> {
    let size = t.data(func, "input")?.layout.shape[d] as i64;
    let dim = d as i64;
    if mode == Mode::Reflect && (before >= size || after >= size || before < 0 || after < 0) {
        bail!(
            Runtime,
            "{func}(): Padding size should be less than the corresponding input dimension, but got: padding \
             ({before}, {after}) at dimension {d} of input {:?}",
            t.shape()?.as_ref()
        );
    }
    if mode == Mode::Circular && (before > size || after > size) {
        bail!(Runtime, "{func}(): Padding value causes wrapping around more than once.");
    }
    // Negative amounts remove positions first.
    let (cut_before, cut_after) = ((-before).max(0), (-after).max(0));
    let kept = size - cut_before - cut_after;
    if kept < 0 {
        bail!(
            Runtime,
            "{func}(): The input size {size}, plus negative padding {before} and {after} resulted in a negative \
             output size, which is invalid. Check dimension {d} of your input."
        );
    }
    let core = if cut_before > 0 || cut_after > 0 {
        narrow_impl(func, ("input", t), dim, cut_before, kept)?
    } else {
        t.clone()
    };
    let (before, after) = (before.max(0), after.max(0));
    if before == 0 && after == 0 {
        return Ok(core);
    }
    // The source positions (in `t`, before any cut) of each side.
    let side = |count: i64, leading: bool| -> Result<Option<Tensor>> {
        if count == 0 {
            return Ok(None);
        }
        let piece = match mode {
            Mode::Constant => {
                let x = core.data(func, "input")?;
                let shape: Shape =
                    x.layout.shape.iter().enumerate().map(|(i, &n)| if i == d { count as usize } else { n }).collect();
                crate::primitive::full(&shape, Scalar::Float(value), x.dtype, x.device())?
            }
            Mode::Reflect => {
                let start = if leading { 1 } else { size - 1 - count };
                flip_impl(func, ("input", &narrow_impl(func, ("input", t), dim, start, count)?), &Dims::from(dim))?
            }
            Mode::Replicate => {
                let edge = narrow_impl(func, ("input", &core), dim, if leading { 0 } else { kept - 1 }, 1)?;
                let mut sizes: Vec<i64> = edge.shape()?.iter().map(|&n| n as i64).collect();
                sizes[d] = count;
                expand_impl(func, ("input", &edge), &sizes)?
            }
            Mode::Circular => {
                let start = if leading { size - count } else { 0 };
                narrow_impl(func, ("input", t), dim, start, count)?
            }
        };
        Ok(Some(piece))
    };
    let pieces: Vec<Tensor> =
        [side(before, true)?, Some(core.clone()), side(after, false)?].into_iter().flatten().collect();
    cat_impl(func, &pieces, dim)
}

crate::samples! {
    PAD => [
        sample([f32s(&[2, 3]), Value::List(vec![Value::Int(2), Value::Int(1)])]),
        sample([f32s(&[1, 2, 3]), Value::List(vec![Value::Int(1), Value::Int(1), Value::Int(1), Value::Int(0)])]).kw("value", 9.0),
        sample([f32s(&[1, 2, 3]), Value::List(vec![Value::Int(2), Value::Int(1)]), Value::Str("reflect".into())]),
        sample([f32s(&[1, 2, 3]), Value::List(vec![Value::Int(2), Value::Int(-1)])]).kw("mode", "replicate"),
        sample([f32s(&[1, 2, 3]), Value::List(vec![Value::Int(2), Value::Int(1)])]).kw("mode", "circular"),
        sample([i64s(&[2, 2]), Value::List(vec![Value::Int(-1), Value::Int(2)])]),
    ],
}
