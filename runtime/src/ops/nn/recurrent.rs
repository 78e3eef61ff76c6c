//! Recurrent networks: `torch.lstm` and `torch.gru` (what `nn.LSTM` and `nn.GRU` call), over
//! layers and directions, with PyTorch's gate order and formulas. Each layer projects its whole
//! input sequence in one product (as PyTorch's). A float32 LSTM layer on the CPU then runs its
//! recurrence fused, as one autograd node ([`LstmLayer`], PyTorch's `mkldnn_rnn_layer` path);
//! every other layer is composed of operations, so that gradients and the other transforms
//! come from theirs, stepping through the sequence with `unbind`, whose one node joins the
//! steps' gradients. Each layer's outputs are stacked for the next.

use crate::autograd::{Ctx, Function};
use crate::backend::Device;
use crate::error::{Result, bail};
use crate::tensor::{DType, Tensor};
use crate::testing::{f32s, sample, small_f32s};
use crate::torch_function;
use crate::value::Value;

/// Which cell a recurrent network runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Cell {
    /// Gates `i, f, g, o`; a hidden and a cell state.
    Lstm,
    /// Gates `r, z, n`; a hidden state.
    Gru,
}

impl Cell {
    /// How many gates the weights stack (rows of `weight_ih` per hidden unit).
    pub fn gates(self) -> usize {
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
/// `c` for an LSTM): each step's output stacked in time order (`[T, N, H]`) and the final
/// states. The input's projection is one product for the whole sequence, as PyTorch's; only
/// the hidden state's is made step by step. An LSTM in float32 on the CPU runs its recurrence
/// fused ([`LstmLayer`]), as PyTorch's runs `mkldnn_rnn_layer` there.
fn run_direction(
    cell: Cell,
    x: &Tensor,
    w: &Weights<'_>,
    h: Tensor,
    c: Option<Tensor>,
    reverse: bool,
) -> Result<(Tensor, Tensor, Option<Tensor>)> {
    // `[T * N, I]`: one matrix product (a 3-D operand would multiply step by step).
    let shape = x.shape()?;
    let (t, n) = (shape[0] as i64, shape[1] as i64);
    let rows = x.reshape(&[t * n, shape[2] as i64])?;
    let width = w.ih.shape()?[0] as i64;
    let c = match (cell, c) {
        (Cell::Lstm, Some(c)) => c,
        (Cell::Lstm, None) => bail!(Runtime, "lstm(): an LSTM carries a cell state"),
        (Cell::Gru, _) => {
            let projected = affine(&rows, w.ih, w.b_ih)?.reshape(&[t, n, width])?;
            let (outputs, h) = gru_recurrence(&projected, h, w, reverse)?;
            return Ok((outputs, h, None));
        }
    };
    // An LSTM's hidden bias joins the input's, added once for the whole sequence.
    let bias = match (w.b_ih, w.b_hh) {
        (Some(a), Some(b)) => Some(a.add(b, 1)?),
        (a, b) => a.or(b).cloned(),
    };
    let gates = affine(&rows, w.ih, bias.as_ref())?.reshape(&[t, n, width])?;
    let (hs, cs) = if fused(&[&gates, &h, &c, w.hh]) {
        let mut states = LstmLayer::apply((gates, h, c, w.hh.clone(), reverse))?.into_iter();
        match (states.next(), states.next()) {
            (Some(hs), Some(cs)) => (hs, cs),
            _ => bail!(Runtime, "lstm(): the fused layer gave fewer than two results"),
        }
    } else {
        lstm_recurrence(&gates, h, c, w.hh, reverse)?
    };
    let last = if reverse { 0 } else { t - 1 };
    let (h, c) = (hs.select(0, last)?, cs.select(0, last)?);
    Ok((hs, h, Some(c)))
}

/// Whether an LSTM layer runs fused: every operand float32, on the CPU (a wrapper or a fake
/// tensor standing for the CPU's included, whose hooks and modes receive the fused operator) or
/// the meta device, none with a tangent (forward AD differentiates the composed layer).
/// Float64 and the GPU compose the layer, as PyTorch's float64 and its devices without a fused
/// kernel do.
fn fused(operands: &[&Tensor]) -> bool {
    let fits = |t: &&Tensor| {
        t.dtype().is_ok_and(|d| d == DType::Float32) && t.device().is_ok_and(|d| d == Device::CPU || d.is_meta())
    };
    operands.iter().all(fits) && crate::autograd::forward_ad::tangents(operands).is_none()
}

/// The steps of `sequence` (`[T, ...]`) in the order a direction runs them: from the first to
/// the last, or from the last to the first with `reverse` (whose results are reversed back
/// into time order).
fn in_order(sequence: &Tensor, reverse: bool) -> Result<Vec<Tensor>> {
    let mut steps = sequence.unbind(0)?;
    if reverse {
        steps.reverse();
    }
    Ok(steps)
}

/// An LSTM's recurrence composed of operations, over `gates` (`[T, N, 4H]`, the input's
/// projection with both biases) from `h` and `c`: the hidden and cell states after each step,
/// stacked in time order. Its gates are PyTorch's `i, f, g, o`.
fn lstm_recurrence(
    gates: &Tensor,
    mut h: Tensor,
    mut c: Tensor,
    w_hh: &Tensor,
    reverse: bool,
) -> Result<(Tensor, Tensor)> {
    let steps = in_order(gates, reverse)?;
    let (mut hs, mut cs) = (Vec::with_capacity(steps.len()), Vec::with_capacity(steps.len()));
    for x in &steps {
        let gates = x.add(&h.matmul(&w_hh.t()?)?, 1)?.chunk(4, -1)?;
        let (i, f) = (gates[0].sigmoid()?, gates[1].sigmoid()?);
        let (g, o) = (gates[2].tanh()?, gates[3].sigmoid()?);
        c = f.mul(&c)?.add(&i.mul(&g)?, 1)?;
        h = o.mul(&c.tanh()?)?;
        hs.push(h.clone());
        cs.push(c.clone());
    }
    if reverse {
        hs.reverse();
        cs.reverse();
    }
    Ok((crate::stack(&hs, 0)?, crate::stack(&cs, 0)?))
}

/// A GRU's recurrence over `projected` (`[T, N, 3H]`, the input's projection with its bias)
/// from `h`: the outputs stacked in time order, and the final hidden state. PyTorch's gates
/// `r, z, n`.
fn gru_recurrence(projected: &Tensor, mut h: Tensor, w: &Weights<'_>, reverse: bool) -> Result<(Tensor, Tensor)> {
    let steps = in_order(projected, reverse)?;
    let mut outputs = Vec::with_capacity(steps.len());
    for x in &steps {
        let hidden = affine(&h, w.hh, w.b_hh)?;
        let (xs, hs) = (x.chunk(3, -1)?, hidden.chunk(3, -1)?);
        let r = xs[0].add(&hs[0], 1)?.sigmoid()?;
        let z = xs[1].add(&hs[1], 1)?.sigmoid()?;
        let n = xs[2].add(&r.mul(&hs[2])?, 1)?.tanh()?;
        // (1 - z) * n + z * h = n + z * (h - n)
        h = n.add(&z.mul(&h.sub(&n, 1)?)?, 1)?;
        outputs.push(h.clone());
    }
    if reverse {
        outputs.reverse();
    }
    Ok((crate::stack(&outputs, 0)?, h))
}

/// One LSTM layer's recurrence as one autograd node, named as PyTorch's CPU node for it
/// (`MkldnnRnnLayerBackward0`): the fused kernel forward (`aten::_lstm_layer`), and backward
/// its fused gradient (`aten::_lstm_layer_backward`) plus one product for `weight_hh`'s, where
/// the composed layer records a dozen nodes a step and sums a weight gradient per step. Its
/// inputs: the projected gates, `h0`, `c0`, `weight_hh`, and whether it runs in reverse.
#[derive(Default)]
struct LstmLayer {
    reverse: bool,
}

impl Function for LstmLayer {
    type Inputs = (Tensor, Tensor, Tensor, Tensor, bool);
    type Output = Vec<Tensor>;
    type GradOutputs = Vec<Option<Tensor>>;

    fn node_name() -> std::borrow::Cow<'static, str> {
        "MkldnnRnnLayerBackward0".into()
    }

    fn forward_with_ctx(ctx: &mut Ctx<Self>, (gates, h0, c0, w_hh, reverse): &Self::Inputs) -> Result<Vec<Tensor>> {
        let mut results = crate::primitive::lstm_layer(gates, h0, c0, w_hh, *reverse)?;
        let workspace = results.pop();
        ctx.reverse = *reverse;
        let (hs, cs) = (results.first().cloned(), results.get(1).cloned());
        ctx.save_for_backward((gates, h0, c0, w_hh, hs, cs, workspace));
        Ok(results)
    }

    fn backward(ctx: &mut Ctx<Self>, grads: Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> {
        let (gates, h0, c0, w_hh, hs, cs, workspace): (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor) =
            ctx.saved_tensors()?;
        let reverse = ctx.reverse;
        let given = |i: usize| grads.get(i).cloned().flatten().map_or_else(|| crate::zeros_like(&hs, None), Ok);
        let (g_hs, g_cs) = (given(0)?, given(1)?);
        let needs = ctx.needs_input_grad.clone();
        let needed = |i: usize| needs.get(i).copied().unwrap_or(true);
        if crate::autograd::is_grad_enabled() {
            // Differentiating again (`create_graph`): the composed layer, recomputed from
            // aliases of the inputs (so that a gradient reaching one input through another, a
            // weight shared between layers, say, is not counted twice) and differentiated with
            // its graph recorded.
            let alias = |t: &Tensor| crate::primitive::view(t, |l| Ok(l.clone()));
            let aliases = [alias(&gates)?, alias(&h0)?, alias(&c0)?, alias(&w_hh)?];
            let [a_gates, a_h0, a_c0, a_w] = &aliases;
            let (hs, cs) = lstm_recurrence(a_gates, a_h0.clone(), a_c0.clone(), a_w, reverse)?;
            let wanted: Vec<usize> =
                (0..4).filter(|&i| needed(i) && aliases[i].requires_grad().unwrap_or(false)).collect();
            let inputs: Vec<Tensor> = wanted.iter().map(|&i| aliases[i].clone()).collect();
            let mut grads: Vec<Option<Tensor>> = vec![None; 5];
            if !inputs.is_empty() {
                let found = crate::autograd::grad(&[hs, cs], &inputs, Some(&[g_hs, g_cs]), None, true, true)?;
                for (&i, g) in wanted.iter().zip(found) {
                    grads[i] = g;
                }
            }
            return Ok(grads);
        }
        let mut found =
            crate::primitive::lstm_layer_backward(&g_hs, &g_cs, [&c0, &w_hh, &cs, &workspace], reverse)?.into_iter();
        let (Some(g_gates), Some(g_h0), Some(g_c0)) = (found.next(), found.next(), found.next()) else {
            bail!(Runtime, "lstm(): the fused backward gave fewer than three gradients");
        };
        if !needed(3) {
            return Ok(vec![Some(g_gates), Some(g_h0), Some(g_c0), None, None]);
        }
        // `weight_hh`'s gradient: every step's gate gradients times the hidden state it saw,
        // summed over the steps, in one product.
        let shape = hs.shape()?;
        let (t, n, h) = (shape[0] as i64, shape[1] as i64, shape[2] as i64);
        let before = if t == 1 {
            h0.unsqueeze(0)?
        } else if reverse {
            crate::cat(&[hs.narrow(0, 1, t - 1)?, h0.unsqueeze(0)?], 0)?
        } else {
            crate::cat(&[h0.unsqueeze(0)?, hs.narrow(0, 0, t - 1)?], 0)?
        };
        let g_w = g_gates.reshape(&[t * n, 4 * h])?.t()?.matmul(&before.reshape(&[t * n, h])?)?;
        Ok(vec![Some(g_gates), Some(g_h0), Some(g_c0), Some(g_w), None])
    }
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
    if x.shape()?[0] == 0 {
        bail!(Runtime, "Expected sequence length to be larger than 0 in RNN");
    }
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
            outputs.push(out);
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
