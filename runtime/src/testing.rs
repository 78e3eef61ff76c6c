//! Sample inputs for every operation, as PyTorch's OpInfo: the calls the override coverage
//! test makes with a duck in each tensor position, and that other backends are checked on.
//!
//! Each operation registers its samples next to its definition with [`samples!`](crate::samples).
//!
//! ```
//! use torchfn::testing::samples;
//! let add = samples(torchfn::ADD);
//! assert!(!add.is_empty());
//! let out = torchfn::ADD.call(&add[0].args, &add[0].kwargs)?;
//! assert!(out.as_tensor().is_some());
//! # Ok::<(), torchfn::Error>(())
//! ```

use crate::protocol::Func;
use crate::tensor::{DType, Dense, Element, Shape, Tensor};
use crate::types::with_dtype;
use crate::value::{Kwargs, Value};

/// The arguments of one call.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    /// The positional arguments.
    pub args: Vec<Value>,
    /// The keyword arguments.
    pub kwargs: Kwargs,
}

impl Sample {
    /// These arguments with one more keyword argument.
    pub fn kw(mut self, name: &str, value: impl Into<Value>) -> Sample {
        self.kwargs.insert(name, value);
        self
    }
}

/// A call with these positional arguments.
pub fn sample<const N: usize>(args: [Value; N]) -> Sample {
    Sample { args: args.into(), kwargs: Kwargs::new() }
}

/// The samples of one function.
#[doc(hidden)]
pub struct SampleSet {
    func: &'static Func,
    make: fn() -> Vec<Sample>,
}

impl SampleSet {
    #[doc(hidden)]
    pub const fn __new(func: &'static Func, make: fn() -> Vec<Sample>) -> Self {
        SampleSet { func, make }
    }
}

inventory::collect!(SampleSet);

/// Registers sample inputs for functions: `samples! { torchfn::ADD => [sample([a, b])], ... }`.
#[macro_export]
macro_rules! samples {
    ($($func:expr => [$($sample:expr),* $(,)?]),* $(,)?) => {$(
        $crate::__private::inventory::submit! {
            $crate::testing::SampleSet::__new($func, || ::std::vec![$($sample),*])
        }
    )*};
}

/// The sample inputs registered for `func` (empty when it has none).
pub fn samples(func: &'static Func) -> Vec<Sample> {
    inventory::iter::<SampleSet>.into_iter().filter(|s| s.func == func).flat_map(|s| (s.make)()).collect()
}

/// A tensor of `shape` and `dtype` with varied, deterministic values: positive and negative,
/// fractional for floats, none of them zero (so they divide safely).
pub fn values(shape: &[usize], dtype: DType) -> Tensor {
    let shape = Shape::new(shape);
    let n = shape.numel();
    let pattern = |i: usize| {
        let k = (i * 7 + 3) % 11;
        (k as f64 - 5.0) / 2.0 + if k == 5 { 1.5 } else { 0.0 }
    };
    let dense = with_dtype!(
        dtype,
        T => {
            // Integers take twice the pattern (whole, -10 to 10); uint8 its magnitude.
            let scale = if dtype.is_floating_point() { 1.0 } else { 2.0 };
            let value = |i| {
                let v = pattern(i) * scale;
                T::from_f64(if dtype.is_unsigned() { v.abs() } else { v })
            };
            Dense::from_vec((0..n).map(value).collect(), shape)
        },
        bool => Dense::from_vec((0..n).map(|i| (i * 7 + 3) % 3 != 0).collect(), shape)
    );
    Tensor::from_dense(dense)
}

/// [`values`] as a float32 argument.
pub fn f32s(shape: &[usize]) -> Value {
    Value::Tensor(values(shape, DType::Float32))
}

/// [`values`] divided by 8, as a float32 argument: weights small enough that a product of
/// several of them (attention's scores) does not saturate a softmax.
pub fn small_f32s(shape: &[usize]) -> Value {
    let t = values(shape, DType::Float32);
    let data: Vec<f32> = t.to_vec::<f32>().expect("a float32 tensor").into_iter().map(|v| v / 8.0).collect();
    Value::Tensor(Tensor::from_dense(Dense::from_vec(data, Shape::new(shape))))
}

/// [`values`] as an int64 argument.
pub fn i64s(shape: &[usize]) -> Value {
    Value::Tensor(values(shape, DType::Int64))
}

/// [`values`] as a bool argument.
pub fn bools(shape: &[usize]) -> Value {
    Value::Tensor(values(shape, DType::Bool))
}
