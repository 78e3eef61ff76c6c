//! One LSTM layer's recurrence in one direction, fused, as PyTorch's `mkldnn_rnn_layer` runs it
//! on the CPU once the input is projected: each step is one product of the hidden state with
//! `weight_hh` (packed once for all the steps in float32) and one pass over the gates that
//! applies their activations and updates the states, where the composed layer runs a dozen
//! kernels and packs the weights again at every step. The backward walks the steps in reverse
//! the same way: one pass over the gates' gradients, one product with `weight_hh`.

use ndarray::{ArrayView2, ArrayViewMut2};

use super::map::{output, vectorised, zeroed};
use super::{Float, Number, array, elements, host, threads, with_all_elements};
use crate::backend::{Array, LstmSaved};
use crate::error::{Error, Result};
use crate::types::{DType, Shape};

/// A float type's product `a @ w` with one recurrent weight, made many times.
trait Recurrent: Float {
    /// Multiplies by `w` (`[k, n]`): float32 packs it once for every call.
    fn multiplier<'w>(w: ArrayView2<'w, Self>) -> Multiplier<'w, Self>;
}

/// `a @ w` for one `w` and many `a`.
type Multiplier<'w, F> = Box<dyn Fn(ArrayView2<'_, F>, &mut ArrayViewMut2<'_, F>) + 'w>;

impl Recurrent for f32 {
    fn multiplier<'w>(w: ArrayView2<'w, f32>) -> Multiplier<'w, f32> {
        #[cfg(target_arch = "x86_64")]
        if let Some(packed) = super::sgemm::PackedB::new(w) {
            return Box::new(move |a, out| packed.multiply(a, out));
        }
        Box::new(move |a, out| f32::matmul(a, w, out))
    }
}

impl Recurrent for f64 {
    fn multiplier<'w>(w: ArrayView2<'w, f64>) -> Multiplier<'w, f64> {
        Box::new(move |a, out| f64::matmul(a, w, out))
    }
}

/// `1 / (1 + e^-v)`, as the sigmoid kernel computes it.
#[inline(always)]
fn sigmoid<F: Float>(v: F) -> F {
    F::from_f64(1.0).add(v.neg().exp()).recip()
}

/// The layer's sizes `(T, N, H)`, once every operand is a host float32 or float64 array of
/// the shape the others imply.
fn sizes(func: &str, named: &[(&str, &Array, usize)], gates: &Array) -> Result<(usize, usize, usize, DType)> {
    host(named.iter().map(|(_, a, _)| *a))?;
    let shape = &gates.layout.shape;
    let (Some(&t), Some(&n), Some(&g)) = (shape.first(), shape.get(1), shape.get(2)) else {
        return Err(Error::runtime_error(format!("{func}(): the gates must be [T, N, 4H], got {:?}", &shape[..])));
    };
    if shape.len() != 3 || g % 4 != 0 || g == 0 {
        return Err(Error::runtime_error(format!("{func}(): the gates must be [T, N, 4H], got {:?}", &shape[..])));
    }
    let h = g / 4;
    let dtype = gates.dtype;
    if !matches!(dtype, DType::Float32 | DType::Float64) {
        return Err(Error::runtime_error(format!("{func}(): the CPU kernel takes float32 or float64, not {dtype}")));
    }
    for &(name, a, rank) in named {
        let want: &[usize] = match (rank, name) {
            (2, "w_hh") => &[g, h],
            (2, _) => &[n, h],
            (_, "gates" | "workspace") => &[t, n, g],
            _ => &[t, n, h],
        };
        if a.layout.shape[..] != *want || a.dtype != dtype {
            return Err(Error::runtime_error(format!(
                "{func}(): {name} must be {dtype} of shape {want:?}, got {} of shape {:?}",
                a.dtype,
                &a.layout.shape[..]
            )));
        }
    }
    Ok((t, n, h, dtype))
}

/// How many of a step's `n` rows one thread's pass over the gates takes: about 4,096 hidden
/// units' worth (16 rows of 256), so that a batch of a few dozen rows splits over two threads
/// and a small layer stays on one (the cost of a parallel region is a few microseconds).
fn rows_per_piece(n: usize, h: usize) -> usize {
    (4096 / h.max(1)).clamp(1, n.max(1))
}

/// The step's position in time at step `step` of `t`.
fn time(step: usize, t: usize, reverse: bool) -> usize {
    if reverse { t - 1 - step } else { step }
}

/// [`Backend::lstm_layer`](crate::backend::Backend::lstm_layer) on the CPU.
pub fn lstm_layer(gates: &Array, h0: &Array, c0: &Array, w_hh: &Array, reverse: bool) -> Result<[Array; 3]> {
    let named = [("gates", gates, 3), ("h0", h0, 2), ("c0", c0, 2), ("w_hh", w_hh, 2)];
    let (t, n, h, dtype) = sizes("lstm_layer", &named, gates)?;
    match dtype {
        DType::Float32 => forward::<f32>(gates, h0, c0, w_hh, [t, n, h], reverse),
        _ => forward::<f64>(gates, h0, c0, w_hh, [t, n, h], reverse),
    }
}

