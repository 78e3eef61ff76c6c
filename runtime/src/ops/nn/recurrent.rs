//! Recurrent networks: `torch.lstm` and `torch.gru` (what `nn.LSTM` and `nn.GRU` call), over
//! layers and directions, with PyTorch's gate order and formulas, composed of operations so
//! that gradients and the other transforms come from theirs. Each layer projects its whole
//! input sequence in one product (as PyTorch's) and steps through it with `unbind`, whose one
//! node joins the steps' gradients; the layer's outputs are stacked for the next.

use crate::error::{Result, bail};
use crate::tensor::Tensor;
use crate::testing::{f32s, sample, small_f32s};
use crate::torch_function;
use crate::value::Value;

/// Which cell a recurrent network runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Cell {
    /// Gates `i, f, g, o`; a hidden and a cell state.
    Lstm,
    /// Gates `r, z, n`; a hidden state.
    Gru,
}

impl Cell {
    /// How many gates the weights stack (rows of `weight_ih` per hidden unit).
    pub(crate) fn gates(self) -> usize {
        match self {
            Cell::Lstm => 4,
            Cell::Gru => 3,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Cell::Lstm => "lstm",
            Cell::Gru => "gru",
        }
    }
}

/// One layer's weights in one direction: `weight_ih`, `weight_hh` and the biases.
struct Weights<'a> {
    ih: &'a Tensor,
    hh: &'a Tensor,
    b_ih: Option<&'a Tensor>,
    b_hh: Option<&'a Tensor>,
}

/// The settings of a recurrent call.
struct Settings {
    cell: Cell,
    has_biases: bool,
    num_layers: i64,
    dropout: f64,
    train: bool,
    bidirectional: bool,
    batch_first: bool,
}

/// `x @ w.T + b`.
fn affine(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
    let y = x.matmul(&w.t()?)?;
    match b {
        Some(b) => y.add(b, 1),
        None => Ok(y),
    }
}

/// One direction of one layer over the sequence `x` (`[T, N, I]`) from the states `h` (and
/// `c` for an LSTM): each step's output in time order and the final states. The input's
/// projection is one product for the whole sequence, as PyTorch's; only the hidden state's is
/// made step by step.
fn run_direction(
    cell: Cell,
    x: &Tensor,
    w: &Weights<'_>,
    mut h: Tensor,
    mut c: Option<Tensor>,
    reverse: bool,
) -> Result<(Vec<Tensor>, Tensor, Option<Tensor>)> {
    // `[T * N, I]`: one matrix product (a 3-D operand would multiply step by step).
    let shape = x.shape()?;
    let (t, n) = (shape[0] as i64, shape[1] as i64);
    let rows = x.reshape(&[t * n, shape[2] as i64])?;
    let gates = w.ih.shape()?[0] as i64;
    let projected = affine(&rows, w.ih, w.b_ih)?.reshape(&[t, n, gates])?.unbind(0)?;
    let mut outputs = Vec::with_capacity(projected.len());
    let order: Box<dyn Iterator<Item = &Tensor>> =
        if reverse { Box::new(projected.iter().rev()) } else { Box::new(projected.iter()) };
    for x in order {
        let hidden = affine(&h, w.hh, w.b_hh)?;
        match cell {
            Cell::Lstm => {
                let gates = x.add(&hidden, 1)?.chunk(4, -1)?;
                let (i, f) = (gates[0].sigmoid()?, gates[1].sigmoid()?);
                let (g, o) = (gates[2].tanh()?, gates[3].sigmoid()?);
                let previous = c.take().expect("an LSTM carries a cell state");
                let next = f.mul(&previous)?.add(&i.mul(&g)?, 1)?;
                h = o.mul(&next.tanh()?)?;
                c = Some(next);
            }
            Cell::Gru => {
                let (xs, hs) = (x.chunk(3, -1)?, hidden.chunk(3, -1)?);
                let r = xs[0].add(&hs[0], 1)?.sigmoid()?;
                let z = xs[1].add(&hs[1], 1)?.sigmoid()?;
                let n = xs[2].add(&r.mul(&hs[2])?, 1)?.tanh()?;
                // (1 - z) * n + z * h = n + z * (h - n)
                h = n.add(&z.mul(&h.sub(&n, 1)?)?, 1)?;
            }
        }
        outputs.push(h.clone());
    }
    if reverse {
        outputs.reverse();
    }
    Ok((outputs, h, c))
}

