//! The softmax family on the CPU: one pass for the maxima, one for the exponentials, one for
//! their sum and one to normalise, in the element type (float32 as PyTorch's vectorised
//! kernels compute it: [`exp_f32`](super::vector_math::exp_f32) and sums kept in one partial
//! per vector lane), each pass a loop compiled for the widest vectors the processor has.

use std::ops::Range;

use crate::backend::Array;
use crate::error::Result;
use crate::types::DType;

use super::elementwise::Float;
use super::map::{output, vectorised};
use super::{array, threads, with_elements};

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

/// Partial results kept side by side by [`fold_lanes`]: one per float32 lane of a 512-bit
/// vector.
const LANES: usize = 16;

/// `f` folded over `xs` into [`LANES`] partial results, combined at the end: unlike one
/// running result, a loop the compiler vectorises (sums are then added in another order
/// than one by one, as PyTorch's vectorised reductions add them).
#[inline(always)]
fn fold_lanes<T: Float>(xs: &[T], init: T, f: impl Fn(T, T) -> T) -> T {
    let mut partial = [init; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (p, &v) in partial.iter_mut().zip(chunk) {
            *p = f(*p, v);
        }
    }
    partial.into_iter().chain(rest.iter().copied()).fold(init, f)
}

/// The larger of two numbers, one select instruction: a NaN may be skipped here, as it makes
/// its lane's sum NaN in the next pass anyway.
#[inline(always)]
fn max<T: Float>(a: T, b: T) -> T {
    if b > a { b } else { a }
}

/// Columns of a strip that [`strip_softmax`] takes at once: its maxima and sums stay in
/// registers and the first level of cache, and its rows in the second.
const STRIP: usize = 64;

/// A strip's rows of input, and the same rows of the result.
type Strip<'a, T> = (Vec<&'a [T]>, Vec<&'a mut [T]>);

/// The rows of a strip of columns, of the input and of the result.
trait Rows<T> {
    /// How many rows.
    fn count(&self) -> usize;
    /// Row `r` of the input and of the result.
    fn row(&mut self, r: usize) -> (&[T], &mut [T]);
}

impl<T> Rows<T> for Strip<'_, T> {
    #[inline(always)]
    fn count(&self) -> usize {
        self.0.len()
    }

    #[inline(always)]
    fn row(&mut self, r: usize) -> (&[T], &mut [T]) {
        (self.0[r], &mut *self.1[r])
    }
}

/// Columns `cols` of a block of rows `inner` long, and of its result.
struct Columns<'a, T> {
    block: &'a [T],
    out: &'a mut [T],
    inner: usize,
    cols: Range<usize>,
}

impl<T> Rows<T> for Columns<'_, T> {
    #[inline(always)]
    fn count(&self) -> usize {
        self.block.len() / self.inner
    }

    #[inline(always)]
    fn row(&mut self, r: usize) -> (&[T], &mut [T]) {
        let cols = r * self.inner + self.cols.start..r * self.inner + self.cols.end;
        (&self.block[cols.clone()], &mut self.out[cols])
    }
}

