//! Creation functions. Those without a tensor argument take part in no dispatch (they are
//! listed by `get_ignored_functions`, as PyTorch's are) but still have handles, to call them by
//! name; the `*_like` ones take a tensor and are overridable.

use crate::backend::host::cast;
use crate::backend::host::check_dtype;
use crate::backend::{Buffer, Device};
use crate::error::{Error, Result, bail};
use crate::ops::IntList;
use crate::protocol::Relevant;
use crate::tensor::{DType, Dense, Element, Scalar, Shape, Tensor, TensorData, with_dtype};
use crate::testing::{f32s, sample};
use crate::torch_function;
use crate::types::get_default_dtype;
use crate::value::{Kwargs, Returns, Value};

/// `numel(shape)` copies of `value`, or an error when they cannot be allocated.
fn filled_vec<T: Element>(func: &str, shape: &Shape, value: T) -> Result<Vec<T>> {
    check_size(func, shape, T::DTYPE)?;
    let n = shape.numel();
    let mut data = Vec::new();
    crate::backend::host::reserve_exact(&mut data, n).map_err(|_| too_large(func, shape))?;
    data.resize(n, value);
    Ok(data)
}

/// An error unless a tensor of `shape` and `dtype` could be laid out in memory, empty or not
/// (PyTorch's "Storage size calculation overflowed").
pub(crate) fn check_size(func: &str, shape: &Shape, dtype: DType) -> Result<()> {
    if shape.fits_in_memory(dtype.itemsize()) { Ok(()) } else { Err(too_large(func, shape)) }
}

fn too_large(func: &str, shape: &Shape) -> Error {
    Error::runtime_error(format!("{func}(): a tensor of shape {:?} is too large to allocate", shape.as_ref()))
}

/// The device a constructor makes its tensor on (the CPU unless given), and the dtype: the
/// one given, which the device must hold, or `default` (int64 defaults to the device's index
/// dtype where it has no int64).
fn placed(func: &str, device: Option<Device>, dtype: Option<DType>, default: DType) -> Result<(Device, DType)> {
    let device = device.unwrap_or(Device::CPU);
    let dtype = match dtype {
        Some(dtype) => dtype,
        None if default == DType::Int64 => device.index_dtype(),
        None => default,
    };
    check_dtype(func, device, dtype)?;
    Ok((device, dtype))
}

/// A tensor of `shape` on `device` filled with `value` converted to `dtype`; a value that
/// `dtype` cannot hold is an error, as in PyTorch (see [`holds`]), even for an empty tensor.
fn filled(func: &str, shape: Shape, value: Scalar, dtype: DType, device: Device) -> Result<Tensor> {
    check_fill(func, &shape, value, dtype)?;
    crate::primitive::full(&shape, value, dtype, device)
}

/// [`filled`] on `like`'s device, made by `like.new_full` (which wrapper subclasses see).
fn filled_like(func: &str, like: &Tensor, shape: Shape, value: Scalar, dtype: DType) -> Result<Tensor> {
    check_fill(func, &shape, value, dtype)?;
    crate::primitive::new_full(like, &shape, value, dtype)
}

/// What [`filled`] refuses: a size too large, a value `dtype` cannot hold.
fn check_fill(func: &str, shape: &Shape, value: Scalar, dtype: DType) -> Result<()> {
    check_size(func, shape, dtype)?;
    if !holds(dtype, value) {
        bail!(Runtime, "{func}(): value cannot be converted to type {dtype} without overflow");
    }
    Ok(())
}

