//! Reductions ([`Reduce`]) and scans ([`Scan`]) along dimensions on the CPU: the reduced
//! dimensions are moved last, so each output element reduces one contiguous lane.

use ndarray::{ArrayD, IxDyn};

use crate::backend::{Array, Reduce, Scan};
use crate::error::Result;
use crate::types::{DType, Element, Layout, Shape, with_dtype};

use super::map::vectorised;
use super::threads::GRAIN;
use super::{Number, alloc, array, elements, internal, undefined};

/// `op` over the dimensions `dims` of `x`, read as `dtype`; the result has the other dimensions.
pub(super) fn reduce(x: &Array, dims: &[usize], op: Reduce, dtype: DType) -> Result<Array> {
    match (op, dtype) {
        (Reduce::All, _) => lanes::<bool, bool>(x, dims, |lane| lane.iter().all(|&b| b)),
        (Reduce::Any, _) => lanes::<bool, bool>(x, dims, |lane| lane.iter().any(|&b| b)),
        (_, DType::Float32) => numeric::<f32>(x, dims, op),
        (_, DType::Float64) => numeric::<f64>(x, dims, op),
        (_, DType::UInt8) => numeric::<u8>(x, dims, op),
        (_, DType::Int8) => numeric::<i8>(x, dims, op),
        (_, DType::Int16) => numeric::<i16>(x, dims, op),
        (_, DType::Int32) => numeric::<i32>(x, dims, op),
        (_, DType::Int64) => numeric::<i64>(x, dims, op),
        (_, DType::Bool) => boolean(x, dims, op),
        // Half precision computes in float32: the backend widens it first.
        (_, DType::Float16 | DType::BFloat16) => Err(undefined(op, dtype)),
    }
}

fn numeric<T: Number>(x: &Array, dims: &[usize], op: Reduce) -> Result<Array> {
    let floating = T::DTYPE.is_floating_point();
    match op {
        Reduce::Sum if floating => match sum_rows::<T>(x, dims, false) {
            Some(summed) => summed,
            None => fold::<T>(x, dims, |lane| T::from_f64(sum_f64(lane)), Number::add),
        },
        Reduce::Sum => fold::<T>(x, dims, |lane| lane.iter().fold(T::default(), |a, &b| a.add(b)), Number::add),
        Reduce::Prod => fold::<T>(x, dims, |lane| lane.iter().fold(T::from_i64(1), |a, &b| a.mul(b)), Number::mul),
        Reduce::Mean if floating => match sum_rows::<T>(x, dims, true) {
            Some(mean) => mean,
            None => lanes::<T, T>(x, dims, |lane| T::from_f64(sum_f64(lane) / lane.len() as f64)),
        },
        Reduce::Max => lanes::<T, T>(x, dims, |lane| pick(lane, true).1),
        Reduce::Min => lanes::<T, T>(x, dims, |lane| pick(lane, false).1),
        Reduce::ArgMax => lanes::<T, i64>(x, dims, |lane| pick(lane, true).0 as i64),
        Reduce::ArgMin => lanes::<T, i64>(x, dims, |lane| pick(lane, false).0 as i64),
        _ => Err(undefined(op, T::DTYPE)),
    }
}

fn boolean(x: &Array, dims: &[usize], op: Reduce) -> Result<Array> {
    match op {
        Reduce::Sum | Reduce::Max => lanes::<bool, bool>(x, dims, |lane| lane.iter().any(|&b| b)),
        Reduce::Prod | Reduce::Min => lanes::<bool, bool>(x, dims, |lane| lane.iter().all(|&b| b)),
        Reduce::ArgMax => lanes::<bool, i64>(x, dims, |lane| pick(lane, true).0 as i64),
        Reduce::ArgMin => lanes::<bool, i64>(x, dims, |lane| pick(lane, false).0 as i64),
        _ => Err(undefined(op, DType::Bool)),
    }
}

/// The position and value of the first largest (or smallest) element of a lane; a NaN wins,
/// as in PyTorch. An empty lane (which operations refuse) gives the default.
fn pick<T: Element>(lane: &[T], largest: bool) -> (usize, T) {
    let Some(&first) = lane.first() else { return (0, T::default()) };
    let nan = |x: T| x.to_f64().is_nan();
    let mut best = (0, first);
    for (i, &v) in lane.iter().enumerate().skip(1) {
        if nan(best.1) {
            break;
        }
        let better = if largest { v > best.1 } else { v < best.1 };
        if nan(v) || better {
            best = (i, v);
        }
    }
    best
}

