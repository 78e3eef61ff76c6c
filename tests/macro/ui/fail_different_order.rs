use torchfn::prelude::*;

#[dispatcher]
fn add_dispatcher(other: &Tensor, input: &Tensor) -> impl Relevant {
    [input, other]
}

#[torch_function(dispatcher = add_dispatcher)]
fn my_add(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    input + other
}

fn main() {
    let _ = my_add;
}
