use torchfn::prelude::*;

#[dispatcher]
fn tensors_dispatcher(tensors: &[Tensor]) -> impl Relevant {
    tensors
}

#[torch_function(dispatcher = tensors_dispatcher)]
fn total(#[variadic] tensors: &[Tensor]) -> Result<Tensor> {
    tensors[0].sum()
}

fn main() {
    let _ = total;
}
