//! Sliding-window kernels over the last two dimensions of `[batch, channels, height, width]`
//! data: convolution (im2col, then one matrix product per batch element and group) and max
//! pooling. The operations check every size; these only compute.

use ndarray::{ArrayView2, ArrayViewD, ArrayViewMut2};

use crate::error::{Error, Result};
use crate::tensor::{Dense, Element};

use super::{Number, read_as};

/// Where a window sits: kernel size, stride, padding and dilation (height, width), and the
/// output size they give. Every value fits the input: the operation checked them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    pub(crate) kernel: [usize; 2],
    pub(crate) stride: [usize; 2],
    pub(crate) padding: [usize; 2],
    pub(crate) dilation: [usize; 2],
    pub(crate) out: [usize; 2],
}

impl Window {
    /// The input position (row or column, `axis` 0 or 1) that kernel tap `tap` of output
    /// position `at` reads, or `None` when it falls in the padding.
    #[inline(always)]
    fn source(&self, axis: usize, at: usize, tap: usize, size: usize) -> Option<usize> {
        (at * self.stride[axis] + tap * self.dilation[axis]).checked_sub(self.padding[axis]).filter(|&i| i < size)
    }
}

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

/// Runs `f` on the elements of `dense` as `T`, in row-major order.
pub(crate) fn with_elements<T: Element, R>(dense: &Dense, f: impl FnOnce(&[T]) -> R) -> R {
    read_as(dense, |v: ArrayViewD<'_, T>| match v.as_slice() {
        Some(data) => f(data),
        None => f(&v.iter().copied().collect::<Vec<T>>()),
    })
}

fn internal(what: &str) -> Error {
    Error::runtime_error(format!("internal error in the convolution kernel: {what}"))
}

/// The 2-D convolution (cross-correlation, as PyTorch's) of `input`, whose row-major elements
/// have shape `[n, c, h, w]`, with `weight` of shape `[o, c / groups, kh, kw]`, plus `bias`
/// (`o` elements): the row-major elements of the `[n, o, out_h, out_w]` result.
pub(crate) fn conv2d<T: Number>(
    func: &str,
    input: &Dense,
    [n, c, h, w]: [usize; 4],
    weight: &Dense,
    bias: Option<&Dense>,
    groups: usize,
    win: &Window,
) -> Result<Vec<T>> {
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
                                    let source = win.source(0, y, i, h);
                                    for (z, slot) in row[y * ow..][..ow].iter_mut().enumerate() {
                                        *slot = match (source, win.source(1, z, j, w)) {
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
    })?;
    if let Some(bias) = bias {
        with_elements(bias, |bs: &[T]| {
            for (plane, &add) in out.chunks_mut(positions.max(1)).zip(bs.iter().cycle()) {
                plane.iter_mut().for_each(|v| *v = v.add(add));
            }
        });
    }
    Ok(out)
}

/// Max pooling of `input`, whose row-major elements are `planes` planes of `h x w`: the
/// largest element of each window (NaN wins, as in PyTorch) and its position in its plane
/// (`row * w + column`), both in row-major `[planes, out_h, out_w]` order.
pub(crate) fn max_pool2d<T: Element>(
    func: &str,
    input: &Dense,
    [planes, h, w]: [usize; 3],
    win: &Window,
) -> Result<(Vec<T>, Vec<i64>)> {
    let [kh, kw] = win.kernel;
    let [oh, ow] = win.out;
    let total = planes.checked_mul(oh).and_then(|x| x.checked_mul(ow));
    let (mut values, mut indices) = (buffer::<T>(func, total)?, buffer::<i64>(func, total)?);
    with_elements(input, |x: &[T]| {
        for plane in x.chunks(h * w).take(planes) {
            for y in 0..oh {
                for z in 0..ow {
                    let mut best: Option<(f64, T, usize)> = None;
                    for r in (0..kh).filter_map(|i| win.source(0, y, i, h)) {
                        for s in (0..kw).filter_map(|j| win.source(1, z, j, w)) {
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
    });
    Ok((values, indices))
}