/// Whether `dtype` holds `value` without overflow, by PyTorch's checked conversion of a fill
/// value: any number converts to bool, and an infinity or NaN to a float; an integer dtype
/// refuses NaN, the infinities and numbers beyond its range (a float's fraction is dropped;
/// uint8 also takes the integers -255 to -1, which wrap); float32 refuses finite numbers beyond its range,
/// while float16 and bfloat16 round them to infinity, as PyTorch does.
fn holds(dtype: DType, value: Scalar) -> bool {
    // 2^63 is exact in f64; a float below it truncates into range.
    const I64_END: f64 = 9_223_372_036_854_775_808.0;
    let range = match dtype {
        DType::UInt8 => -255..=255,
        DType::Int8 => i64::from(i8::MIN)..=i64::from(i8::MAX),
        DType::Int16 => i64::from(i16::MIN)..=i64::from(i16::MAX),
        DType::Int32 => i64::from(i32::MIN)..=i64::from(i32::MAX),
        _ => i64::MIN..=i64::MAX,
    };
    match (dtype, value) {
        (DType::Bool | DType::Float64 | DType::Float16 | DType::BFloat16, _) | (_, Scalar::Bool(_)) => true,
        (DType::Float32, Scalar::Int(_)) => true,
        (DType::Float32, Scalar::Float(x)) => !x.is_finite() || x.abs() <= f64::from(f32::MAX),
        (DType::Int64, Scalar::Float(x)) => (-I64_END..I64_END).contains(&x),
        (_, Scalar::Int(i)) => range.contains(&i),
        // A float is never wrapped into uint8: it must be in 0..=255 (truncated).
        (DType::UInt8, Scalar::Float(x)) => (0.0..256.0).contains(&x),
        (_, Scalar::Float(x)) => (*range.start() as f64..=*range.end() as f64).contains(&x),
    }
}

/// Host elements of a new tensor moved to `device`.
fn uploaded<T: Element>(data: Vec<T>, shape: Shape, device: Device) -> Result<Tensor> {
    crate::primitive::upload(device, Buffer::from_vec(data), shape)
}

/// The dtype PyTorch gives a tensor made from `value`: bool, int64 or the default float.
fn dtype_of(value: Scalar) -> DType {
    match value {
        Scalar::Bool(_) => DType::Bool,
        Scalar::Int(_) => DType::Int64,
        Scalar::Float(_) => get_default_dtype(),
    }
}

/// A tensor from nested Rust data (`torch.tensor`): an element, or arrays, slices and vectors
/// nested to any depth. The Rust element type decides the dtype (`f32` gives float32, `i64`
/// int64, `bool` bool); ragged data is an error.
///
/// Like every constructor it takes part in no subclass or duck dispatch, but an active mode
/// sees it as [`TENSOR`]`(data, dtype=..)`: the data as nested lists of numbers, and the dtype
/// the element type chose.
///
/// ```
/// let t = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]])?;
/// assert_eq!(t.to_string(), "tensor([[1., 2.],\n        [3., 4.]])");
/// let ragged = torchfn::tensor(vec![vec![1i64, 2], vec![3]]);
/// assert_eq!(ragged.unwrap_err().to_string(), "tensor(): expected sequence of length 2 at dim 1 (got 1)");
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn tensor<D: TensorData>(data: D) -> Result<Tensor> {
    let (mut dims, mut flat) = (Vec::new(), Vec::new());
    data.flatten_into(0, &mut dims, &mut flat)?;
    let made = Tensor::from_dense(Dense::from_vec(flat, Shape::from(dims)));
    let made = if crate::protocol::dispatch::fast_path(&()) { made } else { tensor_under_modes(made)? };
    // Below the function modes, the dispatch modes see a tensor made from data.
    crate::primitive::lift_fresh(made)
}

/// [`tensor`] with a mode active: the modes see the call by name, and what they return is the
/// result; `made` when nothing dispatched.
#[cold]
fn tensor_under_modes(made: Tensor) -> Result<Tensor> {
    let dense = made.data("tensor", "data")?;
    let shape = dense.layout.shape.to_vec();
    let elements: Vec<Value> =
        with_dtype!(dense.dtype, T => made.to_vec::<T>()?.into_iter().map(|x| x.to_scalar().into()).collect());
    let data = nest(&mut elements.into_iter(), &shape);
    let dtype = dense.dtype;
    let kwargs = Kwargs::from([("dtype", dtype)]);
    match crate::protocol::dispatch::dispatch(TENSOR, &(), &[data], &kwargs, None)? {
        Some(value) => Returns::from_value(value, TENSOR),
        None => Ok(made),
    }
}

/// Row-major `elements` as nested lists of `shape`.
fn nest(elements: &mut impl Iterator<Item = Value>, shape: &[usize]) -> Value {
    match shape.split_first() {
        None => elements.next().unwrap_or_default(),
        Some((&n, rest)) => Value::List((0..n).map(|_| nest(elements, rest)).collect()),
    }
}

/// The by-name form of [`tensor`](crate::tensor), whose Rust form is generic over the data.
mod by_name {
    use super::*;