fn forward<F: Recurrent>(
    gates: &Array,
    h0: &Array,
    c0: &Array,
    w_hh: &Array,
    [t, n, h]: [usize; 3],
    reverse: bool,
) -> Result<[Array; 3]> {
    let func = "lstm_layer";
    let (mut hs, mut cs, mut ws) =
        (output::<F>(func, t * n * h)?, output::<F>(func, t * n * h)?, output(func, t * n * 4 * h)?);
    let mut state_h = elements::<F>(func, h0)?;
    let mut state_c = elements::<F>(func, c0)?;
    let mut hidden = zeroed::<F>(func, n * 4 * h)?;
    with_all_elements([w_hh, gates], |[w, x]: [&[F]; 2]| -> Result<()> {
        // `h @ w_hhᵀ`: the weights as `[H, 4H]`.
        let w = ArrayView2::from_shape((4 * h, h), w).map_err(|_| Error::runtime_error("lstm_layer(): w_hh"))?;
        let multiply = F::multiplier(w.t());
        // A piece's elements of the states (`one`) and of the gates (`four`).
        let rows = rows_per_piece(n, h);
        let (one, four) = (h * rows, 4 * h * rows);
        for step in 0..t {
            let at = time(step, t, reverse);
            let state = ArrayView2::from_shape((n, h), &state_h[..]).expect("n * h elements");
            let mut product = ArrayViewMut2::from_shape((n, 4 * h), &mut hidden[..]).expect("n * 4h elements");
            multiply(state, &mut product);
            let x = &x[at * n * 4 * h..][..n * 4 * h];
            let w = &mut ws[at * n * 4 * h..][..n * 4 * h];
            let (h_out, c_out) = (&mut hs[at * n * h..][..n * h], &mut cs[at * n * h..][..n * h]);
            let pieces = (x.chunks(four).zip(hidden.chunks(four)).zip(state_c.chunks(one)))
                .zip(w.chunks_mut(four).zip(c_out.chunks_mut(one)).zip(h_out.chunks_mut(one)));
            threads::for_each(pieces, |(((x, hidden), c_prev), ((w, c), h_out))| {
                vectorised(
                    #[inline(always)]
                    || cell(h, x, hidden, c_prev, w, c, h_out),
                )
            });
            state_h.copy_from_slice(h_out);
            state_c.copy_from_slice(c_out);
        }
        Ok(())
    })??;
    Ok([array(hs, Shape::from([t, n, h])), array(cs, Shape::from([t, n, h])), array(ws, Shape::from([t, n, 4 * h]))])
}

/// One step's pass over its rows: the gates `x + hidden` activated into `w`, the new cell
/// state `c` from the previous one `c_prev`, and the hidden state `h_out`.
#[inline(always)]
fn cell<F: Float>(h: usize, x: &[F], hidden: &[F], c_prev: &[F], w: &mut [F], c: &mut [F], h_out: &mut [F]) {
    let rows = c.len() / h.max(1);
    for r in 0..rows {
        let (x, hidden, w) = (&x[r * 4 * h..][..4 * h], &hidden[r * 4 * h..][..4 * h], &mut w[r * 4 * h..][..4 * h]);
        let (c_prev, c, h_out) = (&c_prev[r * h..][..h], &mut c[r * h..][..h], &mut h_out[r * h..][..h]);
        let (wi, rest) = w.split_at_mut(h);
        let (wf, rest) = rest.split_at_mut(h);
        let (wg, wo) = rest.split_at_mut(h);
        for j in 0..h {
            let i = sigmoid(x[j].add(hidden[j]));
            let f = sigmoid(x[h + j].add(hidden[h + j]));
            let g = x[2 * h + j].add(hidden[2 * h + j]).tanh();
            let o = sigmoid(x[3 * h + j].add(hidden[3 * h + j]));
            let next = f.mul(c_prev[j]).add(i.mul(g));
            (wi[j], wf[j], wg[j], wo[j]) = (i, f, g, o);
            c[j] = next;
            h_out[j] = o.mul(next.tanh());
        }
    }
}

/// [`Backend::lstm_layer_backward`](crate::backend::Backend::lstm_layer_backward) on the CPU.
pub fn lstm_layer_backward(grad_hs: &Array, grad_cs: &Array, s: &LstmSaved<'_>) -> Result<[Array; 3]> {
    let named = [
        ("workspace", s.workspace, 3),
        ("grad_hs", grad_hs, 3),
        ("grad_cs", grad_cs, 3),
        ("cs", s.cs, 3),
        ("c0", s.c0, 2),
        ("w_hh", s.w_hh, 2),
    ];
    let (t, n, h, dtype) = sizes("lstm_layer_backward", &named, s.workspace)?;
    match dtype {
        DType::Float32 => backward::<f32>(grad_hs, grad_cs, s, [t, n, h]),
        _ => backward::<f64>(grad_hs, grad_cs, s, [t, n, h]),
    }
}

