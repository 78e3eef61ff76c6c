//! Layer 3, the primitives: one tensor-level function per kernel family. Each calls its
//! operator through the dispatch layer below ([`crate::dispatch`]: dispatch modes, then the
//! backend of the operands' device), wraps the result as a tensor and, when grad mode is on
//! and an operand requires grad, records the node whose backward the derivatives table
//! ([`derivatives`]) declares. Public operations (layer 2, `ops/`) are compositions of these,
//! so every one of them differentiates, on every device, and every operator call they make,
//! the backward formulas' included, reaches the dispatch layer.

mod derivatives;

use std::borrow::Cow;

use crate::autograd::{self, Edge, Meta, Node, SavedTensor, forward_ad, meta};
use crate::backend::{Array, Binary, Buffer, Device, Reduce, Scan, Unary, Window};
use crate::dispatch::linalg::Decomposition;
use crate::dispatch::{self, Output};
use crate::error::{Result, bail};
use crate::tensor::{DType, Dense, Layout, Scalar, Shape, Tensor};

pub(crate) use derivatives::{Op, conv_transpose2d};

/// The data of an operand; primitives are called with tensors the operation checked, so a
/// duck here names the primitive.
fn data<'t>(t: &'t Tensor, func: &str) -> Result<&'t Dense> {
    t.data(func, "input")
}

/// Whether an operation on `inputs` records: grad mode is on and one of them requires grad.
#[inline]
fn recording(inputs: &[&Tensor]) -> bool {
    inputs.iter().any(|t| meta::requires_grad(t)) && autograd::is_grad_enabled()
}

/// What a node keeps for its backward: some of its inputs (by position), its output, and
/// tensors of its own (indices).
#[derive(Default)]
struct Keep {
    inputs: &'static [usize],
    output: bool,
    extra: Vec<Tensor>,
}

/// The result `array` of `op` on `inputs`, with its history when the operation records and its
/// tangent when an input has one (integer and bool results are neither differentiable).
/// `record` gives the node's operation and what it keeps; it runs only when the operation
/// records or computes a tangent, so nothing is built (or allocated) for it otherwise.
fn finish(inputs: &[&Tensor], out: Output, record: impl FnOnce() -> (Op, Keep)) -> Result<Tensor> {
    finish_with(recording(inputs), inputs, out, record)
}

/// [`finish`] when whether the operation records is already known.
#[inline]
fn finish_with(records: bool, inputs: &[&Tensor], out: Output, record: impl FnOnce() -> (Op, Keep)) -> Result<Tensor> {
    if forward_ad::level_active() {
        return finish_dual(records, inputs, out, record);
    }
    if !records || !out.array().dtype.is_floating_point() {
        return Ok(out.into_tensor());
    }
    let (op, keep) = record();
    Ok(recorded(inputs, out, op, keep))
}

/// [`finish_with`] while a forward-AD level is active: the result also gets its tangent when an
/// input has one.
#[cold]
#[inline(never)]
fn finish_dual(records: bool, inputs: &[&Tensor], out: Output, record: impl FnOnce() -> (Op, Keep)) -> Result<Tensor> {
    let tangents = forward_ad::tangents(inputs);
    if (!records && tangents.is_none()) || !out.array().dtype.is_floating_point() {
        return Ok(out.into_tensor());
    }
    let (op, keep) = record();
    let Some(tangents) = tangents else { return Ok(recorded(inputs, out, op, keep)) };
    let (forward, extra) = (op.clone(), keep.extra.clone());
    let out = if records { recorded(inputs, out, op, keep) } else { out.into_tensor() };
    give_tangent(&forward, inputs, &extra, &out, &tangents)?;
    if records {
        autograd::graph::share_tangent_with_saved_output(&out);
    }
    Ok(out)
}

/// Gives `out` (the result of `op` on `inputs`) its tangent: the forward formula, run with
/// forward AD suspended (its own operations compute no tangents).
fn give_tangent(
    op: &Op,
    inputs: &[&Tensor],
    extra: &[Tensor],
    out: &Tensor,
    tangents: &[Option<Tensor>],
) -> Result<()> {
    let tangent = {
        let _formula = forward_ad::suspend();
        op.jvp(inputs, extra, out, tangents)?
    };
    forward_ad::set_tangent(out, Some(tangent));
    Ok(())
}

/// The result `out` of `op` on `inputs`, as the output of a new node: a hook's tensor gets the
/// history itself, unless it has autograd state of its own (an input handed back, say), when a
/// new handle of its data does.
#[inline]
fn recorded(inputs: &[&Tensor], out: Output, op: Op, keep: Keep) -> Tensor {
    let array = out.array();
    let next = inputs.iter().map(|t| meta::gradient_edge(t));
    let output = autograd::OutputMeta { shape: array.layout.shape.clone(), dtype: array.dtype, device: array.device() };
    let saved = keep.inputs.iter().map(|&i| SavedTensor::input(inputs[i]));
    let saved = saved.chain(keep.extra.iter().map(SavedTensor::input));
    let saved = saved.chain(keep.output.then(|| SavedTensor::output(Tensor::from_array(array.clone()), 0)));
    let edge = Edge { node: Node::function(op, next, saved, [output]), output_nr: 0 };
    match out {
        Output::Given(tensor) if !meta::requires_grad(&tensor) => {
            meta::set_history(&tensor, Some(edge));
            tensor
        }
        out => Tensor::from_dense(Dense::with_meta(out.into_array(), Meta::with_history(edge))),
    }
}

