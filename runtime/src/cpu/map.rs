//! Elementwise loops: `f` applied to each element of one or two arrays, or written into an
//! output. Contiguous operands take parallel slice loops, which the compiler vectorises (with
//! AVX2 and FMA where the processor has them); other layouts go through ndarray.

use std::sync::Arc;

use ndarray::{ArrayViewD, IxDyn};
use rayon::prelude::*;

use crate::backend::Array;
use crate::error::{Error, Result};
use crate::types::{Element, Shape, with_dtype};

use super::pool::take as take_pooled;
use super::{alloc, array, cast, internal, read_as};

/// Elements per task: large enough that scheduling a task is noise, small enough that both
/// threads get work from a few hundred thousand elements on.
const GRAIN: usize = 1 << 16;

/// An operand of an elementwise loop: contiguous elements, or one element repeated (a Python
/// number, a one-element tensor broadcast).
#[derive(Clone, Copy)]
enum Operand<'a, T> {
    Slice(&'a [T]),
    Repeat(T),
}

impl<'a, T: Copy> Operand<'a, T> {
    /// The part of this operand for the elements `start..start + len` of the output.
    fn part(self, start: usize, len: usize) -> Operand<'a, T> {
        match self {
            Operand::Slice(s) => Operand::Slice(&s[start..start + len]),
            repeat => repeat,
        }
    }
}

/// A vector of `n` elements for a result: a pooled buffer when one fits (its old contents are
/// to be overwritten), else a fresh zeroed one; an error naming `func` when memory runs out.
pub(super) fn output<T: Element>(func: &str, n: usize) -> Result<Vec<T>> {
    if let Some(data) = take_pooled::<T>(n) {
        return Ok(data);
    }
    let mut data = Vec::new();
    data.try_reserve_exact(n).map_err(|_| {
        Error::runtime_error(format!("{func}(): not enough memory: you tried to allocate {n} elements"))
    })?;
    data.resize(n, T::default());
    Ok(data)
}

/// Runs `body(start, chunk)` over consecutive chunks of `out`, on several threads when `out`
/// is large, each chunk compiled for the widest vector instructions the processor has.
fn chunked<U: Send>(out: &mut [U], body: impl Fn(usize, &mut [U]) + Sync) {
    if out.len() < 2 * GRAIN {
        vectorised(|| body(0, out));
    } else {
        out.par_chunks_mut(GRAIN).enumerate().for_each(|(i, chunk)| vectorised(|| body(i * GRAIN, chunk)));
    }
}

/// Runs `f`, compiled with AVX2 and FMA when the processor has them (the crate is built for
/// baseline x86-64, whose SSE2 vectors are half as wide), so the loops inlined into it use
/// 256-bit vectors and `mul_add` is one instruction rather than a call to libm's `fma`.
#[inline(always)]
pub(super) fn vectorised<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2,fma")]
        fn wide<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: `wide` only needs the processor to have AVX2 and FMA, checked just above.
            return unsafe { wide(f) };
        }
    }
    f()
}

/// `out[i] = f(x[i])`; `x` has `out`'s length.
fn map1<T: Element, U: Element>(x: &[T], out: &mut [U], f: impl Fn(T) -> U + Sync) {
    chunked(out, |start, out| {
        let x = &x[start..start + out.len()];
        out.iter_mut().zip(x).for_each(|(o, &v)| *o = f(v));
    });
}

/// `out[i] = f(a[i], b[i])`; slice operands have `out`'s length.
fn map2<T: Element, U: Element>(a: Operand<'_, T>, b: Operand<'_, T>, out: &mut [U], f: impl Fn(T, T) -> U + Sync) {
    chunked(out, |start, out| match (a.part(start, out.len()), b.part(start, out.len())) {
        (Operand::Slice(a), Operand::Slice(b)) => {
            out.iter_mut().zip(a).zip(b).for_each(|((o, &p), &q)| *o = f(p, q));
        }
        (Operand::Slice(a), Operand::Repeat(q)) => out.iter_mut().zip(a).for_each(|(o, &p)| *o = f(p, q)),
        (Operand::Repeat(p), Operand::Slice(b)) => out.iter_mut().zip(b).for_each(|(o, &q)| *o = f(p, q)),
        (Operand::Repeat(p), Operand::Repeat(q)) => out.fill(f(p, q)),
    });
}

/// `out[i] = f(out[i])`.
fn map1_in_place<T: Element>(out: &mut [T], f: impl Fn(T) -> T + Sync) {
    chunked(out, |_, out| out.iter_mut().for_each(|o| *o = f(*o)));
}

