use torchfn::prelude::*;

#[dispatcher]
fn add_dispatcher(input: &Tensor, other: &Tensor, alpha: f64) -> impl Relevant {
    [input, other]
}

#[torch_function(dispatcher = add_dispatcher)]
fn my_add(input: &Tensor, other: &Tensor, #[default(1.0)] alpha: f64) -> Result<Tensor> {
    &(other * alpha)? + input
}

#[dispatcher]
fn scale_dispatcher(input: &Tensor, #[default(None)] factor: f64) -> impl Relevant {
    [input]
}

#[torch_function(dispatcher = scale_dispatcher)]
fn scale(input: &Tensor, factor: f64) -> Result<Tensor> {
    input * factor
}

fn main() {
    let _ = (my_add, scale);
}