/// `out` for a kernel that may write into it: never while recording or computing a tangent
/// (the result must be a fresh tensor that the in-place operation then writes, so saved
/// tensors and the inputs the formulas read stay intact; an in-place kernel that records is
/// [`write_recorded`]'s).
#[inline]
fn target<'t>(out: Option<&'t Tensor>, records: bool, inputs: &[&Tensor]) -> Option<&'t Array> {
    let out = out?;
    if records || forward_ad::tangents(inputs).is_some() {
        return None;
    }
    out.dense().map(|d| &d.array)
}

/// An input of an in-place operation composed of several kernels: the tensor itself, or, when
/// the operation records, a recorded copy (the in-place write must not change what the
/// backward reads).
pub(crate) fn inplace_source(t: &Tensor, others: &[&Tensor]) -> Result<Tensor> {
    if (meta::requires_grad(t) || others.iter().any(|o| meta::requires_grad(o))) && autograd::is_grad_enabled() {
        return copy(t, data(t, "copy")?.dtype);
    }
    Ok(t.clone())
}

/// An error when an `out=` form is called on tensors that require grad while recording, as in
/// PyTorch: the result written into `out` could not be differentiated.
pub(crate) fn refuse_out(func: &str, inputs: &[&Tensor]) -> Result<()> {
    if recording(inputs) {
        bail!(
            Runtime,
            "{func}(): functions with out=... arguments don't support automatic differentiation, but one of the \
             arguments requires grad."
        );
    }
    Ok(())
}

/// `op` on each element of `x`, in `dtype`; written into `out` when the kernel can. An
/// in-place operation gives `x` itself as `out`: see [`write_recorded`] for that write while
/// recording.
pub(crate) fn unary(x: &Tensor, op: Unary, dtype: DType, out: Option<&Tensor>) -> Result<Tensor> {
    let records = recording(&[x]);
    let record = || (Op::Unary(op), derivatives::unary_keeps(op));
    if records && out.is_some_and(|o| o.is(x)) {
        return write_recorded(&[x], dtype, record(), |inputs, out| dispatch::unary(inputs[0], op, dtype, out));
    }
    let array = dispatch::unary(x, op, dtype, target(out, records, &[x]))?;
    count_write(out, &array);
    finish_with(records, &[x], array, record)
}

/// `op` on the elements of `a` and `b` broadcast together, in `dtype`; written into `out`
/// when the kernel can (an in-place operation gives `a` itself, as [`unary`]'s).
pub(crate) fn binary(a: &Tensor, b: &Tensor, op: Binary, dtype: DType, out: Option<&Tensor>) -> Result<Tensor> {
    let records = recording(&[a, b]);
    let number = b.dense().is_some_and(|y| y.wrapped_number);
    let record = || (Op::Binary { op, number }, derivatives::binary_keeps(op));
    if records && out.is_some_and(|o| o.is(a)) {
        let kernel = |inputs: &[&Tensor], out: Option<&Array>| dispatch::binary(inputs[0], inputs[1], op, dtype, out);
        return write_recorded(&[a, b], dtype, record(), kernel);
    }
    let array = dispatch::binary(a, b, op, dtype, target(out, records, &[a, b]))?;
    count_write(out, &array);
    finish_with(records, &[a, b], array, record)
}

/// Counts a kernel's write into `out` in its version counter: a result in `out`'s memory, at
/// its layout, was computed there.
#[inline]
fn count_write(out: Option<&Tensor>, result: &Output) {
    if let Some(o) = out.and_then(Tensor::dense)
        && o.shares(result.array())
        && o.layout == result.array().layout
    {
        o.storage.bump_version();
    }
}

/// An in-place operation's kernel while recording: `kernel` of `inputs`, the first of which is
/// the written `target`, computed into `target`'s memory (the modes see the in-place operator,
/// `add_.Tensor`, `relu_`), the write counted, and `target` made the output of the operation's
/// node. The node reads a recorded copy of `target`'s old value only where its backward needs
/// it (`mul_`, `sin_`: PyTorch's `original_self`); a saved output is `target` at its new
/// version. Where the kernel would not write in place (a result of another shape or a dtype
/// `target` cannot take, an expanded `target`, an operand sharing its memory, a leaf or a view
/// of one, a tangent to compute), it runs on a recorded copy into a fresh result, which the
/// in-place operation then writes, or refuses, as any other.
#[cold]
#[inline(never)]
fn write_recorded(
    inputs: &[&Tensor],
    dtype: DType,
    (op, keep): (Op, Keep),
    kernel: impl Fn(&[&Tensor], Option<&Array>) -> Result<Output>,
) -> Result<Tensor> {
    let target = inputs[0];
    let dst = data(target, "in-place")?;
    let in_place = writes_in_place(inputs, dst, dtype);
    let old = if in_place && !keep.inputs.contains(&0) { None } else { Some(copy(target, dst.dtype)?) };
    let mut operands = inputs.to_vec();
    if let Some(old) = &old {
        operands[0] = old;
    }
    if !in_place {
        let out = kernel(&operands, None)?;
        return finish(&operands, out, || (op, keep));
    }
    let written = kernel(inputs, Some(&dst.array))?;
    count_write(Some(target), &written);
    copy_in("in-place", target, &written.into_tensor())?;
    let result = recorded(&operands, Output::Array(dst.array.clone()), op, keep);
    take_history(target, &result)?;
    Ok(target.clone())
}

