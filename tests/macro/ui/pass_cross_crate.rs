// Dispatchers from another crate, and that crate's own overridable function in the registry.
use torchfn::prelude::*;

#[torch_function(dispatcher = torchfn_macro_tests::binary_dispatcher, module = "mine")]
fn weighted(input: &Tensor, other: &Tensor, #[default(0.5)] alpha: f64) -> Result<Tensor> {
    &(input * (1.0 - alpha))? + &(other * alpha)?
}

#[torch_function(dispatcher = torchfn_macro_tests::nested::unary_dispatcher)]
fn square(input: &Tensor) -> Result<Tensor> {
    input * input
}

fn main() {
    let a = torchfn::tensor([0.0f32, 4.0]).unwrap();
    let b = torchfn::tensor([2.0f32, 0.0]).unwrap();
    assert_eq!(weighted(&a, &b, 0.5).unwrap().to_vec::<f32>().unwrap(), [1.0, 2.0]);
    assert_eq!(square(&b).unwrap().to_vec::<f32>().unwrap(), [4.0, 0.0]);
    let listed = torchfn::overrides::get_overridable_functions();
    assert!(listed["mine"].iter().any(|f| f.name() == "weighted"));
    let _ = torchfn_macro_tests::axpy(&a, &b, 1.0).unwrap();
    assert!(listed["xcrate"].iter().any(|f| f.name() == "axpy"));
}