/// `out[i] = f(out[i], b[i])`; a slice `b` has `out`'s length.
fn map2_in_place<T: Element>(out: &mut [T], b: Operand<'_, T>, f: impl Fn(T, T) -> T + Sync) {
    chunked(out, |start, out| match b.part(start, out.len()) {
        Operand::Slice(b) => out.iter_mut().zip(b).for_each(|(o, &q)| *o = f(*o, q)),
        Operand::Repeat(q) => out.iter_mut().for_each(|o| *o = f(*o, q)),
    });
}

/// Copies `x` into `out`, of the same length.
fn copy<T: Element>(x: &[T], out: &mut [T]) {
    chunked(out, |start, out| out.copy_from_slice(&x[start..start + out.len()]));
}

/// Runs `f` on `x` as an operand of an elementwise loop over `shape`: one element repeated
/// when it has a single element, its contiguous elements when it has `shape` and dtype `T`,
/// `None` otherwise.
fn with_operand<T: Element, R>(x: &Array, shape: &Shape, f: impl FnOnce(Option<Operand<'_, T>>) -> R) -> R {
    // Never waits for the lock: a caller may hold another storage's (see `binary_to`).
    let Some(buffer) = x.storage.try_read() else { return f(None) };
    let (offset, n) = (x.layout.offset, x.layout.numel());
    if n == 1 {
        let value =
            with_dtype!(x.dtype, S => buffer.as_slice::<S>().and_then(|d| d.get(offset)).map(|&v| cast::<S, T>(v)));
        return f(value.map(Operand::Repeat));
    }
    if x.dtype != T::DTYPE || x.layout.shape != *shape || !x.layout.is_contiguous() {
        return f(None);
    }
    f(buffer.as_slice::<T>().and_then(|data| data.get(offset..offset + n)).map(Operand::Slice))
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

/// `f` applied to each element of `x` (read as `T`), producing `U`. Contiguous inputs of dtype
/// `T` take the parallel loop; other layouts and dtypes go through ndarray.
pub(super) fn unary<T: Element, U: Element>(x: &Array, f: impl Fn(T) -> U + Sync) -> Result<Array> {
    let shape = &x.layout.shape;
    let fast = with_operand(x, shape, |operand: Option<Operand<'_, T>>| match operand? {
        Operand::Slice(v) => Some(output::<U>("unary", v.len()).map(|mut out| {
            map1(v, &mut out, &f);
            array(out, shape.clone())
        })),
        Operand::Repeat(v) => Some(Ok(array(vec![f(v)], shape.clone()))),
    });
    if let Some(result) = fast {
        return result;
    }
    read_as(x, |v: ArrayViewD<'_, T>| -> Result<Array> {
        let mut out = alloc("unary", v.len())?;
        vectorised(|| out.extend(v.iter().map(|&e| f(e))));
        Ok(array(out, shape.clone()))
    })?
}

/// As [`unary`], written into `out` when it can be: `out` contiguous, of dtype `U` and `x`'s
/// shape, and either `x` itself (same storage, layout and dtype, as an in-place operation's
/// `self`) or a storage `x` does not share. Returns `out` when it was written, a new array
/// otherwise.
pub(super) fn unary_to<T: Element, U: Element>(
    x: &Array,
    out: Option<&Array>,
    f: impl Fn(T) -> U + Sync,
) -> Result<Array> {
    let shape = &x.layout.shape;
    let written = out.is_some_and(|out| {
        if x.shares(out) {
            x.layout == out.layout
                && (x.dtype, U::DTYPE) == (T::DTYPE, T::DTYPE)
                && writable::<T>(out, shape).is_some_and(|mut o| {
                    map1_in_place(&mut o, |v| cast::<U, T>(f(v)));
                    true
                })
        } else {
            with_operand(x, shape, |operand: Option<Operand<'_, T>>| match (operand, writable::<U>(out, shape)) {
                (Some(Operand::Slice(x)), Some(mut o)) => {
                    map1(x, &mut o, &f);
                    true
                }
                (Some(Operand::Repeat(v)), Some(mut o)) => {
                    o.fill(f(v));
                    true
                }
                _ => false,
            })
        }
    });
    match out {
        Some(out) if written => Ok(out.clone()),
        _ => unary(x, f),
    }
}