    /// A tensor from `data` (`torch.tensor(data, dtype=None, device=None, requires_grad=False)`),
    /// called by name: a number, nested lists or tuples of numbers (float data gives the
    /// default dtype, integer data int64, bool data bool), or a tensor, which is copied without
    /// its history.
    #[allow(dead_code)] // the Rust form is the generic `torchfn::tensor`
    #[torch_function(module = "torchfn", ignore = "a constructor with no tensor argument")]
    pub fn tensor(
        data: Value,
        #[default(None)] dtype: Option<DType>,
        #[default(None)] device: Option<Device>,
        #[default(false)] requires_grad: bool,
    ) -> Result<Tensor> {
        let made = from_data("tensor", &data, dtype, device, true)?;
        if requires_grad { made.__impl_requires_grad_(true) } else { Ok(made) }
    }
}
pub use by_name::TENSOR;

/// `data` as a tensor (`torch.as_tensor`): without a copy when it already is a tensor of that
/// dtype (if given) on that device (if given), which is then returned itself; converted
/// otherwise, keeping its history. Numbers and nested lists make a new tensor, as
/// [`TENSOR`] does.
///
/// ```
/// use torchfn::DType;
/// let t = torchfn::tensor([1.0f32, 2.0])?;
/// assert!(torchfn::as_tensor(&t, None, None)?.is(&t));
/// assert!(torchfn::as_tensor(&t, DType::Float32, None)?.is(&t));
/// let f64s = torchfn::as_tensor(&t, DType::Float64, None)?;
/// assert_eq!(f64s.to_vec::<f64>()?, [1.0, 2.0]);
/// assert_eq!(torchfn::as_tensor(2.5, None, None)?.to_string(), "tensor(2.5000)");
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn", ignore = "a constructor with no tensor argument")]
pub fn as_tensor(
    data: impl Into<Value>,
    #[default(None)] dtype: impl Into<Option<DType>>,
    #[default(None)] device: impl Into<Option<Device>>,
) -> Result<Tensor> {
    from_data("as_tensor", &data.into(), dtype.into(), device.into(), false)
}

/// A tensor from the data of [`TENSOR`] or [`as_tensor`]: a tensor converted to `dtype` and
/// `device` when given (always a copy without history when `copy`, as `torch.tensor` makes);
/// numbers and nested sequences of them in a new tensor.
fn from_data(func: &str, data: &Value, dtype: Option<DType>, device: Option<Device>, copy: bool) -> Result<Tensor> {
    if let Value::Tensor(t) = data {
        let source = if copy { t.__impl_detach()? } else { t.clone() };
        let device = match device {
            Some(device) => device,
            None => source.data(func, "data")?.device(),
        };
        return source.__impl_to_device(device, dtype, false, copy);
    }
    let (mut dims, mut flat) = (Vec::new(), Vec::new());
    flatten(data, (func, dtype.is_none()), 0, &mut dims, &mut flat)?;
    // The highest category among the numbers (bool < int64 < the default float), as PyTorch
    // infers it; no numbers at all give the default float.
    let inferred = flat.iter().copied().map(dtype_of).max().unwrap_or_else(get_default_dtype);
    let (device, dtype) = placed(func, device, dtype, inferred)?;
    let shape = Shape::from(dims);
    with_dtype!(dtype, T => uploaded(flat.iter().map(|&n| T::from_number(n)).collect::<Vec<T>>(), shape, device))
}

/// Appends the numbers of nested lists and tuples to `out` in row-major order, recording the
/// size of each dimension in `dims` and refusing ragged data, as `torch.tensor` does. With no
/// dtype given (`inferring`), what is not a number fails as PyTorch's dtype inference does.
fn flatten(
    data: &Value,
    (func, inferring): (&str, bool),
    depth: usize,
    dims: &mut Vec<usize>,
    out: &mut Vec<Scalar>,
) -> Result<()> {
    match data {
        Value::List(items) | Value::Tuple(items) => {
            match dims.get(depth) {
                // Numbers already read at this depth: a sequence beside them is ragged.
                None if !out.is_empty() => {
                    bail!(Type, "{func}(): expected a number at dim {depth}, got {}", data.type_name())
                }
                None if depth == dims.len() => dims.push(items.len()),
                Some(&expected) if expected == items.len() => {}
                expected => bail!(
                    Value,
                    "{func}(): expected sequence of length {} at dim {depth} (got {})",
                    expected.copied().unwrap_or(0),
                    items.len()
                ),
            }
            items.iter().try_for_each(|item| flatten(item, (func, inferring), depth + 1, dims, out))
        }
        value if depth < dims.len() => {
            bail!(Type, "{func}(): expected a sequence at dim {depth}, not {}", value.type_name())
        }
        Value::None if inferring => bail!(Runtime, "Could not infer dtype of NoneType"),
        value if !inferring || matches!(value, Value::Bool(_) | Value::Int(_) | Value::Float(_) | Value::Tensor(_)) => {
            out.push(number(func, value)?);
            Ok(())
        }
        value => bail!(Type, "{func}(): invalid data type '{}'", value.type_name()),
    }
}

