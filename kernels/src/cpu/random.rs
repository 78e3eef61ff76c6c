//! Sampling kernels: fill fresh buffers from a generator's stream.

use crate::backend::Buffer;
use crate::error::Result;
use crate::random::Draw;
use crate::types::{DType, Shape, with_dtype};

use super::{alloc, cast};

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