/// The body of `torch.lstm` and `torch.gru`: the output and the final hidden (and cell) states.
fn recurrent(
    input: &Tensor,
    hx: &[Tensor],
    params: &[Tensor],
    s: &Settings,
) -> Result<(Tensor, Tensor, Option<Tensor>)> {
    let func = s.cell.name();
    let shape = input.shape()?;
    let batched = match shape.len() {
        3 => true,
        2 => false,
        n => bail!(Runtime, "{func}(): input must have 2 (unbatched) or 3 dimensions, got {n}"),
    };
    let directions = if s.bidirectional { 2 } else { 1 };
    let layers = usize::try_from(s.num_layers).ok().filter(|&l| l > 0);
    let Some(layers) = layers else { bail!(Runtime, "{func}(): num_layers must be positive, got {}", s.num_layers) };
    let per = if s.has_biases { 4 } else { 2 };
    let expected = layers.checked_mul(directions * per);
    if expected != Some(params.len()) {
        bail!(
            Runtime,
            "{func}(): expected {per} parameter tensors for each of {layers} layers and {directions} directions, got {}",
            params.len()
        );
    }
    let states = if s.cell == Cell::Lstm { 2 } else { 1 };
    if hx.len() != states {
        bail!(Runtime, "{func}(): expected {states} initial state tensors, got {}", hx.len());
    }
    if !(0.0..=1.0).contains(&s.dropout) {
        bail!(Value, "{func}(): dropout should be a number in range [0, 1], got {}", s.dropout);
    }
    // Sequence first, batched.
    let x = if !batched {
        input.unsqueeze(1)?
    } else if s.batch_first {
        input.transpose(0, 1)?
    } else {
        input.clone()
    };
    let hx: Vec<Tensor> =
        hx.iter().map(|h| if batched { Ok(h.clone()) } else { h.unsqueeze(1) }).collect::<Result<_>>()?;
    let batch = x.shape()?[1];
    let hidden = params[1].shape()?.get(1).copied().unwrap_or(0);
    for h in &hx {
        if h.shape()?[..] != [layers * directions, batch, hidden] {
            bail!(
                Runtime,
                "{func}(): Expected hidden size {:?}, got {:?}",
                [layers * directions, batch, hidden],
                h.shape()?
            );
        }
    }
    // Each layer's input and output: the whole sequence `[T, N, width]`.
    let mut sequence = x;
    let mut width = sequence.shape()?[2];
    let (mut finals_h, mut finals_c) = (Vec::new(), Vec::new());
    for layer in 0..layers {
        if layer > 0 && s.dropout > 0.0 && s.train {
            sequence = super::functional::dropout(&sequence, s.dropout, true, false)?;
        }
        let mut outputs = Vec::with_capacity(directions);
        for direction in 0..directions {
            let k = layer * directions + direction;
            let p = &params[k * per..(k + 1) * per];
            let w =
                Weights { ih: &p[0], hh: &p[1], b_ih: s.has_biases.then(|| &p[2]), b_hh: s.has_biases.then(|| &p[3]) };
            let rows = s.cell.gates() * hidden;
            let expected: [(&str, &Tensor, Vec<usize>); 2] =
                [("weight_ih", w.ih, vec![rows, width]), ("weight_hh", w.hh, vec![rows, hidden])];
            let biases = [("bias_ih", w.b_ih), ("bias_hh", w.b_hh)];
            let biases = biases.into_iter().filter_map(|(name, b)| b.map(|b| (name, b, vec![rows])));
            for (name, t, want) in expected.into_iter().chain(biases) {
                if hidden == 0 || t.shape()?[..] != want[..] {
                    bail!(
                        Runtime,
                        "{func}(): {name} of layer {layer} has shape {:?}, expected {want:?} (a positive hidden size)",
                        t.shape()?
                    );
                }
            }
            let h0 = hx[0].select(0, k as i64)?;
            let c0 = hx.get(1).map(|c| c.select(0, k as i64)).transpose()?;
            let (out, h, c) = run_direction(s.cell, &sequence, &w, h0, c0, direction == 1)?;
            outputs.push(crate::stack(&out, 0)?);
            finals_h.push(h);
            finals_c.extend(c);
        }
        // Both directions' outputs side by side.
        sequence = if directions == 1 { outputs.remove(0) } else { crate::cat(&outputs, -1)? };
        width = hidden * directions;
    }
    let mut output = sequence;
    let mut h_n = crate::stack(&finals_h, 0)?;
    let mut c_n = if finals_c.is_empty() { None } else { Some(crate::stack(&finals_c, 0)?) };
    if !batched {
        output = output.squeeze_dim(1)?;
        h_n = h_n.squeeze_dim(1)?;
        c_n = c_n.map(|c| c.squeeze_dim(1)).transpose()?;
    } else if s.batch_first {
        output = output.transpose(0, 1)?;
    }
    Ok((output, h_n, c_n))
}