/// Whether [`write_recorded`]'s kernel writes its result (of `dtype`) into `inputs[0]`, `dst`,
/// in place and records it there.
fn writes_in_place(inputs: &[&Tensor], dst: &Dense, dtype: DType) -> bool {
    let others = &inputs[1..];
    dtype.is_floating_point()
        && others.iter().all(|t| t.dense().is_some_and(|d| !d.shares(dst)))
        && dispatch::writable_in_place(dst, others.iter().copied(), dtype)
        && forward_ad::tangents(inputs).is_none()
        && refuse_recorded_write("", inputs[0]).is_ok()
}

/// `a` where `condition` holds, `b` elsewhere, broadcast together, in `dtype`.
pub(crate) fn select(condition: &Tensor, a: &Tensor, b: &Tensor, dtype: DType) -> Result<Tensor> {
    let array = dispatch::select(condition, a, b, dtype)?;
    finish(&[condition, a, b], array, || (Op::Select, Keep { inputs: &[0], ..Keep::default() }))
}

/// `op` over the dimensions `dims` (sorted, distinct) of `x`, read as `dtype`; the reduced
/// dimensions are dropped.
pub(crate) fn reduce(x: &Tensor, dims: &[usize], op: Reduce, dtype: DType) -> Result<Tensor> {
    let array = dispatch::reduce(x, dims, op, dtype)?;
    let keep = match op {
        Reduce::Prod => Keep { inputs: &[0], ..Keep::default() },
        Reduce::Max | Reduce::Min => Keep { inputs: &[0], output: true, ..Keep::default() },
        _ => Keep::default(),
    };
    finish(&[x], array, || (Op::Reduce { op, dims: dims.to_vec() }, keep))
}

/// The running `op` along `dim` of `x`, in `dtype`.
pub(crate) fn scan(x: &Tensor, dim: usize, op: Scan, dtype: DType) -> Result<Tensor> {
    let array = dispatch::scan(x, dim, op, dtype)?;
    let keep = match op {
        Scan::Prod => Keep { inputs: &[0], ..Keep::default() },
        _ => Keep::default(),
    };
    finish(&[x], array, || (Op::Scan { op, dim }, keep))
}

/// `a @ b` in `dtype` for `a` of shape `[..., n, k]` and `b` of shape `[..., k, m]` (two or
/// more dimensions each, the leading ones broadcasting): `[*batch, n, m]`.
pub(crate) fn matmul(a: &Tensor, b: &Tensor, dtype: DType) -> Result<Tensor> {
    let array = dispatch::matmul(a, b, dtype)?;
    finish(&[a, b], array, || (Op::Matmul, Keep { inputs: &[0, 1], ..Keep::default() }))
}

/// The positions `index` (an integer vector in range) of dimension `dim` of `x`.
pub(crate) fn index_select(x: &Tensor, dim: usize, index: &Tensor) -> Result<Tensor> {
    let array = dispatch::index_select(x, dim, index)?;
    finish(&[x], array, || (Op::IndexSelect { dim }, Keep { extra: vec![index.clone()], ..Keep::default() }))
}

/// `x` at `index` (integers in range) along `dim`, elementwise.
pub(crate) fn gather(x: &Tensor, dim: usize, index: &Tensor) -> Result<Tensor> {
    let array = dispatch::gather(x, dim, index)?;
    finish(&[x], array, || (Op::Gather { dim }, Keep { extra: vec![index.clone()], ..Keep::default() }))
}

/// `pieces` joined along `dim` into one tensor of `shape`, read as `dtype`.
pub(crate) fn concat(pieces: &[Tensor], dim: usize, shape: &Shape, dtype: DType) -> Result<Tensor> {
    let array = dispatch::cat(pieces, dim, shape, dtype)?;
    let inputs: Vec<&Tensor> = pieces.iter().collect();
    let sizes = || pieces.iter().map(|p| p.dense().map_or(0, |d| d.layout.shape[dim])).collect();
    finish(&inputs, array, || (Op::Concat { dim, sizes: sizes() }, Keep::default()))
}

/// The softmax (or, with `log`, log-softmax) of `x` along `dim`, in the float `dtype`.
pub(crate) fn softmax(x: &Tensor, dim: usize, log: bool, dtype: DType) -> Result<Tensor> {
    let array = dispatch::softmax(x, dim, log, dtype)?;
    finish(&[x], array, || (Op::Softmax { dim, log }, Keep { output: true, ..Keep::default() }))
}

/// The 2-D cross-correlation of `input` `[n, c, h, w]` with `weight` `[o, c / groups, kh, kw]`
/// plus `bias` `[o]`, over `window`.
pub(crate) fn conv2d(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    groups: usize,
    window: &Window,
) -> Result<Tensor> {
    let input = &contiguous(input)?;
    let array = dispatch::convolution(input, weight, bias, groups, window)?;
    let mut inputs = vec![input, weight];
    inputs.extend(bias);
    finish(&inputs, array, || (Op::Conv2d { groups, window: *window }, Keep { inputs: &[0, 1], ..Keep::default() }))
}

