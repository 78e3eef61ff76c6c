//! Elementwise loops over contiguous data, split across threads when large: the fast path of
//! the unary and binary kernels. The loops are plain slice zips, which the compiler vectorises.

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::tensor::{Element, take_pooled};

/// Elements per task: large enough that scheduling a task is noise, small enough that both
/// threads get work from a few hundred thousand elements on.
const GRAIN: usize = 1 << 16;

/// An operand of an elementwise loop: contiguous elements, or one element repeated (a Python
/// number, a one-element tensor broadcast).
#[derive(Clone, Copy)]
pub(crate) enum Operand<'a, T> {
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
pub(crate) fn output<T: Element>(func: &str, n: usize) -> Result<Vec<T>> {
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
/// is large.
fn chunked<U: Send>(out: &mut [U], body: impl Fn(usize, &mut [U]) + Sync) {
    if out.len() < 2 * GRAIN {
        body(0, out);
    } else {
        out.par_chunks_mut(GRAIN).enumerate().for_each(|(i, chunk)| body(i * GRAIN, chunk));
    }
}

/// `out[i] = f(x[i])`; `x` has `out`'s length.
pub(crate) fn map1<T: Element, U: Element>(x: &[T], out: &mut [U], f: impl Fn(T) -> U + Sync) {
    chunked(out, |start, out| {
        let x = &x[start..start + out.len()];
        out.iter_mut().zip(x).for_each(|(o, &v)| *o = f(v));
    });
}

/// `out[i] = f(a[i], b[i])`; slice operands have `out`'s length.
pub(crate) fn map2<T: Element, U: Element>(
    a: Operand<'_, T>,
    b: Operand<'_, T>,
    out: &mut [U],
    f: impl Fn(T, T) -> U + Sync,
) {
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
pub(crate) fn map1_in_place<T: Element>(out: &mut [T], f: impl Fn(T) -> T + Sync) {
    chunked(out, |_, out| out.iter_mut().for_each(|o| *o = f(*o)));
}

/// `out[i] = f(out[i], b[i])`; a slice `b` has `out`'s length.
pub(crate) fn map2_in_place<T: Element>(out: &mut [T], b: Operand<'_, T>, f: impl Fn(T, T) -> T + Sync) {
    chunked(out, |start, out| match b.part(start, out.len()) {
        Operand::Slice(b) => out.iter_mut().zip(b).for_each(|(o, &q)| *o = f(*o, q)),
        Operand::Repeat(q) => out.iter_mut().for_each(|o| *o = f(*o, q)),
    });
}

/// Copies `x` into `out`, of the same length.
pub(crate) fn copy<T: Element>(x: &[T], out: &mut [T]) {
    chunked(out, |start, out| out.copy_from_slice(&x[start..start + out.len()]));
}

#[cfg(test)]
mod tests {
    use super::*;

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
