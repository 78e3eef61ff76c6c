//! Float16 elementwise loops on the processor's conversion instructions: the operands' runs
//! widened to float32 sixteen (AVX-512) or eight (AVX2 with F16C) elements at a time with
//! `vcvtph2ps`, the function computed on the block in float32 (a loop the compiler
//! vectorises), and the block rounded back with `vcvtps2ph` (to nearest even, as the bit
//! operations of `types::dtype_reduced` round). Stable Rust has no float16 type, so the generic
//! loops can only convert with bit operations, which cost more than the bytes float16 saves;
//! converting by blocks takes an add of 1e7 elements from 3.7 to 1.8 ms on one core.
//!
//! The results are the bit operations' (every value; a NaN stays a NaN, its payload the
//! instruction's, as PyTorch's vectorised float16 loops give it).

use std::any::TypeId;

use super::map::{Input, Operand};
use super::{Instructions, instructions};
use crate::types::Element;
use crate::types::dtype_reduced as reduced;
use crate::types::half::f16;

/// A block operand: float16 elements of a run or of the output, or one value repeated.
#[derive(Clone, Copy)]
enum Block<'a> {
    Elements(&'a [f16]),
    Output,
    Repeat(f32),
}

impl<'a> Block<'a> {
    /// The block operand of `input`, `None` for a strided run (left to the element loop).
    #[inline(always)]
    fn of(input: Input<'a, f16>) -> Option<Block<'a>> {
        match input {
            Input::Run(Operand::Slice(x)) => Some(Block::Elements(x)),
            Input::Run(Operand::Repeat(v)) => Some(Block::Repeat(widen(v))),
            Input::Run(Operand::Strided(..)) => None,
            Input::Output => Some(Block::Output),
        }
    }

    /// Element `i`, widened (`out` is the output, for `Output`).
    #[inline(always)]
    fn get(self, out: &[f16], i: usize) -> f32 {
        match self {
            Block::Elements(x) => widen(x[i]),
            Block::Output => widen(out[i]),
            Block::Repeat(v) => v,
        }
    }

    /// Elements `i..i + L`, widened into `block`.
    ///
    /// # Safety
    ///
    /// The processor has the instructions of `L` lanes (see [`lanes`]).
    #[inline(always)]
    unsafe fn load<const L: usize>(self, out: &[f16], i: usize, block: &mut [f32; L]) {
        let elements = match self {
            Block::Elements(x) => &x[i..i + L],
            Block::Output => &out[i..i + L],
            Block::Repeat(v) => {
                *block = [v; L];
                return;
            }
        };
        // SAFETY: `elements` holds `L` float16 values and `block` `L` float32 ones, which the
        // unaligned loads and stores below read and write; the caller vouches for the
        // instructions.
        unsafe { convert::widen::<L>(elements, block) }
    }
}

#[inline(always)]
fn widen(x: f16) -> f32 {
    reduced::f16_to_f32(x.to_bits())
}

#[inline(always)]
fn narrow(x: f32) -> f16 {
    f16::from_bits(reduced::f32_to_f16(x))
}

/// The block width the processor runs: 16 lanes with AVX-512, 8 with AVX2 (which
/// [`instructions`] names only with F16C), none on the baseline.
#[inline(always)]
fn lanes() -> Option<usize> {
    match instructions() {
        Instructions::Avx512 => Some(16),
        Instructions::Avx2 => Some(8),
        Instructions::Baseline => None,
    }
}

/// `out[i] = x[i]` converted, float16 to float32 or float32 to float16, by blocks: the
/// conversions of `tensor.to(dtype)` and of every half-precision kernel's widened operands
/// and rounded result. False (nothing written) for other element types, a run that is not
/// contiguous, or a processor without the instructions.
#[inline(always)]
pub(super) fn converted<S: Element, T: Element>(x: Operand<'_, S>, out: &mut [T]) -> bool {
    let Operand::Slice(x) = x else { return false };
    // Whether the processor runs 16 lanes (else 8), asked only once the types are known.
    let wide = || lanes().map(|lanes| lanes == 16);
    if let (Some(x), Some(out)) = (retyped::<S, f16>(x), retyped_mut::<T, f32>(out)) {
        let Some(wide) = wide() else { return false };
        // SAFETY: `lanes` gives the width the processor has the instructions for.
        unsafe { if wide { widen_all::<16>(x, out) } else { widen_all::<8>(x, out) } }
        return true;
    }
    if let (Some(x), Some(out)) = (retyped::<S, f32>(x), retyped_mut::<T, f16>(out)) {
        let Some(wide) = wide() else { return false };
        // SAFETY: as above.
        unsafe { if wide { narrow_all::<16>(x, out) } else { narrow_all::<8>(x, out) } }
        return true;
    }
    false
}

/// `x` as a slice of `U`, when `S` is `U`.
#[inline(always)]
fn retyped<S: 'static, U: 'static>(x: &[S]) -> Option<&[U]> {
    // SAFETY: the type ids are equal, so `S` is `U`: the same memory, length and lifetime.
    (TypeId::of::<S>() == TypeId::of::<U>()).then(|| unsafe { std::slice::from_raw_parts(x.as_ptr().cast(), x.len()) })
}

/// `x` as a mutable slice of `U`, when `S` is `U`.
#[inline(always)]
fn retyped_mut<S: 'static, U: 'static>(x: &mut [S]) -> Option<&mut [U]> {
    // SAFETY: as in `retyped`; the borrow is moved into the result, so it stays unique.
    (TypeId::of::<S>() == TypeId::of::<U>())
        .then(|| unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr().cast(), x.len()) })
}

