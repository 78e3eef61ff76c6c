//! Arithmetic on the numeric element types: floats as IEEE, integers wrapping (as PyTorch's
//! integer tensors do, never panicking on overflow).

use ndarray::{ArrayView2, ArrayViewMut2};

use crate::types::{Element, Scalar};

/// A numeric element type (every dtype but bool).
pub trait Number: Element {
    /// `self + other` (wrapping for integers).
    fn add(self, other: Self) -> Self;
    /// `self - other` (wrapping for integers).
    fn sub(self, other: Self) -> Self;
    /// `self * other` (wrapping for integers).
    fn mul(self, other: Self) -> Self;
    /// `-self` (wrapping for integers).
    fn neg(self) -> Self;
    /// Division rounding toward zero; `None` for an integer division by zero.
    fn div_trunc(self, other: Self) -> Option<Self>;
    /// Division rounding toward negative infinity; `None` for an integer division by zero.
    fn div_floor(self, other: Self) -> Option<Self>;
    /// The number as this type (floats truncate toward zero into integers).
    fn from_scalar(s: Scalar) -> Self;
    /// `out = a @ b`.
    fn matmul(a: ArrayView2<'_, Self>, b: ArrayView2<'_, Self>, out: &mut ArrayViewMut2<'_, Self>);
}

macro_rules! float {
    ($t:ty, $matmul:path) => {
        impl Number for $t {
            #[inline(always)]
            fn add(self, other: Self) -> Self {
                self + other
            }
            #[inline(always)]
            fn sub(self, other: Self) -> Self {
                self - other
            }
            #[inline(always)]
            fn mul(self, other: Self) -> Self {
                self * other
            }
            #[inline(always)]
            fn neg(self) -> Self {
                -self
            }
            #[inline(always)]
            fn div_trunc(self, other: Self) -> Option<Self> {
                Some((self / other).trunc())
            }
            #[inline(always)]
            fn div_floor(self, other: Self) -> Option<Self> {
                Some((self / other).floor())
            }
            fn from_scalar(s: Scalar) -> Self {
                s.to_f64() as $t
            }
            fn matmul(a: ArrayView2<'_, Self>, b: ArrayView2<'_, Self>, out: &mut ArrayViewMut2<'_, Self>) {
                $matmul(a, b, out)
            }
        }
    };
}
// float32 products run on torchfn's own kernel (`sgemm.rs`: packed, cache-blocked, a 12 x 32
// AVX-512 or a 6 x 16 AVX2+FMA micro-kernel, on all cores) when the processor has AVX2 and FMA;
// float64 products and machines without them use `matrixmultiply`. The README's performance
// section has the rates of each against the processor's peak and PyTorch's.
float!(f32, f32_matmul);
float!(f64, matrixmultiply_f64);

/// `out = a @ b` in float32: torchfn's kernel where the processor has AVX2 and FMA (AVX-512
/// where it has that), else `matrixmultiply`'s.
fn f32_matmul(a: ArrayView2<'_, f32>, b: ArrayView2<'_, f32>, out: &mut ArrayViewMut2<'_, f32>) {
    #[cfg(target_arch = "x86_64")]
    if super::sgemm::matmul(a, b, out) {
        return;
    }
    matrixmultiply_f32(a, b, out)
}

/// Defines `$name(a, b, out)`: `out = a @ b` through `matrixmultiply`'s `$gemm`.
macro_rules! matrixmultiply {
    ($name:ident, $t:ty, $gemm:path) => {
        #[doc = concat!("`out = a @ b` in ", stringify!($t), " through `matrixmultiply`.")]
        fn $name(a: ArrayView2<'_, $t>, b: ArrayView2<'_, $t>, out: &mut ArrayViewMut2<'_, $t>) {
            let ((m, k), n) = (a.dim(), b.dim().1);
            debug_assert_eq!((b.dim().0, out.dim()), (k, (m, n)));
            let (a_s, b_s) = (a.strides(), b.strides());
            let (o_rs, o_cs) = (out.strides()[0], out.strides()[1]);
            // SAFETY: the pointers and strides come from ndarray views of exactly these
            // dimensions (`a` is m x k, `b` is k x n, `out` is m x n), so every element the
            // GEMM addresses, `ptr + i * row_stride + j * col_stride` for `i, j` inside those
            // dimensions, lies in the memory the view borrows. `out` is borrowed mutably and
            // `a`, `b` immutably for the whole call, so the output overlaps neither input and
            // nothing else writes to them meanwhile. With beta 0, `out`'s old contents are
            // never read.
            unsafe {
                $gemm(
                    m,
                    k,
                    n,
                    1.0,
                    a.as_ptr(),
                    a_s[0],
                    a_s[1],
                    b.as_ptr(),
                    b_s[0],
                    b_s[1],
                    0.0,
                    out.as_mut_ptr(),
                    o_rs,
                    o_cs,
                )
            }
        }
    };
}
matrixmultiply!(matrixmultiply_f32, f32, matrixmultiply::sgemm);
matrixmultiply!(matrixmultiply_f64, f64, matrixmultiply::dgemm);

/// `Number` for an integer type; `$floor` turns the truncated quotient `q` of `a / b` into the
/// floored one (the same for unsigned types).
macro_rules! int {
    ($t:ty, $floor:expr) => {
        impl Number for $t {
            #[inline(always)]
            fn add(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
            #[inline(always)]
            fn sub(self, other: Self) -> Self {
                self.wrapping_sub(other)
            }
            #[inline(always)]
            fn mul(self, other: Self) -> Self {
                self.wrapping_mul(other)
            }
            #[inline(always)]
            fn neg(self) -> Self {
                self.wrapping_neg()
            }
            #[inline(always)]
            fn div_trunc(self, other: Self) -> Option<Self> {
                (other != 0).then(|| self.wrapping_div(other))
            }
            #[inline(always)]
            fn div_floor(self, other: Self) -> Option<Self> {
                let q = self.div_trunc(other)?;
                let floor: fn($t, $t, $t) -> $t = $floor;
                Some(floor(self, other, q))
            }
            fn from_scalar(s: Scalar) -> Self {
                s.to_i64() as $t
            }
            fn matmul(a: ArrayView2<'_, Self>, b: ArrayView2<'_, Self>, out: &mut ArrayViewMut2<'_, Self>) {
                for ((i, j), o) in out.indexed_iter_mut() {
                    *o = a
                        .row(i)
                        .iter()
                        .zip(b.column(j))
                        .fold(0, |acc: $t, (&x, &y)| acc.wrapping_add(x.wrapping_mul(y)));
                }
            }
        }
    };
}
/// A quotient rounded toward zero, floored: one less when the division was inexact and the
/// operands' signs differ.
macro_rules! signed_floor {
    () => {
        |a, b, q| if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) { q - 1 } else { q }
    };
}
int!(i8, signed_floor!());
int!(i16, signed_floor!());
int!(i32, signed_floor!());
int!(i64, signed_floor!());
int!(u8, |_, _, q| q);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_division_rounds_like_pytorch() {
        assert_eq!(Number::div_floor(7i64, -2), Some(-4));
        assert_eq!(Number::div_trunc(7i64, -2), Some(-3));
        assert_eq!(Number::div_floor(-7i64, 2), Some(-4));
        assert_eq!(Number::div_floor(1i32, 0), None);
        assert_eq!(Number::div_floor(-7.0f64, 2.0), Some(-4.0));
    }

    #[test]
    fn integers_wrap_instead_of_panicking() {
        assert_eq!(Number::add(i64::MAX, 1), i64::MIN);
        assert_eq!(Number::div_trunc(i64::MIN, -1), Some(i64::MIN));
    }
}
