//! Dtype conversion: `Tensor.to(dtype)`.

use crate::cpu;
use crate::error::Result;
use crate::tensor::{DType, Tensor};
use crate::testing::{f32s, i64s, sample};
use crate::torch_function;
use crate::value::Value;

/// The tensor converted to `dtype`; the very same tensor when it already has that dtype and no
/// `copy` is asked for.
fn to_impl(func: &str, (name, t): (&str, &Tensor), dtype: DType, copy: bool) -> Result<Tensor> {
    let x = t.data(func, name)?;
    if x.dtype == dtype && !copy {
        return Ok(t.clone());
    }
    Ok(Tensor::from_dense(cpu::convert(x, dtype)))
}

impl Tensor {
    /// This tensor converted to `dtype` (`Tensor.to(dtype)`): floats truncate toward zero into
    /// integers (NaN and out-of-range values saturate), anything non-zero (NaN included) is
    /// `true`. With the dtype it already has and `copy` false, the very same tensor comes
    /// back; `non_blocking` has no effect on the CPU.
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
        to_impl("to", ("self", self), dtype, copy)
    }
}

crate::samples! {
    Tensor::TO => [sample([f32s(&[3]), Value::DType(DType::Int64)]), sample([i64s(&[3]), Value::DType(DType::Bool)]).kw("copy", true)],
}
