//! Seed 001's `LinearFunction`, the custom autograd Function of "Extending torch.autograd", in
//! both forms (a separate `setup_context`, and the combined forward that takes the context),
//! with the `linear` wrapper that gives `bias` a default, checked with gradcheck as the seed
//! does.
//!
//! Run it with `cargo run --example linear_function`.

use std::fmt::Write;

use torchfn::autograd::{Ctx, Function, GradcheckOptions, gradcheck};
use torchfn::prelude::*;

/// Inherit from Function.
#[derive(Default)]
pub struct LinearFunction;

impl Function for LinearFunction {
    type Inputs = (Tensor, Tensor, Option<Tensor>);
    type Output = Tensor;
    type GradOutputs = Tensor;

    fn forward((input, weight, bias): &Self::Inputs) -> Result<Tensor> {
        let output = input.mm(&weight.t()?)?;
        if let Some(bias) = bias {
            output.add_(&bias.unsqueeze(0)?.expand_as(&output)?, 1)?;
        }
        Ok(output)
    }

    // `inputs` is a tuple of all of the inputs passed to forward; `output` is the output of
    // the forward().
    fn setup_context(ctx: &mut Ctx<Self>, (input, weight, bias): &Self::Inputs, _output: &Tensor) -> Result<()> {
        ctx.save_for_backward((input, weight, bias));
        Ok(())
    }

    // This function has only a single output, so it gets only one gradient.
    fn backward(ctx: &mut Ctx<Self>, grad_output: Tensor) -> Result<Vec<Option<Tensor>>> {
        // Unpack saved_tensors and initialize all gradients w.r.t. inputs to None. Additional
        // trailing Nones are ignored, so the return is simple even with optional inputs.
        let (input, weight, bias): (Tensor, Tensor, Option<Tensor>) = ctx.saved_tensors()?;
        let (mut grad_input, mut grad_weight, mut grad_bias) = (None, None, None);

        // These needs_input_grad checks are optional and there only to improve efficiency.
        if ctx.needs_input_grad[0] {
            grad_input = Some(grad_output.mm(&weight)?);
        }
        if ctx.needs_input_grad[1] {
            grad_weight = Some(grad_output.t()?.mm(&input)?);
        }
        if bias.is_some() && ctx.needs_input_grad[2] {
            grad_bias = Some(grad_output.sum_dim(0, false)?);
        }
        Ok(vec![grad_input, grad_weight, grad_bias])
    }
}

/// The combined form: `forward` takes the context (and could save intermediate values).
pub mod combined {
    use torchfn::autograd::{Ctx, Function};
    use torchfn::prelude::*;

    /// Seed 001's `LinearFunction` with a combined forward.
    #[derive(Default)]
    pub struct LinearFunction;

    impl Function for LinearFunction {
        type Inputs = (Tensor, Tensor, Option<Tensor>);
        type Output = Tensor;
        type GradOutputs = Tensor;

        // ctx is the first argument to forward.
        fn forward_with_ctx(ctx: &mut Ctx<Self>, (input, weight, bias): &Self::Inputs) -> Result<Tensor> {
            // The forward pass can use ctx.
            ctx.save_for_backward((input, weight, bias));
            let output = input.mm(&weight.t()?)?;
            if let Some(bias) = bias {
                output.add_(&bias.unsqueeze(0)?.expand_as(&output)?, 1)?;
            }
            Ok(output)
        }

        fn backward(ctx: &mut Ctx<Self>, grad_output: Tensor) -> Result<Vec<Option<Tensor>>> {
            let (input, weight, bias): (Tensor, Tensor, Option<Tensor>) = ctx.saved_tensors()?;
            let (mut grad_input, mut grad_weight, mut grad_bias) = (None, None, None);
            if ctx.needs_input_grad[0] {
                grad_input = Some(grad_output.mm(&weight)?);
            }
            if ctx.needs_input_grad[1] {
                grad_weight = Some(grad_output.t()?.mm(&input)?);
            }
            if bias.is_some() && ctx.needs_input_grad[2] {
                grad_bias = Some(grad_output.sum_dim(0, false)?);
            }
            Ok(vec![grad_input, grad_weight, grad_bias])
        }
    }
}

/// Option 2 of the seed: wrap in a function, to support default arguments and keyword
/// arguments. As an overridable function it also has a by-name call with `bias=None`.
#[torch_function(module = "examples")]
pub fn linear(input: &Tensor, weight: &Tensor, #[default(None)] bias: Option<&Tensor>) -> Result<Tensor> {
    LinearFunction::apply((input.clone(), weight.clone(), bias.cloned()))
}

/// Seed 001's "Extending torch.nn": a `Linear` module whose forward is `LinearFunction`.
#[derive(torchfn::nn::Module)]
#[module(extra_repr = extra_repr)]
pub struct Linear {
    #[module(skip)]
    input_features: usize,
    #[module(skip)]
    output_features: usize,
    // A Parameter is a tensor the module registers as its parameter: it appears in
    // `.parameters()` and moves with the module. Parameters require gradients by default.
    weight: torchfn::nn::Parameter,
    // Optional parameters are `Option`s.
    bias: Option<torchfn::nn::Parameter>,
}

