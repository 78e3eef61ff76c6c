//! Where an operation runs: the device its tensors share, and the checks that they do.

use crate::backend::Device;
use crate::error::Result;
use crate::tensor::Dense;

/// True for a tensor that may join an operation on any device: a one-element CPU tensor
/// without dimensions (a Python number, a zero-dimensional tensor), as PyTorch lets CPU
/// scalars join CUDA operations.
fn joins_any(x: &Dense) -> bool {
    x.layout.ndim() == 0 && x.device().is_cpu()
}

/// The device an operation on `operands` (name, data) runs on: the one they are all on. A
/// zero-dimensional CPU tensor joins any device. Two devices are an error naming both.
#[inline]
pub(crate) fn device_of(func: &str, operands: &[(&str, &Dense)]) -> Result<Device> {
    let first = operands.first().map_or(Device::CPU, |(_, x)| x.device());
    if operands.iter().all(|(_, x)| x.device() == first) {
        return Ok(first);
    }
    mixed_devices(func, operands)
}

/// [`device_of`] for operands on more than one device.
#[cold]
fn mixed_devices(func: &str, operands: &[(&str, &Dense)]) -> Result<Device> {
    // A wrapper subclass's hook gets the call, whatever the other devices.
    if let Some((_, w)) = operands.iter().find(|(_, x)| crate::dispatch::is_wrapper_device(x.device())) {
        return Ok(w.device());
    }
    // Under a fake tensor mode, real tensors meet fake ones: the mode makes them fake.
    if operands.iter().any(|(_, x)| x.device().is_meta()) && crate::fake_tensor::active() {
        return Ok(Device::META);
    }
    let devices = operands.iter().map(|&(name, x)| (x.device(), joins_any(x), name));
    let common = common_device(devices, |(d, first), (device, name)| {
        crate::error::Error::runtime_error(format!(
            "{func}(): Expected all tensors to be on the same device, but found at least two devices, {d} \
             (argument '{first}') and {device} (argument '{name}')!"
        ))
    })?;
    Ok(common.unwrap_or(Device::CPU))
}

/// The device shared by `devices` (each a device, whether it joins any, as a zero-dimensional
/// CPU tensor does, and a name), `None` for none; two others are the error `conflict` makes of
/// the first seen and the one that differs.
pub(crate) fn common_device<'a>(
    devices: impl IntoIterator<Item = (Device, bool, &'a str)>,
    conflict: impl Fn((Device, &'a str), (Device, &'a str)) -> crate::error::Error,
) -> Result<Option<Device>> {
    // The device so far, the name that set it, and whether only devices joining any gave it.
    let mut found: Option<(Device, &str, bool)> = None;
    for (device, joins, name) in devices {
        found = match found {
            None => Some((device, name, joins)),
            Some((d, first, only_joining)) if d == device => Some((d, first, only_joining && joins)),
            Some((_, _, true)) => Some((device, name, joins)),
            Some(kept) if joins => Some(kept),
            Some((d, first, false)) => return Err(conflict((d, first), (device, name))),
        };
    }
    Ok(found.map(|(d, ..)| d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Shape;

    #[test]
    fn operations_on_the_cpu_run_on_the_cpu() {
        let x = Dense::from_vec(vec![1.0f32, 2.0], Shape::from([2]));
        let s = Dense::from_vec(vec![3.0f32], Shape::from([]));
        assert_eq!(device_of("add", &[("input", &x), ("other", &s)]).unwrap(), Device::CPU);
        assert_eq!(device_of("zeros", &[]).unwrap(), Device::CPU);
    }
}
