//! The meta device's tensor-level helpers (the meta backend itself is a kernel crate's
//! backend, [`torchfn_kernels::meta`]): a call's arguments moved to meta.

pub(crate) use torchfn_kernels::meta::*;

use crate::backend::Device;
use crate::error::Result;
use crate::tensor::Tensor;
use crate::value::Value;

/// `value` with each tensor replaced by what `fake` makes of it, and each device by the meta
/// device: a call's arguments moved to meta.
pub(crate) fn faked(value: &Value, fake: &dyn Fn(&Tensor) -> Result<Tensor>) -> Result<Value> {
    value.map(fake, &|_| Device::META)
}

/// A meta tensor of `t`'s layout and dtype (a call's argument, for working out its results'
/// shapes).
pub(crate) fn like_tensor(t: &Tensor) -> Result<Tensor> {
    Ok(Tensor::from_array(like(t.data("meta", "tensor")?)))
}
