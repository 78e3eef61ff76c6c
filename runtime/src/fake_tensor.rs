//! Running programs on shapes alone (`torch._subclasses.fake_tensor`): [`FakeTensorMode`] is a
//! dispatch mode under which every tensor is fake (a tensor on the [meta device](crate::Device::META)
//! that reports the device it stands for: shape, dtype, strides, device and no data), so the
//! whole program, forward and backward, runs without computing or allocating, and says how many
//! bytes its tensors would have needed at the peak.
//!
//! ```
//! use torchfn::Device;
//! use torchfn::dispatch::push_dispatch_mode;
//! use torchfn::fake_tensor::FakeTensorMode;
//!
//! let real = torchfn::ones([1024, 1024], None, None)?; // 4 MiB, real
//! let fake = push_dispatch_mode(FakeTensorMode::new());
//! let x = fake.from_tensor(&real)?.requires_grad_(true)?;
//! let b = torchfn::tensor([1.0f32; 1024])?; // made under the mode: fake from the start
//! let y = (&x.matmul(&x)? + &b)?.relu()?.sum()?;
//! y.backward()?;
//! assert_eq!((y.device()?, y.to_string()), (Device::CPU, "FakeTensor(..., size=())".to_string()));
//! assert_eq!(x.grad()?.unwrap().shape()?, [1024, 1024]);
//! assert!(fake.peak_bytes() >= 3 * 4 << 20); // x's fake, the product and its gradient
//! let err = y.item().unwrap_err();
//! assert!(err.to_string().starts_with("DataDependentOutputException: aten._local_scalar_dense.default"));
//! // A real tensor met as an argument is refused, as PyTorch refuses it.
//! let err = (&real * 2.0).unwrap_err();
//! assert!(err.to_string().starts_with("Please convert all Tensors to FakeTensors first"));
//! # Ok::<(), torchfn::Error>(())
//! ```

use std::cell::RefCell;

use crate::backend::{Array, Device};
use crate::dispatch::{Operator, Tag, TorchDispatchMode, aten, tensors_in};
use crate::error::{Error, Result};
use crate::protocol::Types;
use crate::tensor::{ById, Tensor};
use crate::value::{Kwargs, Value};

/// Runs every operator call on fake tensors (`FakeTensorMode`): tensors made from data while it
/// is active are fake from the start (`lift_fresh`), [`from_tensor`](FakeTensorMode::from_tensor)
/// converts real ones, factories create fake tensors, and operators whose output depends on
/// values fail with PyTorch's `DataDependentOutputException` or
/// `DynamicOutputShapeException`. A fake tensor reports the device it stands for, and results
/// stand for their inputs' device. As PyTorch's, it refuses real tensors met as arguments
/// unless made with [`allow_non_fake_inputs`](FakeTensorMode::allow_non_fake_inputs)
/// (zero-dimensional CPU tensors, numbers wrapped as tensors, are always taken).
pub struct FakeTensorMode {
    /// Each real tensor converted so far, and its fake.
    memo: RefCell<Vec<(ById, Tensor)>>,
    /// Convert real tensors met as arguments instead of refusing them.
    allow_non_fake_inputs: bool,
}

impl Default for FakeTensorMode {
    fn default() -> Self {
        FakeTensorMode::new()
    }
}

impl FakeTensorMode {
    /// A mode with nothing converted yet; its peak of bytes starts from the fake tensors alive
    /// on this thread now.
    pub fn new() -> FakeTensorMode {
        crate::meta::reset_peak_bytes();
        FakeTensorMode { memo: RefCell::new(Vec::new()), allow_non_fake_inputs: false }
    }

    /// The mode converting real tensors met as arguments, as they come
    /// (`FakeTensorMode(allow_non_fake_inputs=True)`).
    pub fn allow_non_fake_inputs(mut self, allow: bool) -> FakeTensorMode {
        self.allow_non_fake_inputs = allow;
        self
    }

    /// The fake tensor standing for `t` (`mode.from_tensor(t)`): the same shape, dtype, strides,
    /// device and `requires_grad`, with no data; the same fake every time for the same `t`, and
    /// a view's fake is the same view of its base's fake. A fake tensor is its own fake.
    pub fn from_tensor(&self, t: &Tensor) -> Result<Tensor> {
        let dense = t.data("FakeTensorMode.from_tensor", "tensor")?;
        if dense.device().is_meta() {
            return Ok(t.clone());
        }
        let key = ById::new(t);
        if let Some((_, fake)) = self.memo.borrow().iter().find(|(k, _)| *k == key) {
            return Ok(fake.clone());
        }
        let fake = match dense.base.as_ref() {
            Some(base) => {
                let fake_base = self.from_tensor(base)?;
                let base_data = fake_base.data("FakeTensorMode.from_tensor", "tensor")?;
                fake_base.view_of(base_data, base_data.with_layout(dense.layout.clone()))
            }
            None => fresh_fake(t)?,
        };
        self.memo.borrow_mut().push((key, fake.clone()));
        Ok(fake)
    }

    /// The most bytes the fake tensors alive on this thread would have held at once since the
    /// mode was made: what the program would need on a real device.
    pub fn peak_bytes(&self) -> usize {
        crate::meta::peak_bytes()
    }

    /// `value` with its real tensors turned fake.
    fn faked(&self, value: &Value) -> Result<Value> {
        crate::meta::faked(value, &|t| self.from_tensor(t))
    }
}