/// The gradients of conv2d's input and weight (where `which` asks) from the gradient `g` of
/// its result, by the backend's own kernel: `None` when it has none, or when the gradients
/// would record history or carry tangents (the composite formulation does both).
pub(crate) fn conv2d_backward(
    g: &Tensor,
    input: &Tensor,
    weight: &Tensor,
    groups: usize,
    window: &Window,
    which: [bool; 2],
) -> Result<Option<[Option<Tensor>; 2]>> {
    // Tangents of these operands, not merely an active level: the level is the process's, and
    // another thread's (a jvp running beside this backward) must not change what runs here.
    if recording(&[g, input, weight]) || forward_ad::tangents(&[g, input, weight]).is_some() {
        return Ok(None);
    }
    dispatch::convolution_backward(g, input, weight, groups, window, which)
}

/// Max pooling of `input` `[planes, h, w]` over `window`: the values (differentiable) and each
/// one's position in its plane.
pub(crate) fn max_pool2d(input: &Tensor, window: &Window) -> Result<(Tensor, Tensor)> {
    let x = data(input, "max_pool2d")?;
    let (values, indices) = dispatch::max_pool2d(input, window)?;
    let indices = indices.into_tensor();
    let record =
        || (Op::MaxPool2d { input: x.layout.shape.clone() }, Keep { extra: vec![indices.clone()], ..Keep::default() });
    Ok((finish(&[input], values, record)?, indices))
}

/// The decomposition `op` of `inputs` (`A`, and `B` for a solve) with its option `flag`: its
/// results, not recorded (the operations in `ops/decompositions.rs` record each decomposition as one
/// node whose backward is written with differentiable operations).
pub(crate) fn decompose(op: Decomposition, inputs: &[&Tensor], flag: bool) -> Result<Vec<Tensor>> {
    Ok(dispatch::linalg::decompose(op, inputs, flag)?.into_iter().map(Output::into_tensor).collect())
}

/// One LSTM layer's fused recurrence from `gates` (the input's projection), `h0`, `c0` and
/// `w_hh`: the hidden states, the cell states and the gates' activations, not recorded (the LSTM
/// in `ops/nn/recurrent.rs` records the layer as one node whose backward is
/// [`lstm_layer_backward`]).
pub(crate) fn lstm_layer(
    gates: &Tensor,
    h0: &Tensor,
    c0: &Tensor,
    w_hh: &Tensor,
    reverse: bool,
) -> Result<Vec<Tensor>> {
    Ok(dispatch::lstm_layer(gates, h0, c0, w_hh, reverse)?.into_iter().map(Output::into_tensor).collect())
}

/// The gradients of [`lstm_layer`]'s `gates`, `h0` and `c0` from those of its hidden and cell
/// states, not recorded; `saved` is `c0`, `w_hh`, and the cell states and the activations the
/// forward gave.
pub(crate) fn lstm_layer_backward(
    grad_hs: &Tensor,
    grad_cs: &Tensor,
    saved: [&Tensor; 4],
    reverse: bool,
) -> Result<Vec<Tensor>> {
    let grads = dispatch::lstm_layer_backward(grad_hs, grad_cs, saved, reverse)?;
    Ok(grads.into_iter().map(Output::into_tensor).collect())
}

/// `x` sorted along `dim` (stably, NaN largest; `descending` reverses the order, ties keeping
/// theirs): the values and their positions. The values are `x` gathered at the positions when
/// a gradient or tangent is wanted, so they differentiate as `gather` does.
pub(crate) fn sort(x: &Tensor, dim: usize, descending: bool) -> Result<(Tensor, Tensor)> {
    sorted(x, dim, dispatch::sort(x, dim, descending)?)
}

/// The first `k` of [`sort`] along `dim` (the largest with `largest`), selected before sorting.
pub(crate) fn topk(x: &Tensor, k: usize, dim: usize, largest: bool) -> Result<(Tensor, Tensor)> {
    sorted(x, dim, dispatch::topk(x, k, dim, largest)?)
}

/// A sorting kernel's values and positions as tensors, the values gathered from `x` at the
/// positions when they are to be differentiated.
fn sorted(x: &Tensor, dim: usize, (values, indices): (Output, Output)) -> Result<(Tensor, Tensor)> {
    let indices = indices.into_tensor();
    if data(x, "sort")?.layout.ndim() == 0 {
        return Ok((copy(x, data(x, "sort")?.dtype)?, indices));
    }
    if recording(&[x]) || forward_ad::tangents(&[x]).is_some() {
        return Ok((gather(x, dim, &indices)?, indices));
    }
    Ok((values.into_tensor(), indices))
}

/// A contiguous copy of `x` converted to `dtype` (`clone`, `contiguous`, `to(dtype)`).
pub(crate) fn copy(x: &Tensor, dtype: DType) -> Result<Tensor> {
    let array = dispatch::to_copy(x, dtype, data(x, "copy")?.device())?;
    finish(&[x], array, || (Op::Copy, Keep::default()))
}

/// `f` of `x` computed in float32 when `x` is float16 or bfloat16, its result rounded back
/// once (differentiably): the operations PyTorch runs as one kernel that computes half
/// precision in float32 (the norms, the losses) but torchfn composes from several primitives
/// round once, as PyTorch's, instead of after every step. Other dtypes run `f` on `x` itself.
pub(crate) fn in_float32(x: &Tensor, f: impl FnOnce(&Tensor) -> Result<Tensor>) -> Result<Tensor> {
    let dtype = data(x, "in_float32")?.dtype;
    if !dtype.is_reduced_float() {
        return f(x);
    }
    let y = f(&copy(x, DType::Float32)?)?;
    if data(&y, "in_float32")?.dtype == DType::Float32 { copy(&y, dtype) } else { Ok(y) }
}

