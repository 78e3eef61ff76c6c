//! transformers' activations (`transformers/activations.py`): the module `ACT2FN[hidden_act]`
//! builds for a config's activation name, with its class name and repr as `print(model)` shows
//! them (transformers' own classes, `SiLUActivation()`, and torch's, `SiLU()` for `swish`), and
//! its computation.

use std::fmt;

use torchfn::nn::{self, Forward, Layer, Module, Visitor, VisitorMut};
use torchfn::prelude::*;

/// The computations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Gelu,
    GeluPython,
    GeluTanh,
    GeluTanhPython,
    GeluFast,
    GeluClipped,
    QuickGelu,
    Relu,
    ReluSquared,
    Relu6,
    LeakyRelu,
    Silu,
    Tanh,
    Sigmoid,
    Mish,
    Hardswish,
    Laplace,
    Linear,
}

/// `ACT2CLS`: each name this port implements, its computation, its module's class and the
/// inside of its repr.
const ACT2CLS: [(&str, Kind, &str, &str); 21] = [
    ("gelu", Kind::Gelu, "GELUActivation", ""),
    ("gelu_python", Kind::GeluPython, "GELUActivation", ""),
    // `NewGELUActivation` writes the tanh formula out; `F.gelu(approximate="tanh")` is the same
    // function (transformers: "equivalent ... not an exact numerical match due to rounding"),
    // one operation that fx passes find as a gelu.
    ("gelu_new", Kind::GeluTanh, "NewGELUActivation", ""),
    ("gelu_pytorch_tanh", Kind::GeluTanh, "GELUTanh", ""),
    ("gelu_python_tanh", Kind::GeluTanhPython, "GELUTanh", ""),
    ("gelu_accurate", Kind::GeluTanhPython, "AccurateGELUActivation", ""),
    ("gelu_fast", Kind::GeluFast, "FastGELUActivation", ""),
    ("gelu_10", Kind::GeluClipped, "ClippedGELUActivation", ""),
    ("quick_gelu", Kind::QuickGelu, "QuickGELUActivation", ""),
    ("relu", Kind::Relu, "ReLU", ""),
    ("relu2", Kind::ReluSquared, "ReLUSquaredActivation", ""),
    ("relu6", Kind::Relu6, "ReLU6", ""),
    ("leaky_relu", Kind::LeakyRelu, "LeakyReLU", "negative_slope=0.01"),
    ("silu", Kind::Silu, "SiLUActivation", ""),
    ("swish", Kind::Silu, "SiLU", ""),
    ("tanh", Kind::Tanh, "Tanh", ""),
    ("sigmoid", Kind::Sigmoid, "Sigmoid", ""),
    ("mish", Kind::Mish, "MishActivation", ""),
    ("hardswish", Kind::Hardswish, "Hardswish", ""),
    ("laplace", Kind::Laplace, "LaplaceActivation", ""),
    ("linear", Kind::Linear, "LinearActivation", ""),
];

/// The module transformers' `ACT2FN[name]` builds: no parameters, a forward, and its class's
/// repr (`GELUActivation()`, `LeakyReLU(negative_slope=0.01)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Activation {
    kind: Kind,
    class: &'static str,
    extra_repr: &'static str,
}

impl Activation {
    /// The activation of a config's `hidden_act`, or an error naming it and those implemented.
    pub fn new(name: &str) -> Result<Activation> {
        match ACT2CLS.iter().find(|(key, ..)| *key == name) {
            Some(&(_, kind, class, extra_repr)) => Ok(Activation { kind, class, extra_repr }),
            None => {
                let names: Vec<&str> = ACT2CLS.iter().map(|(key, ..)| *key).collect();
                Err(Error::value_error(format!(
                    "hidden_act {name:?} is not one of transformers' activations this port implements ({})",
                    names.join(", ")
                )))
            }
        }
    }
}

/// `x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x³)))`, as `GELUTanh`'s python form and
/// `AccurateGELUActivation` write it.
fn tanh_gelu_formula(x: &Tensor) -> Result<Tensor> {
    let cubed = x.pow(&Tensor::scalar(3.0))?;
    let inner = (&(x + &(&cubed * 0.044715)?)? * (2.0 / std::f64::consts::PI).sqrt())?;
    &(x * 0.5)? * &(&inner.tanh()? + 1.0)?
}

impl Forward for Activation {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self.kind {
            Kind::Gelu => nn::functional::gelu(x, "none"),
            // input * 0.5 * (1.0 + torch.erf(input / math.sqrt(2.0)))
            Kind::GeluPython => &(x * 0.5)? * &(&(x / std::f64::consts::SQRT_2)?.erf()? + 1.0)?,
            Kind::GeluTanh => nn::functional::gelu(x, "tanh"),
            Kind::GeluTanhPython => tanh_gelu_formula(x),
            // 0.5 * input * (1.0 + torch.tanh(input * 0.7978845608 * (1.0 + 0.044715 * input * input)))
            Kind::GeluFast => {
                let inner = (&(x * 0.7978845608)? * &(&(&(x * 0.044715)? * x)? + 1.0)?)?;
                &(x * 0.5)? * &(&inner.tanh()? + 1.0)?
            }
            Kind::GeluClipped => nn::functional::gelu(x, "none")?.clamp(Some((-10.0).into()), Some(10.0.into())),
            Kind::QuickGelu => x * &(x * 1.702)?.sigmoid()?,
            Kind::Relu => x.relu(),
            Kind::ReluSquared => x.relu()?.square(),
            // F.relu6 is hardtanh(x, 0, 6): a clamp.
            Kind::Relu6 => x.clamp(Some(0.0.into()), Some(6.0.into())),
            Kind::LeakyRelu => nn::functional::leaky_relu(x, 0.01, false),
            Kind::Silu => nn::functional::silu(x, false),
            Kind::Tanh => x.tanh(),
            Kind::Sigmoid => x.sigmoid(),
            // F.mish: x * tanh(softplus(x)), softplus(x) = log(1 + exp(x)).
            Kind::Mish => x * &x.exp()?.log1p()?.tanh()?,
            Kind::Hardswish => nn::functional::hardswish(x, false),
            // 0.5 * (1.0 + torch.erf((input - mu).div(sigma * math.sqrt(2.0)))), mu 0.707107, sigma 0.282095
            Kind::Laplace => {
                #[allow(clippy::approx_constant)] // transformers' mu, written to 6 digits
                let z = (&(x - 0.707107)? / (0.282095 * std::f64::consts::SQRT_2))?;
                &(&z.erf()? + 1.0)? * 0.5
            }
            Kind::Linear => Ok(x.clone()),
        }
    }
}

impl Module for Activation {
    fn visit<'m>(&'m self, _: &mut dyn Visitor<'m>) {}

    fn visit_mut(&mut self, _: &mut dyn VisitorMut) {}

    fn type_name(&self) -> &'static str {
        self.class
    }

    fn extra_repr(&self) -> String {
        self.extra_repr.to_string()
    }

    fn as_dyn(&self) -> &dyn Module {
        self
    }

    fn as_layer(&self) -> Option<&dyn Layer> {
        Some(self)
    }

    fn rust_path(&self) -> &'static str {
        module_path!()
    }
}

impl fmt::Display for Activation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repr())
    }
}
