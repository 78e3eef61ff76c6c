//! Seed 001's `MulConstant`: a custom autograd Function parametrized by a number kept on the
//! context, then the same Function optimized with `set_materialize_grads(false)`.
//!
//! Run it with `cargo run --example mul_constant`.

use std::fmt::Write;

use torchfn::autograd::{Ctx, Function, GradcheckOptions, gradcheck};
use torchfn::prelude::*;

/// `tensor * constant`; the constant is stashed on the context (`ctx.constant`).
#[derive(Default)]
pub struct MulConstant {
    constant: f64,
}

impl Function for MulConstant {
    type Inputs = (Tensor, f64);
    type Output = Tensor;
    type GradOutputs = Tensor;

    fn forward((tensor, constant): &(Tensor, f64)) -> Result<Tensor> {
        tensor * *constant
    }

    fn setup_context(ctx: &mut Ctx<Self>, (_tensor, constant): &(Tensor, f64), _output: &Tensor) -> Result<()> {
        // ctx is a context object that can be used to stash information for backward.
        ctx.constant = *constant;
        Ok(())
    }

    fn backward(ctx: &mut Ctx<Self>, grad_output: Tensor) -> Result<Vec<Option<Tensor>>> {
        // We return as many input gradients as there were arguments. Gradients of non-Tensor
        // arguments to forward must be None.
        Ok(vec![Some((&grad_output * ctx.constant)?), None])
    }
}

/// The same, optimized: gradients that do not exist are not materialized as zeros.
pub mod lazy {
    use torchfn::autograd::{Ctx, Function};
    use torchfn::prelude::*;

    /// `MulConstant` with `set_materialize_grads(false)`.
    #[derive(Default)]
    pub struct MulConstant {
        constant: f64,
    }

    impl Function for MulConstant {
        type Inputs = (Tensor, f64);
        type Output = Tensor;
        // Not materialized: the gradient may be None.
        type GradOutputs = Option<Tensor>;

        fn forward((tensor, constant): &(Tensor, f64)) -> Result<Tensor> {
            tensor * *constant
        }

        fn setup_context(ctx: &mut Ctx<Self>, (_tensor, constant): &(Tensor, f64), _output: &Tensor) -> Result<()> {
            ctx.set_materialize_grads(false);
            ctx.constant = *constant;
            Ok(())
        }

        fn backward(ctx: &mut Ctx<Self>, grad_output: Option<Tensor>) -> Result<Vec<Option<Tensor>>> {
            // Here we must handle a None grad_output. In this case we can skip unnecessary
            // computations and just return None.
            let Some(grad_output) = grad_output else { return Ok(vec![None, None]) };
            Ok(vec![Some((&grad_output * ctx.constant)?), None])
        }
    }
}

/// The example's transcript.
pub fn run() -> Result<String> {
    let mut out = String::new();
    let x = torchfn::tensor([1.0f64, 2.0, 3.0])?.requires_grad_(true)?;
    let y = MulConstant::apply((x.clone(), 2.5))?;
    writeln!(out, ">>> y = MulConstant.apply(x, 2.5)\n{y}").ok();
    y.sum()?.backward()?;
    writeln!(out, ">>> x.grad\n{}", x.grad()?.unwrap()).ok();

    let x = torchfn::tensor([1.0f64, 2.0, 3.0])?.requires_grad_(true)?;
    let y = lazy::MulConstant::apply((x.clone(), -1.0))?;
    y.backward_with(Some(&torchfn::tensor([1.0f64, 10.0, 100.0])?), None, false, None)?;
    writeln!(out, ">>> x.grad (set_materialize_grads(false))\n{}", x.grad()?.unwrap()).ok();

    let input =
        [torchfn::randn([4, 5], torchfn::Generator::new().manual_seed(1), DType::Float64, None)?
            .requires_grad_(true)?];
    let options = GradcheckOptions::new().eps(1e-6).atol(1e-4);
    let both = gradcheck(|x: &[Tensor]| MulConstant::apply((x[0].clone(), 3.0)), &input, &options)?
        && gradcheck(|x: &[Tensor]| lazy::MulConstant::apply((x[0].clone(), 3.0)), &input, &options)?;
    writeln!(out, ">>> gradcheck of both forms\n{both}").ok();
    Ok(out)
}

fn main() -> Result<()> {
    print!("{}", run()?);
    Ok(())
}
