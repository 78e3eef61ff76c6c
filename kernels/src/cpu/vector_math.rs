//! Float32 transcendental functions without branches, so that the loops over slices which call
//! them vectorise (libm's `expf`, `logf`, `tanhf` are a call per element, and an error function
//! computed in `f64` is a hundred times slower): each is a polynomial after a range reduction,
//! with its special cases (infinities, NaN, zero, subnormals) chosen by selects rather than
//! branches. Their multiply-adds are fused: one instruction each in the loops
//! [`vectorised`](super::map) compiles for FMA processors (elsewhere, libm's `fmaf`).
//!
//! Accuracy, checked by this module's tests against `f64` over the whole range: [`exp_f32`]
//! and [`ln_f32`] and [`tanh_f32`] within 2 ulp, [`erf_f32`] within 3, [`erfc_f32`] within 4
//! (relative to its value, down to where it is subnormal). PyTorch's own vectorised float32
//! functions (Sleef's, and an `erf` good to 1.5e-7 absolute) are of the same order.

/// Horner's rule with fused multiply-adds: `c[0] + c[1] x + ... + c[n] x^n`.
#[inline(always)]
fn polynomial<const N: usize>(x: f32, c: [f32; N]) -> f32 {
    c.into_iter().rev().reduce(|p, c| p.mul_add(x, c)).unwrap_or(0.0)
}

/// `e^x`: Cephes' `expf`, a degree-6 polynomial on `[-ln 2 / 2, ln 2 / 2]` after reducing by
/// `n ln 2`, scaled by `2^n` in two steps so that subnormal results round once. Within 2 ulp;
/// above 88.73 it is `inf`, below -103.97 0, and NaN stays NaN.
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    // 1.5 * 2^23: adding it rounds to a whole number in the low bits (ties to even).
    const ROUND: f32 = 12_582_912.0;
    // Beyond these the result is infinite or zero anyway; NaN stays NaN.
    let x = x.clamp(-104.0, 89.0);
    let shifted = x.mul_add(std::f32::consts::LOG2_E, ROUND);
    let n = shifted - ROUND;
    let r = n.mul_add(-0.693_359_4, x);
    let r = n.mul_add(2.121_944_4e-4, r);
    let p = polynomial(r, [0.5, 0.166_666_65, 4.166_579_6e-2, 8.333_452e-3, 1.398_199_9e-3, 1.987_569_1e-4]);
    let p = p.mul_add(r * r, r) + 1.0;
    let n = (shifted.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    let half = n >> 1;
    let scale = |k: i32| f32::from_bits(((k + 127) as u32) << 23);
    p * scale(half) * scale(n - half)
}

/// The natural logarithm: Cephes' `logf`. `x = m 2^e` with `m` in `[sqrt(1/2), sqrt(2))`, and
/// `ln(m)` a degree-9 polynomial in `m - 1`. Subnormal inputs are scaled by `2^23` first.
/// Within 2 ulp; `ln(0) = -inf`, `ln(inf) = inf`, negative numbers and NaN give NaN.
#[inline(always)]
pub fn ln_f32(x: f32) -> f32 {
    let subnormal = x < f32::MIN_POSITIVE;
    let scaled = if subnormal { x * 8_388_608.0 } else { x };
    let bits = scaled.to_bits();
    // The exponent with the mantissa in [0.5, 1), as C's `frexp`.
    let e = ((bits >> 23) & 0xff) as i32 - 126 - if subnormal { 23 } else { 0 };
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f00_0000);
    let low = m < std::f32::consts::FRAC_1_SQRT_2;
    let e = (e - i32::from(low)) as f32;
    let m = if low { m + m } else { m } - 1.0;
    let z = m * m;
    let p = polynomial(
        m,
        [
            3.333_333e-1,
            -2.499_999_4e-1,
            2.000_071_4e-1,
            -1.666_805_8e-1,
            1.424_932_3e-1,
            -1.242_014_1e-1,
            1.167_699_9e-1,
            -1.151_461e-1,
            7.037_683_6e-2,
        ],
    ) * m
        * z;
    let y = e.mul_add(-2.121_944_4e-4, p) - 0.5 * z;
    let value = e.mul_add(0.693_359_4, m + y);
    let special = if x == 0.0 {
        f32::NEG_INFINITY
    } else if x == f32::INFINITY {
        x
    } else {
        f32::NAN
    };
    if x > 0.0 && x < f32::INFINITY { value } else { special }
}

