//! Sliding-window kernels over the last two dimensions of `[batch, channels, height, width]`
//! data: convolution (im2col, then one matrix product per batch element and group) and max
//! pooling. The operations check every size; these only compute.

use ndarray::{ArrayView2, ArrayViewMut2};

use crate::backend::{Array, Window};
use crate::error::{Error, Result};
use crate::types::{Element, Shape};

use super::{Number, array, with_elements};

/// An empty vector with room for `n` elements, or a `RuntimeError` when they cannot be had.
fn buffer<T>(func: &str, n: Option<usize>) -> Result<Vec<T>> {
    let too_big = || Error::runtime_error(format!("{func}(): the result is too large to allocate"));
    let n = n.ok_or_else(too_big)?;
    let mut data = Vec::new();
    data.try_reserve_exact(n).map_err(|_| too_big())?;
    Ok(data)
}

/// `n` zeros (default values), or a `RuntimeError` when they cannot be had.
fn zeros<T: Element>(func: &str, n: Option<usize>) -> Result<Vec<T>> {
    let mut data = buffer(func, n)?;
    data.resize(n.unwrap_or(0), T::default());
    Ok(data)
}

fn internal(what: &str) -> Error {
    Error::runtime_error(format!("internal error in the convolution kernel: {what}"))
}

/// The 2-D convolution (cross-correlation, as PyTorch's) of `input` (`[n, c, h, w]`) with
/// `weight` (`[o, c / groups, kh, kw]`), plus `bias` (`o` elements): the `[n, o, out_h, out_w]`
/// result.
pub(super) fn conv2d<T: Number>(
    input: &Array,
    weight: &Array,
    bias: Option<&Array>,
    groups: usize,
    win: &Window,
) -> Result<Array> {
    let func = "conv2d";
    let (n, c) = (input.layout.shape[0], input.layout.shape[1]);
    let [h, w] = win.input;
    let o = weight.layout.shape.first().copied().unwrap_or(0);
    let (cg, og) = (c / groups, o / groups);
    let [kh, kw] = win.kernel;
    let [oh, ow] = win.out;
    let too_big = || Error::runtime_error(format!("{func}(): the result is too large to allocate"));
    let taps = cg.checked_mul(kh).and_then(|x| x.checked_mul(kw)).ok_or_else(too_big)?;
    let positions = oh.checked_mul(ow).ok_or_else(too_big)?;
    let total = n.checked_mul(o).and_then(|x| x.checked_mul(positions));
    let mut out = zeros::<T>(func, total)?;
    let mut columns = zeros::<T>(func, taps.checked_mul(positions))?;
    with_elements(input, |x: &[T]| {
        with_elements(weight, |wt: &[T]| -> Result<()> {
            for b in 0..n {
                for g in 0..groups {
                    // im2col: one row per (channel, kernel row, kernel column), one column per
                    // output position.
                    for ch in 0..cg {
                        let plane = &x[((b * c) + g * cg + ch) * h * w..][..h * w];
                        for i in 0..kh {
                            for j in 0..kw {
                                let row = &mut columns[((ch * kh + i) * kw + j) * positions..][..positions];
                                for y in 0..oh {
                                    let source = win.source(0, y, i);
                                    for (z, slot) in row[y * ow..][..ow].iter_mut().enumerate() {
                                        *slot = match (source, win.source(1, z, j)) {
                                            (Some(r), Some(s)) => plane[r * w + s],
                                            _ => T::default(),
                                        };
                                    }
                                }
                            }
                        }
                    }
                    let filters = ArrayView2::from_shape((og, taps), &wt[g * og * taps..][..og * taps])
                        .map_err(|_| internal("weight"))?;
                    let cols =
                        ArrayView2::from_shape((taps, positions), &columns[..]).map_err(|_| internal("columns"))?;
                    let start = (b * o + g * og) * positions;
                    let mut result = ArrayViewMut2::from_shape((og, positions), &mut out[start..][..og * positions])
                        .map_err(|_| internal("output"))?;
                    T::matmul(filters, cols, &mut result);
                }
            }
            Ok(())
        })
    })???;
    if let Some(bias) = bias {
        with_elements(bias, |bs: &[T]| {
            for (plane, &add) in out.chunks_mut(positions.max(1)).zip(bs.iter().cycle()) {
                plane.iter_mut().for_each(|v| *v = v.add(add));
            }
        })?;
    }
    Ok(array(out, Shape::from([n, o, oh, ow])))
}

/// Max pooling of `input` (`[planes, h, w]`): the largest element of each window (NaN wins, as
/// in PyTorch) and its position in its plane (`row * w + column`), both `[planes, out_h, out_w]`.
pub(super) fn max_pool2d<T: Element>(input: &Array, win: &Window) -> Result<(Array, Array)> {
    let func = "max_pool2d";
    let planes = input.layout.shape[0];
    let [h, w] = win.input;
    let [kh, kw] = win.kernel;
    let [oh, ow] = win.out;
    let total = planes.checked_mul(oh).and_then(|x| x.checked_mul(ow));
    let (mut values, mut indices) = (buffer::<T>(func, total)?, buffer::<i64>(func, total)?);
    with_elements(input, |x: &[T]| {
        for plane in x.chunks((h * w).max(1)).take(planes) {
            for y in 0..oh {
                for z in 0..ow {
                    let mut best: Option<(f64, T, usize)> = None;
                    for r in (0..kh).filter_map(|i| win.source(0, y, i)) {
                        for s in (0..kw).filter_map(|j| win.source(1, z, j)) {
                            let at = r * w + s;
                            let v = plane[at];
                            let f = v.to_f64();
                            if best.is_none_or(|(m, ..)| f > m || f.is_nan()) {
                                best = Some((f, v, at));
                            }
                        }
                    }
                    let (_, v, at) = best.unwrap_or((f64::NEG_INFINITY, T::from_f64(f64::NEG_INFINITY), 0));
                    values.push(v);
                    indices.push(at as i64);
                }
            }
        }
    })?;
    let shape = Shape::from([planes, oh, ow]);
    Ok((array(values, shape.clone()), array(indices, shape)))
}