/// The softmax (or log-softmax) of row-major `data` of shape `[outer, n, inner]` along its
/// middle dimension: `exp(x - max) / sum(exp(x - max))`, or `x - max - log(sum(exp(x -
/// max)))`. Along the last dimension (`inner` 1) each lane is contiguous; otherwise the passes
/// run along rows of a strip of at most [`STRIP`] columns, each lane one column. A NaN in a
/// lane makes its sum, and so the whole lane, NaN; so does `+inf` (`inf - inf`). Runs of
/// lanes or of blocks go to the CPU's threads, or the strips of a few large blocks (a
/// softmax along the first dimension).
fn softmax_blocks<T: Float>(data: &[T], [_, n, inner]: [usize; 3], log: bool) -> Result<Vec<T>> {
    // A pooled buffer: every element is written below.
    let mut out = output("softmax", data.len())?;
    if data.is_empty() {
        return Ok(out);
    }
    let parallel = data.len() >= 2 * threads::GRAIN;
    if inner == 1 {
        let run = |(lanes, out): (&[T], &mut [T])| {
            vectorised(
                #[inline(always)]
                || {
                    for (lane, result) in lanes.chunks(n).zip(out.chunks_mut(n)) {
                        lane_softmax(lane, result, log);
                    }
                },
            )
        };
        in_runs(data, &mut out, n, parallel, run);
        return Ok(out);
    }
    let block = n * inner;
    if !parallel || block < threads::GRAIN {
        // Runs of whole blocks, each a strip of columns after another.
        let run = |(data, out): (&[T], &mut [T])| {
            vectorised(
                #[inline(always)]
                || {
                    for (block, out) in data.chunks(n * inner).zip(out.chunks_mut(n * inner)) {
                        for start in (0..inner).step_by(STRIP) {
                            let cols = start..(start + STRIP).min(inner);
                            strip_softmax(&mut Columns { block, out: &mut *out, inner, cols }, log);
                        }
                    }
                },
            )
        };
        in_runs(data, &mut out, block, parallel, run);
        return Ok(out);
    }
    // Large blocks (a few): their rows cut into strips of columns, for the threads to share.
    let width = STRIP.min(inner);
    let mut strips: Vec<Strip<'_, T>> = Vec::new();
    for (block, result) in data.chunks(block).zip(out.chunks_mut(block)) {
        let first = strips.len();
        strips.extend((0..inner.div_ceil(width)).map(|_| (Vec::with_capacity(n), Vec::with_capacity(n))));
        for (row, out_row) in block.chunks(inner).zip(result.chunks_mut(inner)) {
            for ((strip, part), out_part) in
                strips[first..].iter_mut().zip(row.chunks(width)).zip(out_row.chunks_mut(width))
            {
                strip.0.push(part);
                strip.1.push(out_part);
            }
        }
    }
    threads::for_each(strips, |mut strip: Strip<'_, T>| {
        vectorised(
            #[inline(always)]
            || strip_softmax(&mut strip, log),
        )
    });
    Ok(out)
}

/// `run` over runs of whole `unit`s of `data` and of `out` (about a grain each), on the
/// threads when `parallel`, else all at once.
fn in_runs<T: Float>(data: &[T], out: &mut [T], unit: usize, parallel: bool, run: impl Fn((&[T], &mut [T])) + Sync) {
    if parallel {
        let per_run = (threads::GRAIN / unit).max(1) * unit;
        threads::for_each(data.chunks(per_run).zip(out.chunks_mut(per_run)), run);
    } else {
        run((data, out));
    }
}

/// The softmax (or log-softmax) of one contiguous lane, into `out`.
#[inline(always)]
fn lane_softmax<T: Float>(lane: &[T], out: &mut [T], log: bool) {
    let top = fold_lanes(lane, T::from_f64(f64::NEG_INFINITY), max);
    for (o, &v) in out.iter_mut().zip(lane) {
        *o = v.sub(top).exp();
    }
    let sum = fold_lanes(out, T::default(), T::add);
    if log {
        // `x - max` first, as PyTorch: exact for values near the maximum however large.
        let log_sum = sum.ln();
        for (o, &v) in out.iter_mut().zip(lane) {
            *o = v.sub(top).sub(log_sum);
        }
    } else {
        for o in out.iter_mut() {
            *o = o.div(sum);
        }
    }
}

/// The softmax (or log-softmax) of each column of a strip (`rows` of at most [`STRIP`]
/// elements each), into the rows of its result.
#[inline(always)]
fn strip_softmax<T: Float>(rows: &mut impl Rows<T>, log: bool) {
    let count = rows.count();
    let width = if count == 0 { 0 } else { rows.row(0).0.len() };
    let mut top = [T::from_f64(f64::NEG_INFINITY); STRIP];
    let mut sum = [T::default(); STRIP];
    let (top, sum) = (&mut top[..width], &mut sum[..width]);
    for r in 0..count {
        for (m, &v) in top.iter_mut().zip(rows.row(r).0) {
            *m = max(*m, v);
        }
    }
    for r in 0..count {
        let (row, out_row) = rows.row(r);
        for (((o, &v), &m), s) in out_row.iter_mut().zip(row).zip(&*top).zip(sum.iter_mut()) {
            *o = v.sub(m).exp();
            *s = s.add(*o);
        }
    }
    if log {
        sum.iter_mut().for_each(|s| *s = s.ln());
    }
    for r in 0..count {
        let (row, out_row) = rows.row(r);
        for (((o, &v), &m), &s) in out_row.iter_mut().zip(row).zip(&*top).zip(&*sum) {
            *o = if log { v.sub(m).sub(s) } else { o.div(s) };
        }
    }
}
