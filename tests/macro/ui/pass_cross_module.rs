// Dispatchers in other modules, named by relative, `crate::` and `super::` paths.
mod dispatchers {
    use torchfn::prelude::*;

    #[dispatcher]
    pub fn unary(input: &Tensor) -> impl Relevant {
        [input]
    }

    #[dispatcher]
    pub(crate) fn variadic(#[variadic] tensors: &[Tensor], #[default(None)] scale: f64) -> impl Relevant {
        tensors
    }
}

mod ops {
    use torchfn::prelude::*;

    #[torch_function(dispatcher = super::dispatchers::unary)]
    pub fn double(input: &Tensor) -> Result<Tensor> {
        input * 2
    }

    #[torch_function(dispatcher = crate::dispatchers::variadic)]
    pub fn total(#[variadic] tensors: &[Tensor], #[default(1.0)] scale: f64) -> Result<Tensor> {
        let mut sum = torchfn::zeros([], torchfn::DType::Float32, None)?;
        for t in tensors {
            sum = (&sum + &t.sum()?)?;
        }
        &sum * scale
    }
}

use torchfn::prelude::*;

#[torch_function(dispatcher = dispatchers::unary)]
fn triple(input: &Tensor) -> Result<Tensor> {
    input * 3
}

fn main() {
    let t = torchfn::tensor([1.0f32, 2.0]).unwrap();
    assert_eq!(ops::double(&t).unwrap().to_vec::<f32>().unwrap(), [2.0, 4.0]);
    assert_eq!(triple(&t).unwrap().to_vec::<f32>().unwrap(), [3.0, 6.0]);
    assert_eq!(ops::total(&[t.clone(), t], 0.5).unwrap().item().unwrap(), Scalar::Float(3.0));
    assert_eq!(ops::TOTAL.signature().to_string(), "(*tensors, scale=1.0)");
}