/// `x` itself when contiguous, else a contiguous copy.
pub(crate) fn contiguous(x: &Tensor) -> Result<Cow<'_, Tensor>> {
    let a = data(x, "contiguous")?;
    if a.layout.is_contiguous() { Ok(Cow::Borrowed(x)) } else { Ok(Cow::Owned(copy(x, a.dtype)?)) }
}

/// `x` copied to `device` as `dtype`, through host memory.
pub(crate) fn transfer(x: &Tensor, device: Device, dtype: DType) -> Result<Tensor> {
    let array = dispatch::to_copy(x, dtype, device)?;
    finish(&[x], array, || (Op::Transfer, Keep::default()))
}

/// A view of `x`'s memory with the layout `make` gives for `x`'s layout (`make` must be a view
/// of the same elements: a permutation, a slice, a broadcast, a reshape of a contiguous
/// layout...). Its backward needs `make` of a contiguous layout of `x`'s shape too.
pub(crate) fn view(x: &Tensor, make: impl Fn(&Layout) -> Result<Layout>) -> Result<Tensor> {
    restride(x, make, true, true)
}

/// As [`view`] of a tensor the operation just made (a copy being reshaped): the result shares
/// its memory but is no view of it (PyTorch's `_unsafe_view`; its `_base` is `None`).
pub(crate) fn unsafe_view(x: &Tensor, make: impl Fn(&Layout) -> Result<Layout>) -> Result<Tensor> {
    restride(x, make, false, true)
}

/// The view (or unsafe view) `make` lays out, with its tangent, and its own node when `node`
/// (a piece of [`views`] gets the shared one instead).
fn restride(x: &Tensor, make: impl Fn(&Layout) -> Result<Layout>, is_view: bool, node: bool) -> Result<Tensor> {
    let a = data(x, "view")?;
    let view = match dispatch::as_strided(x, make(&a.layout)?)? {
        Output::Array(array) if is_view => x.view_of(a, array),
        // A wrapper's hook made the view: it is still a view of `x`, as autograd's view
        // tracking (above the hook) makes it in PyTorch.
        Output::Given(tensor) if is_view && tensor.is_wrapper() => x.view_of(a, data(&tensor, "view")?.array.clone()),
        Output::Given(tensor) if is_view => tensor,
        out => Tensor::from_array(out.into_array()),
    };
    let tangents = forward_ad::tangents(&[x]);
    let records = node && recording(&[x]);
    if !records && tangents.is_none() {
        return Ok(view);
    }
    let op = Op::View { input: a.layout.shape.clone(), relative: make(&Layout::contiguous(a.layout.shape.clone()))? };
    if let Some(tangents) = tangents {
        give_tangent(&op, &[x], &[], &view, &tangents)?;
    }
    if records {
        let node = Node::function(op, [meta::gradient_edge(x)], Vec::new(), [meta::output_meta(data(&view, "view")?)]);
        meta::set_history(&view, Some(Edge { node, output_nr: 0 }));
    }
    Ok(view)
}

/// The pieces of `x` along dimension `dim` (`split`, `chunk`, `unbind`: disjoint, in order,
/// covering it), the `i`-th laid out by `make(i, x's layout)`, `unbind` when they drop `dim`:
/// recorded as one node `name` with an output per piece, as PyTorch's `SplitBackward0` and
/// `UnbindBackward0`, whose backward joins the pieces' gradients (a node per piece would make
/// a gradient of `x`'s size for each: quadratic for a recurrent network stepping through a
/// sequence's `unbind`).
pub(crate) fn views(
    x: &Tensor,
    count: usize,
    make: impl Fn(usize, &Layout) -> Result<Layout>,
    pieces: Pieces,
) -> Result<Vec<Tensor>> {
    let out: Vec<Tensor> = (0..count).map(|i| restride(x, |l| make(i, l), true, false)).collect::<Result<_>>()?;
    if !recording(&[x]) {
        return Ok(out);
    }
    let outputs: Vec<_> = out.iter().map(|v| Ok(meta::output_meta(data(v, "view")?))).collect::<Result<_>>()?;
    let node = Node::function(Op::Views(pieces), [meta::gradient_edge(x)], Vec::new(), outputs);
    for (output_nr, v) in out.iter().enumerate() {
        meta::set_history(v, Some(Edge { node: node.clone(), output_nr }));
    }
    Ok(out)
}

/// How [`views`] cut their input: along `dim`, keeping it (`split`) or dropping it (`unbind`),
/// and the node's name.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pieces {
    pub(crate) dim: usize,
    pub(crate) unbind: bool,
    pub(crate) name: &'static str,
}

/// The gradient of `x` from its [`views`]' (zeros where a piece has none): joined along the
/// dimension they were cut from, so it differentiates, batches and runs for wrapper
/// subclasses as `cat` does.
pub(crate) fn views_gradient(pieces: Pieces, grads: &[Tensor]) -> Result<Tensor> {
    let joined: Vec<Tensor> = if pieces.unbind {
        grads
            .iter()
            .map(|g| {
                let mut shape = data(g, "backward")?.layout.shape.to_vec();
                shape.insert(pieces.dim, 1);
                reshape(g, &Shape::from(shape))
            })
            .collect::<Result<_>>()?
    } else {
        grads.to_vec()
    };
    let first = data(&joined[0], "backward")?;
    let mut shape = first.layout.shape.to_vec();
    shape[pieces.dim] =
        joined.iter().map(|g| Ok(data(g, "backward")?.layout.shape[pieces.dim])).sum::<Result<usize>>()?;
    concat(&joined, pieces.dim, &Shape::from(shape), first.dtype)
}