/// A multi-layer LSTM over `input` (`torch.lstm`, what `nn.LSTM` calls): `[T, N, I]` (or
/// `[N, T, I]` with `batch_first`, or unbatched `[T, I]`) from the states `hx = [h_0, c_0]`
/// (`[num_layers * directions, N, H]`). `params` holds each layer's `weight_ih`
/// (`[4H, I]`), `weight_hh` (`[4H, H]`) and, with `has_biases`, `bias_ih` and `bias_hh`, per
/// layer and then per direction (the reverse one with `bidirectional`). The gates are
/// PyTorch's `i, f, g, o`: `c' = σ(f) c + σ(i) tanh(g)`, `h' = σ(o) tanh(c')`. `dropout`
/// applies between layers while `train`. Returns the output (the last layer's hidden states,
/// both directions concatenated) and the final `h_n` and `c_n`.
///
/// ```
/// let (t, n, i, h) = (5, 2, 3, 4);
/// let x = torchfn::randn([t, n, i], None, None, None)?;
/// let zeros = torchfn::zeros([1, n, h], None, None)?;
/// let params = [torchfn::randn([4 * h, i], None, None, None)?, torchfn::randn([4 * h, h], None, None, None)?];
/// let (out, h_n, c_n) = torchfn::lstm(&x, &[zeros.clone(), zeros], &params, false, 1, 0.0, false, false, false)?;
/// assert_eq!((out.shape()?, h_n.shape()?, c_n.shape()?), ([5, 2, 4].into(), [1, 2, 4].into(), [1, 2, 4].into()));
/// # Ok::<(), torchfn::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
#[torch_function(module = "torchfn")]
pub fn lstm(
    input: &Tensor,
    hx: &[Tensor],
    params: &[Tensor],
    has_biases: bool,
    num_layers: i64,
    dropout: f64,
    train: bool,
    bidirectional: bool,
    batch_first: bool,
) -> Result<(Tensor, Tensor, Tensor)> {
    let s = Settings { cell: Cell::Lstm, has_biases, num_layers, dropout, train, bidirectional, batch_first };
    let (output, h_n, c_n) = recurrent(input, hx, params, &s)?;
    Ok((output, h_n, c_n.expect("an LSTM returns a cell state")))
}