/// The sum of `x` in `f64`, in eight interleaved partial sums: the compiler vectorises it, and
/// the rounding error grows more slowly than one running sum's.
pub fn sum_f64<T: Element>(x: &[T]) -> f64 {
    let mut partial = [0.0f64; 8];
    let chunks = x.chunks_exact(8);
    let rest: f64 = chunks.remainder().iter().map(|v| v.to_f64()).sum();
    for chunk in chunks {
        partial.iter_mut().zip(chunk).for_each(|(p, v)| *p += v.to_f64());
    }
    partial.iter().sum::<f64>() + rest
}

/// The sum (or, with `mean`, the mean) over a run of consecutive dimensions of a contiguous
/// array of dtype `T` that has dimensions after them: a bias's gradient summed over the batch
/// (`[B, C]` over 0), or over the tokens of each example (`[B, T, C]` over 1, what per-sample
/// gradients under vmap need). Each block of the dimensions before the run sums its rows in
/// f64, reading memory in order instead of gathering each strided lane. `None` when `reduced`
/// is not such a run of such an array (or the rows are too narrow to gain).
fn sum_rows<T: Element>(x: &Array, reduced: &[usize], mean: bool) -> Option<Result<Array>> {
    let shape = &x.layout.shape;
    let (&first, &last) = (reduced.first()?, reduced.last()?);
    let run = reduced.iter().enumerate().all(|(i, &d)| d == first + i);
    if !run || last + 1 >= shape.len() || x.dtype != T::DTYPE || !x.layout.is_contiguous() {
        return None;
    }
    let width: usize = shape[last + 1..].iter().product();
    if width < 8 {
        return None;
    }
    let count: usize = shape[first..=last].iter().product();
    if count == 0 {
        return None;
    }
    let buffer = x.storage.read()?;
    let (offset, n) = (x.layout.offset, x.layout.numel());
    let data = buffer.as_slice::<T>()?.get(offset..offset + n)?;
    let mut out: Vec<T> = match alloc("reduce", n / count) {
        Ok(out) => out,
        Err(e) => return Some(Err(e)),
    };
    let mut sums = vec![0.0f64; width];
    for block in data.chunks_exact(count * width) {
        sums.fill(0.0);
        for row in block.chunks_exact(width) {
            sums.iter_mut().zip(row).for_each(|(s, v)| *s += v.to_f64());
        }
        out.extend(sums.iter().map(|&s| T::from_f64(if mean { s / count as f64 } else { s })));
    }
    let kept: Shape = shape[..first].iter().chain(&shape[last + 1..]).copied().collect();
    Some(Ok(array(out, kept)))
}

/// Runs `body` on the elements of `x` (as `T`) with the `reduced` dimensions (sorted) moved
/// last, with the length of one lane of them and the shape of the other dimensions. A
/// contiguous array of dtype `T` whose reduced dimensions already come last is read in place;
/// any other is copied in that order first.
fn with_lanes<T: Element, R>(x: &Array, reduced: &[usize], body: impl FnOnce(&[T], usize, Shape) -> R) -> Result<R> {
    let shape = &x.layout.shape;
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !reduced.contains(d)).collect();
    let lane: usize = reduced.iter().map(|&d| shape[d]).product();
    let kept_shape: Shape = kept.iter().map(|&d| shape[d]).collect();
    let trailing = reduced.iter().enumerate().all(|(i, &d)| d == shape.len() - reduced.len() + i);
    if trailing && x.dtype == T::DTYPE && x.layout.is_contiguous() {
        let buffer = x.storage.read().ok_or_else(|| internal("a reduction of memory not on the host"))?;
        let (offset, n) = (x.layout.offset, x.layout.numel());
        if let Some(data) = buffer.as_slice::<T>().and_then(|data| data.get(offset..offset + n)) {
            return Ok(body(data, lane, kept_shape));
        }
    }
    let order = kept.iter().chain(reduced);
    let moved = Layout {
        shape: order.clone().map(|&d| shape[d]).collect(),
        strides: order.map(|&d| x.layout.strides[d]).collect(),
        offset: x.layout.offset,
    };
    let data = elements::<T>("reduce", &x.with_layout(moved))?;
    Ok(body(&data, lane, kept_shape))
}