/// A view of `x` with `layout` relative to a contiguous layout of `x` (as the backward of
/// `embed`): `x` is made contiguous first.
pub(crate) fn strided(x: &Tensor, relative: Layout) -> Result<Tensor> {
    let x = contiguous(x)?;
    view(&x, |l| Ok(Layout { offset: l.offset + relative.offset, ..relative.clone() }))
}

/// A tensor of `shape`, zero except where `relative` (a layout over a contiguous tensor of
/// `shape`, addressing each element at most once) places the elements of `src`: the adjoint of
/// [`strided`]. Dimensions that `relative` broadcasts (stride 0) are summed first.
pub(crate) fn embed(src: &Tensor, shape: &Shape, relative: &Layout) -> Result<Tensor> {
    let s = data(src, "embed")?;
    let broadcast: Vec<usize> =
        (0..relative.ndim()).filter(|&d| relative.strides[d] == 0 && relative.shape[d] > 1).collect();
    if !broadcast.is_empty() {
        let summed = sum_keepdim(src, &broadcast)?;
        let mut relative = relative.clone();
        for &d in &broadcast {
            relative.shape = relative.shape.iter().enumerate().map(|(k, &n)| if k == d { 1 } else { n }).collect();
        }
        return embed(&summed, shape, &relative);
    }
    if relative.offset == 0 && relative.numel() == shape.numel() && relative.is_contiguous() {
        // Every element once, in order (a reshape's backward): `src` reshaped back.
        return reshape(src, shape);
    }
    if let Some(order) = permutation(shape, relative) {
        // Every element once, in another order (a transpose's backward): `src` viewed back.
        return view(src, move |l| {
            let mut strides = l.strides.clone();
            for (d, &e) in order.iter().enumerate() {
                strides[e] = l.strides[d];
            }
            Ok(Layout { shape: shape.clone(), strides, offset: l.offset })
        });
    }
    // A batched `src` is embedded for the whole batch in one plain call: the general path
    // below works for it too (`new_full` batches the zeros), through three batching rules,
    // which measured 7% slower on gpt_tiny's per-sample gradients (`cargo bench --bench func`).
    if let Some((physical, level)) = crate::func::top_batch(src)? {
        return embed_batched(src, &physical, &level, shape, relative);
    }
    // Zeros made like `src` (a DTensor gets its own kind), `src` written through the view.
    let zeros = dispatch::new_full(src, shape, Scalar::Int(0), s.dtype)?.into_tensor();
    let at = Layout { offset: data(&zeros, "embed")?.layout.offset + relative.offset, ..relative.clone() };
    dispatch::copy_(&dispatch::as_strided(&zeros, at)?.into_tensor(), src)?;
    finish(&[src], Output::Given(zeros), || (Op::Embed { relative: relative.clone() }, Keep::default()))
}

/// Where each dimension of `relative` is in `shape`, when `relative` lays out every element of
/// a contiguous tensor of `shape` once, its dimensions permuted (a transpose or permute).
fn permutation(shape: &Shape, relative: &Layout) -> Option<Vec<usize>> {
    if relative.offset != 0 || relative.ndim() != shape.len() {
        return None;
    }
    let contiguous = shape.contiguous_strides();
    let mut used = vec![false; shape.len()];
    let mut order = Vec::with_capacity(shape.len());
    for d in 0..relative.ndim() {
        let e = (0..shape.len()).find(|&e| {
            !used[e] && shape[e] == relative.shape[d] && (shape[e] == 1 || contiguous[e] == relative.strides[d])
        })?;
        used[e] = true;
        order.push(e);
    }
    Some(order)
}

/// [`embed`] of a batched `src`: the whole batch embedded at once (each example in a block of
/// its own) and batched again.
fn embed_batched(
    src: &Tensor,
    physical: &Tensor,
    level: &std::sync::Arc<crate::func::Level>,
    shape: &Shape,
    relative: &Layout,
) -> Result<Tensor> {
    let batch = data(physical, "embed")?.layout.shape[0];
    let block = Layout {
        shape: std::iter::once(batch).chain(relative.shape.iter().copied()).collect(),
        strides: std::iter::once(shape.numel()).chain(relative.strides.iter().copied()).collect(),
        offset: relative.offset,
    };
    let whole: Shape = std::iter::once(batch).chain(shape.iter().copied()).collect();
    let out = crate::func::wrap(&embed(physical, &whole, &block)?, level)?;
    // `Output::Given` holds tensors with data only (its `array` reads theirs).
    data(&out, "embed")?;
    finish(&[src], Output::Given(out), || (Op::Embed { relative: relative.clone() }, Keep::default()))
}

/// A tensor of `shape` on `device`, zero where `index` (integers in range, `src`'s shape)
/// does not point along `dim`, and the sum of the elements of `src` that point there elsewhere.
pub(crate) fn scatter_add(shape: &Shape, dim: usize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    let array = dispatch::scatter_add(shape, dim, index, src)?;
    finish(&[src], array, || (Op::ScatterAdd { dim }, Keep { extra: vec![index.clone()], ..Keep::default() }))
}

