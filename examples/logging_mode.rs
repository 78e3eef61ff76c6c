//! Logging below autograd, as PyTorch's `torch.testing._internal.logging_tensor`: a dispatch
//! mode (`LoggingTensorMode`) that sees every operator the program runs, and a wrapper subclass
//! (`LoggingTensor`) that sees every operator its instances take part in; both see the
//! backward pass's operators too, and print each in PyTorch's format,
//! `$2: f32[2] = aten.mul.Tensor($0, $1, dtype=torch.float32)`, numbering tensors as they
//! meet them.
//!
//! Run it with `cargo run --example logging_mode`.

use std::cell::RefCell;
use std::fmt::Write;

use torchfn::dispatch::{Operator, TorchDispatchMode, WrapperSubclass, WrapperTensor, push_dispatch_mode};
use torchfn::prelude::*;
use torchfn::{ById, DType};

/// Names tensors as it meets them and logs operator calls.
#[derive(Default)]
pub struct Logger {
    /// The tensors met so far, by identity: `$n` is the n-th.
    names: RefCell<Vec<ById>>,
    /// One line per operator call.
    pub log: RefCell<Vec<String>>,
}

/// Logs every operator call below autograd.
#[derive(Default)]
pub struct LoggingMode(pub Logger);

/// PyTorch's abbreviations of dtypes in logs.
fn abbreviation(dtype: DType) -> &'static str {
    match dtype {
        DType::Float32 => "f32",
        DType::Float64 => "f64",
        DType::Int64 => "i64",
        DType::Int32 => "i32",
        DType::Bool => "b8",
        DType::UInt8 => "u8",
        DType::Int8 => "i8",
        DType::Int16 => "i16",
        DType::Float16 => "f16",
        DType::BFloat16 => "bf16",
    }
}

impl Logger {
    /// `$n` for `t`, naming it on first sight.
    fn name(&self, t: &Tensor) -> String {
        let key = ById::new(t);
        let mut names = self.names.borrow_mut();
        let n = names.iter().position(|k| *k == key).unwrap_or_else(|| {
            names.push(key);
            names.len() - 1
        });
        format!("${n}")
    }

    /// An argument: tensors by name, lists item by item, anything else as Python prints it.
    fn argument(&self, value: &Value) -> String {
        match value {
            Value::Tensor(t) => self.name(t),
            Value::List(items) => format!("[{}]", self.arguments(items)),
            other => other.to_string(),
        }
    }

    fn arguments(&self, items: &[Value]) -> String {
        items.iter().map(|v| self.argument(v)).collect::<Vec<_>>().join(", ")
    }

    /// A result: `$n: f32[2, 3]`, or a tuple of them.
    fn result(&self, value: &Value) -> String {
        match value {
            Value::Tensor(t) => {
                let shape = t.shape().map(|s| s.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", "));
                let dtype = t.dtype().map_or("?", abbreviation);
                format!("{}: {dtype}[{}]", self.name(t), shape.unwrap_or_default())
            }
            Value::Tuple(items) => {
                format!("({})", items.iter().map(|v| self.result(v)).collect::<Vec<_>>().join(", "))
            }
            other => other.to_string(),
        }
    }
}

impl Logger {
    /// Runs the call `func(args, kwargs)` through `run` and logs it with its result.
    fn logged(
        &self,
        func: &'static Operator,
        args: &[Value],
        kwargs: &Kwargs,
        run: impl FnOnce() -> Result<Value>,
    ) -> Result<Value> {
        // Name the inputs before the result, so that numbers follow the order of the program.
        let mut call = self.arguments(args);
        for (name, value) in kwargs.iter() {
            write!(call, "{}{name}={}", if call.is_empty() { "" } else { ", " }, self.argument(value)).ok();
        }
        let result = run()?;
        self.log.borrow_mut().push(format!("{} = {func}({call})", self.result(&result)));
        Ok(result)
    }
}

impl TorchDispatchMode for LoggingMode {
    fn torch_dispatch(&self, func: &'static Operator, _: &Types, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        self.0.logged(func, args, kwargs, || func.call(args, kwargs))
    }
}

thread_local! {
    /// What `LoggingTensor`s log into on this thread.
    pub static TENSOR_LOG: Logger = Logger::default();
}

/// A tensor that logs every operator it takes part in (a wrapper around its values).
#[derive(WrapperTensor)]
pub struct LoggingTensor(pub Tensor);

impl WrapperSubclass for LoggingTensor {
    fn torch_dispatch(func: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        TENSOR_LOG.with(|log| log.logged(func, args, kwargs, || Self::dispatch_inner(func, args, kwargs)))
    }
}

/// A small program, forward and backward, under the mode; returns the log.
pub fn run() -> Result<String> {
    let x = torchfn::tensor([1.0f32, 2.0])?.requires_grad_(true)?;
    let y = torchfn::tensor([3.0f32, 4.0])?;
    let mode = push_dispatch_mode(LoggingMode::default());
    mode.0.name(&x);
    mode.0.name(&y);
    let loss = (&x * &y)?.sum()?;
    loss.backward()?;
    let log = mode.0.log.borrow().join("\n");
    Ok(log + "\n")
}

/// The same program on logging tensors; returns their log.
pub fn run_tensor() -> Result<String> {
    let x = LoggingTensor(torchfn::tensor([1.0f32, 2.0])?).wrap()?.requires_grad_(true)?;
    let y = LoggingTensor(torchfn::tensor([3.0f32, 4.0])?).wrap()?;
    TENSOR_LOG.with(|log| {
        log.name(&x);
        log.name(&y);
    });
    let loss = (&x * &y)?.sum()?;
    loss.backward()?;
    Ok(TENSOR_LOG.with(|log| log.log.borrow().join("\n")) + "\n")
}

fn main() -> Result<()> {
    println!("LoggingTensorMode:");
    print!("{}", run()?);
    println!("\nLoggingTensor:");
    print!("{}", run_tensor()?);
    Ok(())
}
