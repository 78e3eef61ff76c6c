//! Arithmetic on the numeric element types: floats as IEEE, integers wrapping (as PyTorch's
//! integer tensors do, never panicking on overflow).

use ndarray::{ArrayView2, ArrayViewMut2};

use crate::tensor::{Element, Scalar};

/// A numeric element type (every dtype but bool).
pub(crate) trait Number: Element {
    fn add(self, other: Self) -> Self;
    fn sub(self, other: Self) -> Self;
    fn mul(self, other: Self) -> Self;
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
    ($t:ty) => {
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
                float_matmul(a, b, out)
            }
        }
    };
}
float!(f32);
float!(f64);

/// `out = a @ b` for floats, with the `gemm` crate: packed, cache-blocked SIMD kernels chosen
/// for the CPU at run time (AVX-512, AVX2+FMA, ...), on the rayon threads for large products.
fn float_matmul<T: Number>(a: ArrayView2<'_, T>, b: ArrayView2<'_, T>, out: &mut ArrayViewMut2<'_, T>) {
    let ((m, k), n) = (a.dim(), b.dim().1);
    debug_assert_eq!((b.dim().0, out.dim()), (k, (m, n)));
    let (a_rs, a_cs) = (a.strides()[0], a.strides()[1]);
    let (b_rs, b_cs) = (b.strides()[0], b.strides()[1]);
    let (o_rs, o_cs) = (out.strides()[0], out.strides()[1]);
    let (zero, one) = (T::from_scalar(Scalar::Int(0)), T::from_scalar(Scalar::Int(1)));
    // SAFETY: the pointers and strides come from ndarray views of exactly these dimensions
    // (`a` is m x k, `b` is k x n, `out` is m x n), so every element `gemm` addresses,
    // `ptr + i * row_stride + j * col_stride` for `i, j` inside those dimensions, lies in the
    // memory the view borrows. `out` is borrowed mutably and `a`, `b` immutably for the whole
    // call, so the output overlaps neither input, and nothing else writes to them meanwhile.
    // `read_dst` is false: `out`'s old contents are never read (alpha, which scales them, is 0).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            o_cs,
            o_rs,
            false,
            a.as_ptr(),
            a_cs,
            a_rs,
            b.as_ptr(),
            b_cs,
            b_rs,
            zero,
            one,
            false,
            false,
            false,
            gemm::Parallelism::Rayon(0),
        )
    }
}

macro_rules! int {
    ($t:ty) => {
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
                Some(if self.wrapping_rem(other) != 0 && ((self < 0) != (other < 0)) { q - 1 } else { q })
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
int!(i32);
int!(i64);

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
