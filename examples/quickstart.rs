//! torchfn in one screen: annotate a function, override it with a subclass and with a duck,
//! watch the subclass survive a chain of operations, trace every call with a mode, and query
//! the registry.
//!
//! Run it with `cargo run --example quickstart`.

use std::cell::RefCell;
use std::fmt::{self, Write};

use torchfn::prelude::*;

// 1. An overridable function of our own. The dispatcher names the arguments that may carry
//    overrides; the macro checks at compile time that both signatures match.
#[dispatcher]
fn scale_dispatcher(input: &Tensor, #[default(None)] factor: f64) -> impl Relevant {
    [input]
}

/// `input * factor`.
#[torch_function(dispatcher = scale_dispatcher, module = "mylib")]
pub fn scale(input: &Tensor, #[default(2.0)] factor: f64) -> Result<Tensor> {
    input * factor
}

// 2. A subclass whose instances carry a unit. Its hook is the default one, which keeps the
//    subclass (and the unit) through every operation, `mylib.scale` included.
#[derive(TensorSubclass)]
pub struct Meters {
    /// The unit's label.
    pub label: &'static str,
}

// 3. A duck: not a tensor at all, yet accepted by every function; it answers `scale` itself.
#[derive(DuckTensor)]
pub struct Lazy {
    factor: f64,
}

impl fmt::Debug for Lazy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Lazy(x{})", self.factor)
    }
}

impl TorchFunction for Lazy {
    fn torch_function(_: &'static Class, func: &'static Func, _: &Types, args: &[Value], _: &Kwargs) -> Outcome {
        let (Some(lazy), true) = (args.first().and_then(|a| a.duck::<Lazy>()), func == SCALE) else {
            return Ok(Value::NotImplemented);
        };
        let factor = args.get(1).and_then(Value::as_f64).unwrap_or(2.0);
        Ok(Tensor::from_duck(Lazy { factor: lazy.factor * factor }).into())
    }
}

// 4. A mode sees every call in its scope, plain tensors included.
#[derive(Default)]
struct Tracer(RefCell<Vec<String>>);

impl TorchFunctionMode for Tracer {
    fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
        self.0.borrow_mut().push(func.qualified_name());
        func.call(args, kwargs)
    }
}

/// The whole story, as text.
pub fn run() -> Result<String> {
    let mut out = String::new();
    let d = torchfn::tensor([1.0f32, 2.0, 3.0])?.as_subclass(Meters { label: "m" })?;
    let e = scale(&(&d + &d)?, 10.0)?.get(1..)?.sum()?;
    let label = e.attrs::<Meters>().map_or("none", |m| m.label);
    writeln!(out, "subclass: scale(d + d, 10)[1:].sum() = {e}  (unit: {label})").ok();

    let lazy = scale(&Tensor::from_duck(Lazy { factor: 1.0 }), 3.0)?;
    writeln!(out, "duck:     scale(Lazy(x1), 3) = {lazy}").ok();
    match torchfn::sum(&lazy) {
        Ok(v) => writeln!(out, "duck:     sum(lazy) = {v}"),
        Err(e) => writeln!(out, "duck:     sum(lazy) fails: {e}"),
    }
    .ok();

    let tracer = push_mode(Tracer::default());
    let x = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]])?;
    let _ = (&x.matmul(&x)? - 1.0)?.mean()?;
    writeln!(out, "mode:     traced {}", tracer.0.borrow().join(", ")).ok();
    drop(tracer);

    let funcs = torchfn::overrides::get_overridable_functions();
    let total: usize = funcs.values().map(Vec::len).sum();
    let namespaces: Vec<_> = funcs.keys().copied().collect();
    writeln!(out, "registry: {total} overridable functions in {}", namespaces.join(", ")).ok();
    writeln!(out, "registry: {:?}", SCALE).ok();
    Ok(out)
}

fn main() -> Result<()> {
    print!("{}", run()?);
    Ok(())
}