/// One number of `new_tensor`'s data: a Python number, or a one-element tensor.
fn number(func: &str, data: &Value) -> Result<Scalar> {
    match data {
        Value::Bool(b) => Ok(Scalar::Bool(*b)),
        Value::Int(i) => Ok(Scalar::Int(*i)),
        Value::Float(x) => Ok(Scalar::Float(*x)),
        Value::Tensor(t) => {
            let x = t.data(func, "data")?;
            if x.layout.numel() != 1 {
                bail!(Value, "{func}(): only one element tensors can be converted to Python scalars");
            }
            crate::primitive::item(t)
        }
        other => bail!(Type, "{func}(): must be real number, not {}", other.type_name()),
    }
}

/// A tensor of zeros (`torch.zeros`), float32 unless `dtype` says otherwise, on the CPU unless
/// `device` says otherwise.
///
/// ```
/// use torchfn::DType;
/// assert_eq!(torchfn::zeros([2, 3], DType::Int64, None)?.to_vec::<i64>()?, [0; 6]);
/// assert_eq!(torchfn::zeros([2], None, None)?.to_string(), "tensor([0., 0.])");
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn", ignore = "a constructor with no tensor argument")]
pub fn zeros(
    size: impl Into<Shape>,
    #[default(None)] dtype: impl Into<Option<DType>>,
    #[default(None)] device: impl Into<Option<Device>>,
) -> Result<Tensor> {
    let (device, dtype) = placed("zeros", device.into(), dtype.into(), get_default_dtype())?;
    filled("zeros", size.into(), Scalar::Int(0), dtype, device)
}

/// A tensor whose elements the program is to write before it reads them (`torch.empty`),
/// float32 unless `dtype` says otherwise, on the CPU unless `device` says otherwise. PyTorch
/// leaves its memory as it was; torchfn's allocations are zeroed, so its elements are zeros.
///
/// ```
/// let t = torchfn::empty([2, 3], None, None)?;
/// assert_eq!(t.shape()?, [2, 3]);
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn", ignore = "a constructor with no tensor argument")]
pub fn empty(
    size: impl Into<Shape>,
    #[default(None)] dtype: impl Into<Option<DType>>,
    #[default(None)] device: impl Into<Option<Device>>,
) -> Result<Tensor> {
    let (device, dtype) = placed("empty", device.into(), dtype.into(), get_default_dtype())?;
    filled("empty", size.into(), Scalar::Int(0), dtype, device)
}

/// A tensor of ones (`torch.ones`), float32 unless `dtype` says otherwise, on the CPU unless
/// `device` says otherwise.
#[torch_function(module = "torchfn", ignore = "a constructor with no tensor argument")]
pub fn ones(
    size: impl Into<Shape>,
    #[default(None)] dtype: impl Into<Option<DType>>,
    #[default(None)] device: impl Into<Option<Device>>,
) -> Result<Tensor> {
    let (device, dtype) = placed("ones", device.into(), dtype.into(), get_default_dtype())?;
    filled("ones", size.into(), Scalar::Int(1), dtype, device)
}

/// A tensor filled with `fill_value` (`torch.full`); its dtype follows the value (float32,
/// int64 or bool) unless `dtype` says otherwise.
#[torch_function(module = "torchfn", ignore = "a constructor with no tensor argument")]
pub fn full(
    size: impl Into<Shape>,
    fill_value: impl Into<Scalar>,
    #[default(None)] dtype: impl Into<Option<DType>>,
    #[default(None)] device: impl Into<Option<Device>>,
) -> Result<Tensor> {
    let value = fill_value.into();
    let (device, dtype) = placed("full", device.into(), dtype.into(), dtype_of(value))?;
    filled("full", size.into(), value, dtype, device)
}

