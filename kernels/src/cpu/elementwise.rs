//! Elementwise math on the element types: the floating-point functions (`exp`, `erf`, ...) and
//! the signed operations that keep integers integer (`abs`, `sign`, `pow`, `fmod`,
//! `remainder`).

use std::marker::PhantomData;

use super::Number;
use super::map::{Input, Map1, Map2, Operand};
use super::vector_math::{erf_f32, erfc_f32, exp_f32, ln_f32, tanh_f32};
use crate::backend::Binary;
use crate::types::dtype_reduced as reduced;
use crate::types::{Element, half};

/// A floating-point element type (`f32`, `f64`): the functions of the unary float operations.
pub trait Float: Number {
    /// `e^x`.
    fn exp(self) -> Self;
    /// The natural logarithm.
    fn ln(self) -> Self;
    /// `ln(1 + x)`.
    fn ln_1p(self) -> Self;
    /// `e^x - 1`.
    fn exp_m1(self) -> Self;
    /// The square root.
    fn sqrt(self) -> Self;
    /// The sine.
    fn sin(self) -> Self;
    /// The cosine.
    fn cos(self) -> Self;
    /// The tangent.
    fn tan(self) -> Self;
    /// The hyperbolic tangent.
    fn tanh(self) -> Self;
    /// The error function.
    fn erf(self) -> Self;
    /// The complementary error function `1 - erf(x)`, accurate relative to its small values.
    fn erfc(self) -> Self;
    /// Rounds down.
    fn floor(self) -> Self;
    /// Rounds up.
    fn ceil(self) -> Self;
    /// Rounds toward zero.
    fn trunc(self) -> Self;
    /// Rounds half to even, as `torch.round` and IEEE's `nearbyint`.
    fn round_ties_even(self) -> Self;
    /// The angle of the point `(other, self)`.
    fn atan2(self, other: Self) -> Self;
    /// `self / other`.
    fn div(self, other: Self) -> Self;
    /// `1 / self`.
    fn recip(self) -> Self;
}