/// `f` applied to each lane of the `reduced` dimensions (lanes in parallel when there are many
/// elements).
fn lanes<T: Element, A: Element>(x: &Array, reduced: &[usize], f: impl Fn(&[T]) -> A + Sync) -> Result<Array> {
    let f = |lane: &[T]| vectorised(|| f(lane));
    with_lanes(x, reduced, |data, lane, kept| -> Result<Array> {
        let count = kept.checked_numel().ok_or_else(|| internal("a reduction's result is too large"))?;
        let mut out: Vec<A> = alloc("reduce", count)?;
        if lane == 0 {
            out.resize(count, f(&[]));
        } else if data.len() >= 2 * GRAIN {
            out.extend(super::threads::map(data.chunks(lane), f));
        } else {
            out.extend(data.chunks(lane).map(&f));
        }
        Ok(array(out, kept))
    })?
}

/// As [`lanes`], for an `f` that can work on parts of a lane: `f(lane)` equals
/// `combine(f(first part), f(rest))`, as sums and products do. Long lanes (a full reduction of
/// a large tensor) are split across threads.
fn fold<T: Element>(
    x: &Array,
    reduced: &[usize],
    f: impl Fn(&[T]) -> T + Sync,
    combine: impl Fn(T, T) -> T + Sync,
) -> Result<Array> {
    let lane: usize = reduced.iter().map(|&d| x.layout.shape[d]).product();
    if lane < 2 * GRAIN {
        return lanes(x, reduced, f);
    }
    with_lanes(x, reduced, |data, lane, kept| -> Result<Array> {
        let part = |part: &[T]| vectorised(|| f(part));
        let split = |lane: &[T]| {
            super::threads::map(lane.chunks(GRAIN), part).into_iter().reduce(&combine).unwrap_or_else(|| f(&[]))
        };
        let mut out = alloc("reduce", data.len() / lane)?;
        out.extend(data.chunks(lane).map(split));
        Ok(array(out, kept))
    })?
}

/// The running `op` along `dim` of `x`, read as `dtype`; the result has `x`'s shape.
pub(super) fn scan(x: &Array, dim: usize, op: Scan, dtype: DType) -> Result<Array> {
    fn running<T: Number>(x: &Array, dim: usize, op: Scan) -> Result<Array> {
        let (start, step): (T, fn(T, T) -> T) = match op {
            Scan::Sum => (T::default(), Number::add),
            Scan::Prod => (T::from_i64(1), Number::mul),
        };
        scan_with::<T>(x, dim, |lane, out| {
            let mut acc = start;
            for (o, &v) in out.iter_mut().zip(lane) {
                acc = step(acc, v);
                *o = acc;
            }
        })
    }
    with_dtype!(
        dtype,
        T => running::<T>(x, dim, op),
        bool => Err(internal("a scan of bools")),
        reduced => Err(internal("scans compute half precision in float32"))
    )
}

