// Items the macro cannot make overridable, each with its reason.
use torchfn::prelude::*;

#[torch_function]
async fn asynchronous(input: &Tensor) -> Result<Tensor> {
    Ok(input.clone())
}

#[torch_function]
fn generic<T: Into<f64>>(input: &Tensor, x: T) -> Result<Tensor> {
    input * x.into()
}

#[torch_function]
fn no_result(_input: &Tensor) {}

#[torch_function]
fn order(input: &Tensor, #[default(1.0)] alpha: f64, beta: f64) -> Result<Tensor> {
    input * (alpha + beta)
}

#[torch_function(dispatch = d)]
fn unknown_option(input: &Tensor) -> Result<Tensor> {
    Ok(input.clone())
}

fn main() {}
