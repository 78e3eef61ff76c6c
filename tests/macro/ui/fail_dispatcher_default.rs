use torchfn::prelude::*;

#[dispatcher]
fn add_dispatcher(input: &Tensor, other: &Tensor, #[default(1.0)] alpha: f64) -> impl Relevant {
    [input, other]
}

#[torch_function(dispatcher = add_dispatcher)]
fn my_add(input: &Tensor, other: &Tensor, #[default(1.0)] alpha: f64) -> Result<Tensor> {
    &(other * alpha)? + input
}

fn main() {
    let _ = my_add;
}
