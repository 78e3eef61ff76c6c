//! Elementwise loops: `f` applied to each element of one or more arrays broadcast together, or
//! written into an output. The elements are walked run by run ([`Walk`]); each run is a slice
//! loop (or a repeated element, or a strided one) which the compiler vectorises, with AVX2 and
//! FMA where the processor has them, and large outputs are split across threads.

use crate::backend::Array;
use crate::error::{Error, Result};
use crate::types::{Element, Layout, Shape, with_dtype};

use super::pool::take as take_pooled;
use super::strided::{Walk, flat_step};
use super::threads::GRAIN;
use super::{array, cast, elements, internal};

/// An operand of an elementwise loop along one run of a [`Walk`]: contiguous elements, one
/// element repeated (a Python number, a broadcast dimension), or elements `step` apart.
#[derive(Clone, Copy)]
pub(super) enum Operand<'a, T> {
    Slice(&'a [T]),
    Repeat(T),
    Strided(&'a [T], usize),
}

/// An operand of a loop that may write in place: a run of elements, or the output's own.
#[derive(Clone, Copy)]
pub(super) enum Input<'a, T> {
    Run(Operand<'a, T>),
    Output,
}

/// Where an operand's run is: its memory, the run's first position in it, and the step.
type Run<'a, T> = (&'a [T], usize, usize);

