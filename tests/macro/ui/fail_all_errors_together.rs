// Every mismatch of one item is reported at once, each at its parameter.
use torchfn::prelude::*;

#[dispatcher]
fn d(input: &Tensor, othr: &Tensor, alpha: f64, tensors: &[Tensor]) -> impl Relevant {
    [input, othr]
}

#[torch_function(dispatcher = d)]
fn f(input: &Tensor, other: &Tensor, #[default(1.0)] alpha: f64, #[variadic] tensors: &[Tensor]) -> Result<Tensor> {
    let _ = (other, alpha, tensors);
    Ok(input.clone())
}

fn main() {
    let _ = f;
}