/// `f` applied to the elements of `a` and `b` (read as `T`), broadcast to `shape`. Operands of
/// that shape, contiguous and of dtype `T`, or of one element, take the parallel loop; others
/// go through ndarray.
pub(super) fn binary<T: Element, U: Element>(
    a: &Array,
    b: &Array,
    shape: &Shape,
    f: impl Fn(T, T) -> U + Sync,
) -> Result<Array> {
    let fast = with_operand(a, shape, |x| {
        with_operand(b, shape, |y| -> Option<Result<Array>> {
            let (x, y) = (x?, y?);
            let n = shape.checked_numel()?;
            Some(output::<U>("binary", n).map(|mut out| {
                map2(x, y, &mut out, &f);
                array(out, shape.clone())
            }))
        })
    });
    if let Some(result) = fast {
        return result;
    }
    read_as(a, |av: ArrayViewD<'_, T>| {
        read_as(b, |bv: ArrayViewD<'_, T>| -> Result<Array> {
            let dims = IxDyn(shape);
            let av = av.broadcast(dims.clone()).ok_or_else(|| internal("left operand does not broadcast"))?;
            let bv = bv.broadcast(dims).ok_or_else(|| internal("right operand does not broadcast"))?;
            let mut out = alloc("binary", av.len())?;
            vectorised(|| out.extend(av.iter().zip(bv.iter()).map(|(&p, &q)| f(p, q))));
            Ok(array(out, shape.clone()))
        })
    })??
}

/// As [`binary`], written into `out` when it can be: `out` contiguous, of dtype `U` and
/// `shape`, and either `a` itself (same storage, layout and dtype, as an in-place operation's
/// `self`) while `b` is elsewhere, or a storage neither operand shares. Returns `out` when it
/// was written, a new array otherwise. Locks are only tried while another is held, so two
/// threads writing into each other's operands fall back instead of deadlocking.
pub(super) fn binary_to<T: Element, U: Element>(
    a: &Array,
    b: &Array,
    shape: &Shape,
    out: Option<&Array>,
    f: impl Fn(T, T) -> U + Sync,
) -> Result<Array> {
    let written = out.is_some_and(|out| {
        if b.shares(out) {
            false
        } else if a.shares(out) {
            a.layout == out.layout
                && (a.dtype, U::DTYPE) == (T::DTYPE, T::DTYPE)
                && writable::<T>(out, shape).is_some_and(|mut o| {
                    with_operand(b, shape, |y: Option<Operand<'_, T>>| {
                        y.map(|y| map2_in_place(&mut o, y, |p, q| cast::<U, T>(f(p, q)))).is_some()
                    })
                })
        } else {
            with_operand(a, shape, |x| {
                with_operand(b, shape, |y| match (x, y, writable::<U>(out, shape)) {
                    (Some(x), Some(y), Some(mut o)) => {
                        map2(x, y, &mut o, &f);
                        true
                    }
                    _ => false,
                })
            })
        }
    });
    match out {
        Some(out) if written => Ok(out.clone()),
        _ => binary(a, b, shape, f),
    }
}

/// Copies `src` into `dst` in one parallel pass when both are contiguous, of one dtype, in
/// different storages (or `src` has one element); false, changing nothing, otherwise.
pub(super) fn copied(dst: &Array, src: &Array) -> bool {
    let shape = &dst.layout.shape;
    !Arc::ptr_eq(&dst.storage, &src.storage)
        && with_dtype!(dst.dtype, T => with_operand(src, shape, |x: Option<Operand<'_, T>>| {
            match (x, writable::<T>(dst, shape)) {
                (Some(Operand::Slice(x)), Some(mut out)) => copy(x, &mut out),
                (Some(Operand::Repeat(v)), Some(mut out)) => out.fill(v),
                _ => return false,
            }
            true
        }))
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
    fn large_loops_cover_every_element_once() {
        let n = 5 * GRAIN + 123;
        let x: Vec<i64> = (0..n as i64).collect();
        let mut out = vec![0i64; n];
        map2(Operand::Slice(&x), Operand::Repeat(10), &mut out, |p, q| p * q);
        assert!(out.iter().enumerate().all(|(i, &v)| v == 10 * i as i64));
        map2(Operand::Repeat(1), Operand::Slice(&x), &mut out, |p, q| q - p);
        assert!(out.iter().enumerate().all(|(i, &v)| v == i as i64 - 1));
        let mut halves = vec![0.0f64; n];
        map1(&x, &mut halves, |v| v as f64 / 2.0);
        assert_eq!(halves[n - 1], (n - 1) as f64 / 2.0);
        map1_in_place(&mut halves, |v| v * 2.0);
        map2_in_place(&mut halves, Operand::Repeat(1.0), |p, q| p + q);
        assert!(halves.iter().enumerate().all(|(i, &v)| v == i as f64 + 1.0));
        let mut copied = vec![0i64; n];
        copy(&x, &mut copied);
        assert_eq!(copied, x);
    }
}
