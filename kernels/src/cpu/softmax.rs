//! The softmax family on the CPU: one strided pass per block of the softmax dimension, in
//! `f64`.

use crate::backend::Array;
use crate::error::Result;
use crate::types::{DType, Element};

use super::{alloc, array, threads, with_elements};

/// The softmax (`log` false) or log-softmax of `x` along `dim`, in the float `dtype`.
pub(super) fn softmax(x: &Array, dim: usize, log: bool, dtype: DType) -> Result<Array> {
    let shape = &x.layout.shape;
    // A zero-dimensional tensor is one lane of one element.
    let n = shape.get(dim).copied().unwrap_or(1);
    let sizes = [shape.iter().take(dim).product(), n, shape.iter().skip(dim + 1).product()];
    match dtype {
        DType::Float64 => Ok(array(with_elements(x, |d: &[f64]| softmax_blocks(d, sizes, log))??, shape.clone())),
        _ => Ok(array(with_elements(x, |d: &[f32]| softmax_blocks(d, sizes, log))??, shape.clone())),
    }
}

/// The softmax (or log-softmax) of row-major `data` of shape `[outer, n, inner]` along its
/// middle dimension, computed in `f64`: `exp(x - max) / sum(exp(x - max))`, or
/// `x - max - log(sum(exp(x - max)))`. One pass for the maxima, one for the exponentials and
/// one to normalize, each running along contiguous rows of `inner` elements. A NaN in a lane
/// makes its sum, and so the whole lane, NaN; so does `+inf` (`inf - inf`).
fn softmax_blocks<T: Element>(data: &[T], [_, n, inner]: [usize; 3], log: bool) -> Result<Vec<T>> {
    let mut out = alloc("softmax", data.len())?;
    out.resize(data.len(), T::default());
    if data.is_empty() {
        return Ok(out);
    }
    if inner == 1 {
        // Contiguous lanes (the last dimension): each one on its own, runs of lanes on the
        // CPU's threads.
        let lanes = (threads::GRAIN / n.max(1)).max(1);
        threads::for_each(data.chunks(lanes * n).zip(out.chunks_mut(lanes * n)), |(data, out)| {
            lanes_softmax(data, out, n, log)
        });
        return Ok(out);
    }
    let (mut max, mut sum) = (vec![f64::NEG_INFINITY; inner], vec![0.0f64; inner]);
    for (block, result) in data.chunks(n * inner).zip(out.chunks_mut(n * inner)) {
        max.fill(f64::NEG_INFINITY);
        sum.fill(0.0);
        for row in block.chunks(inner) {
            for (m, v) in max.iter_mut().zip(row) {
                *m = m.max(v.to_f64());
            }
        }
        for (row, out_row) in block.chunks(inner).zip(result.chunks_mut(inner)) {
            for (((o, v), m), s) in out_row.iter_mut().zip(row).zip(&max).zip(sum.iter_mut()) {
                let e = (v.to_f64() - m).exp();
                *s += e;
                if !log {
                    *o = T::from_f64(e);
                }
            }
        }
        if log {
            sum.iter_mut().for_each(|s| *s = s.ln());
        }
        for (row, out_row) in block.chunks(inner).zip(result.chunks_mut(inner)) {
            for (((o, v), m), s) in out_row.iter_mut().zip(row).zip(&max).zip(&sum) {
                *o = if log { T::from_f64(v.to_f64() - m - s) } else { T::from_f64(o.to_f64() / s) };
            }
        }
    }
    Ok(out)
}

/// The softmax (or log-softmax) of each contiguous lane of `n` elements of `data`, into `out`.
fn lanes_softmax<T: Element>(data: &[T], out: &mut [T], n: usize, log: bool) {
    for (lane, result) in data.chunks(n).zip(out.chunks_mut(n)) {
        let max = lane.iter().fold(f64::NEG_INFINITY, |m, v| m.max(v.to_f64()));
        let mut sum = 0.0;
        for (o, v) in result.iter_mut().zip(lane) {
            let e = (v.to_f64() - max).exp();
            sum += e;
            *o = T::from_f64(e);
        }
        if log {
            let log_sum = sum.ln();
            result.iter_mut().zip(lane).for_each(|(o, v)| *o = T::from_f64(v.to_f64() - max - log_sum));
        } else {
            result.iter_mut().for_each(|o| *o = T::from_f64(o.to_f64() / sum));
        }
    }
}