/// The `n x m` identity matrix (`m` defaults to `n`), float32 unless `dtype` says otherwise
/// (`torch.eye`).
///
/// ```
/// let i = torchfn::eye(2, None, None, None)?;
/// assert_eq!(i.to_string(), "tensor([[1., 0.],\n        [0., 1.]])");
/// # Ok::<(), torchfn::Error>(())
/// ```
#[torch_function(module = "torchfn", ignore = "a constructor with no tensor argument")]
pub fn eye(
    n: usize,
    #[default(None)] m: Option<usize>,
    #[default(None)] dtype: impl Into<Option<DType>>,
    #[default(None)] device: impl Into<Option<Device>>,
) -> Result<Tensor> {
    let (device, dtype) = placed("eye", device.into(), dtype.into(), get_default_dtype())?;
    let m = m.unwrap_or(n);
    let shape = Shape::from([n, m]);
    with_dtype!(dtype, T => {
        let mut data = filled_vec("eye", &shape, T::default())?;
        for i in 0..n.min(m) {
            data[i * m + i] = cast::<f64, T>(1.0);
        }
        uploaded(data, shape, device)
    })
}

/// `0, 1, ..., end - 1` (`torch.arange(end)`); int64 for an integer `end`, float32 for a float.
#[torch_function(module = "torchfn", ignore = "a constructor with no tensor argument")]
pub fn arange(
    end: impl Into<Scalar>,
    #[default(None)] dtype: impl Into<Option<DType>>,
    #[default(None)] device: impl Into<Option<Device>>,
) -> Result<Tensor> {
    range("arange", Scalar::Int(0), end.into(), Scalar::Int(1), dtype.into(), device.into())
}

/// `start, start + step, ...` up to `end` excluded (`torch.arange(start, end, step)`).
#[torch_function(overload_of = ARANGE, ignore = "a constructor with no tensor argument")]
pub fn arange_range(
    start: impl Into<Scalar>,
    end: impl Into<Scalar>,
    #[default(1)] step: impl Into<Scalar>,
    #[default(None)] dtype: impl Into<Option<DType>>,
    #[default(None)] device: impl Into<Option<Device>>,
) -> Result<Tensor> {
    range("arange", start.into(), end.into(), step.into(), dtype.into(), device.into())
}

fn range(
    func: &str,
    start: Scalar,
    end: Scalar,
    step: Scalar,
    dtype: Option<DType>,
    device: Option<Device>,
) -> Result<Tensor> {
    let floating = [start, end, step].iter().any(|s| s.is_floating_point());
    let default = if floating { get_default_dtype() } else { DType::Int64 };
    let (device, dtype) = placed(func, device, dtype, default)?;
    if dtype == DType::Bool {
        bail!(NotImplemented, "{func}(): not implemented for torch.bool");
    }
    let (a, b, s) = (start.to_f64(), end.to_f64(), step.to_f64());
    if s == 0.0 {
        bail!(Runtime, "{func}(): step must be nonzero");
    }
    if !(a.is_finite() && b.is_finite()) {
        bail!(Runtime, "{func}(): unsupported range: {a} -> {b}");
    }
    if (b - a) * s < 0.0 {
        bail!(Runtime, "{func}(): upper bound and larger bound inconsistent with step sign");
    }
    // The length is counted exactly for int64 from integers (large numbers lose no precision),
    // else from the numbers in f64; the values are computed in the dtype's accumulation type, as
    // PyTorch's: f64 for floats, and for integers the start and step truncated to int64
    // (`arange(0, 2.5, 0.5, dtype=torch.int64)` is five zeros).
    let n = if dtype == DType::Int64 && !floating {
        let (a, b, s) = (i128::from(start.to_i64()), i128::from(end.to_i64()), i128::from(step.to_i64()));
        usize::try_from(((b - a + s - s.signum()) / s).max(0)).unwrap_or(usize::MAX)
    } else {
        ((b - a) / s).ceil().max(0.0) as usize
    };
    let shape = Shape::from([n]);
    let (first, stride) = (start.to_i64(), step.to_i64());
    with_dtype!(dtype, T => {
        let mut data = filled_vec(func, &shape, T::default())?;
        for (i, x) in data.iter_mut().enumerate() {
            *x = if T::DTYPE.is_floating_point() {
                cast::<f64, T>(a + i as f64 * s)
            } else {
                T::from_i64(first.wrapping_add((i as i64).wrapping_mul(stride)))
            };
        }
        uploaded(data, shape, device)
    })
}