impl<'a, T: Copy> Operand<'a, T> {
    /// The run of `len` (at least one) elements of `data` from `position` on, `step` apart.
    #[inline(always)]
    fn run((data, position, step): Run<'a, T>, len: usize) -> Operand<'a, T> {
        match step {
            0 => Operand::Repeat(data[position]),
            1 => Operand::Slice(&data[position..position + len]),
            _ => Operand::Strided(&data[position..=position + (len - 1) * step], step),
        }
    }

    #[inline(always)]
    pub(super) fn get(self, i: usize) -> T {
        match self {
            Operand::Slice(s) => s[i],
            Operand::Repeat(v) => v,
            Operand::Strided(s, step) => s[i * step],
        }
    }
}

/// The function an elementwise loop of one operand applies: any closure, or a type that also
/// fills contiguous and repeated runs its own way (float16's conversions by blocks,
/// `super::f16c`).
pub(super) trait Map1<T, U>: Sync {
    /// The result of one element.
    fn at(&self, x: T) -> U;
    /// Fills `out` from the run `x` its own way, or returns false (the loop then calls `at`).
    #[inline(always)]
    fn run(&self, _x: Operand<'_, T>, _out: &mut [U]) -> bool {
        false
    }
    /// Replaces each element of `out` by its result its own way, or returns false.
    #[inline(always)]
    fn run_in_place(&self, _out: &mut [T]) -> bool {
        false
    }
}

impl<T, U, F: Fn(T) -> U + Sync> Map1<T, U> for F {
    #[inline(always)]
    fn at(&self, x: T) -> U {
        (*self)(x)
    }
}

/// The function an elementwise loop of two operands applies (as [`Map1`]).
pub(super) trait Map2<T, U>: Sync {
    /// The result of one pair of elements.
    fn at(&self, p: T, q: T) -> U;
    /// Fills `out` from the runs `a` and `b` its own way, or returns false.
    #[inline(always)]
    fn run(&self, _a: Operand<'_, T>, _b: Operand<'_, T>, _out: &mut [U]) -> bool {
        false
    }
    /// `out[i] = at(out[i], b[i])` its own way, or returns false.
    #[inline(always)]
    fn run_in_place(&self, _out: &mut [T], _b: Operand<'_, T>) -> bool {
        false
    }
}

impl<T, U, F: Fn(T, T) -> U + Sync> Map2<T, U> for F {
    #[inline(always)]
    fn at(&self, p: T, q: T) -> U {
        (*self)(p, q)
    }
}

/// Results of fewer elements than this are allocated plainly: they are too small to be pooled,
/// and the allocator cannot fail on them in practice.
const SMALL: usize = 1 << 12;

/// A vector of `n` elements for a result: a pooled buffer when one fits (its old contents are
/// to be overwritten), else a fresh zeroed one; an error naming `func` when memory runs out.
pub(super) fn output<T: Element>(func: &str, n: usize) -> Result<Vec<T>> {
    match take_pooled::<T>(n) {
        Some(data) => Ok(data),
        None => fresh(func, n),
    }
}

/// `n` zeros: a pooled buffer cleared (its pages are mapped already, where a fresh one's
/// would fault in one by one), else a fresh one.
pub(super) fn zeroed<T: Element>(func: &str, n: usize) -> Result<Vec<T>> {
    match take_pooled::<T>(n) {
        Some(mut data) => {
            data.fill(T::default());
            Ok(data)
        }
        None => fresh(func, n),
    }
}

/// A fresh vector of `n` zeros; an error naming `func` when memory runs out.
fn fresh<T: Element>(func: &str, n: usize) -> Result<Vec<T>> {
    if n < SMALL {
        // Not `vec![T::default(); n]`: for zeros that is `calloc`, which skips glibc's
        // thread-local cache of small blocks.
        let mut data = Vec::with_capacity(n);
        data.resize(n, T::default());
        return Ok(data);
    }
    let mut data = Vec::new();
    super::reserve_exact(&mut data, n).map_err(|_| {
        Error::runtime_error(format!("{func}(): not enough memory: you tried to allocate {n} elements"))
    })?;
    data.resize(n, T::default());
    Ok(data)
}

/// Runs `body(start, chunk)` over consecutive chunks of `out`, on several threads when `out`
/// is large, each chunk compiled for the widest vector instructions the processor has.
fn chunked<U: Send>(out: &mut [U], body: impl Fn(usize, &mut [U]) + Sync) {
    // `vectorised` calls its closure twice (with AVX2 and FMA, and without), and a closure
    // called from two places is compiled on its own, for baseline x86-64 (`exp`'s fused
    // multiply-adds become calls to the software `fmaf`, 30 times slower). So every closure
    // from here down to the loop over elements is inlined by force (`#[inline(always)]`), here
    // and in the loops that call `chunked` and `fill`.
    let run = |start: usize, chunk: &mut [U]| {
        vectorised(
            #[inline(always)]
            || body(start, chunk),
        )
    };
    if out.len() < 2 * GRAIN {
        run(0, out);
    } else {
        super::threads::for_each(out.chunks_mut(GRAIN).enumerate(), |(i, chunk)| run(i * GRAIN, chunk));
    }
}

/// Runs `f`, compiled for the widest vectors the processor has: AVX-512 (512-bit vectors, 16
/// float32 lanes), else AVX2 and FMA (256-bit), else baseline x86-64's SSE2 (128-bit), where
/// `mul_add` is a call to libm's `fma` rather than one instruction. `TORCHFN_CPU=avx2` (or
/// `baseline`) caps the choice, to test and time the narrower paths on a wider processor.
#[inline(always)]
pub(super) fn vectorised<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
        fn widest<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        #[target_feature(enable = "avx2,fma,f16c")]
        fn wide<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        match super::instructions() {
            // SAFETY: `instructions` names AVX-512 only when the processor has AVX-512 F, VL,
            // BW and DQ (and AVX2 and FMA), all that `widest` needs.
            super::Instructions::Avx512 => return unsafe { widest(f) },
            // SAFETY: `instructions` names AVX2 only when the processor has AVX2, FMA and F16C.
            super::Instructions::Avx2 => return unsafe { wide(f) },
            super::Instructions::Baseline => {}
        }
    }
    f()
}

// The loops below are plain `for` loops calling `f` through `(*f)(..)`: a closure passed to an
// iterator adaptor, or `f` called through the reference (`<&F as Fn>::call`), is a function of
// its own that the compiler may decline to inline when `f` is large (`gelu`'s polynomials), and
// is then compiled for baseline x86-64 with `mul_add` as a call to libm's `fmaf` (a hundred
// times slower, seen in a profile).