/// A fake standing for the real tensor `t` (not a view): its layout, dtype and device, and
/// `requires_grad` for a leaf that requires it.
fn fresh_fake(t: &Tensor) -> Result<Tensor> {
    let dense = t.data("FakeTensorMode.from_tensor", "tensor")?;
    let array = crate::meta::like(dense);
    crate::meta::set_stands_for(&array, crate::dispatch::reported_device(dense));
    let fake = Tensor::from_array(array);
    if t.requires_grad()? && t.is_leaf()? { fake.requires_grad_(true) } else { Ok(fake) }
}

/// Whether `value` holds nothing real: no tensor off the meta device, no other device.
fn is_fake(value: &Value) -> bool {
    match value {
        Value::Tensor(t) => t.dense().is_some_and(|d| d.device().is_meta()),
        Value::Device(d) => d.is_meta(),
        Value::List(items) | Value::Tuple(items) => items.iter().all(is_fake),
        _ => true,
    }
}

/// The real tensors of `value`, but for zero-dimensional CPU tensors: numbers wrapped as
/// tensors, and the constants operations make (PyTorch's scalars).
fn real_tensors(value: &Value) -> Vec<&Tensor> {
    let scalar = |d: &crate::tensor::Dense| d.device().is_cpu() && d.layout.shape.is_empty();
    tensors_in(value).filter(|t| t.dense().is_some_and(|d| !d.device().is_meta() && !scalar(d))).collect()
}

/// The device a call's results stand for: its `device` argument, else the one its tensors stand
/// for (zero-dimensional CPU tensors and plain meta tensors join any, but meta tensors with
/// nothing but such scalars stay meta); `None` when nothing stands for a device.
fn result_device(func: &Operator, args: &[Value], kwargs: &Kwargs) -> Result<Option<Device>> {
    if let Some(Value::Device(d)) = kwargs.get("device") {
        return Ok(Some(*d).filter(|d| !d.is_meta()));
    }
    let (mut meta, mut only_scalars) = (false, true);
    let devices = args.iter().chain(kwargs.iter().map(|(_, v)| v)).flat_map(tensors_in).filter_map(|t| {
        let dense = t.dense()?;
        let device = crate::dispatch::reported_device(dense);
        let scalar = device.is_cpu() && dense.layout.shape.is_empty();
        meta |= device.is_meta();
        only_scalars &= scalar || device.is_meta();
        (!device.is_meta()).then_some((device, scalar, ""))
    });
    let device = crate::ops::device::common_device(devices, |(d, _), (device, _)| {
        Error::runtime_error(format!(
            "Unhandled FakeTensor Device Propagation for {func}, found two different devices {d}, {device}"
        ))
    })?;
    Ok(device.filter(|_| !(meta && only_scalars)))
}

/// Whether an operation must skip a check of `x`'s values (an index range, a division by zero):
/// `x` is on meta, or a fake tensor mode would make the check's own operators fake. PyTorch's
/// meta kernels check nothing either.
pub(crate) fn values_unknown(x: &Array) -> bool {
    x.device().is_meta() || active()
}

/// Whether a fake tensor mode is on this thread's dispatch mode stack: operations then let
/// real tensors meet fake ones (the mode converts them below).
pub(crate) fn active() -> bool {
    crate::dispatch::intercepting()
        && crate::dispatch::dispatch_mode_stack().iter().any(|m| m.downcast_ref::<FakeTensorMode>().is_some())
}

impl TorchDispatchMode for FakeTensorMode {
    fn torch_dispatch(&self, func: &'static Operator, _: &Types, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        if func.has_tag(Tag::DataDependent) {
            return Err(Error::runtime_error(format!(
                "DataDependentOutputException: {func}: its output depends on tensor values, which fake tensors do \
                 not have"
            )));
        }
        if func.has_tag(Tag::DynamicOutputShape) {
            return Err(Error::runtime_error(format!(
                "DynamicOutputShapeException: {func}: the shape of its output depends on tensor values, which fake \
                 tensors do not have"
            )));
        }
        if func == &aten::LIFT_FRESH
            && let Some(t) = args.first().and_then(Value::as_tensor)
        {
            // A tensor made from data while the mode is active: fake from the start (and not
            // remembered: nothing else holds the real one, which is dropped now).
            return Ok(Value::Tensor(if t.device()?.is_meta() { t.clone() } else { fresh_fake(t)? }));
        }
        let all = || args.iter().chain(kwargs.iter().map(|(_, v)| v));
        if !self.allow_non_fake_inputs && all().any(|v| !real_tensors(v).is_empty()) {
            let shown: Vec<String> = args.iter().map(|v| v.to_string()).collect();
            return Err(Error::runtime_error(format!(
                "Please convert all Tensors to FakeTensors first or instantiate FakeTensorMode with \
                 'allow_non_fake_inputs'. Found in {func}({})",
                shown.join(", ")
            )));
        }
        let device = result_device(func, args, kwargs)?;
        let out = if all().all(is_fake) {
            // Nothing to convert: the call goes on as it came (and skips binding).
            func.call(args, kwargs)?
        } else {
            let args: Vec<Value> = args.iter().map(|v| self.faked(v)).collect::<Result<_>>()?;
            let mut faked = Kwargs::new();
            for (name, value) in kwargs.iter() {
                faked.insert(name, self.faked(value)?);
            }
            func.call(&args, &faked)?
        };
        if let Some(device) = device {
            for t in tensors_in(&out) {
                if let Some(dense) = t.dense() {
                    crate::meta::set_stands_for(dense, device);
                }
            }
        }
        Ok(out)
    }
}
