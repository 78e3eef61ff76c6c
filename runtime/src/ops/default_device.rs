//! The default device of constructors (`torch.set_default_device`), built as PyTorch builds it:
//! a mode that fills in `device=` for every constructor called without one.

use std::cell::RefCell;

use crate::backend::Device;
use crate::protocol::{Func, ModeGuard, Outcome, TorchFunctionMode, Types, mode_stack, push_mode};
use crate::value::{Kwargs, Value};

/// The mode behind [`set_default_device`] and [`default_device`]
/// (`torch.utils._device.DeviceContext`): every constructor (the functions listed as ignored
/// because they take no tensor, `zeros`, `tensor`, `arange`, `rand`, ...) called without a
/// device gets this one; every other call passes through unchanged.
///
/// It passes the device as the keyword `device=`, dropping trailing `None` positional
/// arguments first: a typed call gives every parameter positionally, and the trailing ones of
/// torchfn's constructors (`dtype`, `device`, `generator`, `m`) all default to `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceContext {
    device: Device,
}

impl DeviceContext {
    /// A mode making constructors' tensors on `device`.
    pub fn new(device: Device) -> Self {
        DeviceContext { device }
    }

    /// The device it fills in.
    pub fn device(&self) -> Device {
        self.device
    }
}

impl TorchFunctionMode for DeviceContext {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        // Only constructors are looked at; every other call passes straight through.
        let constructor_without_device = func.ignored().is_some()
            && !args.iter().chain(kwargs.iter().map(|(_, v)| v)).any(|v| matches!(v, Value::Device(_)))
            && func.signatures().iter().any(|s| s.params().iter().any(|p| p.name() == "device"));
        if !constructor_without_device {
            return func.call(args, kwargs);
        }
        let kept = args.len() - args.iter().rev().take_while(|a| a.is_none()).count();
        let mut kwargs = kwargs.clone();
        kwargs.insert("device", self.device);
        func.call(&args[..kept], &kwargs)
    }
}

thread_local! {
    /// The mode `set_default_device` pushed on this thread, if any.
    static DEFAULT: RefCell<Option<ModeGuard<DeviceContext>>> = const { RefCell::new(None) };
}

/// Makes constructors called without a device on this thread make their tensors on `device`
/// (`torch.set_default_device`), or stops doing so with `None`. As PyTorch's, it is a mode
/// ([`DeviceContext`]) pushed on this thread's mode stack, replacing the one an earlier call
/// pushed, so other modes see constructors before or after it depending on the order they were
/// pushed in, and every call on this thread leaves the fast path while it is set.
/// [`default_device`] sets a device for a scope.
///
/// ```
/// use torchfn::Device;
/// torchfn::set_default_device(Device::CPU);
/// assert_eq!(torchfn::get_default_device(), Device::CPU);
/// assert_eq!(torchfn::zeros([2], None, None)?.device()?, Device::CPU);
/// torchfn::set_default_device(None);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn set_default_device(device: impl Into<Option<Device>>) {
    let device = device.into();
    DEFAULT.with(|slot| {
        // The old mode leaves the stack before the new one is pushed.
        slot.borrow_mut().take();
        *slot.borrow_mut() = device.map(|d| push_mode(DeviceContext::new(d)));
    });
}

/// Makes constructors called without a device make their tensors on `device` until the returned
/// guard is dropped (Python's `with torch.device(...):`).
///
/// ```
/// use torchfn::Device;
/// {
///     let _cpu = torchfn::default_device(Device::CPU);
///     assert_eq!(torchfn::get_default_device(), Device::CPU);
/// }
/// ```
pub fn default_device(device: Device) -> ModeGuard<DeviceContext> {
    push_mode(DeviceContext::new(device))
}

/// The device constructors use on this thread when given none (`torch.get_default_device`): the
/// topmost [`DeviceContext`] on the mode stack, else the CPU.
pub fn get_default_device() -> Device {
    mode_stack()
        .iter()
        .rev()
        .find_map(|m| m.downcast_ref::<DeviceContext>().map(DeviceContext::device))
        .unwrap_or(Device::CPU)
}
