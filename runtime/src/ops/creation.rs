//! Creation functions. They take no tensor argument, so nothing could override them: they are
//! listed by `get_ignored_functions`, as PyTorch's are.

use crate::cpu::cast;
use crate::error::{Error, Result};
use crate::overrides::ignored;
use crate::tensor::{DType, Dense, Device, Element, Scalar, Shape, Tensor, TensorData, with_dtype};

/// The dtype and device of a new tensor (PyTorch's `dtype=` and `device=` arguments). Defaults
/// to float32 on the CPU; a [`DType`] or a [`Device`] converts into options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TensorOptions {
    /// The element type.
    pub dtype: DType,
    /// Where the data lives.
    pub device: Device,
}

impl TensorOptions {
    /// These options with another dtype.
    pub fn dtype(self, dtype: DType) -> Self {
        TensorOptions { dtype, ..self }
    }

    /// These options with another device.
    pub fn device(self, device: Device) -> Self {
        TensorOptions { device, ..self }
    }
}

impl From<DType> for TensorOptions {
    fn from(dtype: DType) -> Self {
        TensorOptions::default().dtype(dtype)
    }
}

impl From<Device> for TensorOptions {
    fn from(device: Device) -> Self {
        TensorOptions::default().device(device)
    }
}

ignored! {
    "torchfn.tensor": "a constructor with no tensor argument",
    "torchfn.zeros": "a constructor with no tensor argument",
    "torchfn.ones": "a constructor with no tensor argument",
    "torchfn.eye": "a constructor with no tensor argument",
}

/// `numel(shape)` copies of `value`, or an error when they cannot be allocated.
fn filled_vec<T: Element>(func: &str, shape: &Shape, value: T) -> Result<Vec<T>> {
    let too_big =
        || Error::runtime_error(format!("{func}(): a tensor of shape {:?} is too large to allocate", shape.as_ref()));
    let n = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).ok_or_else(too_big)?;
    let mut data = Vec::new();
    data.try_reserve_exact(n).map_err(|_| too_big())?;
    data.resize(n, value);
    Ok(data)
}

/// A tensor of `shape` filled with `value` converted to the dtype of `options`.
fn filled(func: &str, shape: Shape, value: Scalar, options: TensorOptions) -> Result<Tensor> {
    let dense = with_dtype!(options.dtype, T => Dense::from_vec(filled_vec(func, &shape, cast::<f64, T>(value.to_f64()))?, shape));
    Ok(Tensor::from_dense(dense))
}

/// A tensor from nested Rust data (`torch.tensor`): an element, or arrays, slices and vectors
/// nested to any depth. The Rust element type decides the dtype (`f32` gives float32, `i64`
/// int64, `bool` bool); ragged data is an error.
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
    // An empty sequence leaves its inner dimensions unrecorded; they have size zero.
    Ok(Tensor::from_dense(Dense::from_vec(flat, Shape::from(dims))))
}

/// A tensor of zeros (`torch.zeros`).
///
/// ```
/// use torchfn::DType;
/// let z = torchfn::zeros([2, 3], DType::Int64)?;
/// assert_eq!(z.to_vec::<i64>()?, [0; 6]);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn zeros(shape: impl Into<Shape>, options: impl Into<TensorOptions>) -> Result<Tensor> {
    filled("zeros", shape.into(), Scalar::Int(0), options.into())
}

/// A tensor of ones (`torch.ones`).
pub fn ones(shape: impl Into<Shape>, options: impl Into<TensorOptions>) -> Result<Tensor> {
    filled("ones", shape.into(), Scalar::Int(1), options.into())
}

/// The `n x n` identity matrix (`torch.eye`).
///
/// ```
/// let i = torchfn::eye(2, torchfn::DType::Float32)?;
/// assert_eq!(i.to_string(), "tensor([[1., 0.],\n        [0., 1.]])");
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn eye(n: usize, options: impl Into<TensorOptions>) -> Result<Tensor> {
    let shape = Shape::from([n, n]);
    let dense = with_dtype!(options.into().dtype, T => {
        let mut data = filled_vec("eye", &shape, T::default())?;
        for i in 0..n {
            data[i * n + i] = cast::<f64, T>(1.0);
        }
        Dense::from_vec(data, shape)
    });
    Ok(Tensor::from_dense(dense))
}