/// The hyperbolic tangent: Cephes' `tanhf`, an odd polynomial below 0.625 and
/// `1 - 2 / (e^(2|x|) + 1)` above, with `x`'s sign. Within 2 ulp; ±1 beyond ±9.02 (where float32's
/// tanh is 1), NaN stays NaN.
#[inline(always)]
pub fn tanh_f32(x: f32) -> f32 {
    let a = x.abs().min(9.5);
    let z = x * x;
    let small = polynomial(z, [-3.333_328e-1, 1.333_144_2e-1, -5.373_971_6e-2, 2.063_909e-2, -5.704_988_7e-3]);
    // Odd, so with `x`'s sign (which the sum would lose at -0).
    let small = (small * z).mul_add(x, x).copysign(x);
    let large = (1.0 - 2.0 / (exp_f32(a + a) + 1.0)).copysign(x);
    // NaN takes the polynomial, which keeps it.
    if x.abs() >= 0.625 { large } else { small }
}

/// `erf(x) / x` for `|x| < 1`, a degree-6 polynomial in `x^2` (Cephes' `erff`, refitted:
/// the same to 1e-9). This and the two below are least-squares fits of minimal relative error
/// by `bench/fit_erfc.py`.
const ERF_SMALL: [f32; 7] = [
    std::f32::consts::FRAC_2_SQRT_PI,
    -3.761_262_6e-1,
    1.128_358_5e-1,
    -2.685_381_2e-2,
    5.188_327_6e-3,
    -8.010_192_5e-4,
    7.853_858e-5,
];
/// `e^(a^2) erfc(a)` for `0.5 <= a < 2`, a degree-9 polynomial in `a - 1.25` (2e-8 relative).
const ERFC_NEAR: [f32; 10] = [
    3.678_229_2e-1,
    -2.088_218_6e-1,
    1.067_949_9e-1,
    -5.021_845e-2,
    2.201_973_7e-2,
    -9.081_949e-3,
    3.511_497e-3,
    -1.318_116_6e-3,
    5.568_228e-4,
    -1.849_606_7e-4,
];
/// `a e^(a^2) erfc(a)` for `2 <= a <= 10`, a degree-9 polynomial in `1 / a^2` (1e-9 relative).
const ERFC_FAR: [f32; 10] = [
    5.641_895_7e-1,
    -2.820_917e-1,
    4.228_935_5e-1,
    -1.047_416_5,
    3.439_517_3,
    -12.279_332,
    39.005_98,
    -92.531_33,
    137.379_75,
    -93.286_15,
];

/// `erfc(a)` for `a >= 0.5` (0 from about 10.05 on, where it is below float32's least
/// subnormal): `e^(-a^2)` times the fitted [`ERFC_NEAR`] or [`ERFC_FAR`], with `a^2` split in
/// two parts so that its rounding does not reach the exponential.
#[inline(always)]
fn erfc_tail(a: f32) -> f32 {
    // From 11 on, e^(-a^2) is 0 (and `a^2`'s low part would be NaN at infinity).
    let a = a.min(11.0);
    let near = a < 2.0;
    let b = a.min(10.0);
    let t = if near { b - 1.25 } else { 1.0 / (b * b) };
    let c: [f32; 10] = std::array::from_fn(|i| if near { ERFC_NEAR[i] } else { ERFC_FAR[i] });
    let p = polynomial(t, c);
    let p = if near { p } else { p / b };
    let square = a * a;
    let low = a.mul_add(a, -square);
    exp_f32(-square) * low.mul_add(-p, p)
}

/// The error function: [`ERF_SMALL`] below 1, `1 - erfc(|x|)` with `x`'s sign above. Within
/// 3 ulp; ±1 at ±infinity, NaN stays NaN.
#[inline(always)]
pub fn erf_f32(x: f32) -> f32 {
    let a = x.abs();
    let small = x * polynomial(x * x, ERF_SMALL);
    let large = (1.0 - erfc_tail(a)).copysign(x);
    // NaN takes the polynomial, which keeps it.
    if a >= 1.0 { large } else { small }
}