/// `out[i] = f(x[i])`.
#[inline(always)]
fn apply1<T: Copy, U, F: Map1<T, U>>(x: Run<'_, T>, out: &mut [U], f: &F) {
    let x = Operand::run(x, out.len());
    if f.run(x, out) {
        return;
    }
    match x {
        Operand::Slice(x) => {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = f.at(v);
            }
        }
        Operand::Repeat(v) => {
            for o in out.iter_mut() {
                *o = f.at(v);
            }
        }
        x => {
            for (i, o) in out.iter_mut().enumerate() {
                *o = f.at(x.get(i));
            }
        }
    }
}

/// `out[i] = f(a[i], b[i])`.
#[inline(always)]
fn apply2<T: Copy, U, F: Map2<T, U>>(a: Run<'_, T>, b: Run<'_, T>, out: &mut [U], f: &F) {
    let (a, b) = (Operand::run(a, out.len()), Operand::run(b, out.len()));
    if f.run(a, b, out) {
        return;
    }
    match (a, b) {
        (Operand::Slice(a), Operand::Slice(b)) => {
            for ((o, &p), &q) in out.iter_mut().zip(a).zip(b) {
                *o = f.at(p, q);
            }
        }
        (Operand::Slice(a), Operand::Repeat(q)) => {
            for (o, &p) in out.iter_mut().zip(a) {
                *o = f.at(p, q);
            }
        }
        (Operand::Repeat(p), Operand::Slice(b)) => {
            for (o, &q) in out.iter_mut().zip(b) {
                *o = f.at(p, q);
            }
        }
        _ => {
            for (i, o) in out.iter_mut().enumerate() {
                *o = f.at(a.get(i), b.get(i));
            }
        }
    }
}

/// `out[i] = f(out[i], b[i])`, cast back to `out`'s type.
#[inline(always)]
fn update<T: Element, U: Element, F: Map2<T, U>>(out: &mut [T], b: Run<'_, T>, f: &F) {
    let b = Operand::run(b, out.len());
    if f.run_in_place(out, b) {
        return;
    }
    match b {
        Operand::Slice(b) => {
            for (o, &q) in out.iter_mut().zip(b) {
                *o = cast::<U, T>(f.at(*o, q));
            }
        }
        Operand::Repeat(q) => {
            for o in out.iter_mut() {
                *o = cast::<U, T>(f.at(*o, q));
            }
        }
        b => {
            for (i, o) in out.iter_mut().enumerate() {
                *o = cast::<U, T>(f.at(*o, b.get(i)));
            }
        }
    }
}

/// Writes each element of the loop `walk` into `out` (all of its elements, in order): `body`
/// gets the positions and steps of each run in the operands and the part of `out` it fills.
/// (`body` is inlined into the vectorised loop by force: see [`chunked`].)
fn fill<U: Send, const N: usize>(
    walk: &Loop<N>,
    out: &mut [U],
    body: impl Fn([usize; N], [usize; N], &mut [U]) + Sync,
) {
    let walk = match walk {
        Loop::Tiny(positions, steps) => return body(*positions, *steps, out),
        Loop::Walk(walk) => walk,
    };
    chunked(
        out,
        #[inline(always)]
        |start, chunk| {
            let mut rest = chunk;
            walk.runs(
                start..start + rest.len(),
                #[inline(always)]
                |positions, len, steps| {
                    let (part, tail) = std::mem::take(&mut rest).split_at_mut(len);
                    body(positions, steps, part);
                    rest = tail;
                },
            );
        },
    );
}

/// An elementwise loop over `N` operands: a tiny one, or a walk.
enum Loop<const N: usize> {
    /// A result of at most [`TINY`] elements, each operand one run (its first position and its
    /// step, 1 or 0): filled in one call, with no setup for vector instructions or threads,
    /// which cost more than the loop (a one-element `add`).
    Tiny([usize; N], [usize; N]),
    /// Any other loop, run by run.
    Walk(Walk<N>),
}