/// A tensor of `shape` on `device` with every element `value` as `dtype` (no history).
pub(crate) fn full(shape: &Shape, value: Scalar, dtype: DType, device: Device) -> Result<Tensor> {
    Ok(dispatch::full(shape, value, dtype, device)?.into_tensor())
}

/// A tensor of `shape` with every element `value` as `dtype`, on `like`'s device (no history):
/// a factory that dispatches on `like`, so a wrapper subclass makes its own kind of result.
pub(crate) fn new_full(like: &Tensor, shape: &Shape, value: Scalar, dtype: DType) -> Result<Tensor> {
    Ok(dispatch::new_full(like, shape, value, dtype)?.into_tensor())
}

/// Zeros of `shape`, `dtype`, on `device`.
pub(crate) fn zeros(shape: &Shape, dtype: DType, device: Device) -> Result<Tensor> {
    full(shape, Scalar::Int(0), dtype, device)
}

/// Ones of `shape`, `dtype`, on `device`.
pub(crate) fn ones(shape: &Shape, dtype: DType, device: Device) -> Result<Tensor> {
    full(shape, Scalar::Int(1), dtype, device)
}

/// Host elements (row-major, of `shape`) uploaded to `device` (no history), handed to the
/// modes as a tensor just made from data.
pub(crate) fn upload(device: Device, data: Buffer, shape: Shape) -> Result<Tensor> {
    lift_fresh(Tensor::from_array(device.backend().upload(device, data, shape)?))
}

/// Samples of `dist` (no history): a random operator, drawn on the host from `generator` or the
/// default one; `like` is the tensor `uniform_` fills, whose shape, dtype and device they take.
pub(crate) fn draw(
    func: &str,
    dist: crate::backend::Distribution,
    placement: (&Shape, DType, Device),
    generator: Option<&crate::tensor::Generator>,
    like: Option<&Tensor>,
) -> Result<Tensor> {
    dispatch::draw(func, dist, placement, generator, like).map(Output::into_tensor)
}

/// A tensor just made from data, as the modes make it (`aten.lift_fresh`): under
/// `FakeTensorMode`, a fake tensor.
pub(crate) fn lift_fresh(t: Tensor) -> Result<Tensor> {
    dispatch::lift_fresh(t)
}

/// The value of the one-element tensor `x`, read on the host (no history: a number).
pub(crate) fn item(x: &Tensor) -> Result<Scalar> {
    dispatch::local_scalar(x)
}

/// The positions of the nonzero elements of `x`, one row each (no history: indices).
pub(crate) fn nonzero(x: &Tensor) -> Result<Tensor> {
    dispatch::nonzero(x).map(Output::into_tensor)
}

/// `a + b` in their promoted dtype (used to accumulate gradients).
pub(crate) fn add(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let dtype = promoted(a, b)?;
    binary(a, b, Binary::Add(Scalar::Int(1)), dtype, None)
}

/// `target += source` in place, in `target`'s dtype (a gradient accumulated outside
/// `create_graph`): computed into `target`'s memory when the kernel can, else copied there.
pub(crate) fn add_(target: &Tensor, source: &Tensor) -> Result<()> {
    let dtype = data(target, "add_")?.dtype;
    let sum = binary(target, source, Binary::Add(Scalar::Int(1)), dtype, Some(target))?;
    write("add_", target, &sum)
}

/// The dtype `a op b` computes in, by PyTorch's promotion.
pub(crate) fn promoted(a: &Tensor, b: &Tensor) -> Result<DType> {
    Ok(crate::tensor::result_type([data(a, "promote")?.participant(), data(b, "promote")?.participant()]))
}

/// The sum of `x` over `dims`, keeping them as size one.
pub(crate) fn sum_keepdim(x: &Tensor, dims: &[usize]) -> Result<Tensor> {
    let a = data(x, "sum")?;
    let kept: Shape = a.layout.shape.iter().enumerate().map(|(d, &n)| if dims.contains(&d) { 1 } else { n }).collect();
    let summed = reduce(x, dims, Reduce::Sum, a.dtype)?;
    reshape(&summed, &kept)
}

/// `x` with the same elements in `shape`: a view when `x` is contiguous, else a copy's view.
pub(crate) fn reshape(x: &Tensor, shape: &Shape) -> Result<Tensor> {
    let a = data(x, "reshape")?;
    if a.layout.shape == *shape {
        return Ok(x.clone());
    }
    let shape = shape.clone();
    let make = move |l: &Layout| Ok(Layout { offset: l.offset, ..Layout::contiguous(shape.clone()) });
    match contiguous(x)? {
        Cow::Borrowed(x) => view(x, make),
        Cow::Owned(copy) => unsafe_view(&copy, make),
    }
}

/// Writes the elements of `src` (of `dst`'s shape) into `dst`'s memory, converting them to
/// `dst`'s dtype and moving them from `src`'s device, and counts the write in the version
/// counter. A `dst` whose elements overlap in memory (an expanded tensor) is refused, as in
/// PyTorch. No history is recorded: see [`write`].
pub(crate) fn assign(func: &str, target: &Tensor, source: &Tensor) -> Result<()> {
    let dst = data(target, func)?;
    dispatch::check_writable(func, &dst.layout)?;
    dispatch::copy_(target, source)?;
    dst.storage.bump_version();
    Ok(())
}

