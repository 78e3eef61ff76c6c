//! Running programs on shapes alone (`torch._subclasses.fake_tensor`): [`FakeTensorMode`] is a
//! dispatch mode that turns every real tensor an operator receives into a fake one (a tensor on
//! the [meta device](crate::Device::META): shape, dtype and strides, no data), so the whole
//! program, forward and backward, runs without computing or allocating, and says how many bytes
//! its tensors would have needed at the peak.
//!
//! ```
//! use torchfn::dispatch::push_dispatch_mode;
//! use torchfn::fake_tensor::FakeTensorMode;
//!
//! let x = torchfn::ones([1024, 1024], None, None)?.requires_grad_(true)?; // 4 MiB, real
//! let fake = push_dispatch_mode(FakeTensorMode::new());
//! let y = x.matmul(&x)?.relu()?.sum()?;
//! y.backward()?;
//! assert_eq!(y.device()?, torchfn::Device::META);
//! assert_eq!(x.grad()?.unwrap().shape()?, [1024, 1024]);
//! assert!(fake.peak_bytes() >= 3 * 4 << 20); // x's fake, the product and its gradient
//! let err = y.item().unwrap_err();
//! assert!(err.to_string().starts_with("DataDependentOutputException: aten._local_scalar_dense.default"));
//! # Ok::<(), torchfn::Error>(())
//! ```
//!
//! Where torchfn differs from PyTorch: fake tensors report the meta device, not the device they
//! stand for (that needs wrapper subclasses); and real inputs are converted on entry whatever
//! `allow_non_fake_inputs` would say, since tensors torchfn makes from data (`tensor`,
//! `arange`) do not pass through the dispatch layer to be made fake, as PyTorch's
//! `lift_fresh` does.

use std::cell::RefCell;

use crate::backend::{Array, Device};
use crate::dispatch::{Operator, Tag, TorchDispatchMode};
use crate::error::{Error, Result};
use crate::protocol::Types;
use crate::tensor::{ById, Tensor};
use crate::value::{Kwargs, Value};

/// Runs every operator call on fake tensors (`FakeTensorMode`): real tensors it receives are
/// converted once each ([`from_tensor`](FakeTensorMode::from_tensor)), factories create fake
/// tensors, and operators whose output depends on values fail with PyTorch's
/// `DataDependentOutputException`.
pub struct FakeTensorMode {
    /// Each real tensor converted so far, and its fake.
    memo: RefCell<Vec<(ById, Tensor)>>,
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
        FakeTensorMode { memo: RefCell::new(Vec::new()) }
    }

    /// The fake tensor standing for `t` (`mode.from_tensor(t)`): the same shape, dtype, strides
    /// and `requires_grad`, on the meta device; the same fake every time for the same `t`, and
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
            None => {
                let fake = Tensor::from_array(crate::meta::like(dense));
                if t.requires_grad()? && t.is_leaf()? { fake.requires_grad_(true)? } else { fake }
            }
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

/// Whether `value` holds nothing real: no tensor off the meta device, no other device.
fn is_fake(value: &Value) -> bool {
    match value {
        Value::Tensor(t) => t.device().is_ok_and(Device::is_meta),
        Value::Device(d) => d.is_meta(),
        Value::List(items) | Value::Tuple(items) => items.iter().all(is_fake),
        _ => true,
    }
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
        if args.iter().chain(kwargs.iter().map(|(_, v)| v)).all(is_fake) {
            // Nothing to convert: the call goes on as it came (and skips binding).
            return func.call(args, kwargs);
        }
        let args: Vec<Value> = args.iter().map(|v| self.faked(v)).collect::<Result<_>>()?;
        let mut faked = Kwargs::new();
        for (name, value) in kwargs.iter() {
            faked.insert(name, self.faked(value)?);
        }
        func.call(&args, &faked)
    }
}
