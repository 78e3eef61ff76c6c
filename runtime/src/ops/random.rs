//! Random tensors: `rand`, `randn`, `randint` (constructors, not overridable, as in PyTorch),
//! the overridable `rand_like` and `randn_like`, and the in-place `uniform_` and `normal_`.
//! Each draws from the generator it is given, or from the default one
//! ([`manual_seed`](crate::manual_seed) reseeds it).

use crate::backend::Device;
use crate::backend::Distribution;
use crate::backend::host::check_dtype;
use crate::error::{Result, bail};
use crate::tensor::{DType, Generator, Shape, Tensor};
use crate::testing::{bools, f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

use super::inplace::write_into;

/// Draws a tensor of `shape` and `dtype` from `dist`, with `generator` or the default one, on
/// `device`: a random operator (`aten::rand`, `randn`, `normal`, `randint`, or `uniform` for
/// `like`, the tensor `uniform_` fills), drawn on the host so that a seed gives the same numbers
/// on every device.
fn drawn(
    func: &str,
    generator: Option<Generator>,
    dist: Distribution,
    (shape, dtype): (Shape, DType),
    device: Device,
) -> Result<Tensor> {
    check_dtype(func, device, dtype)?;
    crate::ops::creation::check_size(func, &shape, dtype)?;
    crate::primitive::draw(func, dist, (&shape, dtype, device), generator.as_ref(), None)
}

/// The floating dtype a continuous distribution is drawn in: `dtype`, float32 by default. Another
/// is a `NotImplementedError`, as PyTorch's kernels have none for integers and bools.
fn floating(func: &str, dtype: Option<DType>) -> Result<DType> {
    match dtype.unwrap_or_default() {
        d if d.is_floating_point() => Ok(d),
        d => bail!(
            NotImplemented,
            "{func}(): argument 'dtype' must be a floating point dtype (float32 or float64), not {d}"
        ),
    }
}

/// Uniform samples on `[0, 1)` of `size` (`torch.rand`), float32 unless `dtype` says otherwise.
///
/// ```
/// let g = torchfn::Generator::new();
/// g.manual_seed(1);
/// let t = torchfn::rand([2, 3], &g, torchfn::DType::Float64, None)?;
/// assert!(t.to_vec::<f64>()?.iter().all(|x| (0.0..1.0).contains(x)));
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn", ignore = "a constructor with no tensor argument")]
pub fn rand(
    size: impl Into<Shape>,
    #[default(None)] generator: impl Into<Option<Generator>>,
    #[default(None)] dtype: impl Into<Option<DType>>,
    #[default(None)] device: impl Into<Option<Device>>,
) -> Result<Tensor> {
    let dtype = floating("rand", dtype.into())?;
    let device = device.into().unwrap_or(Device::CPU);
    drawn("rand", generator.into(), Distribution::Uniform { low: 0.0, high: 1.0 }, (size.into(), dtype), device)
}

/// Standard normal samples of `size` (`torch.randn`), float32 unless `dtype` says otherwise.
///
/// ```
/// torchfn::manual_seed(3);
/// let t = torchfn::randn([10_000], None, None, None)?;
/// assert!(t.mean()?.item()?.to_f64().abs() < 0.05);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn", ignore = "a constructor with no tensor argument")]
pub fn randn(
    size: impl Into<Shape>,
    #[default(None)] generator: impl Into<Option<Generator>>,
    #[default(None)] dtype: impl Into<Option<DType>>,
    #[default(None)] device: impl Into<Option<Device>>,
) -> Result<Tensor> {
    let dtype = floating("randn", dtype.into())?;
    let device = device.into().unwrap_or(Device::CPU);
    drawn("randn", generator.into(), Distribution::Normal { mean: 0.0, std: 1.0 }, (size.into(), dtype), device)
}

/// Integers drawn uniformly from `[low, high)`, checked to fit `dtype`.
fn integers(
    func: &str,
    (low, high): (i64, i64),
    size: Shape,
    generator: Option<Generator>,
    (dtype, device): (Option<DType>, Option<Device>),
) -> Result<Tensor> {
    if low >= high {
        bail!(Runtime, "{func}(): expected 'low' to be less than 'high', but got low={low} >= high={high}");
    }
    let device = device.unwrap_or(Device::CPU);
    let dtype = dtype.unwrap_or(device.index_dtype());
    let (min, max) = match dtype {
        DType::Bool => (0, 1),
        DType::UInt8 => (0, i64::from(u8::MAX)),
        DType::Int8 => (i64::from(i8::MIN), i64::from(i8::MAX)),
        DType::Int16 => (i64::from(i16::MIN), i64::from(i16::MAX)),
        DType::Int32 => (i64::from(i32::MIN), i64::from(i32::MAX)),
        DType::Int64 => (i64::MIN, i64::MAX),
        // The integers a float represents exactly, as PyTorch's `check_from_to_in_range`.
        DType::Float16 => (-(1 << 11), 1 << 11),
        DType::BFloat16 => (-(1 << 8), 1 << 8),
        DType::Float32 => (-(1 << 24), 1 << 24),
        DType::Float64 => (-(1 << 53), 1 << 53),
    };
    if low < min || high - 1 > max {
        bail!(
            Runtime,
            "{func}(): the range [{low}, {high}) is out of bounds for dtype {dtype} (which holds {min} to {max})"
        );
    }
    drawn(func, generator, Distribution::Integers { low, high }, (size, dtype), device)
}

/// Integers drawn uniformly from `[0, high)` (`torch.randint(high, size)`), int64 unless `dtype`
/// says otherwise. [`randint_range`] takes a lower bound too.
///
/// ```
/// let t = torchfn::randint(6, [100], None, None, None)?;
/// assert!(t.to_vec::<i64>()?.iter().all(|x| (0..6).contains(x)));
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn", ignore = "a constructor with no tensor argument")]
pub fn randint(
    high: i64,
    size: impl Into<Shape>,
    #[default(None)] generator: impl Into<Option<Generator>>,
    #[default(None)] dtype: impl Into<Option<DType>>,
    #[default(None)] device: impl Into<Option<Device>>,
) -> Result<Tensor> {
    integers("randint", (0, high), size.into(), generator.into(), (dtype.into(), device.into()))
}

/// Integers drawn uniformly from `[low, high)` (`torch.randint(low, high, size)`).
#[torch_function(overload_of = RANDINT, ignore = "a constructor with no tensor argument")]
pub fn randint_range(
    low: i64,
    high: i64,
    size: impl Into<Shape>,
    #[default(None)] generator: impl Into<Option<Generator>>,
    #[default(None)] dtype: impl Into<Option<DType>>,
    #[default(None)] device: impl Into<Option<Device>>,
) -> Result<Tensor> {
    integers("randint", (low, high), size.into(), generator.into(), (dtype.into(), device.into()))
}

/// The dtype of a `*_like` result: `dtype`, or `input`'s, which must be floating.
fn like_dtype(func: &str, input: &Tensor, dtype: Option<DType>) -> Result<DType> {
    floating(func, Some(dtype.map_or_else(|| input.data(func, "input").map(|d| d.dtype), Ok)?))
}

/// Uniform samples on `[0, 1)` with the shape (and dtype, unless given) of `input`
/// (`torch.rand_like`).
#[torch_function(module = "torchfn")]
pub fn rand_like(input: &Tensor, #[default(None)] dtype: impl Into<Option<DType>>) -> Result<Tensor> {
    let dtype = like_dtype("rand_like", input, dtype.into())?;
    let x = input.data("rand_like", "input")?;
    drawn("rand_like", None, Distribution::Uniform { low: 0.0, high: 1.0 }, (x.layout.shape.clone(), dtype), x.device())
}

/// Standard normal samples with the shape (and dtype, unless given) of `input`
/// (`torch.randn_like`).
#[torch_function(module = "torchfn")]
pub fn randn_like(input: &Tensor, #[default(None)] dtype: impl Into<Option<DType>>) -> Result<Tensor> {
    let dtype = like_dtype("randn_like", input, dtype.into())?;
    let x = input.data("randn_like", "input")?;
    drawn("randn_like", None, Distribution::Normal { mean: 0.0, std: 1.0 }, (x.layout.shape.clone(), dtype), x.device())
}

impl Tensor {
    /// Fills this floating tensor with uniform samples on `[from, to)`, in place
    /// (`Tensor.uniform_`); returns `self`.
    ///
    /// ```
    /// let w = torchfn::zeros([3, 3], None, None)?;
    /// w.uniform_(-0.1, 0.1, None)?;
    /// assert!(w.to_vec::<f32>()?.iter().all(|x| (-0.1..0.1).contains(x)));
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn uniform_(
        &self,
        #[default(0.0)] from: f64,
        #[default(1.0)] to: f64,
        #[default(None)] generator: impl Into<Option<Generator>>,
    ) -> Result<Tensor> {
        if from.partial_cmp(&to).is_none_or(|o| o.is_gt()) || !(to - from).is_finite() {
            bail!(Runtime, "uniform_(): expected from <= to and a finite range, but got from={from} and to={to}");
        }
        let x = self.data("uniform_", "self")?;
        let dtype = floating("uniform_", Some(x.dtype))?;
        let dist = Distribution::Uniform { low: from, high: to };
        check_dtype("uniform_", x.device(), dtype)?;
        let generator: Option<Generator> = generator.into();
        let placement = (&x.layout.shape, dtype, x.device());
        let drawn = crate::primitive::draw("uniform_", dist, placement, generator.as_ref(), Some(self))?;
        write_into("uniform_", self, drawn)
    }

    /// Fills this floating tensor with normal samples of mean `mean` and standard deviation
    /// `std`, in place (`Tensor.normal_`); returns `self`.
    #[torch_function]
    pub fn normal_(
        &self,
        #[default(0.0)] mean: f64,
        #[default(1.0)] std: f64,
        #[default(None)] generator: impl Into<Option<Generator>>,
    ) -> Result<Tensor> {
        if std.is_nan() || std < 0.0 {
            bail!(Runtime, "normal_(): expected 'std' to be non-negative, but got std={std}");
        }
        let x = self.data("normal_", "self")?;
        let dtype = floating("normal_", Some(x.dtype))?;
        let dist = Distribution::Normal { mean, std };
        let drawn = drawn("normal_", generator.into(), dist, (x.layout.shape.clone(), dtype), x.device())?;
        write_into("normal_", self, drawn)
    }

    /// Fills this tensor with 1 (`true`) with probability `p` and 0 (`false`) otherwise, in
    /// place (`Tensor.bernoulli_`), whatever its dtype, as PyTorch's; returns `self`.
    ///
    /// ```
    /// let mask = torchfn::zeros([1000], None, None)?;
    /// mask.bernoulli_(0.25, torchfn::Generator::new())?;
    /// let kept = mask.sum()?.item()?.to_f64();
    /// assert!(mask.to_vec::<f32>()?.iter().all(|&v| v == 0.0 || v == 1.0) && (150.0..350.0).contains(&kept));
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn bernoulli_(
        &self,
        #[default(0.5)] p: f64,
        #[keyword_only]
        #[default(None)]
        generator: impl Into<Option<Generator>>,
    ) -> Result<Tensor> {
        if !(0.0..=1.0).contains(&p) {
            bail!(Runtime, "bernoulli_(): p must be in [0, 1], but got p={p}");
        }
        let x = self.data("bernoulli_", "self")?;
        let dtype = x.dtype;
        check_dtype("bernoulli_", x.device(), dtype)?;
        let generator: Option<Generator> = generator.into();
        let placement = (&x.layout.shape, dtype, x.device());
        let bernoulli = Distribution::Bernoulli { p };
        let drawn = crate::primitive::draw("bernoulli_", bernoulli, placement, generator.as_ref(), Some(self))?;
        write_into("bernoulli_", self, drawn)
    }
}

crate::samples! {
    RAND_LIKE => [sample([f32s(&[2, 3])]), sample([f32s(&[4])]).kw("dtype", Value::DType(DType::Float64))],
    RANDN_LIKE => [sample([f32s(&[2, 3])])],
    Tensor::UNIFORM_ => [sample([f32s(&[2, 3]), Value::Float(-1.0), Value::Float(1.0)])],
    Tensor::NORMAL_ => [sample([f32s(&[5]), Value::Float(2.0), Value::Float(0.5)])],
    Tensor::BERNOULLI_ => [
        sample([f32s(&[2, 3])]),
        sample([f32s(&[4]), Value::Float(0.3)]),
        sample([i64s(&[2, 2]), Value::Float(0.7)]),
        sample([bools(&[5])]),
    ],
}
