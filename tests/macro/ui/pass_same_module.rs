// A dispatcher in the same module, at the crate root; its docs copied onto the function.
use torchfn::prelude::*;

/// Adds `alpha` times `other` to `input`.
#[dispatcher]
fn add_dispatcher(input: &Tensor, other: &Tensor, #[default(None)] alpha: f64) -> impl Relevant {
    [input, other]
}

#[torch_function(dispatcher = add_dispatcher, docs_from_dispatcher)]
fn axpy(input: &Tensor, other: &Tensor, #[default(1.0)] alpha: f64) -> Result<Tensor> {
    &(other * alpha)? + input
}

fn main() {
    let t = torchfn::tensor([1.0f32]).unwrap();
    assert_eq!(axpy(&t, &t, 2.0).unwrap().to_vec::<f32>().unwrap(), [3.0]);
    assert_eq!(AXPY.doc(), "Adds `alpha` times `other` to `input`.");
    assert_eq!(AXPY.signature().to_string(), "(input, other, alpha=1.0)");
}