/// `out[i] = x[i]` widened, `L` at a time.
///
/// # Safety
///
/// The processor has the instructions of `L` lanes; `out` is as long as `x`.
#[inline(always)]
unsafe fn widen_all<const L: usize>(x: &[f16], out: &mut [f32]) {
    let whole = x.len() / L * L;
    for (x, out) in x[..whole].chunks_exact(L).zip(out.chunks_exact_mut(L)) {
        let block: &mut [f32; L] = out.try_into().expect("a chunk of L elements");
        // SAFETY: as the caller vouches; `x` holds `L` elements.
        unsafe { convert::widen::<L>(x, block) };
    }
    for (o, &v) in out[whole..].iter_mut().zip(&x[whole..]) {
        *o = widen(v);
    }
}

/// `out[i] = x[i]` rounded (to nearest even), `L` at a time.
///
/// # Safety
///
/// As [`widen_all`]'s.
#[inline(always)]
unsafe fn narrow_all<const L: usize>(x: &[f32], out: &mut [f16]) {
    let whole = x.len() / L * L;
    for (x, out) in x[..whole].chunks_exact(L).zip(out.chunks_exact_mut(L)) {
        let block: &[f32; L] = x.try_into().expect("a chunk of L elements");
        // SAFETY: as the caller vouches; `out` holds `L` elements.
        unsafe { convert::narrow::<L>(block, out) };
    }
    for (o, &v) in out[whole..].iter_mut().zip(&x[whole..]) {
        *o = narrow(v);
    }
}

/// `out[i] = g(x[i])` by blocks; false (nothing written) where it does not apply.
#[inline(always)]
pub(super) fn lifted1(x: Input<'_, f16>, out: &mut [f16], g: &impl Fn(f32) -> f32) -> bool {
    let Some(x) = Block::of(x) else { return false };
    // SAFETY: `lanes` gives the width the processor has the instructions for.
    match lanes() {
        Some(16) => unsafe { blocks1::<16>(x, out, g) },
        Some(_) => unsafe { blocks1::<8>(x, out, g) },
        None => return false,
    }
    true
}

/// `out[i] = g(a[i], b[i])` by blocks; false (nothing written) where it does not apply.
#[inline(always)]
pub(super) fn lifted2(a: Input<'_, f16>, b: Input<'_, f16>, out: &mut [f16], g: &impl Fn(f32, f32) -> f32) -> bool {
    let (Some(a), Some(b)) = (Block::of(a), Block::of(b)) else { return false };
    // SAFETY: `lanes` gives the width the processor has the instructions for.
    match lanes() {
        Some(16) => unsafe { blocks2::<16>(a, b, out, g) },
        Some(_) => unsafe { blocks2::<8>(a, b, out, g) },
        None => return false,
    }
    true
}

/// # Safety
///
/// The processor has the instructions of `L` lanes.
#[inline(always)]
unsafe fn blocks1<const L: usize>(x: Block<'_>, out: &mut [f16], g: &impl Fn(f32) -> f32) {
    let (mut wide, mut result) = ([0f32; L], [0f32; L]);
    let mut i = 0;
    while i + L <= out.len() {
        // SAFETY: as the caller vouches.
        unsafe { x.load::<L>(out, i, &mut wide) };
        for (r, &v) in result.iter_mut().zip(&wide) {
            *r = g(v);
        }
        // SAFETY: as the caller vouches; the slice holds `L` elements.
        unsafe { convert::narrow::<L>(&result, &mut out[i..i + L]) };
        i += L;
    }
    for i in i..out.len() {
        out[i] = narrow(g(x.get(out, i)));
    }
}

