//! Reductions and scans along dimensions: the reduced dimensions are moved last, so each output
//! element reduces one contiguous lane.

use ndarray::{ArrayD, ArrayViewD, IxDyn};
use rayon::prelude::*;

use crate::tensor::{Dense, Element, Shape};

use super::{from_array, read_as};

/// Lanes of at least this many elements are split across threads by [`fold`].
const GRAIN: usize = 1 << 16;

/// Runs `body` on the elements of `dense` (as `T`) with the `reduced` dimensions (sorted) moved
/// last, with the length of one lane of them and the shape of the other dimensions. A
/// contiguous tensor of dtype `T` whose reduced dimensions already come last is read in place;
/// any other is copied in that order first.
fn with_lanes<T: Element, R>(dense: &Dense, reduced: &[usize], body: impl FnOnce(&[T], usize, Vec<usize>) -> R) -> R {
    let shape = &dense.layout.shape;
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !reduced.contains(d)).collect();
    let lane: usize = reduced.iter().map(|&d| shape[d]).product();
    let kept_shape: Vec<usize> = kept.iter().map(|&d| shape[d]).collect();
    let trailing = reduced.iter().enumerate().all(|(i, &d)| d == shape.len() - reduced.len() + i);
    if trailing && dense.dtype == T::DTYPE && dense.layout.is_contiguous() {
        let buffer = dense.storage.read();
        let (offset, n) = (dense.layout.offset, dense.layout.numel());
        if let Some(data) = buffer.as_slice::<T>().and_then(|data| data.get(offset..offset + n)) {
            return body(data, lane, kept_shape);
        }
    }
    let order: Vec<usize> = kept.iter().chain(reduced).copied().collect();
    let data: Vec<T> = read_as(dense, |v: ArrayViewD<'_, T>| v.permuted_axes(IxDyn(&order)).iter().copied().collect());
    body(&data, lane, kept_shape)
}

/// The shape of a reduction's result: the `reduced` dimensions kept as size one with
/// `keepdim`, dropped otherwise.
fn reduced_shape(dense: &Dense, reduced: &[usize], keepdim: bool, kept: Vec<usize>) -> Shape {
    if keepdim {
        dense.layout.shape.iter().enumerate().map(|(d, &n)| if reduced.contains(&d) { 1 } else { n }).collect()
    } else {
        kept.into_iter().collect()
    }
}

/// `f` applied to each lane of the `reduced` dimensions (lanes in parallel when there are many
/// elements); the result keeps them as size one with `keepdim`, and drops them otherwise.
pub(crate) fn reduce<T: Element, A: Element>(
    dense: &Dense,
    reduced: &[usize],
    keepdim: bool,
    f: impl Fn(&[T]) -> A + Sync,
) -> Dense {
    with_lanes(dense, reduced, |data, lane, kept| {
        let out: Vec<A> = if lane == 0 {
            (0..kept.iter().product::<usize>()).map(|_| f(&[])).collect()
        } else if data.len() >= 2 * GRAIN {
            data.par_chunks(lane).map(&f).collect()
        } else {
            data.chunks(lane).map(&f).collect()
        };
        Dense::from_vec(out, reduced_shape(dense, reduced, keepdim, kept))
    })
}

/// As [`reduce`], for an `f` that can work on parts of a lane: `f(lane)` equals
/// `combine(f(first part), f(rest))`, as sums, products and extremes do. Long lanes (a full
/// reduction of a large tensor) are split across threads.
pub(crate) fn fold<T: Element>(
    dense: &Dense,
    reduced: &[usize],
    keepdim: bool,
    f: impl Fn(&[T]) -> T + Sync,
    combine: impl Fn(T, T) -> T + Sync,
) -> Dense {
    let lane: usize = reduced.iter().map(|&d| dense.layout.shape[d]).product();
    if lane < 2 * GRAIN {
        return reduce(dense, reduced, keepdim, f);
    }
    with_lanes(dense, reduced, |data, lane, kept| {
        let split = |lane: &[T]| lane.par_chunks(GRAIN).map(&f).reduce_with(&combine).unwrap_or_else(|| f(&[]));
        let out: Vec<T> = data.chunks(lane).map(split).collect();
        Dense::from_vec(out, reduced_shape(dense, reduced, keepdim, kept))
    })
}

