use torchfn::prelude::*;

#[dispatcher]
fn add_dispatcher(input: &Tensor, othr: &Tensor) -> impl Relevant {
    [input, othr]
}

#[torch_function(dispatcher = add_dispatcher)]
fn my_add(input: &Tensor, other: &Tensor) -> Result<Tensor> {
    input + other
}

fn main() {
    // The function still exists, so this line adds no error of its own.
    let _ = my_add;
}
