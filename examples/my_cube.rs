//! Seed 001's `MyCube`: a custom autograd Function that returns an intermediate value (`dx`) as
//! a second output so that backward can save it, and whose backward is written with
//! differentiable operations, so it differentiates twice (checked with gradgradcheck).
//!
//! Run it with `cargo run --example my_cube`.

use std::fmt::Write;

use torchfn::autograd::{Ctx, Function, GradcheckOptions, gradcheck, gradgradcheck};
use torchfn::prelude::*;

/// `x ** 3`, with `3 * x ** 2` as a second output.
#[derive(Default)]
pub struct MyCube;

impl Function for MyCube {
    type Inputs = Tensor;
    type Output = (Tensor, Tensor);
    type GradOutputs = (Tensor, Tensor);

    fn forward(x: &Tensor) -> Result<(Tensor, Tensor)> {
        // We wish to save dx for backward. In order to do so, it must be returned as an output.
        let dx = (&x.pow(&Tensor::scalar(2))? * 3.0)?;
        let result = x.pow(&Tensor::scalar(3))?;
        Ok((result, dx))
    }

    fn setup_context(ctx: &mut Ctx<Self>, x: &Tensor, (_result, dx): &(Tensor, Tensor)) -> Result<()> {
        ctx.save_for_backward((x, dx));
        Ok(())
    }

    fn backward(ctx: &mut Ctx<Self>, (grad_output, grad_dx): (Tensor, Tensor)) -> Result<Vec<Option<Tensor>>> {
        let (x, dx): (Tensor, Tensor) = ctx.saved_tensors()?;
        // In order for the Function to work with higher-order gradients, we must add the
        // gradient contribution of `dx`, which is grad_dx * 6 * x.
        let result = (&(&grad_output * &dx)? + &(&(&grad_dx * 6.0)? * &x)?)?;
        Ok(vec![Some(result)])
    }
}

/// Wrap MyCube in a function so that it is clearer what the output is.
pub fn my_cube(x: &Tensor) -> Result<Tensor> {
    let (result, _dx) = MyCube::apply(x.clone())?;
    Ok(result)
}

/// The example's transcript.
pub fn run() -> Result<String> {
    let mut out = String::new();
    let x = torchfn::tensor([2.0f64])?.requires_grad_(true)?;
    let y = my_cube(&x)?;
    // d/dx of `of`, recorded (create_graph) so that it can be differentiated again.
    let derivative = |of: &Tensor| -> Result<Tensor> {
        let grads =
            torchfn::autograd::grad(std::slice::from_ref(of), std::slice::from_ref(&x), None, None, true, false)?;
        grads.into_iter().next().flatten().ok_or_else(|| Error::runtime_error("x does not reach the output"))
    };
    let dy = derivative(&y)?;
    let d2y = derivative(&dy)?;
    writeln!(out, ">>> y, dy/dx, d2y/dx2 at x = 2\n{y} {dy} {d2y}").ok();

    let input =
        [torchfn::randn([6], torchfn::Generator::new().manual_seed(2), DType::Float64, None)?.requires_grad_(true)?];
    let options = GradcheckOptions::new().eps(1e-6).atol(1e-4);
    writeln!(out, ">>> gradcheck(my_cube, input)\n{}", gradcheck(|x: &[Tensor]| my_cube(&x[0]), &input, &options)?)
        .ok();
    let second = gradgradcheck(|x: &[Tensor]| my_cube(&x[0]), &input, None, &options)?;
    writeln!(out, ">>> gradgradcheck(my_cube, input)\n{second}").ok();
    Ok(out)
}

fn main() -> Result<()> {
    print!("{}", run()?);
    Ok(())
}
