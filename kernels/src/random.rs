//! The random stream generators draw from (layer 5: the kernels of random operations read it):
//! xoshiro256++ (Blackman and Vigna), its 256-bit state expanded from the 64-bit seed by
//! SplitMix64, the primitive distributions drawn from a locked state, and [`sample`], which
//! fills a fresh host buffer from the stream (every device's random operations draw there).

use crate::backend::Buffer;
use crate::backend::host::{alloc, cast};
use crate::error::Result;
use crate::types::{DType, Shape, with_dtype};

/// The state of xoshiro256++, with the seed it started from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    /// The seed the stream started from.
    pub seed: u64,
    /// xoshiro256++'s four words.
    pub s: [u64; 4],
}

/// SplitMix64's step: the generator that expands a seed into xoshiro's state.
fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl State {
    /// The state a seed starts (SplitMix64 expands it).
    pub fn seeded(seed: u64) -> State {
        let mut x = seed;
        // SplitMix64 never outputs four zeros in a row, so the state is never all zero.
        State { seed, s: [(); 4].map(|_| splitmix64(&mut x)) }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }
}

/// Draws from a locked generator: the primitive distributions every random operation builds on.
pub struct Draw<'a>(pub parking_lot::MutexGuard<'a, State>);

impl Draw<'_> {
    /// 64 random bits.
    pub fn bits(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform on `[0, 1)` with 53 random bits.
    pub fn uniform_f64(&mut self) -> f64 {
        (self.bits() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform on `[0, 1)` with 24 random bits (every float32 of that form is reachable, and
    /// 1.0 never is).
    pub fn uniform_f32(&mut self) -> f32 {
        self.uniform_digits(24)
    }

    /// Uniform on `[0, 1)` with `digits` random bits (at most 24): the significand's width of
    /// the float type drawn for, so that every value is exact in it and 1.0 is never reached
    /// (PyTorch's `uniform_real` with its type's `digits`).
    pub fn uniform_digits(&mut self, digits: u32) -> f32 {
        (self.bits() >> (64 - digits)) as f32 / (1u32 << digits) as f32
    }

    /// Two independent standard normal samples (the Box-Muller transform, as PyTorch's CPU
    /// `normal_` uses).
    pub fn normal_pair(&mut self) -> (f64, f64) {
        // 1 - u is in (0, 1], so the logarithm is finite.
        let radius = (-2.0 * (1.0 - self.uniform_f64()).ln()).sqrt();
        let angle = std::f64::consts::TAU * self.uniform_f64();
        (radius * angle.cos(), radius * angle.sin())
    }

    /// Uniform on `[0, range)` without bias (Lemire's multiply-and-reject); 0 for an empty
    /// range (`range` 0, which callers refuse first).
    pub fn below(&mut self, range: u64) -> u64 {
        if range == 0 {
            return 0;
        }
        loop {
            let product = u128::from(self.bits()) * u128::from(range);
            // The low half falls below `2^64 mod range` for the values that would be drawn
            // once more often than the others: draw again for those.
            if (product as u64) >= range.wrapping_neg() % range {
                return (product >> 64) as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xoshiro256pp_matches_the_reference_implementation() {
        // The reference C code's first outputs from the state {1, 2, 3, 4}.
        let mut s = State { seed: 0, s: [1, 2, 3, 4] };
        let first: Vec<u64> = (0..3).map(|_| s.next_u64()).collect();
        assert_eq!(first, [41943041, 58720359, 3588806011781223]);
    }

    #[test]
    fn splitmix64_matches_the_reference_implementation() {
        let mut x = 1234567;
        let out: Vec<u64> = (0..2).map(|_| splitmix64(&mut x)).collect();
        assert_eq!(out, [6457827717110365317, 3203168211198807973]);
    }

    #[test]
    fn below_an_empty_range_is_zero_not_a_panic() {
        let state = parking_lot::Mutex::new(State::seeded(1));
        assert_eq!(Draw(state.lock()).below(0), 0);
    }
}

/// How the values are drawn.
#[derive(Clone, Copy, Debug)]
pub enum Distribution {
    /// Uniform on `[low, high)`.
    Uniform {
        /// The lowest value.
        low: f64,
        /// The bound above every value.
        high: f64,
    },
    /// Normal with this mean and standard deviation.
    Normal {
        /// The mean.
        mean: f64,
        /// The standard deviation.
        std: f64,
    },
    /// 1 with probability `p`, else 0 (one uniform per element: 1 when it falls below `p`).
    Bernoulli {
        /// The probability of a 1.
        p: f64,
    },
    /// Integers uniform on `[low, high)`, `low < high`.
    Integers {
        /// The lowest value.
        low: i64,
        /// The bound above every value.
        high: i64,
    },
}

/// The elements of a tensor of `shape` and `dtype` drawn from `dist`, in host memory (every
/// device draws its random numbers here, so a seed gives the same tensor on any device).
/// Floating dtypes draw in their own precision for uniforms (float32 samples have 24 random
/// bits, float64 ones 53).
pub fn sample(func: &str, draw: &mut Draw<'_>, dist: Distribution, shape: &Shape, dtype: DType) -> Result<Buffer> {
    let n = shape.checked_numel().unwrap_or(usize::MAX);
    with_dtype!(dtype, T => {
        let mut data = alloc::<T>(func, n)?;
        match dist {
            // As many random bits as the type's significand holds: no draw rounds up to `high`.
            Distribution::Uniform { low, high } if dtype == DType::Float32 || dtype.is_reduced_float() => {
                let digits = match dtype {
                    DType::Float16 => 11,
                    DType::BFloat16 => 8,
                    _ => 24,
                };
                let (low, span) = (low as f32, (high - low) as f32);
                data.extend((0..n).map(|_| cast::<f32, T>(low + span * draw.uniform_digits(digits))));
            }
            Distribution::Uniform { low, high } => {
                data.extend((0..n).map(|_| cast::<f64, T>(low + (high - low) * draw.uniform_f64())));
            }
            Distribution::Normal { mean, std } => {
                while data.len() < n {
                    let (a, b) = draw.normal_pair();
                    data.push(cast::<f64, T>(mean + std * a));
                    if data.len() < n {
                        data.push(cast::<f64, T>(mean + std * b));
                    }
                }
            }
            Distribution::Bernoulli { p } => {
                data.extend((0..n).map(|_| cast::<i64, T>(i64::from(draw.uniform_f64() < p))));
            }
            Distribution::Integers { low, high } => {
                let range = (i128::from(high) - i128::from(low)) as u64;
                data.extend((0..n).map(|_| {
                    let x = (i128::from(low) + i128::from(draw.below(range))) as i64;
                    cast::<i64, T>(x)
                }));
            }
        }
        Ok(Buffer::from_vec(data))
    })
}