/// The loop over `shape` reading operands through `layouts` broadcast to it, in memories of
/// `lens` elements; an error when a layout does not broadcast or reaches past its memory (a bug).
#[inline]
fn walk<const N: usize>(shape: &[usize], layouts: [&Layout; N], lens: [usize; N]) -> Result<Loop<N>> {
    if let Some(runs) = tiny(shape, layouts, lens) {
        return Ok(Loop::Tiny(runs.map(|(p, _)| p), runs.map(|(_, s)| s)));
    }
    let walk = Walk::new(shape, layouts).ok_or_else(|| internal("an operand does not broadcast"))?;
    if (0..N).any(|i| walk.span(i) > lens[i]) {
        return Err(internal("a layout leaves its storage"));
    }
    Ok(Loop::Walk(walk))
}

/// The most elements of a [`Loop::Tiny`].
const TINY: usize = 16;

/// For a result of `shape` with at most [`TINY`] elements (and at least one), where each
/// operand (read through `layouts`, in memories of `lens` elements) starts and how far apart
/// its elements are: 1 for an operand contiguous over `shape`, 0 for a single element. `None`
/// for larger results and any other operand.
#[inline]
fn tiny<const N: usize>(shape: &[usize], layouts: [&Layout; N], lens: [usize; N]) -> Option<[(usize, usize); N]> {
    let n = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).filter(|n| (1..=TINY).contains(n))?;
    let mut runs = [(0, 0); N];
    for ((run, layout), len) in runs.iter_mut().zip(layouts).zip(lens) {
        let step = flat_step(shape, layout)?;
        if layout.offset + step * (n - 1) >= len {
            return None;
        }
        *run = (layout.offset, step);
    }
    Some(runs)
}

/// Runs `f` on the elements of `x` as `T` and the layout to read them through: its own memory
/// when it is of dtype `T`, else a converted contiguous copy.
pub(crate) fn with_input<T: Element, R>(x: &Array, f: impl FnOnce(&[T], &Layout) -> R) -> Result<R> {
    if x.dtype == T::DTYPE {
        let buffer = x.storage.read().ok_or_else(|| internal("a read of memory not on the host"))?;
        let data = buffer.as_slice::<T>().ok_or_else(|| internal("a tensor's dtype is not its storage's"))?;
        return Ok(f(data, &x.layout));
    }
    let converted = elements::<T>("read", x)?;
    Ok(f(&converted, &Layout::contiguous(x.layout.shape.clone())))
}

/// The elements of `data` that `layout` addresses, converted to `T`, in row-major order.
pub(crate) fn gather<S: Element, T: Element>(func: &str, data: &[S], layout: &Layout) -> Result<Vec<T>> {
    let n = layout.shape.checked_numel().ok_or_else(|| internal("a tensor too large to read"))?;
    let walk = walk(&layout.shape, [layout], [data.len()])?;
    let mut out = output::<T>(func, n)?;
    fill(
        &walk,
        &mut out,
        #[inline(always)]
        |[p], [s], part| apply1((data, p, s), part, &Cast),
    );
    Ok(out)
}

/// The conversion of `tensor.to(dtype)` ([`cast`]), float16 to and from float32 by blocks on
/// the processor's conversion instructions (`super::f16c`): each element through float64 and
/// the bit operations took a rounding of 1024 x 1024 float32 elements to float16 0.56 ms.
struct Cast;

impl<S: Element, T: Element> Map1<S, T> for Cast {
    #[inline(always)]
    fn at(&self, x: S) -> T {
        cast(x)
    }

    #[inline(always)]
    fn run(&self, x: Operand<'_, S>, out: &mut [T]) -> bool {
        super::f16c::converted(x, out)
    }
}

/// The elements `out` covers, locked for writing, when it is a contiguous array of dtype `T`
/// and `shape`, and no one else holds its storage's lock; `None` otherwise.
fn writable<'a, T: Element>(out: &'a Array, shape: &Shape) -> Option<impl std::ops::DerefMut<Target = [T]> + 'a> {
    if out.dtype != T::DTYPE || out.layout.shape != *shape || !out.layout.is_contiguous() {
        return None;
    }
    let range = out.layout.offset..out.layout.offset + out.layout.numel();
    let guard = out.storage.try_write()?;
    parking_lot::RwLockWriteGuard::try_map(guard, |buffer| buffer.as_mut_slice::<T>()?.get_mut(range)).ok()
}

