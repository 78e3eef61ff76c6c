//! `LoggingTensor` from PyTorch's notes and RFC-0001: a subclass whose hook logs every function,
//! method and operator through the `tracing` crate, then calls `super()` (the default hook),
//! which runs the operation and keeps the subclass.
//!
//! Run it with `cargo run --example logging_tensor`.

use std::fmt::Write;

use torchfn::prelude::*;

/// A tensor that logs every operation on it.
#[derive(TensorSubclass)]
#[torchfn(hook)]
pub struct LoggingTensor;

impl TorchFunction for LoggingTensor {
    fn torch_function(
        cls: &'static Class,
        func: &'static Func,
        types: &Types,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> Outcome {
        // Logging prints the arguments, which calls Tensor.__repr__, so __repr__ itself must
        // not be logged, or printing recurses (the note's `if func is not torch.Tensor.__repr__`).
        if func != Tensor::__REPR__ {
            let args_repr = Value::Tuple(args.to_vec()).to_string();
            tracing::info!("func: {func}, args: {args_repr}, kwargs: {kwargs}");
        }
        Tensor::torch_function(cls, func, types, args, kwargs)
    }
}

/// RFC-0001's session; the log goes to the `tracing` subscriber, the results are returned.
pub fn run() -> Result<String> {
    let mut out = String::new();
    let t = torchfn::tensor([1.0f32])?.as_subclass(LoggingTensor)?;
    writeln!(out, "t.sum() = {}", t.sum()?).ok();
    writeln!(out, "t.get(0) = {}", t.get(0)?).ok();
    writeln!(out, "torchfn::sum(&t) = {}", torchfn::sum(&t)?).ok();
    writeln!(out, "&t * 2.0 = {}", (&t * 2.0)?).ok();
    writeln!(out, "t.shape() = {}", t.shape()?).ok();
    // Printing a tensor goes through the protocol too: `{t:.1}` is Tensor.__format__.
    writeln!(out, "t = {t:.1}").ok();
    Ok(out)
}

fn main() -> Result<()> {
    tracing_subscriber::fmt().without_time().with_target(false).init();
    print!("{}", run()?);
    Ok(())
}