impl Linear {
    /// A layer of `input_features` to `output_features`, weights uniform on ±0.1.
    pub fn new(input_features: usize, output_features: usize, bias: bool, generator: &Generator) -> Result<Linear> {
        use torchfn::nn::{Parameter, init};
        let weight = Parameter::new(&torchfn::zeros([output_features, input_features], None, None)?)?;
        let bias = if bias { Some(Parameter::new(&torchfn::zeros([output_features], None, None)?)?) } else { None };
        // Not a very smart way to initialize weights.
        init::uniform_(&weight, -0.1, 0.1, generator)?;
        if let Some(bias) = &bias {
            init::uniform_(bias, -0.1, 0.1, generator)?;
        }
        Ok(Linear { input_features, output_features, weight, bias })
    }

    /// See the autograd section for what happens here.
    pub fn forward(&self, input: &Tensor) -> Result<Tensor> {
        LinearFunction::apply((
            input.clone(),
            self.weight.tensor().clone(),
            self.bias.as_ref().map(|b| b.tensor().clone()),
        ))
    }

    /// The extra information printed with the module.
    fn extra_repr(&self) -> String {
        format!(
            "input_features={}, output_features={}, bias={}",
            self.input_features,
            self.output_features,
            if self.bias.is_some() { "True" } else { "False" }
        )
    }
}

/// The example's transcript.
pub fn run() -> Result<String> {
    let mut out = String::new();
    let generator = torchfn::Generator::new().manual_seed(0);
    let randn = |shape: &[usize]| -> Result<Tensor> {
        torchfn::randn(shape.to_vec(), generator.clone(), DType::Float64, None)?.requires_grad_(true)
    };

    // A small call, compared with the built-in linear.
    let (x, w, b) = (randn(&[2, 3])?, randn(&[4, 3])?, randn(&[4])?);
    let output = linear(&x, &w, Some(&b))?;
    writeln!(out, ">>> output.grad_fn\n{:?}", output.grad_fn()?.unwrap()).ok();
    let builtin = torchfn::nn::functional::linear(&x, &w, Some(&b))?;
    let same = output.to_vec::<f64>()? == builtin.to_vec::<f64>()?;
    writeln!(out, ">>> output equals F.linear(input, weight, bias)\n{same}").ok();
    output.sum()?.backward()?;
    writeln!(out, ">>> bias.grad\n{}", b.grad()?.unwrap()).ok();

    // The default argument, by name: `linear(input, weight)` with bias=None.
    let by_name = LINEAR.call(&[Value::from(&x), Value::from(&w)], &Kwargs::new())?;
    writeln!(out, ">>> linear(input, weight).shape\n{:?}", by_name.as_tensor().unwrap().shape()?).ok();

    // gradcheck takes a tuple of tensors as input, checks whether the gradient evaluated with
    // these tensors is close enough to numerical approximations, and returns true if so.
    let input = [randn(&[20, 20])?, randn(&[30, 20])?];
    let options = GradcheckOptions::new().eps(1e-6).atol(1e-4);
    let test = gradcheck(|x: &[Tensor]| linear(&x[0], &x[1], None), &input, &options)?;
    writeln!(out, ">>> gradcheck(linear, input, eps=1e-6, atol=1e-4)\n{test}").ok();
    let with_bias = [randn(&[5, 3])?, randn(&[4, 3])?, randn(&[4])?];
    let test = gradcheck(|x: &[Tensor]| linear(&x[0], &x[1], Some(&x[2])), &with_bias, &options)?;
    writeln!(out, ">>> gradcheck(linear, (input, weight, bias), eps=1e-6, atol=1e-4)\n{test}").ok();
    let combined = |x: &[Tensor]| combined::LinearFunction::apply((x[0].clone(), x[1].clone(), Some(x[2].clone())));
    let test = gradcheck(combined, &with_bias, &options)?;
    writeln!(out, ">>> gradcheck(combined LinearFunction.apply, (input, weight, bias))\n{test}").ok();

    // The module built on the Function.
    use torchfn::nn::Module;
    let layer = Linear::new(20, 30, true, &generator)?;
    writeln!(out, ">>> Linear(20, 30)\n{layer}").ok();
    let y = layer.forward(&torchfn::randn([4, 20], generator.clone(), None, None)?)?;
    y.sum()?.backward()?;
    let grads = layer.parameters().iter().filter(|p| p.grad().ok().flatten().is_some()).count();
    writeln!(out, ">>> output.shape, parameters with a gradient\n{:?} {grads}", y.shape()?).ok();
    Ok(out)
}

fn main() -> Result<()> {
    print!("{}", run()?);
    Ok(())
}