/// The complementary error function `1 - erf(x)`, accurate relative to its value where that
/// is small (large `x`): `erfc_tail(x)` from 0.5 on, `2 - erfc_tail(-x)` from -0.5 down, and
/// `1 - erf(x)` between. 0 at infinity, 2 at minus infinity, NaN stays NaN.
#[inline(always)]
pub fn erfc_f32(x: f32) -> f32 {
    let a = x.abs();
    let middle = 1.0 - x * polynomial(x * x, ERF_SMALL);
    let tail = erfc_tail(a);
    let outer = if x < 0.0 { 2.0 - tail } else { tail };
    if a >= 0.5 { outer } else { middle }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Units in the last place between `got` and the exact `want`, counting subnormals as
    /// float32 spaces them.
    fn ulps(got: f32, want: f64) -> f64 {
        let want32 = want as f32;
        let ulp = (f32::from_bits(want32.abs().to_bits() + 1) - want32.abs()).max(f32::from_bits(1));
        (f64::from(got) - want).abs() / f64::from(ulp)
    }

    /// Every `step`-th float32 between `from` and `to`, walked through their bits (so small
    /// and large magnitudes are sampled alike); both bounds positive.
    fn samples(from: f32, to: f32, step: u32) -> impl Iterator<Item = f32> {
        (from.to_bits()..to.to_bits()).step_by(step as usize).map(f32::from_bits)
    }

    #[test]
    fn exp_is_within_two_ulp_everywhere() {
        for x in samples(1e-8, 110.0, 997).flat_map(|x| [x, -x]) {
            let want = f64::from(x).exp();
            if want > f64::from(f32::MAX) {
                assert_eq!(exp_f32(x), f32::INFINITY, "exp({x})");
            } else {
                assert!(ulps(exp_f32(x), want) <= 2.0, "exp({x}) = {}, expected {want}", exp_f32(x));
            }
        }
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert!(exp_f32(f32::NAN).is_nan());
        assert_eq!(exp_f32(-103.0), (-103.0f64).exp() as f32, "a subnormal result");
    }

    #[test]
    fn ln_is_within_two_ulp_everywhere() {
        for x in samples(f32::from_bits(1), f32::MAX, 9973) {
            let want = f64::from(x).ln();
            assert!(ulps(ln_f32(x), want) <= 2.0, "ln({x}) = {}, expected {want}", ln_f32(x));
        }
        assert_eq!(ln_f32(1.0), 0.0);
        assert_eq!(ln_f32(0.0), f32::NEG_INFINITY);
        assert_eq!(ln_f32(-0.0), f32::NEG_INFINITY);
        assert_eq!(ln_f32(f32::INFINITY), f32::INFINITY);
        assert!(ln_f32(-1.0).is_nan() && ln_f32(f32::NEG_INFINITY).is_nan() && ln_f32(f32::NAN).is_nan());
    }

    #[test]
    fn tanh_is_within_two_ulp_everywhere() {
        for x in samples(1e-30, 20.0, 997).flat_map(|x| [x, -x]) {
            let want = f64::from(x).tanh();
            assert!(ulps(tanh_f32(x), want) <= 2.0, "tanh({x}) = {}, expected {want}", tanh_f32(x));
        }
        assert_eq!(tanh_f32(0.0), 0.0);
        assert!(tanh_f32(-0.0).is_sign_negative());
        assert_eq!(tanh_f32(f32::INFINITY), 1.0);
        assert_eq!(tanh_f32(f32::NEG_INFINITY), -1.0);
        assert!(tanh_f32(f32::NAN).is_nan());
    }

    #[test]
    fn erf_and_erfc_are_accurate_everywhere() {
        use super::super::elementwise::{erf, erfc};
        for x in samples(1e-30, 12.0, 997).flat_map(|x| [x, -x]) {
            let want = erf(f64::from(x));
            let got = erf_f32(x);
            assert!(ulps(got, want) <= 3.0, "erf({x}) = {got}, expected {want}");
            let want = erfc(f64::from(x));
            let got = erfc_f32(x);
            assert!(ulps(got, want) <= 4.0, "erfc({x}) = {got}, expected {want}");
        }
        assert_eq!(erf_f32(0.0), 0.0);
        assert!(erf_f32(-0.0).is_sign_negative());
        assert_eq!(erf_f32(f32::INFINITY), 1.0);
        assert_eq!(erf_f32(f32::NEG_INFINITY), -1.0);
        assert_eq!(erfc_f32(f32::INFINITY), 0.0);
        assert_eq!(erfc_f32(f32::NEG_INFINITY), 2.0);
        assert!(erf_f32(f32::NAN).is_nan() && erfc_f32(f32::NAN).is_nan());
    }
}
