//! `ScalarTensor` from PyTorch's "Extending torch" note: a duck type (not a tensor) that stores
//! an N x N diagonal matrix as two numbers and implements `mean` and `add` through the
//! override protocol, each declared with `#[implements]` into a table of handled functions.
//!
//! The note gives the hook in two versions, both here. The first answers only what the table
//! handles, so `torchfn::mul(&s, &s)` fails with a `TypeError`; the second converts every
//! scalar tensor to a dense one and calls the original function for everything else, so the
//! same call returns a dense tensor. An instance made with [`ScalarTensor::converting`] follows
//! the second.
//!
//! Run it with `cargo run --example scalar_tensor`.

use std::fmt::{self, Write};

use torchfn::overrides::HandledFunctions;
use torchfn::prelude::*;

/// `value` times the `n x n` identity, stored as two numbers.
#[derive(Clone, DuckTensor)]
pub struct ScalarTensor {
    n: usize,
    value: f64,
    /// Whether this instance follows the note's second hook (convert and call the original
    /// function for what the table does not handle).
    converting: bool,
}

impl ScalarTensor {
    /// A new scalar tensor, as a `Tensor` handle that every torchfn function accepts.
    pub fn tensor_like(n: usize, value: f64) -> Tensor {
        Tensor::from_duck(ScalarTensor { n, value, converting: false })
    }

    /// A scalar tensor that follows the note's second hook.
    pub fn converting(n: usize, value: f64) -> Tensor {
        Tensor::from_duck(ScalarTensor { n, value, converting: true })
    }

    /// The dense tensor it stands for.
    pub fn tensor(&self) -> Result<Tensor> {
        &torchfn::eye(self.n, None, DType::Float32, None)? * self.value
    }
}

impl fmt::Debug for ScalarTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ScalarTensor(N={}, value={})", self.n, self.value)
    }
}

/// The functions `ScalarTensor` implements (`HANDLED_FUNCTIONS` in the note), filled by the
/// `#[implements]` functions below.
static HANDLED_FUNCTIONS: HandledFunctions = HandledFunctions::new();

impl TorchFunction for ScalarTensor {
    fn torch_function(
        _cls: &'static Class,
        func: &'static Func,
        types: &Types,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> Outcome {
        let compatible = types.iter().all(|t| t.is_subclass_of(Tensor::class()) || *t == ScalarTensor::class());
        if HANDLED_FUNCTIONS.contains(func) && compatible {
            return HANDLED_FUNCTIONS.call(func, args, kwargs);
        }
        // The note's second hook: every scalar tensor becomes dense, then the original runs.
        if args.iter().any(|a| a.duck::<ScalarTensor>().is_some_and(|s| s.converting)) {
            let dense: Vec<Value> = args.iter().map(|a| ensure_tensor(a).map(Value::from)).collect::<Result<_>>()?;
            return func.call(&dense, kwargs);
        }
        Ok(Value::NotImplemented)
    }
}

/// `torch.mean` for a scalar tensor: `value / N` (the zeros count too).
#[implements(torchfn::MEAN, table = HANDLED_FUNCTIONS)]
fn mean(input: &Tensor) -> Result<f64> {
    let s = input.duck::<ScalarTensor>().ok_or_else(|| Error::type_error("mean(): expected a ScalarTensor"))?;
    Ok(s.value / s.n as f64)
}

/// `torch.add`: stays a `ScalarTensor` when both are, falls back to dense tensors otherwise.
/// It takes no `alpha`, so `alpha=2` is refused as Python refuses an unexpected keyword.
#[implements(torchfn::ADD, table = HANDLED_FUNCTIONS)]
fn add(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    match (input.duck::<ScalarTensor>(), other.duck::<ScalarTensor>()) {
        (Some(a), Some(b)) if a.n == b.n => {
            Ok(Tensor::from_duck(ScalarTensor { value: a.value + b.value, ..a.clone() }))
        }
        (Some(_), Some(_)) => Err(Error::value_error("Shape mismatch!")),
        _ => torchfn::add(&ensure_tensor(&input.into())?, &ensure_tensor(&other.into())?, 1),
    }
}

/// The dense tensor of a scalar tensor; anything else as it is.
fn ensure_tensor(value: &Value) -> Result<Tensor> {
    match value.duck::<ScalarTensor>() {
        Some(s) => s.tensor(),
        None => value.to::<Tensor>(),
    }
}

/// Runs `call` and writes it and its result (or its error) as the note's session shows them.
fn session(out: &mut String, call: &str, result: Result<impl fmt::Display>) {
    match result {
        Ok(value) => writeln!(out, ">>> {call}\n{value}"),
        Err(err) => writeln!(out, ">>> {call}\n{err:?}"),
    }
    .ok();
}

/// The note's session, as text.
pub fn run() -> Result<String> {
    let mut out = String::new();
    let d = ScalarTensor::tensor_like(5, 2.0);
    session(&mut out, "d", Ok(&d));
    session(
        &mut out,
        "d.tensor()",
        d.duck::<ScalarTensor>().map_or(Err(Error::type_error("not a ScalarTensor")), ScalarTensor::tensor),
    );
    session(&mut out, "torchfn::mean(&d)", torchfn::mean(&d).and_then(|m| m.item()));

    let s = ScalarTensor::tensor_like(2, 2.0);
    session(&mut out, "torchfn::add(&s, &s, 1)", torchfn::add(&s, &s, 1));
    let t = torchfn::tensor([[1i64, 1], [1, 1]])?;
    session(&mut out, "torchfn::add(&s, &t, 1)", torchfn::add(&s, &t, 1));
    // The implementation of add takes no alpha: binding refuses it as Python does.
    session(&mut out, "torchfn::add(&s, &s, 2)", torchfn::add(&s, &s, 2));
    // The first hook: ScalarTensor has no mul, every hook declines, and the call fails.
    session(&mut out, "torchfn::mul(&s, &s)", torchfn::mul(&s, &s));
    // The second hook: converted to dense tensors, the original mul runs.
    let c = ScalarTensor::converting(2, 2.0);
    session(&mut out, "torchfn::mul(&c, &c)", torchfn::mul(&c, &c));
    Ok(out)
}

fn main() -> Result<()> {
    print!("{}", run()?);
    Ok(())
}