/// `steps` values from `start` to `end`, both included, evenly spaced (`torch.linspace`).
#[torch_function(module = "torchfn", ignore = "a constructor with no tensor argument")]
pub fn linspace(
    start: impl Into<Scalar>,
    end: impl Into<Scalar>,
    steps: usize,
    #[default(None)] dtype: impl Into<Option<DType>>,
    #[default(None)] device: impl Into<Option<Device>>,
) -> Result<Tensor> {
    let (device, dtype) = placed("linspace", device.into(), dtype.into(), get_default_dtype())?;
    if dtype == DType::Bool {
        bail!(NotImplemented, "linspace(): not implemented for torch.bool");
    }
    let (a, b) = (start.into().to_f64(), end.into().to_f64());
    let shape = Shape::from([steps]);
    let step = if steps > 1 { (b - a) / (steps - 1) as f64 } else { 0.0 };
    with_dtype!(dtype, T => {
        let mut data = filled_vec("linspace", &shape, T::default())?;
        // From both ends toward the middle, as PyTorch computes it; a single step is `start`.
        let half = steps / 2;
        for (i, x) in data.iter_mut().enumerate() {
            let v = if steps == 1 || i < half { a + step * i as f64 } else { b - step * (steps - 1 - i) as f64 };
            *x = cast::<f64, T>(v);
        }
        uploaded(data, shape, device)
    })
}

/// Zeros with the shape, device and dtype (unless given) of `input` (`torch.zeros_like`).
#[torch_function(module = "torchfn")]
pub fn zeros_like(input: &Tensor, #[default(None)] dtype: impl Into<Option<DType>>) -> Result<Tensor> {
    like("zeros_like", input, Scalar::Int(0), dtype.into())
}

/// A tensor to be written, with the shape, device and dtype (unless given) of `input`
/// (`torch.empty_like`): zeros in torchfn, as [`empty`].
#[torch_function(module = "torchfn")]
pub fn empty_like(input: &Tensor, #[default(None)] dtype: impl Into<Option<DType>>) -> Result<Tensor> {
    like("empty_like", input, Scalar::Int(0), dtype.into())
}

/// Ones with the shape, device and dtype (unless given) of `input` (`torch.ones_like`).
#[torch_function(module = "torchfn")]
pub fn ones_like(input: &Tensor, #[default(None)] dtype: impl Into<Option<DType>>) -> Result<Tensor> {
    like("ones_like", input, Scalar::Int(1), dtype.into())
}

/// `fill_value` with the shape, device and dtype (unless given) of `input` (`torch.full_like`).
#[torch_function(module = "torchfn")]
pub fn full_like(
    input: &Tensor,
    fill_value: impl Into<Scalar>,
    #[default(None)] dtype: impl Into<Option<DType>>,
) -> Result<Tensor> {
    like("full_like", input, fill_value.into(), dtype.into())
}

fn like(func: &str, input: &Tensor, value: Scalar, dtype: Option<DType>) -> Result<Tensor> {
    let x = input.data(func, "input")?;
    let dtype = dtype.unwrap_or(x.dtype);
    check_dtype(func, x.device(), dtype)?;
    filled_like(func, input, x.layout.shape.clone(), value, dtype)
}

// `Tensor.new_*`: constructors that take their dtype and device from a tensor, and so dispatch
// on it (a subclass instance gets a result of its class, through the default hook).

/// The device and dtype of a tensor that `self.new_*` makes: those given, else `self`'s.
fn placed_like(func: &str, t: &Tensor, dtype: Option<DType>, device: Option<Device>) -> Result<(Device, DType)> {
    let x = t.data(func, "self")?;
    let (device, dtype) = (device.unwrap_or(x.device()), dtype.unwrap_or(x.dtype));
    check_dtype(func, device, dtype)?;
    Ok((device, dtype))
}

/// `size` as a shape; a negative size is PyTorch's error.
fn sized(func: &str, size: &IntList) -> Result<Shape> {
    let sizes = size.as_slice();
    if let Some(n) = sizes.iter().find(|&&n| n < 0) {
        bail!(Runtime, "{func}(): Trying to create tensor with negative dimension {n}: {sizes:?}");
    }
    Ok(sizes.iter().map(|&n| usize::try_from(n).unwrap_or(usize::MAX)).collect())
}

