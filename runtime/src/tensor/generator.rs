//! Random number generators (`torch.Generator`): a seedable stream of random bits shared by the
//! handles that clone it, and the process-wide default one that `manual_seed` reseeds.
//!
//! The stream is xoshiro256++ (Blackman and Vigna), its 256-bit state expanded from the 64-bit
//! seed by SplitMix64. It is reproducible for a seed on every platform, but it is not PyTorch's
//! Mersenne Twister stream: the same seed gives other numbers than PyTorch does.

use std::fmt;
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;

use crate::error::{Error, Result};

use super::{DType, Tensor};

/// PyTorch's default seed (`default_rng_seed_val`), which the default generator starts from.
pub const DEFAULT_SEED: u64 = 67280421310721;

/// The state of xoshiro256++, with the seed it started from.
#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    seed: u64,
    s: [u64; 4],
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
    fn seeded(seed: u64) -> State {
        let mut x = seed;
        // SplitMix64 never outputs four zeros in a row, so the state is never all zero.
        State { seed, s: [(); 4].map(|_| splitmix64(&mut x)) }
    }

    fn next_u64(&mut self) -> u64 {
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
pub(crate) struct Draw<'a>(parking_lot::MutexGuard<'a, State>);

impl Draw<'_> {
    /// 64 random bits.
    pub(crate) fn bits(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform on `[0, 1)` with 53 random bits.
    pub(crate) fn uniform_f64(&mut self) -> f64 {
        (self.bits() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform on `[0, 1)` with 24 random bits (every float32 of that form is reachable, and
    /// 1.0 never is).
    pub(crate) fn uniform_f32(&mut self) -> f32 {
        (self.bits() >> 40) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    /// Two independent standard normal samples (the Box-Muller transform, as PyTorch's CPU
    /// `normal_` uses).
    pub(crate) fn normal_pair(&mut self) -> (f64, f64) {
        // 1 - u is in (0, 1], so the logarithm is finite.
        let radius = (-2.0 * (1.0 - self.uniform_f64()).ln()).sqrt();
        let angle = std::f64::consts::TAU * self.uniform_f64();
        (radius * angle.cos(), radius * angle.sin())
    }

    /// Uniform on `[0, range)` without bias (Lemire's multiply-and-reject); `range` is not 0.
    pub(crate) fn below(&mut self, range: u64) -> u64 {
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

/// A random number generator (`torch.Generator`). Clones share one stream, as Python
/// references to one generator do; pass one to [`rand`](crate::rand), [`randn`](crate::randn)
/// or [`randint`](crate::randint) for a stream of your own, or let them use the default one.
///
/// ```
/// use torchfn::Generator;
/// let g = Generator::new();
/// g.manual_seed(7);
/// let a = torchfn::rand([3], &g, None, None)?;
/// g.manual_seed(7);
/// assert_eq!(torchfn::rand([3], &g, None, None)?.to_vec::<f32>()?, a.to_vec::<f32>()?);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(Clone)]
pub struct Generator {
    state: Arc<Mutex<State>>,
}

static DEFAULT: LazyLock<Generator> = LazyLock::new(Generator::new);

impl Generator {
    /// Whether both handles are the same generator (Python's `is`).
    pub(crate) fn same(&self, other: &Generator) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }

    /// A new generator, seeded with [`DEFAULT_SEED`] as PyTorch's are.
    pub fn new() -> Generator {
        Generator { state: Arc::new(Mutex::new(State::seeded(DEFAULT_SEED))) }
    }

    /// The process-wide generator the random operations use when given none
    /// (`torch.default_generator`).
    pub fn default_generator() -> Generator {
        DEFAULT.clone()
    }

    /// Restarts the stream from `seed`; returns this generator (`Generator.manual_seed`).
    pub fn manual_seed(&self, seed: u64) -> Generator {
        *self.state.lock() = State::seeded(seed);
        self.clone()
    }

    /// Reseeds from a non-deterministic source and returns the new seed (`Generator.seed`).
    pub fn seed(&self) -> u64 {
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos(),
        );
        let seed = hasher.finish();
        self.manual_seed(seed);
        seed
    }

    /// The seed the stream last started from (`Generator.initial_seed`).
    pub fn initial_seed(&self) -> u64 {
        self.state.lock().seed
    }

    /// The stream's position, to restore later with [`set_state`](Generator::set_state)
    /// (`Generator.get_state`): an int64 tensor of five elements (the seed, then the four
    /// words of xoshiro256++'s state, as bit patterns).
    pub fn get_state(&self) -> Tensor {
        let state = self.state.lock();
        let words = std::iter::once(state.seed).chain(state.s).map(|w| w as i64).collect::<Vec<_>>();
        Tensor::from_vec(words, [5]).expect("five words make a tensor of shape [5]")
    }

    /// Moves the stream to a position [`get_state`](Generator::get_state) returned
    /// (`Generator.set_state`); returns this generator.
    pub fn set_state(&self, state: &Tensor) -> Result<Generator> {
        let bad = || {
            Error::runtime_error(
                "Generator.set_state(): expected the int64 tensor of 5 elements that get_state() returns",
            )
        };
        if state.dtype()? != DType::Int64 || state.shape()?.as_ref() != [5] {
            return Err(bad());
        }
        let words = state.to_vec::<i64>()?.into_iter().map(|w| w as u64).collect::<Vec<_>>();
        let s = [words[1], words[2], words[3], words[4]];
        if s == [0; 4] {
            return Err(bad()); // xoshiro's one state that never leaves itself
        }
        *self.state.lock() = State { seed: words[0], s };
        Ok(self.clone())
    }

    /// True when `self` and `other` are handles to the same stream.
    pub fn is(&self, other: &Generator) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }

    /// Locks the stream for a run of draws.
    pub(crate) fn draw(&self) -> Draw<'_> {
        Draw(self.state.lock())
    }
}

impl Default for Generator {
    fn default() -> Generator {
        Generator::new()
    }
}

impl fmt::Debug for Generator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<torch._C.Generator object>")
    }
}