/// `f` applied to each element of `x` (read as `T`), producing `U`, in one pass over its
/// memory whatever its layout (in parallel when large).
pub(super) fn unary<T: Element, U: Element>(x: &Array, f: impl Map1<T, U>) -> Result<Array> {
    let out = with_input(x, |data: &[T], layout| -> Result<Vec<U>> {
        let walk = walk(&layout.shape, [layout], [data.len()])?;
        let mut out = output::<U>("unary", x.layout.numel())?;
        fill(
            &walk,
            &mut out,
            #[inline(always)]
            |[p], [s], part| apply1((data, p, s), part, &f),
        );
        Ok(out)
    })??;
    Ok(array(out, x.layout.shape.clone()))
}

/// As [`unary`], written into `out` when it can be: `out` contiguous, of dtype `U` and `x`'s
/// shape, and either `x` itself (same storage, layout and dtype, as an in-place operation's
/// `self`) or a storage `x` does not share. Returns `out` when it was written, a new array
/// otherwise.
pub(super) fn unary_to<T: Element, U: Element>(x: &Array, out: Option<&Array>, f: impl Map1<T, U>) -> Result<Array> {
    let shape = &x.layout.shape;
    let written = match out {
        None => false,
        Some(out) if x.shares(out) => {
            x.layout == out.layout
                && (x.dtype, U::DTYPE) == (T::DTYPE, T::DTYPE)
                && writable::<T>(out, shape).is_some_and(|mut o| {
                    chunked(
                        &mut o,
                        #[inline(always)]
                        |_, part| {
                            if !f.run_in_place(part) {
                                part.iter_mut().for_each(|v| *v = cast::<U, T>(f.at(*v)));
                            }
                        },
                    );
                    true
                })
        }
        // The input is read (waiting for its lock if need be) before the output's lock is tried.
        Some(out) => with_input(x, |data: &[T], layout| -> Result<bool> {
            let walk = walk(shape, [layout], [data.len()])?;
            Ok(writable::<U>(out, shape).is_some_and(|mut o| {
                fill(
                    &walk,
                    &mut o,
                    #[inline(always)]
                    |[p], [s], part| apply1((data, p, s), part, &f),
                );
                true
            }))
        })??,
    };
    match out {
        Some(out) if written => Ok(out.clone()),
        _ => unary(x, f),
    }
}

/// `f` applied to the elements of `a` and `b` (read as `T`), broadcast to `shape`, in one pass
/// over their memory whatever their layouts (in parallel when large).
pub(super) fn binary<T: Element, U: Element>(a: &Array, b: &Array, shape: &Shape, f: impl Map2<T, U>) -> Result<Array> {
    let n = shape.checked_numel().ok_or_else(|| internal("a result too large"))?;
    let out = with_input(a, |x: &[T], la| {
        with_input(b, |y: &[T], lb| -> Result<Vec<U>> {
            let walk = walk(shape, [la, lb], [x.len(), y.len()])?;
            let mut out = output::<U>("binary", n)?;
            fill(
                &walk,
                &mut out,
                #[inline(always)]
                |[p, q], [s, t], part| apply2((x, p, s), (y, q, t), part, &f),
            );
            Ok(out)
        })
    })???;
    Ok(array(out, shape.clone()))
}