fn backward<F: Recurrent>(
    grad_hs: &Array,
    grad_cs: &Array,
    s: &LstmSaved<'_>,
    [t, n, h]: [usize; 3],
) -> Result<[Array; 3]> {
    let func = "lstm_layer_backward";
    let mut grad_gates = output::<F>(func, t * n * 4 * h)?;
    // The gradients flowing into the step before: of its hidden and its cell state.
    let (mut dh, mut dc) = (zeroed::<F>(func, n * h)?, zeroed::<F>(func, n * h)?);
    let c0 = elements::<F>(func, s.c0)?;
    let arrays = [s.w_hh, s.workspace, s.cs, grad_hs, grad_cs];
    with_all_elements(arrays, |[w, ws, cs, g_h, g_c]: [&[F]; 5]| -> Result<()> {
        // `dgates @ w_hh`: the weights as they are, `[4H, H]`.
        let w =
            ArrayView2::from_shape((4 * h, h), w).map_err(|_| Error::runtime_error("lstm_layer_backward(): w_hh"))?;
        let multiply = F::multiplier(w);
        // A piece's elements of the states (`one`) and of the gates (`four`).
        let rows = rows_per_piece(n, h);
        let (one, four) = (h * rows, 4 * h * rows);
        for step in (0..t).rev() {
            let at = time(step, t, s.reverse);
            let c_prev = if step == 0 { &c0[..] } else { &cs[time(step - 1, t, s.reverse) * n * h..][..n * h] };
            let here = at * n * h..(at + 1) * n * h;
            let gates = &mut grad_gates[at * n * 4 * h..][..n * 4 * h];
            let w_at = &ws[at * n * 4 * h..][..n * 4 * h];
            let steps = (g_h[here.clone()].chunks(one).zip(g_c[here.clone()].chunks(one)))
                .zip(cs[here].chunks(one).zip(c_prev.chunks(one)))
                .zip(w_at.chunks(four))
                .map(|(((g_h, g_c), (c, c_prev)), w)| Step { g_h, g_c, c, c_prev, w });
            let pieces = steps.zip(dh.chunks_mut(one).zip(dc.chunks_mut(one)).zip(gates.chunks_mut(four)));
            threads::for_each(pieces, |(step_in, ((dh, dc), gates))| {
                vectorised(
                    #[inline(always)]
                    || cell_backward(h, &step_in, dh, dc, gates),
                )
            });
            let gates = ArrayView2::from_shape((n, 4 * h), &*gates).expect("n * 4h elements");
            let mut into = ArrayViewMut2::from_shape((n, h), &mut dh[..]).expect("n * h elements");
            multiply(gates, &mut into);
        }
        Ok(())
    })??;
    Ok([array(grad_gates, Shape::from([t, n, 4 * h])), array(dh, Shape::from([n, h])), array(dc, Shape::from([n, h]))])
}

/// What one step of the backward reads: the gradients reaching its hidden and cell states from
/// outside the recurrence, its cell state and the one before, and its gates' activations.
struct Step<'a, F> {
    g_h: &'a [F],
    g_c: &'a [F],
    c: &'a [F],
    c_prev: &'a [F],
    w: &'a [F],
}

/// One step's pass over its rows: the gates' gradients into `gates`, and the gradient of the
/// cell state before into `dc`. `dh` and `dc` come in as the gradients from the step after.
#[inline(always)]
fn cell_backward<F: Float>(h: usize, s: &Step<'_, F>, dh: &mut [F], dc: &mut [F], gates: &mut [F]) {
    let one = F::from_f64(1.0);
    let rows = dc.len() / h.max(1);
    for r in 0..rows {
        let (w, gates) = (&s.w[r * 4 * h..][..4 * h], &mut gates[r * 4 * h..][..4 * h]);
        let row = r * h..(r + 1) * h;
        let (g_h, g_c, c, c_prev) =
            (&s.g_h[row.clone()], &s.g_c[row.clone()], &s.c[row.clone()], &s.c_prev[row.clone()]);
        let (dh, dc) = (&mut dh[row.clone()], &mut dc[row]);
        let (di, rest) = gates.split_at_mut(h);
        let (df, rest) = rest.split_at_mut(h);
        let (dg, d_o) = rest.split_at_mut(h);
        for j in 0..h {
            let (i, f, g, o) = (w[j], w[h + j], w[2 * h + j], w[3 * h + j]);
            let tc = c[j].tanh();
            let grad_h = g_h[j].add(dh[j]);
            let grad_c = g_c[j].add(dc[j]).add(grad_h.mul(o).mul(one.sub(tc.mul(tc))));
            di[j] = grad_c.mul(g).mul(i.mul(one.sub(i)));
            df[j] = grad_c.mul(c_prev[j]).mul(f.mul(one.sub(f)));
            dg[j] = grad_c.mul(i).mul(one.sub(g.mul(g)));
            d_o[j] = grad_h.mul(tc).mul(o.mul(one.sub(o)));
            dc[j] = grad_c.mul(f);
        }
    }
}
