//! `torch.nn.init`: filling parameters in place, as PyTorch's initialisations do, from a
//! [`Generator`]. Each runs without recording and returns the tensor.

use crate::error::{Result, bail};
use crate::{Generator, Tensor};

/// `(fan_in, fan_out)` of a weight: `[out, in, *kernel]` gives `in * k` and `out * k`.
pub fn calculate_fan_in_and_fan_out(tensor: &Tensor) -> Result<(usize, usize)> {
    let shape = tensor.shape()?;
    if shape.len() < 2 {
        bail!(
            Value,
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions (got {})",
            shape.len()
        );
    }
    let receptive: usize = shape[2..].iter().product();
    Ok((shape[1] * receptive, shape[0] * receptive))
}

/// The recommended gain for a nonlinearity (`calculate_gain`): `relu` √2, `leaky_relu` with
/// slope `param` √(2 / (1 + slope²)), `tanh` 5/3, `linear`/`sigmoid`/`conv*` 1, `selu` 3/4.
pub fn calculate_gain(nonlinearity: &str, param: Option<f64>) -> Result<f64> {
    Ok(match nonlinearity {
        "linear" | "conv1d" | "conv2d" | "conv3d" | "sigmoid" | "conv_transpose1d" | "conv_transpose2d" => 1.0,
        "tanh" => 5.0 / 3.0,
        "relu" => 2f64.sqrt(),
        "leaky_relu" => {
            let slope = param.unwrap_or(0.01);
            (2.0 / (1.0 + slope * slope)).sqrt()
        }
        "selu" => 0.75,
        other => bail!(Value, "Unsupported nonlinearity {other}"),
    })
}

/// Fills `tensor` with values uniform on `[a, b)` (`nn.init.uniform_`).
pub fn uniform_(tensor: &Tensor, a: f64, b: f64, generator: &Generator) -> Result<Tensor> {
    let _no_grad = crate::autograd::no_grad();
    tensor.uniform_(a, b, generator.clone())
}

/// Fills `tensor` with normal samples (`nn.init.normal_`).
pub fn normal_(tensor: &Tensor, mean: f64, std: f64, generator: &Generator) -> Result<Tensor> {
    let _no_grad = crate::autograd::no_grad();
    tensor.normal_(mean, std, generator.clone())
}

/// Fills `tensor` with zeros (`nn.init.zeros_`).
pub fn zeros_(tensor: &Tensor) -> Result<Tensor> {
    let _no_grad = crate::autograd::no_grad();
    tensor.zero_()
}

/// Fills `tensor` with ones (`nn.init.ones_`).
pub fn ones_(tensor: &Tensor) -> Result<Tensor> {
    let _no_grad = crate::autograd::no_grad();
    tensor.fill_(1)
}

/// He initialisation, uniform (`nn.init.kaiming_uniform_`): bound `gain · √(3 / fan)`, `fan`
/// the fan-in (`mode = "fan_in"`) or fan-out, gain from `nonlinearity` with slope `a`.
pub fn kaiming_uniform_(
    tensor: &Tensor,
    a: f64,
    mode: &str,
    nonlinearity: &str,
    generator: &Generator,
) -> Result<Tensor> {
    let (fan_in, fan_out) = calculate_fan_in_and_fan_out(tensor)?;
    let fan = match mode {
        "fan_in" => fan_in,
        "fan_out" => fan_out,
        other => bail!(Value, "Mode {other} not supported, please use one of fan_in, fan_out"),
    };
    let std = calculate_gain(nonlinearity, Some(a))? / (fan as f64).sqrt();
    let bound = 3f64.sqrt() * std;
    uniform_(tensor, -bound, bound, generator)
}

/// Glorot initialisation, uniform (`nn.init.xavier_uniform_`): bound `gain · √(6 / (fan_in + fan_out))`.
pub fn xavier_uniform_(tensor: &Tensor, gain: f64, generator: &Generator) -> Result<Tensor> {
    let (fan_in, fan_out) = calculate_fan_in_and_fan_out(tensor)?;
    let bound = gain * (6.0 / (fan_in + fan_out) as f64).sqrt();
    uniform_(tensor, -bound, bound, generator)
}

/// Glorot initialisation, normal (`nn.init.xavier_normal_`): std `gain · √(2 / (fan_in + fan_out))`.
pub fn xavier_normal_(tensor: &Tensor, gain: f64, generator: &Generator) -> Result<Tensor> {
    let (fan_in, fan_out) = calculate_fan_in_and_fan_out(tensor)?;
    normal_(tensor, 0.0, gain * (2.0 / (fan_in + fan_out) as f64).sqrt(), generator)
}
