use torchfn::prelude::*;

#[dispatcher]
fn unary_dispatcher(input: &Tensor) -> impl Relevant {
    [input]
}

#[torch_function(dispatcher = unary_dispatcher)]
fn my_add(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    input + other
}

#[dispatcher]
fn with_out_dispatcher(input: &Tensor, #[default(None)] out: Option<&Tensor>) -> impl Relevant {
    (input, out)
}

#[torch_function(dispatcher = with_out_dispatcher)]
fn my_neg(input: &Tensor) -> Result<Tensor> {
    -input
}

fn main() {
    let _ = (my_add, my_neg);
}
