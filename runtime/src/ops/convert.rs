//! Conversions: `Tensor.to(dtype)`, `Tensor.type(dtype)`, `Tensor.to(device)` and `Tensor.cpu()`.

use crate::backend::Device;
use crate::backend::host::check_dtype;
use crate::error::Result;
use crate::tensor::{DType, Tensor};
use crate::testing::{f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

/// The tensor on `device` (when given) as `dtype` (when given); the very same tensor when
/// nothing changes and no `copy` is asked for.
fn to_impl(
    func: &str,
    (name, t): (&str, &Tensor),
    device: Option<Device>,
    dtype: Option<DType>,
    copy: bool,
) -> Result<Tensor> {
    let x = t.data(func, name)?;
    let (device, dtype) = (device.unwrap_or(x.device()), dtype.unwrap_or(x.dtype));
    if device == x.device() {
        if x.dtype == dtype && !copy {
            return Ok(t.clone());
        }
        check_dtype(func, device, dtype)?;
        return crate::primitive::copy(t, dtype);
    }
    check_dtype(func, device, dtype)?;
    crate::primitive::transfer(t, device, dtype)
}

impl Tensor {
    /// This tensor converted to `dtype` (`Tensor.to(dtype)`): floats truncate toward zero into
    /// integers (NaN and out-of-range values saturate), anything non-zero (NaN included) is
    /// `true`. With the dtype it already has and `copy` false, the very same tensor comes
    /// back; `non_blocking` has no effect. See [`to_device`](Tensor::to_device) to move it.
    ///
    /// ```
    /// use torchfn::DType;
    /// let t = torchfn::tensor([-1.7f32, 0.0, 2.5])?;
    /// assert_eq!(t.to(DType::Int64, false, false)?.to_vec::<i64>()?, [-1, 0, 2]);
    /// assert_eq!(t.to(DType::Bool, false, false)?.to_vec::<bool>()?, [true, false, true]);
    /// assert!(t.to(DType::Float32, false, false)?.is(&t));
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn to(
        &self,
        dtype: DType,
        #[default(false)] non_blocking: bool,
        #[default(false)] copy: bool,
    ) -> Result<Tensor> {
        let _ = non_blocking;
        to_impl("to", ("self", self), None, Some(dtype), copy)
    }

    /// This tensor on `device`, converted to `dtype` when given (`Tensor.to(device, dtype)`):
    /// a copy through host memory, or the very same tensor when it is already there (and of
    /// that dtype) and no `copy` is asked for. Moving float64 or int64 to a device without
    /// them (most GPUs) is an error: convert to float32 or int32 first.
    ///
    /// ```
    /// use torchfn::{DType, Device};
    /// let t = torchfn::tensor([1.5f32, 2.0])?;
    /// assert!(t.to_device(Device::CPU, None, false, false)?.is(&t));
    /// let i = t.to_device(Device::CPU, Some(DType::Int32), false, false)?;
    /// assert_eq!(i.to_vec::<i32>()?, [1, 2]);
    /// if let Ok(gpu) = Device::wgpu() {
    ///     let g = t.to_device(gpu, None, false, false)?;
    ///     assert_eq!(g.device()?, gpu);
    ///     assert_eq!((&g * 2.0)?.cpu()?.to_vec::<f32>()?, [3.0, 4.0]);
    /// }
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function(overload_of = Tensor::TO)]
    pub fn to_device(
        &self,
        device: Device,
        #[default(None)] dtype: Option<DType>,
        #[default(false)] non_blocking: bool,
        #[default(false)] copy: bool,
    ) -> Result<Tensor> {
        let _ = non_blocking;
        to_impl("to", ("self", self), Some(device), dtype, copy)
    }

    /// This tensor converted to `dtype` (`Tensor.type(dtype)`): the same as
    /// [`to`](Tensor::to) with that dtype, the very same tensor when it has it already.
    /// (PyTorch's `Tensor.type()` without a dtype, which names the tensor's legacy type as a
    /// string, is not provided.)
    ///
    /// ```
    /// use torchfn::DType;
    /// let t = torchfn::tensor([1.5f32, -2.5])?;
    /// assert_eq!(t.r#type(DType::Int64, false)?.to_vec::<i64>()?, [1, -2]);
    /// assert!(t.r#type(DType::Float32, false)?.is(&t));
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn r#type(&self, dtype: DType, #[default(false)] non_blocking: bool) -> Result<Tensor> {
        let _ = non_blocking;
        to_impl("type", ("self", self), None, Some(dtype), false)
    }

    /// This tensor in host memory (`Tensor.cpu`): itself when it is already there.
    #[torch_function]
    pub fn cpu(&self) -> Result<Tensor> {
        to_impl("cpu", ("self", self), Some(Device::CPU), None, false)
    }
}

/// The dtype shorthands of `Tensor` (`t.float()`, ...): [`to`](Tensor::to) that dtype, the very
/// same tensor when it already has it.
macro_rules! dtype_shorthands {
    ($($name:ident => $dtype:ident, $what:literal;)*) => {
        impl Tensor {
            $(
                #[doc = concat!("This tensor as ", $what, " (`Tensor.", stringify!($name), "()`): `self.to(", stringify!($dtype), ")`.")]
                #[torch_function]
                pub fn $name(&self) -> Result<Tensor> {
                    to_impl(stringify!($name), ("self", self), None, Some(DType::$dtype), false)
                }
            )*
        }
    };
}

dtype_shorthands! {
    float => Float32, "float32";
    double => Float64, "float64";
    long => Int64, "int64";
    int => Int32, "int32";
    bool => Bool, "bool";
}

crate::samples! {
    Tensor::FLOAT => [sample([i64s(&[2, 3])]), sample([f32s(&[2])])],
    Tensor::DOUBLE => [sample([f32s(&[2, 3])])],
    Tensor::LONG => [sample([f32s(&[2, 3])])],
    Tensor::INT => [sample([f32s(&[3])])],
    Tensor::BOOL => [sample([f32s(&[3])])],

    Tensor::TO => [sample([f32s(&[3]), Value::DType(DType::Int64)]), sample([i64s(&[3]), Value::DType(DType::Bool)]).kw("copy", true),
        sample([f32s(&[3]), Value::Device(Device::CPU)]).kw("dtype", DType::Float64)],
    Tensor::TYPE => [sample([f32s(&[3]), Value::DType(DType::Float64)]), sample([i64s(&[3]), Value::DType(DType::Float32)])],
    Tensor::CPU => [sample([f32s(&[3])])],
}