/// A multi-layer GRU over `input` (`torch.gru`, what `nn.GRU` calls): as [`lstm`] with one
/// state `hx` and three gates, PyTorch's `r, z, n`:
/// `n = tanh(W_in x + b_in + r (W_hn h + b_hn))`, `h' = (1 - z) n + z h`. Returns the output
/// and `h_n`.
///
/// ```
/// let x = torchfn::randn([5, 3], None, None, None)?; // unbatched: [T, I]
/// let h0 = torchfn::zeros([1, 4], None, None)?;
/// let params = [torchfn::randn([12, 3], None, None, None)?, torchfn::randn([12, 4], None, None, None)?];
/// let (out, h_n) = torchfn::gru(&x, &h0, &params, false, 1, 0.0, false, false, false)?;
/// assert_eq!((out.shape()?, h_n.shape()?), ([5, 4].into(), [1, 4].into()));
/// # Ok::<(), torchfn::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
#[torch_function(module = "torchfn")]
pub fn gru(
    input: &Tensor,
    hx: &Tensor,
    params: &[Tensor],
    has_biases: bool,
    num_layers: i64,
    dropout: f64,
    train: bool,
    bidirectional: bool,
    batch_first: bool,
) -> Result<(Tensor, Tensor)> {
    let s = Settings { cell: Cell::Gru, has_biases, num_layers, dropout, train, bidirectional, batch_first };
    let (output, h_n, _) = recurrent(input, std::slice::from_ref(hx), params, &s)?;
    Ok((output, h_n))
}

/// The parameters of a recurrent sample: `layers * directions` sets of four (with biases),
/// small enough that the gates do not saturate.
fn weights(gates: usize, input: usize, hidden: usize, layers: usize, directions: usize) -> Value {
    let mut params = Vec::new();
    for layer in 0..layers {
        let width = if layer == 0 { input } else { hidden * directions };
        for _ in 0..directions {
            params.push(small_f32s(&[gates * hidden, width]));
            params.push(small_f32s(&[gates * hidden, hidden]));
            params.push(small_f32s(&[gates * hidden]));
            params.push(small_f32s(&[gates * hidden]));
        }
    }
    Value::List(params)
}

crate::samples! {
    LSTM => [
        sample([
            f32s(&[3, 2, 3]),
            Value::List(vec![small_f32s(&[1, 2, 2]), small_f32s(&[1, 2, 2])]),
            weights(4, 3, 2, 1, 1),
            Value::Bool(true),
            Value::Int(1),
            Value::Float(0.0),
            Value::Bool(false),
            Value::Bool(false),
            Value::Bool(false),
        ]),
        sample([
            f32s(&[2, 2, 2]),
            Value::List(vec![small_f32s(&[2, 2, 1]), small_f32s(&[2, 2, 1])]),
            weights(4, 2, 1, 1, 2),
            Value::Bool(true),
            Value::Int(1),
            Value::Float(0.0),
            Value::Bool(false),
            Value::Bool(true),
            Value::Bool(true),
        ]),
        sample([
            f32s(&[2, 1, 2]),
            Value::List(vec![small_f32s(&[2, 1, 1]), small_f32s(&[2, 1, 1])]),
            weights(4, 2, 1, 2, 1),
            Value::Bool(true),
            Value::Int(2),
            Value::Float(0.0),
            Value::Bool(false),
            Value::Bool(false),
            Value::Bool(false),
        ]),
    ],
    GRU => [
        sample([
            f32s(&[3, 2, 3]),
            small_f32s(&[1, 2, 2]),
            weights(3, 3, 2, 1, 1),
            Value::Bool(true),
            Value::Int(1),
            Value::Float(0.0),
            Value::Bool(false),
            Value::Bool(false),
            Value::Bool(false),
        ]),
        sample([
            f32s(&[2, 2]),
            small_f32s(&[2, 1]),
            weights(3, 2, 1, 1, 2),
            Value::Bool(true),
            Value::Int(1),
            Value::Float(0.0),
            Value::Bool(false),
            Value::Bool(true),
            Value::Bool(false),
        ]),
    ],
}