/// The sum of `x` in `f64`, in eight interleaved partial sums: the compiler vectorises it, and
/// the rounding error grows more slowly than one running sum's.
pub(crate) fn sum_f64<T: Element>(x: &[T]) -> f64 {
    let mut partial = [0.0f64; 8];
    let chunks = x.chunks_exact(8);
    let rest: f64 = chunks.remainder().iter().map(|v| v.to_f64()).sum();
    for chunk in chunks {
        partial.iter_mut().zip(chunk).for_each(|(p, v)| *p += v.to_f64());
    }
    partial.iter().sum::<f64>() + rest
}

/// `f` applied along dimension `dim`: each lane is replaced by what `f` writes for it (a
/// cumulative sum, say); the result has the input's shape.
pub(crate) fn scan<T: Element, A: Element>(dense: &Dense, dim: usize, f: impl Fn(&[T], &mut [A])) -> Dense {
    let (out, kept) = with_lanes::<T, _>(dense, &[dim], |data, lane, kept| {
        let mut out = vec![A::default(); data.len()];
        if lane > 0 {
            data.chunks(lane).zip(out.chunks_mut(lane)).for_each(|(x, y)| f(x, y));
        }
        (out, kept)
    });
    // Back from (kept..., dim) to the input's order of dimensions.
    let permuted: Vec<usize> = kept.iter().copied().chain([dense.layout.shape[dim]]).collect();
    let array = ArrayD::from_shape_vec(IxDyn(&permuted), out).expect("the lanes hold every element");
    let ndim = dense.layout.ndim();
    let back: Vec<usize> = (0..ndim)
        .map(|d| {
            if d < dim {
                d
            } else if d == dim {
                ndim - 1
            } else {
                d - 1
            }
        })
        .collect();
    from_array(array.permuted_axes(IxDyn(&back)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Layout;

    fn ramp(n: usize, shape: &[usize]) -> Dense {
        Dense {
            layout: Layout::contiguous(Shape::new(shape)),
            ..Dense::from_vec((0..n as i64).collect(), Shape::from([n]))
        }
    }

    fn ints(d: &Dense) -> Vec<i64> {
        read_as(d, |v: ArrayViewD<'_, i64>| v.iter().copied().collect())
    }

    #[test]
    fn long_lanes_split_across_threads_give_the_whole_lane_s_result() {
        let n = 5 * GRAIN + 7;
        let sum = |x: &[i64]| x.iter().sum::<i64>();
        let all = fold(&ramp(n, &[n]), &[0], false, sum, |a, b| a + b);
        assert_eq!(ints(&all), [(n as i64 - 1) * n as i64 / 2]);
        let rows = fold(&ramp(2 * n, &[2, n]), &[1], true, sum, |a, b| a + b);
        assert_eq!(
            ints(&rows),
            [sum(&(0..n as i64).collect::<Vec<_>>()), sum(&(n as i64..2 * n as i64).collect::<Vec<_>>())]
        );
        // A leading reduced dimension is read through a permuted copy.
        let columns = fold(&ramp(2 * n, &[2, n]), &[0], false, sum, |a, b| a + b);
        assert_eq!(ints(&columns)[..2], [n as i64, n as i64 + 2]);
    }

    #[test]
    fn sums_in_f64_are_exact_for_small_integers() {
        let x: Vec<f32> = (0..1001).map(|i| i as f32).collect();
        assert_eq!(sum_f64(&x), 500_500.0);
        assert_eq!(sum_f64::<f32>(&[]), 0.0);
    }
}
