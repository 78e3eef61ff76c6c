//! Arithmetic on the numeric element types: floats as IEEE, integers wrapping (as PyTorch's
//! integer tensors do, never panicking on overflow).

use ndarray::{ArrayView2, ArrayViewMut2};

use super::elementwise::Stored;
use crate::types::half::{bf16, f16};
use crate::types::{Element, Scalar};

/// An element type of the matrices torchfn's float32 kernel multiplies (`sgemm.rs`): float32
/// itself, and float16 and bfloat16, which it widens to float32 while it packs them, so that a
/// half-precision product makes no float32 copies of its operands. Each element widens as
/// the elementwise kernels widen it ([`Stored::widen`]).
pub trait MatmulOperand: Stored<Math = f32> + Send + Sync {
    /// The elements as float32s, where they are float32s already (read in place, unpacked).
    fn floats(_: &[Self]) -> Option<&[f32]> {
        None
    }
    /// The eight elements from `p` on, widened.
    ///
    /// # Safety
    ///
    /// `p` points to eight readable elements, and the processor has AVX2 and F16C (the caller
    /// holds an `sgemm::Avx2Fma`).
    #[cfg(target_arch = "x86_64")]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256;
}

impl MatmulOperand for f32 {
    fn floats(elements: &[f32]) -> Option<&[f32]> {
        Some(elements)
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const f32) -> std::arch::x86_64::__m256 {
        // SAFETY: as the caller vouches, `p` points to eight floats and the processor has AVX.
        unsafe { std::arch::x86_64::_mm256_loadu_ps(p) }
    }
}

impl MatmulOperand for f16 {
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const f16) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::{_mm_loadu_si128, _mm256_cvtph_ps};
        // SAFETY: as the caller vouches, `p` points to eight float16s (16 bytes) and the
        // processor has F16C; `vcvtph2ps` widens exactly, as `f16_to_f32` does.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
    }
}

impl MatmulOperand for bf16 {
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const bf16) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::{_mm_loadu_si128, _mm256_castsi256_ps, _mm256_cvtepu16_epi32, _mm256_slli_epi32};
        // SAFETY: as the caller vouches, `p` points to eight bfloat16s (16 bytes) and the
        // processor has AVX2. A bfloat16 is the high half of the float32 it stands for: each
        // zero-extended to 32 bits and shifted up 16 is that float32, bit for bit.
        unsafe { _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast())))) }
    }
}

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
                let ((m, k), n) = (a.dim(), b.dim().1);
                if k == 1 && out.len() <= OUTER_MAX {
                    outer(a, b, out)
                } else if (m == 1 || n == 1) && m * n * k <= OUTER_MAX {
                    matrix_vector(a, b, out)
                } else {
                    $matmul(a, b, out)
                }
            }
        }
    };
}
/// Products of one step along `k` (outer products) of at most this many results are written
/// row by row: a GEMM packs its operands and runs its micro-kernel for a single step (a
/// per-example weight gradient of an MLP, 256 x 1 @ 1 x 784, took about 0.5 million
/// instructions there, 0.3 million by rows); larger ones go to the GEMM, which splits them over
/// the threads.
const OUTER_MAX: usize = 1 << 20;

/// `out = a @ b` for `a` of one column and `b` of one row: each row of `out` is `b`'s row
/// times one element of `a`.
fn outer<T: Copy + std::ops::Mul<Output = T>>(
    a: ArrayView2<'_, T>,
    b: ArrayView2<'_, T>,
    out: &mut ArrayViewMut2<'_, T>,
) {
    let b = b.row(0);
    for (mut row, &x) in out.rows_mut().into_iter().zip(a.column(0)) {
        row.zip_mut_with(&b, |o, &y| *o = x * y);
    }
}

/// `out = a @ b` for `a` of one row or `b` of one column, as a matrix `mat` times a vector
/// `x`: each result is a dot product of a row of `mat` with `x` where those rows are
/// contiguous, else `x`'s elements scale `mat`'s columns into the result. A GEMM would pack the
/// whole matrix for one row (an MLP's linear layer on one example, 1 x 784 @ 784 x 256, spent
/// 0.4 million instructions packing `b`).
fn matrix_vector<T: ndarray::LinalgScalar>(a: ArrayView2<'_, T>, b: ArrayView2<'_, T>, out: &mut ArrayViewMut2<'_, T>) {
    let (mat, x, mut y) = match a.dim().0 {
        1 => (b.view().reversed_axes(), a.row(0), out.row_mut(0)),
        _ => (a.view(), b.column(0), out.column_mut(0)),
    };
    super::map::vectorised(
        #[inline(always)]
        || {
            if mat.strides()[1] == 1 || mat.strides()[0] != 1 {
                for (y, row) in y.iter_mut().zip(mat.rows()) {
                    *y = match (row.as_slice(), x.as_slice()) {
                        (Some(row), Some(x)) => dot(row, x),
                        _ => row.dot(&x),
                    };
                }
            } else {
                y.fill(T::zero());
                for (column, &x) in mat.columns().into_iter().zip(&x) {
                    match (y.as_slice_mut(), column.as_slice()) {
                        (Some(y), Some(column)) => y.iter_mut().zip(column).for_each(|(y, &c)| *y = *y + x * c),
                        _ => y.scaled_add(x, &column),
                    }
                }
            }
        },
    )
}