/// `f` applied along dimension `dim`: each lane is replaced by what `f` writes for it.
fn scan_with<T: Element>(x: &Array, dim: usize, f: impl Fn(&[T], &mut [T])) -> Result<Array> {
    let (out, kept) = with_lanes::<T, _>(x, &[dim], |data, lane, kept| -> Result<(Vec<T>, Shape)> {
        let mut out = alloc("scan", data.len())?;
        out.resize(data.len(), T::default());
        if lane > 0 {
            data.chunks(lane).zip(out.chunks_mut(lane)).for_each(|(x, y)| f(x, y));
        }
        Ok((out, kept))
    })??;
    // Back from (kept..., dim) to the input's order of dimensions.
    let permuted: Vec<usize> = kept.iter().copied().chain([x.layout.shape[dim]]).collect();
    let lanes = ArrayD::from_shape_vec(IxDyn(&permuted), out).map_err(|_| internal("the lanes hold every element"))?;
    let ndim = x.layout.ndim();
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
    let ordered = lanes.permuted_axes(IxDyn(&back));
    let mut data = alloc("scan", ordered.len())?;
    data.extend(ordered.iter().copied());
    Ok(array(data, x.layout.shape.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::host::elements;
    use crate::types::Layout;

    fn ramp(n: usize, shape: &[usize]) -> Array {
        array((0..n as i64).collect::<Vec<_>>(), Shape::from([n])).with_layout(Layout::contiguous(Shape::new(shape)))
    }

    fn ints(x: &Array) -> Vec<i64> {
        elements::<i64>("test", x).unwrap()
    }

    #[test]
    fn float_sums_and_means_over_a_run_of_dimensions_read_rows_in_order_and_agree_with_lanes() {
        let x = array((0..120).map(|i| i as f32 * 0.37 - 3.0).collect::<Vec<f32>>(), Shape::from([2, 3, 2, 10]));
        // The same reductions through the general path: a transposed layout is never read by rows.
        let moved = x.with_layout(Layout {
            shape: Shape::from([10, 2, 3, 2]),
            strides: [1, 60, 20, 10].into_iter().collect(),
            offset: 0,
        });
        for op in [Reduce::Sum, Reduce::Mean] {
            for (dims, general_dims, kept) in
                [(&[0, 1, 2][..], &[1, 2, 3][..], &[10][..]), (&[1, 2], &[2, 3], &[2, 10]), (&[1], &[2], &[2, 2, 10])]
            {
                let rows = reduce(&x, dims, op, DType::Float32).unwrap();
                assert_eq!(rows.layout.shape.as_ref(), kept);
                let general = reduce(&moved, general_dims, op, DType::Float32).unwrap();
                // The general path's result has the kept dimensions in the moved order.
                let general = match kept.len() {
                    1 => elements::<f32>("test", &general).unwrap(),
                    2 => elements::<f32>(
                        "test",
                        &general.with_layout(Layout {
                            shape: Shape::from([2, 10]),
                            strides: [1, 2].into_iter().collect(),
                            offset: 0,
                        }),
                    )
                    .unwrap(),
                    _ => elements::<f32>(
                        "test",
                        &general.with_layout(Layout {
                            shape: Shape::from([2, 2, 10]),
                            strides: [2, 1, 4].into_iter().collect(),
                            offset: 0,
                        }),
                    )
                    .unwrap(),
                };
                assert_eq!(elements::<f32>("test", &rows).unwrap(), general, "{op:?} over {dims:?}");
            }
        }
    }

    #[test]
    fn long_lanes_split_across_threads_give_the_whole_lane_s_result() {
        let n = 5 * GRAIN + 7;
        let sum = |x: &[i64]| x.iter().sum::<i64>();
        let all = reduce(&ramp(n, &[n]), &[0], Reduce::Sum, DType::Int64).unwrap();
        assert_eq!(ints(&all), [(n as i64 - 1) * n as i64 / 2]);
        let rows = reduce(&ramp(2 * n, &[2, n]), &[1], Reduce::Sum, DType::Int64).unwrap();
        assert_eq!(
            ints(&rows),
            [sum(&(0..n as i64).collect::<Vec<_>>()), sum(&(n as i64..2 * n as i64).collect::<Vec<_>>())]
        );
        // A leading reduced dimension is read through a permuted copy.
        let columns = reduce(&ramp(2 * n, &[2, n]), &[0], Reduce::Sum, DType::Int64).unwrap();
        assert_eq!(ints(&columns)[..2], [n as i64, n as i64 + 2]);
    }

    #[test]
    fn extremes_take_the_first_and_nan_wins() {
        assert_eq!(pick(&[1, 3, 3, 2], true), (1, 3));
        assert_eq!(pick(&[1.0, f64::NAN, 5.0], true).0, 1);
        assert_eq!(pick::<i64>(&[], false), (0, 0));
    }

    #[test]
    fn scans_run_along_any_dimension() {
        let x = ramp(6, &[2, 3]);
        assert_eq!(ints(&scan(&x, 0, Scan::Sum, DType::Int64).unwrap()), [0, 1, 2, 3, 5, 7]);
        assert_eq!(ints(&scan(&x, 1, Scan::Prod, DType::Int64).unwrap()), [0, 0, 0, 3, 12, 60]);
    }

    #[test]
    fn sums_in_f64_are_exact_for_small_integers() {
        let x: Vec<f32> = (0..1001).map(|i| i as f32).collect();
        assert_eq!(sum_f64(&x), 500_500.0);
        assert_eq!(sum_f64::<f32>(&[]), 0.0);
    }
}
