//! Recurrent modules: `nn.LSTM` and `nn.GRU`, over `torchfn::lstm` and `torchfn::gru`, with
//! PyTorch's parameters (`weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0`,
//! `..._reverse`), initialisation (uniform on `±1/sqrt(hidden_size)`) and repr.

use super::init;
use super::layers::Layer;
use super::module::{Module, Parameter, Training, Visitor, VisitorMut};
use crate::error::{Result, bail};
use crate::nn::Cell;
use crate::{Generator, Tensor};

/// What `nn.LSTM` and `nn.GRU` share: the parameters by name, in PyTorch's order, and the
/// settings.
struct Recurrent {
    cell: Cell,
    parameters: Vec<(String, Parameter)>,
    training: Training,
    input_size: usize,
    hidden_size: usize,
    num_layers: usize,
    bias: bool,
    batch_first: bool,
    dropout: f64,
    bidirectional: bool,
}

impl Recurrent {
    #[allow(clippy::too_many_arguments)]
    fn new(
        cell: Cell,
        input_size: usize,
        hidden_size: usize,
        num_layers: usize,
        bias: bool,
        batch_first: bool,
        dropout: f64,
        bidirectional: bool,
        generator: &Generator,
    ) -> Result<Recurrent> {
        let kind = if cell == Cell::Lstm { "LSTM" } else { "GRU" };
        if hidden_size == 0 || num_layers == 0 {
            bail!(Value, "{kind}(): hidden_size and num_layers must be positive");
        }
        if !(0.0..=1.0).contains(&dropout) {
            bail!(
                Value,
                "{kind}(): dropout should be a number in range [0, 1] representing the probability of an element being zeroed"
            );
        }
        let bound = 1.0 / (hidden_size as f64).sqrt();
        let gates = cell.gates() * hidden_size;
        let directions = if bidirectional { 2 } else { 1 };
        let mut parameters = Vec::new();
        for layer in 0..num_layers {
            let width = if layer == 0 { input_size } else { hidden_size * directions };
            for direction in 0..directions {
                let suffix = if direction == 1 { "_reverse" } else { "" };
                let mut shapes = vec![("weight_ih", vec![gates, width]), ("weight_hh", vec![gates, hidden_size])];
                if bias {
                    shapes.extend([("bias_ih", vec![gates]), ("bias_hh", vec![gates])]);
                }
                for (name, shape) in shapes {
                    let t = crate::zeros(shape, None, None)?;
                    init::uniform_(&t, -bound, bound, generator)?;
                    parameters.push((format!("{name}_l{layer}{suffix}"), Parameter::new(&t)?));
                }
            }
        }
        Ok(Recurrent {
            cell,
            parameters,
            training: Training::default(),
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
        })
    }

    /// The network on `input` from `hx` (zeros when `None`): the output and the final states.
    fn run(&self, input: &Tensor, hx: Option<Vec<Tensor>>) -> Result<(Tensor, Tensor, Option<Tensor>)> {
        let shape = input.shape()?;
        let batch = match (shape.len(), self.batch_first) {
            (3, true) => Some(shape[0]),
            (3, false) => Some(shape[1]),
            _ => None,
        };
        let directions = if self.bidirectional { 2 } else { 1 };
        let hx = match hx {
            Some(hx) => hx,
            None => {
                let mut state = vec![self.num_layers * directions];
                state.extend(batch);
                state.push(self.hidden_size);
                let count = if self.cell == Cell::Lstm { 2 } else { 1 };
                let zeros = crate::zeros(state, Some(input.dtype()?), Some(input.device()?))?;
                vec![zeros; count]
            }
        };
        let params: Vec<Tensor> = self.parameters.iter().map(|(_, p)| Tensor::clone(p)).collect();
        let (layers, train) = (self.num_layers as i64, self.training.get());
        let (bias, dropout, bidirectional, batch_first) =
            (self.bias, self.dropout, self.bidirectional, self.batch_first);
        Ok(match self.cell {
            Cell::Lstm => {
                let (output, h, c) =
                    crate::lstm(input, &hx, &params, bias, layers, dropout, train, bidirectional, batch_first)?;
                (output, h, Some(c))
            }
            Cell::Gru => {
                let (output, h) =
                    crate::gru(input, &hx[0], &params, bias, layers, dropout, train, bidirectional, batch_first)?;
                (output, h, None)
            }
        })
    }

    fn extra_repr(&self) -> String {
        let mut text = format!("{}, {}", self.input_size, self.hidden_size);
        if self.num_layers != 1 {
            text += &format!(", num_layers={}", self.num_layers);
        }
        if !self.bias {
            text += ", bias=False";
        }
        if self.batch_first {
            text += ", batch_first=True";
        }
        if self.dropout != 0.0 {
            text += &format!(", dropout={:?}", self.dropout);
        }
        if self.bidirectional {
            text += ", bidirectional=True";
        }
        text
    }