/// # Safety
///
/// The processor has the instructions of `L` lanes.
#[inline(always)]
unsafe fn blocks2<const L: usize>(a: Block<'_>, b: Block<'_>, out: &mut [f16], g: &impl Fn(f32, f32) -> f32) {
    let (mut x, mut y, mut result) = ([0f32; L], [0f32; L], [0f32; L]);
    let mut i = 0;
    while i + L <= out.len() {
        // SAFETY: as the caller vouches.
        unsafe {
            a.load::<L>(out, i, &mut x);
            b.load::<L>(out, i, &mut y);
        }
        for ((r, &p), &q) in result.iter_mut().zip(&x).zip(&y) {
            *r = g(p, q);
        }
        // SAFETY: as the caller vouches; the slice holds `L` elements.
        unsafe { convert::narrow::<L>(&result, &mut out[i..i + L]) };
        i += L;
    }
    for i in i..out.len() {
        out[i] = narrow(g(a.get(out, i), b.get(out, i)));
    }
}

/// The conversion instructions, by block width.
mod convert {
    #[cfg(target_arch = "x86_64")]
    use std::arch::x86_64::*;

    use crate::types::half::f16;

    /// `L` float16 values widened into `block`.
    ///
    /// # Safety
    ///
    /// `src` holds at least `L` elements, and the processor has AVX-512 F (`L` = 16) or F16C
    /// and AVX (`L` = 8).
    #[inline(always)]
    pub(super) unsafe fn widen<const L: usize>(src: &[f16], block: &mut [f32; L]) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as the caller vouches: the loads read `L` float16 values (32 or 16 bytes)
        // from `src`, the stores write `L` float32 values (64 or 32 bytes) into `block`.
        unsafe {
            if L == 16 {
                let x = _mm256_loadu_si256(src.as_ptr().cast());
                _mm512_storeu_ps(block.as_mut_ptr(), _mm512_cvtph_ps(x));
            } else {
                let x = _mm_loadu_si128(src.as_ptr().cast());
                _mm256_storeu_ps(block.as_mut_ptr(), _mm256_cvtph_ps(x));
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        for (b, &x) in block.iter_mut().zip(src) {
            *b = super::widen(x);
        }
    }

    /// `block` rounded (to nearest even) into `L` float16 values of `dst`.
    ///
    /// # Safety
    ///
    /// As [`widen`]'s, for `dst`.
    #[inline(always)]
    pub(super) unsafe fn narrow<const L: usize>(block: &[f32; L], dst: &mut [f16]) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as the caller vouches: the loads read `L` float32 values from `block`, the
        // stores write `L` float16 values into `dst`.
        unsafe {
            // Round to nearest even (the immediate's rounding bits 0, MXCSR not consulted).
            const NEAREST: i32 = _MM_FROUND_TO_NEAREST_INT;
            if L == 16 {
                let x = _mm512_cvtps_ph::<NEAREST>(_mm512_loadu_ps(block.as_ptr()));
                _mm256_storeu_si256(dst.as_mut_ptr().cast(), x);
            } else {
                let x = _mm256_cvtps_ph::<NEAREST>(_mm256_loadu_ps(block.as_ptr()));
                _mm_storeu_si128(dst.as_mut_ptr().cast(), x);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        for (d, &x) in dst.iter_mut().zip(block) {
            *d = super::narrow(x);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every float16 value, then some of them again, shifted (so that pairs mix).
    fn values() -> Vec<f16> {
        (0..=u16::MAX).chain((0..=u16::MAX).step_by(7)).map(f16::from_bits).collect()
    }

    /// The same value, or both NaN (the payload of a NaN is the instruction's).
    fn same(got: f16, want: f16) -> bool {
        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
    }

    /// The block widths this processor can run.
    fn widths() -> Vec<usize> {
        let mut widths = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("f16c") && std::arch::is_x86_feature_detected!("avx") {
                widths.push(8);
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                widths.push(16);
            }
        }
        widths
    }

    fn run2(width: usize, a: Block<'_>, b: Block<'_>, out: &mut [f16], g: &impl Fn(f32, f32) -> f32) {
        // SAFETY: `widths` names only the widths whose instructions the processor has.
        unsafe { if width == 16 { blocks2::<16>(a, b, out, g) } else { blocks2::<8>(a, b, out, g) } }
    }

    #[test]
    fn blocks_give_the_element_loop_s_values_for_every_float16() {
        let a = values();
        let b: Vec<f16> = a.iter().rev().copied().collect();
        type Op = fn(f32, f32) -> f32;
        let ops: [(&str, Op); 4] =
            [("add", |p, q| p + q), ("mul", |p, q| p * q), ("div", |p, q| p / q), ("fma", |p, q| p.mul_add(q, 0.25))];
        for width in widths() {
            for (name, g) in ops {
                // Lengths that leave every tail, and the whole table.
                for n in (0..40).chain([a.len()]) {
                    let mut out = vec![f16::ZERO; n];
                    run2(width, Block::Elements(&a[..n]), Block::Elements(&b[..n]), &mut out, &g);
                    for i in 0..n {
                        let want = narrow(g(widen(a[i]), widen(b[i])));
                        assert!(
                            same(out[i], want),
                            "{name} at width {width}: {:?} {:?} gave {:?}, want {want:?}",
                            a[i],
                            b[i],
                            out[i]
                        );
                    }
                }
                // A repeated operand, and the output as an operand (in place).
                let mut out = a.clone();
                run2(width, Block::Output, Block::Repeat(widen(f16::from_f32(1.5))), &mut out, &g);
                for (i, &o) in out.iter().enumerate() {
                    assert!(same(o, narrow(g(widen(a[i]), 1.5))), "{name} in place at width {width}");
                }
            }
            // One operand: a function of one value, through the same path.
            let mut out = vec![f16::ZERO; a.len()];
            // SAFETY: as in `run2`.
            unsafe {
                let g = |x: f32| x * 3.0 - 1.0;
                if width == 16 {
                    blocks1::<16>(Block::Elements(&a), &mut out, &g)
                } else {
                    blocks1::<8>(Block::Elements(&a), &mut out, &g)
                }
                for (&o, &x) in out.iter().zip(&a) {
                    assert!(same(o, narrow(g(widen(x)))), "unary at width {width}");
                }
            }
        }
    }

    #[test]
    fn block_conversions_give_the_element_conversions() {
        let halves = values();
        // Every float16 value, and floats between neighbours (ties and near-ties round).
        let floats: Vec<f32> = halves
            .iter()
            .flat_map(|&h| {
                let x = widen(h);
                [x, x * (1.0 + 1.0 / 2048.0), x * (1.0 + 1.0 / 4096.0), x * (1.0 - 1.0 / 3000.0)]
            })
            .chain([f32::MAX, -f32::MAX, 1e-10, 65520.0, 65519.0, f32::INFINITY])
            .collect();
        for width in widths() {
            for n in (0..40).chain([halves.len()]) {
                let mut wide = vec![0f32; n];
                let mut narrowed = vec![f16::ZERO; n];
                // SAFETY: `widths` names only the widths whose instructions the processor has.
                unsafe {
                    if width == 16 {
                        widen_all::<16>(&halves[..n], &mut wide);
                        narrow_all::<16>(&floats[..n], &mut narrowed);
                    } else {
                        widen_all::<8>(&halves[..n], &mut wide);
                        narrow_all::<8>(&floats[..n], &mut narrowed);
                    }
                }
                for i in 0..n {
                    let want: f32 = super::super::cast(halves[i]);
                    assert!(wide[i].to_bits() == want.to_bits() || want.is_nan() && wide[i].is_nan(), "{want}");
                    assert!(same(narrowed[i], super::super::cast(floats[i])), "{} at width {width}", floats[i]);
                }
            }
            let mut all = vec![f16::ZERO; floats.len()];
            // SAFETY: as above.
            unsafe {
                if width == 16 { narrow_all::<16>(&floats, &mut all) } else { narrow_all::<8>(&floats, &mut all) }
            }
            assert!(all.iter().zip(&floats).all(|(&h, &x)| same(h, super::super::cast(x))), "width {width}");
        }
        // Other types and strided runs are left to the element loop.
        assert!(!converted(Operand::Slice(&[1i32, 2][..]), &mut [0f32; 2]));
        assert!(!converted(Operand::Strided(&halves[..4], 2), &mut [0f32; 2]));
    }

    #[test]
    fn strided_runs_are_left_to_the_element_loop() {
        let x = [f16::ONE; 4];
        let mut out = [f16::ZERO; 2];
        assert!(!lifted1(Input::Run(Operand::Strided(&x, 2)), &mut out, &|v| v));
        assert_eq!(out, [f16::ZERO; 2]);
    }
}