/// A tensor of `size` filled with `value`, placed like `t` unless `dtype` or `device` say
/// otherwise.
fn new_filled(
    func: &str,
    t: &Tensor,
    size: &IntList,
    value: Scalar,
    dtype: Option<DType>,
    device: Option<Device>,
) -> Result<Tensor> {
    let (to, dtype) = placed_like(func, t, dtype, device)?;
    // On `t`'s own device the result is made like `t` (a subclass's hook sees the call).
    if crate::dispatch::same_device(to, t.data(func, "self")?.device()) {
        filled_like(func, t, sized(func, size)?, value, dtype)
    } else {
        filled(func, sized(func, size)?, value, dtype, to)
    }
}

impl Tensor {
    /// A tensor of ones of `size` with this tensor's dtype and device unless `dtype` or
    /// `device` say otherwise (`Tensor.new_ones`). Dispatched on `self`: for a subclass
    /// instance, the default hook makes the result an instance of the same subclass, with its
    /// attributes. By name, the sizes come one by one or as one sequence.
    ///
    /// ```
    /// use torchfn::prelude::*;
    ///
    /// #[derive(TensorSubclass)]
    /// struct Meters;
    ///
    /// let d = torchfn::tensor([1i64, 2])?.as_subclass(Meters)?;
    /// let ones = d.new_ones([2, 3], None, None)?;
    /// assert!(ones.is_instance::<Meters>()); // the default hook keeps the subclass
    /// assert_eq!((ones.shape()?, ones.dtype()?), ([2, 3].into(), DType::Int64));
    /// assert_eq!(d.new_ones([2], DType::Float32, None)?.to_vec::<f32>()?, [1.0, 1.0]);
    /// let err = d.new_ones([-1], None, None).unwrap_err();
    /// assert_eq!(err.to_string(), "new_ones(): Trying to create tensor with negative dimension -1: [-1]");
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn new_ones(
        &self,
        #[variadic] size: impl Into<IntList>,
        #[default(None)] dtype: impl Into<Option<DType>>,
        #[default(None)] device: impl Into<Option<Device>>,
    ) -> Result<Tensor> {
        new_filled("new_ones", self, &size.into(), Scalar::Int(1), dtype.into(), device.into())
    }

    /// A tensor of zeros of `size` with this tensor's dtype and device unless `dtype` or
    /// `device` say otherwise (`Tensor.new_zeros`); dispatched on `self`, as
    /// [`new_ones`](Tensor::new_ones).
    ///
    /// ```
    /// let t = torchfn::tensor([1.5f32])?;
    /// assert_eq!(t.new_zeros([2, 2], None, None)?.to_string(), "tensor([[0., 0.],\n        [0., 0.]])");
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn new_zeros(
        &self,
        #[variadic] size: impl Into<IntList>,
        #[default(None)] dtype: impl Into<Option<DType>>,
        #[default(None)] device: impl Into<Option<Device>>,
    ) -> Result<Tensor> {
        new_filled("new_zeros", self, &size.into(), Scalar::Int(0), dtype.into(), device.into())
    }

    /// A tensor of `size` filled with `fill_value`, with this tensor's dtype and device unless
    /// `dtype` or `device` say otherwise (`Tensor.new_full`): unlike [`full`](crate::full()),
    /// the dtype does not follow the value, which is converted (`1.5` in an int64 tensor is 1).
    /// Dispatched on `self`, as [`new_ones`](Tensor::new_ones).
    ///
    /// ```
    /// let t = torchfn::tensor([1i64])?;
    /// assert_eq!(t.new_full([3], 2.5, None, None)?.to_vec::<i64>()?, [2, 2, 2]);
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn new_full(
        &self,
        size: impl Into<IntList>,
        fill_value: impl Into<Scalar>,
        #[default(None)] dtype: impl Into<Option<DType>>,
        #[default(None)] device: impl Into<Option<Device>>,
    ) -> Result<Tensor> {
        new_filled("new_full", self, &size.into(), fill_value.into(), dtype.into(), device.into())
    }

