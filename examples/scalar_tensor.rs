//! `ScalarTensor` from PyTorch's "Extending torch" note: a duck type (not a tensor) that stores
//! an N x N diagonal matrix as two numbers and implements `mean` and `add` through the
//! override protocol, with a table of handled functions.
//!
//! Run it with `cargo run --example scalar_tensor`.

use std::collections::HashMap;
use std::fmt::{self, Write};
use std::sync::LazyLock;

use torchfn::prelude::*;

/// `value` times the `n x n` identity, stored as two numbers.
#[derive(Clone, DuckTensor)]
pub struct ScalarTensor {
    n: usize,
    value: f64,
}

impl ScalarTensor {
    /// A new scalar tensor, as a `Tensor` handle that every torchfn function accepts.
    pub fn tensor_like(n: usize, value: f64) -> Tensor {
        Tensor::from_duck(ScalarTensor { n, value })
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

/// An override for one function.
type Implementation = fn(&[Value], &Kwargs) -> Outcome;

/// The functions `ScalarTensor` implements, keyed by handle (`HANDLED_FUNCTIONS` in the note).
static HANDLED_FUNCTIONS: LazyLock<HashMap<&'static Func, Implementation>> =
    LazyLock::new(|| HashMap::from([(torchfn::MEAN, mean as Implementation), (torchfn::ADD, add as Implementation)]));

impl TorchFunction for ScalarTensor {
    fn torch_function(
        _cls: &'static Class,
        func: &'static Func,
        types: &Types,
        args: &[Value],
        kwargs: &Kwargs,
    ) -> Outcome {
        let compatible = types.iter().all(|t| t.is_subclass_of(Tensor::class()) || *t == ScalarTensor::class());
        match HANDLED_FUNCTIONS.get(func) {
            Some(implementation) if compatible => implementation(args, kwargs),
            _ => Ok(Value::NotImplemented),
        }
    }
}

/// `torch.mean` for a scalar tensor: `value / N` (the zeros count too).
fn mean(args: &[Value], _: &Kwargs) -> Outcome {
    let s = args[0].duck::<ScalarTensor>().ok_or_else(|| Error::type_error("mean(): expected a ScalarTensor"))?;
    Ok(Value::Float(s.value / s.n as f64))
}

/// `torch.add`: stays a `ScalarTensor` when both are, falls back to dense tensors otherwise.
fn add(args: &[Value], _: &Kwargs) -> Outcome {
    match (args[0].duck::<ScalarTensor>(), args[1].duck::<ScalarTensor>()) {
        (Some(a), Some(b)) if a.n == b.n => Ok(ScalarTensor::tensor_like(a.n, a.value + b.value).into()),
        (Some(_), Some(_)) => Err(Error::value_error("Shape mismatch!")),
        _ => Ok(torchfn::add(&ensure_tensor(&args[0])?, &ensure_tensor(&args[1])?, 1)?.into()),
    }
}

fn ensure_tensor(value: &Value) -> Result<Tensor> {
    match value.duck::<ScalarTensor>() {
        Some(s) => s.tensor(),
        None => value.to::<Tensor>(),
    }
}

/// The note's session, as text.
pub fn run() -> Result<String> {
    let mut out = String::new();
    let d = ScalarTensor::tensor_like(5, 2.0);
    let dense = d.duck::<ScalarTensor>().map(ScalarTensor::tensor).transpose()?;
    writeln!(out, ">>> d\n{d}").ok();
    writeln!(out, ">>> d.tensor()\n{}", dense.map(|t| t.to_string()).unwrap_or_default()).ok();
    writeln!(out, ">>> torchfn::mean(&d)\n{}", torchfn::mean(&d)?.item()?).ok();

    let s = ScalarTensor::tensor_like(2, 2.0);
    writeln!(out, ">>> torchfn::add(&s, &s, 1)\n{}", torchfn::add(&s, &s, 1)?).ok();
    let t = torchfn::tensor([[1i64, 1], [1, 1]])?;
    writeln!(out, ">>> torchfn::add(&s, &t, 1)\n{}", torchfn::add(&s, &t, 1)?).ok();
    // ScalarTensor has no `mul`: every hook declined, so the call fails with a TypeError.
    match torchfn::mul(&s, &3.into()) {
        Ok(product) => writeln!(out, ">>> torchfn::mul(&s, &3.into())\n{product}"),
        Err(err) => writeln!(out, ">>> torchfn::mul(&s, &3.into())\n{err:?}"),
    }
    .ok();
    Ok(out)
}

fn main() -> Result<()> {
    print!("{}", run()?);
    Ok(())
}
