use torchfn::overrides::HandledFunctions;
use torchfn::prelude::*;

#[dispatcher]
fn scaled_dispatcher(input: &Tensor, #[default(None)] scale: f64) -> impl Relevant {
    input
}

// The dispatcher does not mark `scale` keyword-only.
#[torch_function(dispatcher = scaled_dispatcher)]
fn scaled(input: &Tensor, #[keyword_only] #[default(2.0)] scale: f64) -> Result<Tensor> {
    input * scale
}

// Python's bare `*` is written once, and never after `*args`.
#[torch_function]
fn twice(#[keyword_only] a: f64, #[keyword_only] b: f64) -> Result<f64> {
    Ok(a + b)
}

#[torch_function]
fn after_variadic(#[variadic] xs: &[Tensor], #[keyword_only] b: f64) -> Result<f64> {
    Ok(b + xs.len() as f64)
}

static HANDLED: HandledFunctions = HandledFunctions::new();

// An implementation is a free function, and names its table.
#[implements(torchfn::SUM)]
fn sum(input: &Tensor) -> Result<Tensor> {
    input.sum()
}

fn main() {
    let _ = (scaled, twice, after_variadic, &HANDLED);
}