/// One fused Adam (or, `decoupled`, AdamW) step of every parameter, in place and untracked
/// (`aten::_fused_adam_`): refused while recording on parameters that require grad, as any
/// in-place write into a leaf; every tensor the schema marks written counts the write.
pub(crate) fn fused_adam(decoupled: bool, lists: &dispatch::AdamLists<'_>, s: &crate::FusedAdamOptions) -> Result<()> {
    let func = if decoupled { "_fused_adamw_" } else { "_fused_adam_" };
    let written = [lists.params, lists.grads, lists.exp_avgs, lists.exp_avg_sqs, lists.max_exp_avg_sqs];
    fused_step(func, lists.params, &written, || dispatch::fused_adam_(decoupled, lists, s))
}

/// One fused SGD step of every parameter, in place and untracked (`aten::_fused_sgd_`), under
/// the rules of [`fused_adam`].
pub(crate) fn fused_sgd(lists: &dispatch::SgdLists<'_>, s: &crate::FusedSgdOptions) -> Result<()> {
    let written = [lists.params, lists.grads, lists.momentum_buffers];
    fused_step("_fused_sgd_", lists.params, &written, || dispatch::fused_sgd_(lists, s))
}

/// A fused optimizer step: `step` run unless recording on parameters that require grad, then
/// each `written` tensor's write counted.
fn fused_step(func: &str, params: &[Tensor], written: &[&[Tensor]], step: impl FnOnce() -> Result<()>) -> Result<()> {
    if autograd::is_grad_enabled() && params.iter().any(meta::requires_grad) {
        bail!(Runtime, "{func}(): a leaf Variable that requires grad is being used in an in-place operation.");
    }
    step()?;
    for t in written.iter().copied().flatten() {
        data(t, func)?.storage.bump_version();
    }
    Ok(())
}

/// Embedding's `max_norm`, untracked as PyTorch's: the rows of `weight` that `indices` names
/// scaled, in place, to norm `max_norm` where theirs exceeds it (`aten::embedding_renorm_`).
pub(crate) fn embedding_renorm(weight: &Tensor, indices: &Tensor, max_norm: f64, norm_type: f64) -> Result<()> {
    dispatch::embedding_renorm_(weight, indices, max_norm, norm_type)?;
    data(weight, "embedding")?.storage.bump_version();
    Ok(())
}

/// Writes `result` (of `target`'s shape) into `target`'s memory, as an in-place operation or
/// `out=` does, and, when the write records, makes `target` the output of `result`'s history
/// (a view's base takes the write into its own history). A leaf that requires grad cannot be
/// written while recording. A result a kernel computed straight into `target` is already there
/// and counted (see [`count_write`]); `target` itself as the result was also recorded there
/// ([`write_recorded`]).
pub(crate) fn write(func: &str, target: &Tensor, result: &Tensor) -> Result<()> {
    if result.is(target) {
        return Ok(());
    }
    let records = autograd::is_grad_enabled() && (meta::requires_grad(target) || meta::requires_grad(result));
    if records {
        refuse_recorded_write(func, target)?;
    }
    copy_in(func, target, result)?;
    if let Some(tangent) = forward_ad::tangents(&[target, result]).map(|mut t| t.pop().flatten()) {
        derivatives::write_tangent(target, tangent)?;
    }
    if records {
        take_history(target, result)?;
    }
    Ok(())
}

/// Writes `result` into `target`'s memory (and counts the write) unless a kernel computed it
/// there, which [`count_write`] counted.
fn copy_in(func: &str, target: &Tensor, result: &Tensor) -> Result<()> {
    let (dst, src) = (data(target, func)?, data(result, func)?);
    if dst.shares(src) && dst.layout == src.layout { Ok(()) } else { assign(func, target, result) }
}

/// The error of a recorded in-place write into `target`, if it is one autograd refuses: a leaf
/// that requires grad, a view of one, or one of several views an operation returned.
fn refuse_recorded_write(func: &str, target: &Tensor) -> Result<()> {
    if meta::requires_grad(target) && meta::is_leaf(target) {
        bail!(Runtime, "{func}(): a leaf Variable that requires grad is being used in an in-place operation.");
    }
    if let Some(base) = target.base_tensor()
        && meta::requires_grad(&base)
        && meta::is_leaf(&base)
    {
        bail!(
            Runtime,
            "{func}(): a view of a leaf Variable that requires grad is being used in an in-place operation."
        );
    }
    if let Some(edge) = meta::grad_fn_of(target)
        && edge.node.backward.shares_views()
    {
        bail!(
            Runtime,
            "{func}(): Output {} of {} is a view and is being modified inplace. This view is the output of a \
             function that returns multiple views. Such functions do not allow the output views to be modified \
             inplace. You should replace the inplace operation by an out-of-place one.",
            edge.output_nr,
            edge.node.name()
        );
    }
    Ok(())
}

/// Makes `target`, just written with `result`, the output of `result`'s history; a view's base
/// takes the write into its own history.
fn take_history(target: &Tensor, result: &Tensor) -> Result<()> {
    match target.base_tensor() {
        None => {
            meta::set_history(target, meta::gradient_edge(result));
            Ok(())
        }
        Some(base) => derivatives::rebase_view(&base, target, result),
    }
}