/// The dot product of two slices of one length in [`DOT_LANES`] partial sums, one per lane of
/// the vector registers `vectorised` compiles it for, added together at the end (ndarray's
/// `dot` keeps eight scalar sums: 784 elements took about four times the instructions).
#[inline(always)]
fn dot<T: ndarray::LinalgScalar>(a: &[T], b: &[T]) -> T {
    let mut sums = [T::zero(); DOT_LANES];
    let (xs, ys) = (a.chunks_exact(DOT_LANES), b.chunks_exact(DOT_LANES));
    let tail = xs.remainder().iter().zip(ys.remainder()).fold(T::zero(), |s, (&x, &y)| s + x * y);
    for (x, y) in xs.zip(ys) {
        for l in 0..DOT_LANES {
            sums[l] = sums[l] + x[l] * y[l];
        }
    }
    sums.iter().fold(tail, |s, &p| s + p)
}

/// The partial sums of [`dot`]: two 512-bit registers of float32.
const DOT_LANES: usize = 32;

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
    fn outer_products_are_written_row_by_row_through_any_strides() {
        let a = ndarray::Array2::from_shape_fn((5, 1), |(i, _)| i as f32 - 2.0);
        let b = ndarray::Array2::from_shape_fn((1, 7), |(_, j)| 0.5 * j as f32 + 1.0);
        let mut out = ndarray::Array2::<f32>::from_elem((7, 5), f32::NAN);
        // A transposed output: its rows are strided.
        Number::matmul(a.view(), b.view(), &mut out.view_mut().reversed_axes());
        for ((j, i), &o) in out.indexed_iter() {
            assert_eq!(o, a[[i, 0]] * b[[0, j]]);
        }
        // The same as the GEMM's product.
        let mut gemm = ndarray::Array2::<f32>::zeros((5, 7));
        f32_matmul(a.view(), b.view(), &mut gemm.view_mut());
        assert_eq!(gemm, out.t());
    }

    #[test]
    fn matrix_vector_products_match_the_gemm_through_any_strides() {
        let matrix = ndarray::Array2::from_shape_fn((6, 9), |(i, j)| (i * 9 + j) as f32 * 0.25 - 5.0);
        let row = ndarray::Array2::from_shape_fn((1, 6), |(_, j)| j as f32 - 2.5);
        let column = ndarray::Array2::from_shape_fn((9, 1), |(i, _)| 1.0 - i as f32 * 0.5);
        let (t, tr, tc) = (matrix.t().to_owned(), row.t().to_owned(), column.t().to_owned());
        // A row times the matrix (its rows contiguous) or its transpose (its columns), and the
        // matrix times a column, both ways.
        let cases = [
            (row.view(), matrix.view()),
            (tc.view(), t.view()),
            (matrix.view(), column.view()),
            (t.view(), tr.view()),
            (row.view(), t.t()),
            (t.t(), column.view()),
        ];
        // Rows and columns of 70, past the dot product's 32 partial sums with a tail, of values
        // whose sums are exact in any order: dot products of 70 (the matrix times a column),
        // axpys of 70 (a row times the matrix), and the same products through the transpose.
        let long = ndarray::Array2::from_shape_fn((5, 70), |(i, j)| ((i * 70 + j) % 13) as f32 * 0.25 - 1.5);
        let long_t = long.t().to_owned();
        let short_row = ndarray::Array2::from_shape_fn((1, 5), |(_, j)| j as f32 - 2.0);
        let long_column = ndarray::Array2::from_shape_fn((70, 1), |(i, _)| (i % 7) as f32 - 3.0);
        let long_cases = [
            (long.view(), long_column.view()),
            (short_row.view(), long.view()),
            (long_column.t(), long_t.view()),
            (long_t.t(), long_column.view()),
        ];
        for (a, b) in cases.into_iter().chain(long_cases) {
            let mut got = ndarray::Array2::<f32>::from_elem((a.dim().0, b.dim().1), f32::NAN);
            Number::matmul(a, b, &mut got.view_mut());
            let mut gemm = ndarray::Array2::<f32>::zeros(got.dim());
            f32_matmul(a, b, &mut gemm.view_mut());
            assert_eq!(got, gemm, "{:?} @ {:?}", a.dim(), b.dim());
        }
    }

    #[test]
    fn integers_wrap_instead_of_panicking() {
        assert_eq!(Number::add(i64::MAX, 1), i64::MIN);
        assert_eq!(Number::div_trunc(i64::MIN, -1), Some(i64::MIN));
    }
}