/// [`Float`] for a float type, with its exponential, logarithm, hyperbolic tangent and error
/// functions: float32's from [`vector_math`](super::vector_math), which vectorise; libm's and
/// this module's accurate series for `f64`.
macro_rules! float {
    ($t:ty, $exp:path, $ln:path, $tanh:path, $erf:path, $erfc:path) => {
        impl Float for $t {
            #[inline(always)]
            fn exp(self) -> Self {
                $exp(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                $ln(self)
            }
            #[inline(always)]
            fn ln_1p(self) -> Self {
                <$t>::ln_1p(self)
            }
            #[inline(always)]
            fn exp_m1(self) -> Self {
                <$t>::exp_m1(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn sin(self) -> Self {
                <$t>::sin(self)
            }
            #[inline(always)]
            fn cos(self) -> Self {
                <$t>::cos(self)
            }
            #[inline(always)]
            fn tan(self) -> Self {
                <$t>::tan(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                $tanh(self)
            }
            #[inline(always)]
            fn erf(self) -> Self {
                $erf(self)
            }
            #[inline(always)]
            fn erfc(self) -> Self {
                $erfc(self)
            }
            #[inline(always)]
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            #[inline(always)]
            fn ceil(self) -> Self {
                <$t>::ceil(self)
            }
            #[inline(always)]
            fn trunc(self) -> Self {
                <$t>::trunc(self)
            }
            #[inline(always)]
            fn round_ties_even(self) -> Self {
                <$t>::round_ties_even(self)
            }
            #[inline(always)]
            fn atan2(self, other: Self) -> Self {
                <$t>::atan2(self, other)
            }
            #[inline(always)]
            fn div(self, other: Self) -> Self {
                self / other
            }
            #[inline(always)]
            fn recip(self) -> Self {
                1.0 / self
            }
        }
    };
}
float!(f32, exp_f32, ln_f32, tanh_f32, erf_f32, erfc_f32);
float!(f64, f64::exp, f64::ln, f64::tanh, erf, erfc);

/// Where the continued fraction of `erfc` takes over from the series of `erf`: from 2 on, its
/// sixty levels give `erfc` to about one unit in the last place (checked against mpmath).
const FRACTION_FROM: f64 = 2.0;

/// `erfc(a)` for `a >= FRACTION_FROM`, from its continued fraction
/// `exp(-a^2) / sqrt(pi) / (a + (1/2) / (a + 1 / (a + (3/2) / (a + ...))))`, evaluated from the
/// sixtieth level up. It underflows to 0 past about 27, and is 0 at infinity.
fn erfc_fraction(a: f64) -> f64 {
    let fraction = (1..=60).rev().fold(a, |f, k| a + f64::from(k) / 2.0 / f);
    std::f64::consts::FRAC_2_SQRT_PI / 2.0 * (-a * a).exp() / fraction
}

/// The error function `erf(x) = 2/sqrt(pi) * integral from 0 to x of exp(-t^2) dt`, to about
/// 1e-15 absolute: a series of positive terms below 2, one minus [`erfc`]'s continued fraction
/// above.
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let value = if a < FRACTION_FROM {
        // erf(a) = 2/sqrt(pi) * exp(-a^2) * sum over n of 2^n a^(2n+1) / (1 * 3 * ... * (2n+1)).
        let a2 = a * a;
        let (mut term, mut sum) = (a, a);
        let mut n = 0.0;
        while term > sum * 1e-17 {
            n += 1.0;
            term *= 2.0 * a2 / (2.0 * n + 1.0);
            sum += term;
        }
        std::f64::consts::FRAC_2_SQRT_PI * (-a2).exp() * sum
    } else if a < 6.0 {
        1.0 - erfc_fraction(a)
    } else {
        // erfc(6) is about 2e-17, below half an ulp of 1.
        1.0
    };
    value.copysign(x)
}

/// The complementary error function `erfc(x) = 1 - erf(x)`, without the cancellation of that
/// difference where `erf(x)` is close to 1: the continued fraction from 2 on (accurate relative
/// to the small result, down to subnormals), `2 - erfc(-x)` at or below -2, and `1 - erf(x)`
/// between, where the result is above 0.004 and the difference costs at most about 5e-14 of it.
pub fn erfc(x: f64) -> f64 {
    if x >= FRACTION_FROM {
        erfc_fraction(x)
    } else if x <= -FRACTION_FROM {
        2.0 - erfc_fraction(-x)
    } else {
        // NaN falls through here and stays NaN.
        1.0 - erf(x)
    }
}

/// Arithmetic on the numeric types that integers share with floats, as PyTorch defines it:
/// integers wrap instead of overflowing, and integer division by zero gives `None`.
pub trait Signed: Number {
    /// `|x|` (the most negative integer stays itself, as it wraps).
    fn abs(self) -> Self;
    /// -1, 0 or 1; 0 for NaN and for both zeros.
    fn sign(self) -> Self;
    /// The remainder with the sign of the dividend (C's `fmod`).
    fn fmod(self, other: Self) -> Option<Self>;
    /// The remainder with the sign of the divisor (Python's `%`).
    fn remainder(self, other: Self) -> Option<Self>;
    /// `self` to the power `exponent`. For integers, a negative exponent gives 0 except for
    /// the bases 1 and -1 (as `1 / base^n` truncated).
    fn pow(self, exponent: Self) -> Self;
    /// Whether the value is NaN (never, for integers).
    #[inline(always)]
    fn is_nan(self) -> bool {
        false
    }
    /// Whether the value is infinite (never, for integers).
    #[inline(always)]
    fn is_infinite(self) -> bool {
        false
    }
}

macro_rules! signed_float {
    ($t:ty) => {
        impl Signed for $t {
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn sign(self) -> Self {
                if self > 0.0 {
                    1.0
                } else if self < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
            #[inline(always)]
            fn fmod(self, other: Self) -> Option<Self> {
                Some(self % other)
            }
            #[inline(always)]
            fn remainder(self, other: Self) -> Option<Self> {
                let r = self % other;
                Some(if r != 0.0 && ((r < 0.0) != (other < 0.0)) { r + other } else { r })
            }
            #[inline(always)]
            fn pow(self, exponent: Self) -> Self {
                <$t>::powf(self, exponent)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            #[inline(always)]
            fn is_infinite(self) -> bool {
                <$t>::is_infinite(self)
            }
        }
    };
}
signed_float!(f32);
signed_float!(f64);

macro_rules! signed_int {
    ($t:ty) => {
        impl Signed for $t {
            #[inline(always)]
            fn abs(self) -> Self {
                self.wrapping_abs()
            }
            #[inline(always)]
            fn sign(self) -> Self {
                self.signum()
            }
            #[inline(always)]
            fn fmod(self, other: Self) -> Option<Self> {
                (other != 0).then(|| self.wrapping_rem(other))
            }
            #[inline(always)]
            fn remainder(self, other: Self) -> Option<Self> {
                let r = self.fmod(other)?;
                Some(if r != 0 && ((r < 0) != (other < 0)) { r.wrapping_add(other) } else { r })
            }
            fn pow(self, exponent: Self) -> Self {
                if exponent < 0 {
                    return match self {
                        1 => 1,
                        -1 if exponent % 2 == 0 => 1,
                        -1 => -1,
                        _ => 0,
                    };
                }
                // Exponentiation by squaring, wrapping like PyTorch's integer tensors.
                let (mut base, mut e, mut result): ($t, $t, $t) = (self, exponent, 1);
                while e > 0 {
                    if e & 1 == 1 {
                        result = result.wrapping_mul(base);
                    }
                    base = base.wrapping_mul(base);
                    e >>= 1;
                }
                result
            }
        }
    };
}
signed_int!(i8);
signed_int!(i16);
signed_int!(i32);
signed_int!(i64);

/// uint8: no negative values, so `abs` is the value and `sign` is 0 or 1.
impl Signed for u8 {
    #[inline(always)]
    fn abs(self) -> Self {
        self
    }
    #[inline(always)]
    fn sign(self) -> Self {
        u8::from(self > 0)
    }
    #[inline(always)]
    fn fmod(self, other: Self) -> Option<Self> {
        self.checked_rem(other)
    }
    #[inline(always)]
    fn remainder(self, other: Self) -> Option<Self> {
        self.checked_rem(other)
    }
    fn pow(self, exponent: Self) -> Self {
        self.wrapping_pow(u32::from(exponent))
    }
}

/// An element as stored, and the type it computes in: float16 and bfloat16 compute in float32,
/// widened as they are read and rounded once as they are written, inside the elementwise loop
/// (so one pass over memory, at half the bytes of float32); every other type computes in
/// itself.
pub trait Stored: Element {
    /// The type values compute in.
    type Math: Element;
    /// The value as it computes.
    fn widen(self) -> Self::Math;
    /// A computed value as stored (rounded to nearest even for half precision).
    fn narrow(value: Self::Math) -> Self;
    /// `out[i] = narrow(g(widen(x[i])))` over a run its own way (float16 by blocks,
    /// `super::f16c`), or false: the loop then goes element by element.
    #[inline(always)]
    fn lifted1(_x: Input<'_, Self>, _out: &mut [Self], _g: &impl Fn(Self::Math) -> Self::Math) -> bool {
        false
    }
    /// `out[i] = narrow(g(widen(a[i]), widen(b[i])))` as [`lifted1`](Stored::lifted1).
    #[inline(always)]
    fn lifted2(
        _a: Input<'_, Self>,
        _b: Input<'_, Self>,
        _out: &mut [Self],
        _g: &impl Fn(Self::Math, Self::Math) -> Self::Math,
    ) -> bool {
        false
    }
}

/// `g` on stored elements: widened, computed in [`Stored::Math`], rounded once (the function
/// the float operations map over float16 and bfloat16 arrays; inlined by force into the
/// vectorised loops, as every elementwise function: see `map::chunked`).
pub struct Lifted<S, G>(G, PhantomData<fn() -> S>);

impl<S, G> Lifted<S, G> {
    /// `g` lifted.
    #[inline(always)]
    pub fn new(g: G) -> Self {
        Lifted(g, PhantomData)
    }
}

impl<S: Stored, G: Fn(S::Math) -> S::Math + Sync> Map1<S, S> for Lifted<S, G> {
    #[inline(always)]
    fn at(&self, x: S) -> S {
        S::narrow((self.0)(x.widen()))
    }
    #[inline(always)]
    fn run(&self, x: Operand<'_, S>, out: &mut [S]) -> bool {
        S::lifted1(Input::Run(x), out, &self.0)
    }
    #[inline(always)]
    fn run_in_place(&self, out: &mut [S]) -> bool {
        S::lifted1(Input::Output, out, &self.0)
    }
}

impl<S: Stored, G: Fn(S::Math, S::Math) -> S::Math + Sync> Map2<S, S> for Lifted<S, G> {
    #[inline(always)]
    fn at(&self, p: S, q: S) -> S {
        S::narrow((self.0)(p.widen(), q.widen()))
    }
    #[inline(always)]
    fn run(&self, a: Operand<'_, S>, b: Operand<'_, S>, out: &mut [S]) -> bool {
        S::lifted2(Input::Run(a), Input::Run(b), out, &self.0)
    }
    #[inline(always)]
    fn run_in_place(&self, out: &mut [S], b: Operand<'_, S>) -> bool {
        S::lifted2(Input::Output, Input::Run(b), out, &self.0)
    }
}

macro_rules! stored_as_itself {
    ($($t:ty),*) => {$(
        impl Stored for $t {
            type Math = $t;
            #[inline(always)]
            fn widen(self) -> $t {
                self
            }
            #[inline(always)]
            fn narrow(value: $t) -> $t {
                value
            }
        }
    )*};
}
stored_as_itself!(bool, u8, i8, i16, i32, i64, f32, f64);

macro_rules! stored_as_f32 {
    ($t:ty, $to_f32:ident, $from_f32:ident $(, $blocks:item)*) => {
        impl Stored for $t {
            type Math = f32;
            #[inline(always)]
            fn widen(self) -> f32 {
                reduced::$to_f32(self.to_bits())
            }
            #[inline(always)]
            fn narrow(value: f32) -> $t {
                <$t>::from_bits(reduced::$from_f32(value))
            }
            $($blocks)*
        }
    };
}
stored_as_f32!(
    half::f16,
    f16_to_f32,
    f32_to_f16,
    #[inline(always)]
    fn lifted1(x: Input<'_, Self>, out: &mut [Self], g: &impl Fn(f32) -> f32) -> bool {
        super::f16c::lifted1(x, out, g)
    },
    #[inline(always)]
    fn lifted2(a: Input<'_, Self>, b: Input<'_, Self>, out: &mut [Self], g: &impl Fn(f32, f32) -> f32) -> bool {
        super::f16c::lifted2(a, b, out, g)
    }
);
// bfloat16's conversions are a shift and a rounding add, which the element loops vectorise.
stored_as_f32!(half::bf16, bf16_to_f32, f32_to_bf16);

/// The bitwise operations of the integer element types, with PyTorch's shifts: a shift by a
/// negative amount or by the type's width or more gives 0 (a right shift of a negative number,
/// -1); a left shift works on the bits, as on an unsigned number.
pub trait Bits: Signed {
    /// `a & b`, `a | b` or `a ^ b`.
    fn bits(self, other: Self, op: Binary) -> Self;
    /// `!a`.
    fn not(self) -> Self;
}

macro_rules! bits {
    ($t:ty, $u:ty) => {
        impl Bits for $t {
            #[inline(always)]
            fn bits(self, other: Self, op: Binary) -> Self {
                let width = <$t>::BITS as $t;
                match op {
                    Binary::BitAnd => self & other,
                    Binary::BitOr => self | other,
                    Binary::BitXor => self ^ other,
                    Binary::Shl if other < 0 || other >= width => 0,
                    Binary::Shl => ((self as $u) << other) as $t,
                    Binary::Shr if other < 0 || other >= width => {
                        if self < 0 {
                            -1
                        } else {
                            0
                        }
                    }
                    Binary::Shr => self >> other,
                    _ => self,
                }
            }
            #[inline(always)]
            fn not(self) -> Self {
                !self
            }
        }
    };
}
bits!(i8, u8);
bits!(i16, u16);
bits!(i32, u32);
bits!(i64, u64);

impl Bits for u8 {
    #[inline(always)]
    fn bits(self, other: Self, op: Binary) -> Self {
        match op {
            Binary::BitAnd => self & other,
            Binary::BitOr => self | other,
            Binary::BitXor => self ^ other,
            Binary::Shl => self.checked_shl(u32::from(other)).unwrap_or(0),
            Binary::Shr => self.checked_shr(u32::from(other)).unwrap_or(0),
            _ => self,
        }
    }
    #[inline(always)]
    fn not(self) -> Self {
        !self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // Reference values from Abramowitz and Stegun, table 7.1, and mpmath.
        let cases = [
            (0.0, 0.0),
            (0.1, 0.112_462_916_018_284_9),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (1.5, 0.966_105_146_475_310_8),
            (2.0, 0.995_322_265_018_952_7),
            (2.5, 0.999_593_047_982_555),
            (3.0, 0.999_977_909_503_001_4),
            (4.0, 0.999_999_984_582_742_1),
        ];
        for (x, want) in cases {
            assert!((erf(x) - want).abs() < 1e-15, "erf({x}) = {}, expected {want}", erf(x));
            assert!((erf(-x) + want).abs() < 1e-15, "erf is odd");
        }
        assert_eq!(erf(f64::INFINITY), 1.0);
        assert_eq!(erf(f64::NEG_INFINITY), -1.0);
        assert!(erf(f64::NAN).is_nan());
        assert_eq!(erf(1e-300), 1e-300 * std::f64::consts::FRAC_2_SQRT_PI);
        assert!(erf(-0.0).is_sign_negative());
    }

    #[test]
    fn erfc_is_accurate_relative_to_its_small_values() {
        // Reference values from mpmath (30 digits, rounded to f64).
        let cases = [
            (0.5, 0.479_500_122_186_953_5),
            (1.5, 0.033_894_853_524_689_27),
            (2.0, 0.004_677_734_981_047_266),
            (3.0, 2.209_049_699_858_544e-5),
            (5.0, 1.537_459_794_428_035e-12),
            (10.0, 2.088_487_583_762_545e-45),
            (26.0, 5.663_192_408_856_143e-296),
        ];
        for (x, want) in cases {
            let got = erfc(x);
            assert!((got - want).abs() <= 1e-14 * want, "erfc({x}) = {got}, expected {want}");
            assert!((erfc(-x) - (2.0 - want)).abs() <= 1e-15, "erfc(-{x}) = {}", erfc(-x));
        }
        assert_eq!(erfc(0.0), 1.0);
        assert_eq!(erfc(30.0), 0.0);
        assert_eq!(erfc(f64::INFINITY), 0.0);
        assert_eq!(erfc(f64::NEG_INFINITY), 2.0);
        assert!(erfc(f64::NAN).is_nan());
    }

    #[test]
    fn erf_and_erfc_are_continuous_where_their_methods_meet() {
        // Across a step h the functions move by about their slope, erf'(x) = 2/sqrt(pi) exp(-x^2),
        // times h; anything more would be a jump between methods.
        let h = 1e-12;
        for edge in [FRACTION_FROM, 6.0] {
            let slope = std::f64::consts::FRAC_2_SQRT_PI * (-edge * edge).exp();
            let (below, above) = (erf(edge - h), erf(edge));
            assert!((above - below - slope * h).abs() < 1e-15, "erf jumps at {edge}: {below} to {above}");
            let (below, above) = (erfc(edge - h), erfc(edge));
            assert!((below - above - slope * h).abs() < 1e-13 * above, "erfc jumps at {edge}: {below} to {above}");
        }
    }

    #[test]
    fn integer_powers_wrap_and_handle_negative_exponents() {
        assert_eq!(Signed::pow(3i64, 4), 81);
        assert_eq!(Signed::pow(2i64, 64), 0);
        assert_eq!(Signed::pow(-1i64, -3), -1);
        assert_eq!(Signed::pow(-1i64, -4), 1);
        assert_eq!(Signed::pow(1i32, -7), 1);
        assert_eq!(Signed::pow(5i32, -1), 0);
        assert_eq!(Signed::pow(0i64, 0), 1);
    }

    #[test]
    fn remainders_take_the_sign_of_the_divisor_or_the_dividend() {
        assert_eq!(Signed::remainder(-7i64, 3), Some(2));
        assert_eq!(Signed::fmod(-7i64, 3), Some(-1));
        assert_eq!(Signed::remainder(7i64, -3), Some(-2));
        assert_eq!(Signed::remainder(i64::MIN, -1), Some(0));
        assert_eq!(Signed::fmod(1i32, 0), None);
        assert_eq!(Signed::remainder(-7.5f64, 2.0), Some(0.5));
        assert_eq!(Signed::fmod(-7.5f64, 2.0), Some(-1.5));
        assert!(Signed::remainder(1.0f64, 0.0).unwrap().is_nan());
    }
}