impl From<&Generator> for Option<Generator> {
    fn from(g: &Generator) -> Option<Generator> {
        Some(g.clone())
    }
}

/// Reseeds the default generator; returns it (`torch.manual_seed`).
///
/// ```
/// torchfn::manual_seed(0);
/// let a = torchfn::randn([4], None, None, None)?;
/// torchfn::manual_seed(0);
/// assert_eq!(torchfn::randn([4], None, None, None)?.to_vec::<f32>()?, a.to_vec::<f32>()?);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn manual_seed(seed: u64) -> Generator {
    DEFAULT.manual_seed(seed)
}

/// Reseeds the default generator from a non-deterministic source; returns the seed
/// (`torch.seed`).
pub fn seed() -> u64 {
    DEFAULT.seed()
}

/// The seed the default generator last started from (`torch.initial_seed`).
pub fn initial_seed() -> u64 {
    DEFAULT.initial_seed()
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
    fn below_stays_in_range_and_reaches_both_ends() {
        let g = Generator::new();
        let mut d = g.draw();
        let draws: Vec<u64> = (0..1000).map(|_| d.below(3)).collect();
        assert!(draws.iter().all(|&x| x < 3));
        assert!(draws.contains(&0) && draws.contains(&2));
        assert!((0..100).all(|_| d.below(1) == 0));
        assert!((0..100).any(|_| d.below(u64::MAX) > u64::MAX / 2));
    }

    #[test]
    fn uniforms_stay_below_one() {
        let g = Generator::new();
        let mut d = g.draw();
        for _ in 0..10_000 {
            let (a, b) = (d.uniform_f32(), d.uniform_f64());
            assert!((0.0..1.0).contains(&a) && (0.0..1.0).contains(&b));
        }
    }
}
