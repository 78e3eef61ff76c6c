//! A dispatch mode that checks every operator's output for NaN and fails the call that made
//! the first one, naming the operator and the module it ran in: PyTorch's anomaly detection,
//! below autograd, so it catches NaNs made in the backward pass as well as the forward (and a
//! [`ModuleTracker`] charges backward operators to their modules as it does forward ones).
//!
//! Run it with `cargo run --example nan_check`.

use torchfn::dispatch::{Operator, TorchDispatchMode, no_dispatch, push_dispatch_mode};
use torchfn::nn::{Forward, Layer, Module};
use torchfn::prelude::*;
use torchfn::utils::module_tracker::ModuleTracker;

/// Fails the first operator call whose floating-point output holds a NaN.
#[derive(Default)]
pub struct NanCheck {
    modules: ModuleTracker,
}

impl NanCheck {
    /// Where the program is: the innermost module it is in, forward or backward.
    fn place(&self) -> String {
        let module = self.modules.parents().into_iter().max_by_key(|m| (m != "Global", m.matches('.').count()));
        let pass = if self.modules.is_bw() { "backward" } else { "forward" };
        format!("in {} ({pass})", module.unwrap_or_default())
    }
}

/// Whether `value` holds a float tensor with a NaN in it.
fn has_nan(value: &Value) -> Result<bool> {
    match value {
        Value::Tensor(t) if t.dtype()?.is_floating_point() => {
            // The check's own operators go straight to the backend.
            let _quiet = no_dispatch();
            Ok(t.isnan()?.sum()?.item()?.to_f64() != 0.0)
        }
        Value::Tuple(items) | Value::List(items) => {
            for item in items {
                if has_nan(item)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        _ => Ok(false),
    }
}

impl TorchDispatchMode for NanCheck {
    fn torch_dispatch(&self, func: &'static Operator, _: &Types, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        let result = func.call(args, kwargs)?;
        if has_nan(&result)? {
            let inputs = args.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ");
            let place = self.place();
            return Err(Error::runtime_error(format!("{func} returned NaN {place}; its inputs were: {inputs}")));
        }
        Ok(result)
    }
}

/// `sqrt` as a module.
#[derive(Module)]
pub struct Sqrt;

impl Forward for Sqrt {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.sqrt()
    }
}

/// A model whose forward is finite and whose backward makes a NaN (the gradient of `sqrt` at 0
/// is infinite, times 0).
#[derive(Module)]
pub struct Net {
    root: Sqrt,
}

impl Forward for Net {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        (&self.root.call(x)? * 0.0)?.sum()
    }
}

/// Runs [`Net`] forward and backward under the check; returns what the check reports.
pub fn run() -> Result<String> {
    let x = torchfn::tensor([0.0f32, 4.0])?.requires_grad_(true)?;
    let _check = push_dispatch_mode(NanCheck::default());
    let y = Net { root: Sqrt }.call(&x)?;
    let forward = format!("forward: {y}");
    let backward = match y.backward() {
        Ok(()) => "backward: no NaN".to_string(),
        Err(e) => format!("backward: {e}"),
    };
    Ok(format!("{forward}\n{backward}\n"))
}

fn main() -> Result<()> {
    print!("{}", run()?);
    Ok(())
}