    /// A tensor of `size` with this tensor's dtype and device unless `dtype` or `device` say
    /// otherwise (`Tensor.new_empty`). PyTorch leaves its elements uninitialized; torchfn
    /// fills them with zeros, so reading them is never undefined. Dispatched on `self`, as
    /// [`new_ones`](Tensor::new_ones).
    #[torch_function]
    pub fn new_empty(
        &self,
        #[variadic] size: impl Into<IntList>,
        #[default(None)] dtype: impl Into<Option<DType>>,
        #[default(None)] device: impl Into<Option<Device>>,
    ) -> Result<Tensor> {
        new_filled("new_empty", self, &size.into(), Scalar::Int(0), dtype.into(), device.into())
    }

    /// A new tensor holding a copy of `data`, with this tensor's dtype and device unless
    /// `dtype` or `device` say otherwise (`Tensor.new_tensor`): unlike
    /// [`tensor`](crate::tensor()), the dtype does not follow the data. `data` is a tensor
    /// (copied, detached: the result never requires grad), a number, or nested lists and tuples
    /// of numbers ([`Value`]; Rust arrays and slices of numbers convert, nested too). Ragged
    /// data is a `ValueError`.
    ///
    /// Dispatched on `self` alone, as in PyTorch, where `data` is a plain Python object: a
    /// subclass instance or a duck in `data` is not consulted (a duck is a `TypeError`).
    ///
    /// ```
    /// let t = torchfn::tensor([0.5f32])?;
    /// let n = t.new_tensor([[1, 2], [3, 4]], None, None)?;
    /// assert_eq!(n.to_string(), "tensor([[1., 2.],\n        [3., 4.]])"); // float32, as `t`
    /// let source = torchfn::tensor([7i64, 8])?;
    /// let copy = t.new_tensor(&source, torchfn::DType::Int64, None)?;
    /// source.fill_(0)?;
    /// assert_eq!(copy.to_vec::<i64>()?, [7, 8]); // a copy, not a view
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function(dispatcher = new_tensor_dispatcher)]
    pub fn new_tensor(
        &self,
        data: impl Into<Value>,
        #[default(None)] dtype: impl Into<Option<DType>>,
        #[default(None)] device: impl Into<Option<Device>>,
    ) -> Result<Tensor> {
        let (device, dtype) = placed_like("new_tensor", self, dtype.into(), device.into())?;
        from_data("new_tensor", &data.into(), Some(dtype), Some(device), true)
    }
}

/// `new_tensor` dispatches on `self` only: its `data` is not a tensor parameter.
#[crate::dispatcher]
fn new_tensor_dispatcher(
    self_: &Tensor,
    data: Value,
    #[default(None)] dtype: Option<DType>,
    #[default(None)] device: Option<Device>,
) -> impl Relevant {
    self_
}

fn nested(rows: &[&[i64]]) -> Value {
    Value::List(rows.iter().map(|row| Value::List(row.iter().map(|&i| Value::Int(i)).collect())).collect())
}

crate::samples! {
    ZEROS_LIKE => [sample([f32s(&[2, 3])])],
    EMPTY_LIKE => [sample([f32s(&[2, 3])]), sample([f32s(&[3])]).kw("dtype", Value::DType(DType::Float64))],
    ONES_LIKE => [sample([crate::testing::i64s(&[2, 3])])],
    FULL_LIKE => [sample([f32s(&[2, 3]), Value::Float(-2.0)])],
    Tensor::NEW_ONES => [sample([f32s(&[2]), Value::Int(2), Value::Int(3)]), sample([crate::testing::i64s(&[2]), Value::Tuple(vec![3.into()])]).kw("dtype", DType::Float64)],
    Tensor::NEW_ZEROS => [sample([f32s(&[2, 2]), Value::List(vec![2.into(), 1.into()])])],
    Tensor::NEW_FULL => [sample([f32s(&[2]), Value::Tuple(vec![2.into(), 2.into()]), Value::Float(1.5)]), sample([crate::testing::i64s(&[1]), Value::List(vec![3.into()]), Value::Float(2.5)])],
    Tensor::NEW_EMPTY => [sample([f32s(&[2]), Value::Int(3)])],
    Tensor::NEW_TENSOR => [sample([f32s(&[2]), nested(&[&[1, 2, 3], &[4, 5, 6]])]), sample([f32s(&[1]), Value::Float(2.5)]).kw("dtype", DType::Int64)],
}