/// As [`binary`], written into `out` when it can be: `out` contiguous, of dtype `U` and
/// `shape`, and either `a` itself (same storage, layout and dtype, as an in-place operation's
/// `self`) while `b` is elsewhere, or a storage neither operand shares. Returns `out` when it
/// was written, a new array otherwise. The operands are read (waiting for their locks if need
/// be) before the output's lock is tried, never waited for, so two threads writing into each
/// other's operands fall back instead of deadlocking.
pub(super) fn binary_to<T: Element, U: Element>(
    a: &Array,
    b: &Array,
    shape: &Shape,
    out: Option<&Array>,
    f: impl Map2<T, U>,
) -> Result<Array> {
    let written = match out {
        None => false,
        Some(out) if b.shares(out) => false,
        Some(out) if a.shares(out) => {
            a.layout == out.layout
                && (a.dtype, U::DTYPE) == (T::DTYPE, T::DTYPE)
                && with_input(b, |y: &[T], lb| -> Result<bool> {
                    let walk = walk(shape, [lb], [y.len()])?;
                    Ok(writable::<T>(out, shape).is_some_and(|mut o| {
                        fill(
                            &walk,
                            &mut o,
                            #[inline(always)]
                            |[q], [t], part| update(part, (y, q, t), &f),
                        );
                        true
                    }))
                })??
        }
        Some(out) => with_input(a, |x: &[T], la| {
            with_input(b, |y: &[T], lb| -> Result<bool> {
                let walk = walk(shape, [la, lb], [x.len(), y.len()])?;
                Ok(writable::<U>(out, shape).is_some_and(|mut o| {
                    fill(
                        &walk,
                        &mut o,
                        #[inline(always)]
                        |[p, q], [s, t], part| apply2((x, p, s), (y, q, t), part, &f),
                    );
                    true
                }))
            })
        })???,
    };
    match out {
        Some(out) if written => Ok(out.clone()),
        _ => binary(a, b, shape, f),
    }
}

/// `a` where `condition` is true, `b` elsewhere, the three broadcast to `shape` (`condition`
/// read as bool, the others as `T`).
pub(super) fn select<T: Element>(condition: &Array, a: &Array, b: &Array, shape: &Shape) -> Result<Array> {
    let n = shape.checked_numel().ok_or_else(|| internal("a result too large"))?;
    let out = with_input(condition, |c: &[bool], lc| {
        with_input(a, |x: &[T], la| {
            with_input(b, |y: &[T], lb| -> Result<Vec<T>> {
                let walk = walk(shape, [lc, la, lb], [c.len(), x.len(), y.len()])?;
                let mut out = output::<T>("where", n)?;
                fill(
                    &walk,
                    &mut out,
                    #[inline(always)]
                    |[i, p, q], [r, s, t], part| {
                        let len = part.len();
                        let (c, x, y) =
                            (Operand::run((c, i, r), len), Operand::run((x, p, s), len), Operand::run((y, q, t), len));
                        part.iter_mut().enumerate().for_each(|(k, o)| *o = if c.get(k) { x.get(k) } else { y.get(k) });
                    },
                );
                Ok(out)
            })
        })
    })????;
    Ok(array(out, shape.clone()))
}

