//! Moving arrays between host memory and devices: what the tensor's readers (printing,
//! `to_vec`, `.npy`, ndarray views), the kernels' scalar operands and device transfers share.

use std::borrow::Cow;

use super::{Array, Buffer, Device};
use crate::cpu;
use crate::error::{Result, bail};
use crate::types::{DType, Scalar, with_dtype};

/// An error unless `device` holds `dtype`: float64 and int64 on most GPUs.
pub fn check_dtype(func: &str, device: Device, dtype: DType) -> Result<()> {
    if !device.supports(dtype) {
        bail!(
            Runtime,
            "{func}(): {dtype} is not supported on {device} ({}): use {} instead, or compute on the CPU",
            device.describe(),
            if dtype.is_floating_point() { DType::Float32 } else { DType::Int32 }
        );
    }
    Ok(())
}

/// `array` in host memory: itself on the CPU, else a contiguous copy downloaded from its device.
pub fn on_host(array: &Array) -> Result<Cow<'_, Array>> {
    if array.device().is_cpu() {
        return Ok(Cow::Borrowed(array));
    }
    let data = array.device().backend().download(array)?;
    Ok(Cow::Owned(Device::CPU.backend().upload(Device::CPU, data, array.layout.shape.clone())?))
}

/// The value of a one-element array, read on the host.
pub fn scalar_of(array: &Array) -> Result<Scalar> {
    cpu::read_scalar(&*on_host(array)?)
}

/// `x` copied to `device` as `dtype`, through host memory. Moving to a device that cannot hold
/// `dtype` (float64 to most GPUs) is an error that says so: nothing is narrowed silently.
pub fn transfer(func: &str, x: &Array, device: Device, dtype: DType) -> Result<Array> {
    check_dtype(func, device, dtype)?;
    let data = if dtype == x.dtype {
        x.device().backend().download(x)?
    } else {
        let host = on_host(x)?;
        with_dtype!(dtype, T => Buffer::from_vec(cpu::elements::<T>(func, &host)?))
    };
    device.backend().upload(device, data, x.layout.shape.clone())
}