    fn visit<'m>(&'m self, visitor: &mut dyn Visitor<'m>) {
        for (name, p) in &self.parameters {
            visitor.parameter(name, p);
        }
        visitor.training(&self.training);
    }

    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut) {
        for (name, p) in &mut self.parameters {
            visitor.parameter(name, p);
        }
    }
}

/// Implements the constructor, `Module` and `Display` for a recurrent module (a newtype of
/// `Recurrent` running `$cell`).
macro_rules! recurrent_module {
    ($name:ident, $cell:expr) => {
        impl $name {
            /// The network of PyTorch's arguments, in its order.
            #[allow(clippy::too_many_arguments)]
            pub fn new(
                input_size: usize,
                hidden_size: usize,
                num_layers: usize,
                bias: bool,
                batch_first: bool,
                dropout: f64,
                bidirectional: bool,
                generator: &Generator,
            ) -> Result<$name> {
                let (i, h, l) = (input_size, hidden_size, num_layers);
                Ok($name(Recurrent::new($cell, i, h, l, bias, batch_first, dropout, bidirectional, generator)?))
            }
        }

        impl Module for $name {
            fn visit<'m>(&'m self, visitor: &mut dyn Visitor<'m>) {
                self.0.visit(visitor)
            }
            fn visit_mut(&mut self, visitor: &mut dyn VisitorMut) {
                self.0.visit_mut(visitor)
            }
            fn type_name(&self) -> &'static str {
                stringify!($name)
            }
            fn extra_repr(&self) -> String {
                self.0.extra_repr()
            }
            fn as_dyn(&self) -> &dyn Module {
                self
            }
            fn as_layer(&self) -> Option<&dyn Layer> {
                None
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.repr())
            }
        }
    };
}

/// A multi-layer LSTM (`nn.LSTM`): `forward` takes `[T, N, I]` (`[N, T, I]` with
/// `batch_first`, or unbatched `[T, I]`) and the states `(h_0, c_0)` (zeros when `None`), and
/// returns the output and `(h_n, c_n)`. Its parameters are PyTorch's (`weight_ih_l0`...), so
/// state dicts move between the two. `proj_size` is not supported.
///
/// ```
/// use torchfn::nn::{LSTM, Module};
/// let lstm = LSTM::new(3, 4, 2, true, true, 0.0, true, &torchfn::Generator::new())?;
/// assert_eq!(lstm.to_string(), "LSTM(3, 4, num_layers=2, batch_first=True, bidirectional=True)");
/// let (out, (h, c)) = lstm.forward(&torchfn::randn([2, 5, 3], None, None, None)?, None)?;
/// assert_eq!((out.shape()?, h.shape()?, c.shape()?), ([2, 5, 8].into(), [4, 2, 4].into(), [4, 2, 4].into()));
/// assert_eq!(lstm.named_parameters()[0].0, "weight_ih_l0");
/// # Ok::<(), torchfn::Error>(())
/// ```
pub struct LSTM(Recurrent);

impl LSTM {
    /// The LSTM on `input` from `hx = (h_0, c_0)`: the output and `(h_n, c_n)`.
    pub fn forward(&self, input: &Tensor, hx: Option<(&Tensor, &Tensor)>) -> Result<(Tensor, (Tensor, Tensor))> {
        let hx = hx.map(|(h, c)| vec![h.clone(), c.clone()]);
        let (output, h, c) = self.0.run(input, hx)?;
        Ok((output, (h, c.expect("an LSTM returns a cell state"))))
    }
}

recurrent_module!(LSTM, Cell::Lstm);

/// A multi-layer GRU (`nn.GRU`): as [`LSTM`] with one state, `h_0`; returns the output and
/// `h_n`.
///
/// ```
/// use torchfn::nn::GRU;
/// let gru = GRU::new(3, 4, 1, true, false, 0.0, false, &torchfn::Generator::new())?;
/// assert_eq!(gru.to_string(), "GRU(3, 4)");
/// let (out, h) = gru.forward(&torchfn::randn([5, 2, 3], None, None, None)?, None)?;
/// assert_eq!((out.shape()?, h.shape()?), ([5, 2, 4].into(), [1, 2, 4].into()));
/// # Ok::<(), torchfn::Error>(())
/// ```
pub struct GRU(Recurrent);

impl GRU {
    /// The GRU on `input` from `h_0`: the output and `h_n`.
    pub fn forward(&self, input: &Tensor, hx: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        let (output, h, _) = self.0.run(input, hx.map(|h| vec![h.clone()]))?;
        Ok((output, h))
    }
}

recurrent_module!(GRU, Cell::Gru);