/// Copies `src` (any dtype, broadcast to `dst`'s shape) into `dst`'s memory, converting its
/// elements, when `dst` is contiguous and its storage is not `src`'s nor locked by anyone;
/// false, changing nothing, otherwise.
pub(super) fn copied(dst: &Array, src: &Array) -> Result<bool> {
    if dst.shares(src) {
        return Ok(false);
    }
    let shape = &dst.layout.shape;
    with_dtype!(dst.dtype, T => with_input(src, |data: &[T], layout| -> Result<bool> {
        let walk = walk(shape, [layout], [data.len()])?;
        Ok(writable::<T>(dst, shape).is_some_and(|mut out| {
            fill(&walk, &mut out, #[inline(always)] |[p], [s], part| apply1((data, p, s), part, &|v| v));
            true
        }))
    })?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_go_straight_into_outputs_that_allow_it() {
        let dense = |v: Vec<f32>| array(v, Shape::from([3]));
        let (a, b, out) = (dense(vec![1.0, 2.0, 3.0]), dense(vec![10.0; 3]), dense(vec![0.0; 3]));
        let shape = Shape::from([3]);
        let into =
            |x: &Array, y: &Array, o: &Array| binary_to::<f32, f32>(x, y, &shape, Some(o), |p, q| p + q).unwrap();
        assert!(into(&a, &b, &out).shares(&out), "a separate output");
        assert!(into(&a, &b, &a).shares(&a), "the first operand, in place");
        assert!(!into(&a, &b, &b).shares(&b), "the second operand: a new array");
        assert!(unary_to::<f32, f32>(&a, Some(&a), |v| v * 2.0).unwrap().shares(&a));
        assert!(!unary_to::<f32, f64>(&a, Some(&a), f64::from).unwrap().shares(&a), "another dtype");
        let _held = out.storage.read();
        assert!(!into(&a, &b, &out).shares(&out), "a locked output is not waited for");
    }

    #[test]
    fn tiny_results_are_one_loop_and_agree_with_the_walk() {
        let layout = |shape: &[usize], strides: &[usize], offset| Layout {
            shape: Shape::from(shape.to_vec()),
            strides: strides.iter().copied().collect(),
            offset,
        };
        let (row, single, column) =
            (layout(&[2, 3], &[3, 1], 1), layout(&[1, 1], &[0, 0], 6), layout(&[2, 1], &[1, 1], 0));
        let is_tiny =
            |shape: &[usize], layouts: [&Layout; 2]| matches!(walk(shape, layouts, [8, 8]), Ok(Loop::Tiny(..)));
        assert!(is_tiny(&[2, 3], [&row, &single]), "contiguous and a single element");
        assert!(!is_tiny(&[2, 3], [&row, &column]), "a broadcast column is walked");
        assert!(!is_tiny(&[3, 2], [&layout(&[3, 2], &[1, 3], 0), &single]), "a transpose is walked");
        let big = layout(&[17], &[1], 0);
        assert!(!matches!(walk(&[17], [&big], [17]), Ok(Loop::Tiny(..))), "17 elements are walked");
        // The same sums through both loops: a tiny result, then the same operands in a result of
        // more than `TINY` elements (a broadcast single element and an offset view).
        let data: Vec<f32> = (0..40).map(|v| v as f32).collect();
        let sum = |n: usize| {
            let (x, y) = (array(data.clone(), Shape::from([40])), array(vec![0.5f32], Shape::from([1])));
            let view = x.with_layout(layout(&[n], &[1], 3));
            binary::<f32, f32>(&view, &y, &Shape::from([n]), |p, q| p * 2.0 + q).unwrap()
        };
        let expected = |n: usize| (0..n).map(|i| (i + 3) as f32 * 2.0 + 0.5).collect::<Vec<f32>>();
        for n in [1, 16, 17, 37] {
            assert_eq!(elements::<f32>("test", &sum(n)).unwrap(), expected(n), "{n} elements");
        }
    }

    #[test]
    fn layouts_past_their_memory_or_not_broadcasting_are_errors() {
        let dense = Layout { shape: Shape::from([2, 3]), strides: [3, 1].into_iter().collect(), offset: 4 };
        assert!(walk(&[2, 3], [&dense], [10]).is_ok());
        assert!(walk(&[2, 3], [&dense], [9]).is_err());
        assert!(walk(&[3, 2], [&dense], [10]).is_err());
    }

    #[test]
    fn large_loops_cover_every_element_once_across_threads_and_rows() {
        // Rows of 1000 (not a divisor of the threads' chunks) plus a broadcast row and a scalar.
        let (rows, width) = (3 * GRAIN / 1000 + 7, 1000);
        let n = rows * width;
        let x = array((0..n as i64).collect::<Vec<_>>(), Shape::from([rows, width]));
        let row = array((0..width as i64).map(|v| -v).collect::<Vec<_>>(), Shape::from([width]));
        let ten = array(vec![10i64], Shape::from([]));
        let shape = Shape::from([rows, width]);
        let values = |a: &Array| elements::<i64>("test", a).unwrap();
        let scaled = binary::<i64, i64>(&x, &ten, &shape, |p, q| p * q).unwrap();
        assert!(values(&scaled).iter().enumerate().all(|(i, &v)| v == 10 * i as i64));
        let shifted = binary::<i64, i64>(&row, &x, &shape, |p, q| q + p).unwrap();
        assert!(values(&shifted).iter().enumerate().all(|(i, &v)| v == (i - i % width) as i64));
        // The transpose, read through its strides, and halved into another dtype.
        let t = x.with_layout(Layout {
            shape: Shape::from([width, rows]),
            strides: [1, width].into_iter().collect(),
            offset: 0,
        });
        let halves = elements::<f64>("test", &unary::<i64, f64>(&t, |v| v as f64 / 2.0).unwrap()).unwrap();
        assert!(halves.iter().enumerate().all(|(i, &v)| v == ((i % rows) * width + i / rows) as f64 / 2.0));
    }
}
