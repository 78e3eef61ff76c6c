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
pub(crate) use torchfn_kernels::random::Draw;
use torchfn_kernels::random::State;

use super::{DType, Tensor};

/// PyTorch's default seed (`default_rng_seed_val`), which the default generator starts from.
pub const DEFAULT_SEED: u64 = 67280421310721;

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
    pub fn same(&self, other: &Generator) -> bool {
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
