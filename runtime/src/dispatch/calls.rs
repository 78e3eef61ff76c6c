//! Each kernel family's call through the dispatch layer, in two forms that run the same
//! kernel: the typed entry the primitives call (the backend straight away when no dispatch mode
//! is active; else the call as values, through the modes), and [`run`], which binds an
//! operator's values to its schema, checks them and runs the kernel (where the last mode's
//! `func.call(...)` lands).

use std::borrow::Cow;

use super::mode::{dispatch, intercepting};
use super::schema::tensors_in;
use super::{Draw, Kernel, Operator, Output, aten};
use crate::backend::Distribution;
use crate::backend::{AdamHyperparameters, LstmSaved, SgdHyperparameters};
use crate::backend::{Array, Binary, Buffer, Device, Reduce, Unary, Window, host};
use crate::error::{Error, Result};
use crate::protocol::Route;
use crate::protocol::rerun::{Current, rerun_current, with_current};
use crate::tensor::{
    DType, Dense, Generator, Layout, Scalar, Shape, Tensor, broadcast_shapes, normalize_dim, result_type,
};
use crate::value::{FromValue, Kwargs, Value};
use crate::{FusedAdamOptions, FusedSgdOptions};

// ---------------------------------------------------------------------------------------------
// The typed entries (layer 3 calls these). Each runs its kernel straight away when no dispatch
// mode is active; else it offers the call to the modes, as values, with the same kernel ready
// for a hook that hands the call on unchanged (see `intercept`).

/// The kernel's result straight away when no dispatch mode is active; else the call `call`
/// builds (operator, arguments, keyword arguments) offered to the modes, with the kernel ready
/// for a hook that hands it on unchanged.
#[inline(always)]
fn offer<A: AsRef<[Value]>>(
    call: impl FnOnce() -> (&'static Operator, A, Kwargs),
    kernel: impl Fn() -> Result<Array>,
) -> Result<Output> {
    if intercepting() {
        let (op, args, kwargs) = call();
        return intercept(op, args.as_ref(), kwargs, &|| kernel().map(tensor));
    }
    kernel().map(Output::Array)
}

/// `op` on each element of `x`, in `dtype`; written into `out` when the kernel can.
#[inline]
pub(crate) fn unary(x: &Tensor, op: Unary, dtype: DType, out: Option<&Array>) -> Result<Output> {
    if intercepting() {
        let (operator, param) = aten::unary(op);
        let kernel = |out: Option<&Array>| run_unary(dense(x)?, op, dtype, out);
        let in_place = || aten::unary_in_place(op).map(|op| (op, None));
        return offer_elementwise(x, &[x.into()], (operator, param), in_place, dtype, out, kernel);
    }
    run_unary(dense(x)?, op, dtype, out).map(Output::Array)
}

/// `op` on the elements of `a` and `b` broadcast together, in `dtype`; written into `out`
/// when the kernel can.
#[inline]
pub(crate) fn binary(a: &Tensor, b: &Tensor, op: Binary, dtype: DType, out: Option<&Array>) -> Result<Output> {
    if intercepting() {
        let kernel = |out: Option<&Array>| run_binary(dense(a)?, dense(b)?, op, dtype, out);
        let args = [a.into(), b.into()];
        let in_place = || aten::binary_in_place(op);
        return offer_elementwise(a, &args, aten::binary(op), in_place, dtype, out, kernel);
    }
    run_binary(dense(a)?, dense(b)?, op, dtype, out).map(Output::Array)
}

/// An operator with its keyword argument, if any.
type WithParam = (&'static Operator, Option<(&'static str, Value)>);

/// An elementwise kernel offered to the modes: a valid write into the first operand's own
/// memory (`out` is `x`: an in-place operation) as the in-place operator (`add_.Tensor`,
/// `exp_`) where there is one, which writes into `x` and returns it; else the operator into a
/// fresh result (an invalid write is then refused where the result is written, as without a
/// mode).
#[inline(always)]
fn offer_elementwise(
    x: &Tensor,
    args: &[Value],
    (operator, param): WithParam,
    in_place: impl FnOnce() -> Option<WithParam>,
    dtype: DType,
    out: Option<&Array>,
    kernel: impl Fn(Option<&Array>) -> Result<Array>,
) -> Result<Output> {
    if let Some(out) = out
        && let Some(written) = offer_in_place(x, args, in_place, dtype, out, &kernel)
    {
        return written;
    }
    intercept(operator, args, keywords(param, dtype), &|| kernel(None).map(tensor))
}

/// [`offer_elementwise`]'s in-place operator call, when `out` is `x` and the write is valid.
#[cold]
#[inline(never)]
fn offer_in_place(
    x: &Tensor,
    args: &[Value],
    in_place: impl FnOnce() -> Option<WithParam>,
    dtype: DType,
    out: &Array,
    kernel: &dyn Fn(Option<&Array>) -> Result<Array>,
) -> Option<Result<Output>> {
    let d = dense(x).ok()?;
    if !(d.shares(out)
        && d.layout == out.layout
        && writable_in_place(d, args[1..].iter().filter_map(Value::as_tensor), dtype))
    {
        return None;
    }
    let (operator, param) = in_place()?;
    // Checked above: the call handed on unchanged writes straight away.
    let written = || write_kernel(d, kernel).map(|()| Value::Tensor(x.clone()));
    Some(intercept(operator, args, keywords(param, dtype), &written))
}

/// `a` where `condition` holds, `b` elsewhere, in `dtype`.
pub(crate) fn select(condition: &Tensor, a: &Tensor, b: &Tensor, dtype: DType) -> Result<Output> {
    let call = || (&aten::WHERE_SELF, [condition.into(), a.into(), b.into()], keywords(None, dtype));
    offer(call, || run_select(dense(condition)?, dense(a)?, dense(b)?, dtype))
}

/// `op` over `dims` (sorted, distinct) of `x`, read as `dtype`.
pub(crate) fn reduce(x: &Tensor, dims: &[usize], op: Reduce, dtype: DType) -> Result<Output> {
    let call = || (aten::reduce(op), [x.into(), Value::from(dims), false.into()], keywords(None, dtype));
    offer(call, || run_reduce(dense(x)?, dims, op, dtype))
}

/// The running `op` along `dim` of `x`, in `dtype`.
pub(crate) fn scan(x: &Tensor, dim: usize, op: crate::backend::Scan, dtype: DType) -> Result<Output> {
    let call = || (aten::scan(op), [x.into(), dim.into()], keywords(None, dtype));
    offer(call, || run_scan(dense(x)?, dim, op, dtype))
}

/// `a @ b` in `dtype` (two or more dimensions each, the leading ones broadcasting).
pub(crate) fn matmul(a: &Tensor, b: &Tensor, dtype: DType) -> Result<Output> {
    let call = || (&aten::MATMUL, [a.into(), b.into()], keywords(None, dtype));
    offer(call, || run_matmul(dense(a)?, dense(b)?, dtype))
}

/// The positions `index` of dimension `dim` of `x`.
pub(crate) fn index_select(x: &Tensor, dim: usize, index: &Tensor) -> Result<Output> {
    let call = || (&aten::INDEX_SELECT, [x.into(), dim.into(), index.into()], Kwargs::new());
    offer(call, || run_index_select(dense(x)?, dim, dense(index)?))
}

/// `x` at `index` along `dim`, elementwise.
pub(crate) fn gather(x: &Tensor, dim: usize, index: &Tensor) -> Result<Output> {
    let call = || (&aten::GATHER, [x.into(), dim.into(), index.into()], Kwargs::new());
    offer(call, || run_gather(dense(x)?, dim, dense(index)?))
}

/// `src` added at `index` along `dim` into zeros of `shape`.
pub(crate) fn scatter_add(shape: &Shape, dim: usize, index: &Tensor, src: &Tensor) -> Result<Output> {
    let call = || (&aten::SCATTER_ADD, [Value::from(&shape[..]), dim.into(), index.into(), src.into()], Kwargs::new());
    offer(call, || run_scatter_add(shape, dim, dense(index)?, dense(src)?))
}

/// `pieces` joined along `dim` into `shape`, read as `dtype`.
pub(crate) fn cat(pieces: &[Tensor], dim: usize, shape: &Shape, dtype: DType) -> Result<Output> {
    let call =
        || (&aten::CAT, [Value::List(pieces.iter().map(Value::from).collect()), dim.into()], keywords(None, dtype));
    let kernel = || {
        let arrays: Vec<&Dense> = pieces.iter().map(dense).collect::<Result<_>>()?;
        run_cat(&arrays, dim, shape, dtype)
    };
    offer(call, kernel)
}

/// The softmax (or log-softmax) of `x` along `dim`, in `dtype`.
pub(crate) fn softmax(x: &Tensor, dim: usize, log: bool, dtype: DType) -> Result<Output> {
    let op = if log { &aten::LOG_SOFTMAX } else { &aten::SOFTMAX };
    let call = || (op, [x.into(), dim.into(), false.into()], keywords(None, dtype));
    offer(call, || run_softmax(dense(x)?, dim, log, dtype))
}

/// The 2-D cross-correlation of `input` with `weight` plus `bias`, over `window`.
pub(crate) fn convolution(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    groups: usize,
    window: &Window,
) -> Result<Output> {
    let call = || {
        let mut args = vec![input.into(), weight.into(), bias.map_or(Value::None, Value::from)];
        args.extend(window_values(window, false));
        args.extend([false.into(), Value::from(&[0i64, 0][..]), groups.into()]);
        (&aten::CONVOLUTION, args, Kwargs::new())
    };
    let kernel = || run_convolution(dense(input)?, dense(weight)?, bias.map(dense).transpose()?, groups, window);
    offer(call, kernel)
}

/// The gradients of a convolution's input and weight where `which` asks; `None` when the
/// backend has no kernel of its own.
pub(crate) fn convolution_backward(
    grad: &Tensor,
    input: &Tensor,
    weight: &Tensor,
    groups: usize,
    window: &Window,
    which: [bool; 2],
) -> Result<Option<[Option<Tensor>; 2]>> {
    let kernel = || run_convolution_backward(dense(input)?, dense(weight)?, dense(grad)?, groups, window, which);
    if intercepting() {
        let mut args = vec![grad.into(), input.into(), weight.into(), Value::None];
        args.extend(window_values(window, false));
        let mask = [which[0], which[1], false];
        args.extend([false.into(), Value::from(&[0i64, 0][..]), groups.into(), Value::from(&mask[..])]);
        return intercept(&aten::CONVOLUTION_BACKWARD, &args, Kwargs::new(), &|| kernel().map(gradients));
    }
    Ok(kernel()?.map(|grads| grads.map(|g| g.map(Tensor::from_array))))
}

/// One LSTM layer's recurrence, fused: the hidden states, the cell states and the gates'
/// activations.
pub(crate) fn lstm_layer(
    gates: &Tensor,
    h0: &Tensor,
    c0: &Tensor,
    w_hh: &Tensor,
    reverse: bool,
) -> Result<Vec<Output>> {
    let kernel = || run_lstm_layer(dense(gates)?, dense(h0)?, dense(c0)?, dense(w_hh)?, reverse);
    if intercepting() {
        let args = [gates.into(), h0.into(), c0.into(), w_hh.into(), reverse.into()];
        return intercept(&aten::LSTM_LAYER, &args, Kwargs::new(), &|| kernel().map(tensors));
    }
    Ok(kernel()?.into_iter().map(Output::Array).collect())
}

/// The gradients of [`lstm_layer`]'s gates and initial states from those of its hidden and
/// cell states.
pub(crate) fn lstm_layer_backward(
    grad_hs: &Tensor,
    grad_cs: &Tensor,
    saved: [&Tensor; 4],
    reverse: bool,
) -> Result<Vec<Output>> {
    let [c0, w_hh, cs, workspace] = saved;
    let kernel = || {
        let (c0, w_hh, cs, workspace) = (dense(c0)?, dense(w_hh)?, dense(cs)?, dense(workspace)?);
        run_lstm_layer_backward(dense(grad_hs)?, dense(grad_cs)?, [c0, w_hh, cs, workspace], reverse)
    };
    if intercepting() {
        let args =
            [grad_hs.into(), grad_cs.into(), c0.into(), w_hh.into(), cs.into(), workspace.into(), reverse.into()];
        return intercept(&aten::LSTM_LAYER_BACKWARD, &args, Kwargs::new(), &|| kernel().map(tensors));
    }
    Ok(kernel()?.into_iter().map(Output::Array).collect())
}

/// Max pooling of `[planes, h, w]` over `window`: values and positions.
pub(crate) fn max_pool2d(input: &Tensor, window: &Window) -> Result<(Output, Output)> {
    let kernel = || run_max_pool2d(dense(input)?, window);
    if intercepting() {
        let mut args = vec![input.into(), Value::from(&window.kernel[..])];
        args.extend(window_values(window, true));
        return intercept(&aten::MAX_POOL2D_WITH_INDICES, &args, Kwargs::new(), &|| kernel().map(pair));
    }
    kernel().map(|(values, indices)| (Output::Array(values), Output::Array(indices)))
}

/// `x` sorted along `dim` (ascending, or `descending`): the values and their positions.
pub(crate) fn sort(x: &Tensor, dim: usize, descending: bool) -> Result<(Output, Output)> {
    let kernel = || run_sort(dense(x)?, dim, descending, None);
    if intercepting() {
        let mut kwargs = Kwargs::new();
        kwargs.insert("stable", Value::Bool(true));
        kwargs.insert("dim", Value::Int(dim as i64));
        kwargs.insert("descending", Value::Bool(descending));
        return intercept(&aten::SORT_STABLE, &[x.into()], kwargs, &|| kernel().map(pair));
    }
    kernel().map(|(values, indices)| (Output::Array(values), Output::Array(indices)))
}

/// The first `k` of `x` sorted along `dim` (the largest with `largest`): values and positions.
pub(crate) fn topk(x: &Tensor, k: usize, dim: usize, largest: bool) -> Result<(Output, Output)> {
    let kernel = || run_sort(dense(x)?, dim, largest, Some(k));
    if intercepting() {
        let args = [x.into(), Value::Int(k as i64), Value::Int(dim as i64), Value::Bool(largest)];
        return intercept(&aten::TOPK, &args, Kwargs::new(), &|| kernel().map(pair));
    }
    kernel().map(|(values, indices)| (Output::Array(values), Output::Array(indices)))
}

/// A contiguous copy of `x` as `dtype` on `device` (`clone` when both are `x`'s own).
pub(crate) fn to_copy(x: &Tensor, dtype: DType, device: Device) -> Result<Output> {
    let call = || match x.dense() {
        Some(d) if d.dtype == dtype && d.device() == device => (&aten::CLONE, [x.into()], Kwargs::new()),
        _ => (&aten::TO_COPY, [x.into()], placement(dtype, device)),
    };
    offer(call, || run_to_copy(dense(x)?, dtype, device))
}

/// `x`'s memory seen through `layout` (a view the operation worked out).
pub(crate) fn as_strided(x: &Tensor, layout: Layout) -> Result<Output> {
    if intercepting() {
        let args = [x.into(), Value::from(&layout.shape[..]), Value::from(&layout.strides[..]), layout.offset.into()];
        let kernel = || {
            let d = dense(x)?;
            Ok(Value::Tensor(x.view_of(d, d.with_layout(layout.clone()))))
        };
        return intercept(&aten::AS_STRIDED, &args, Kwargs::new(), &kernel);
    }
    Ok(Output::Array(dense(x)?.with_layout(layout)))
}

/// A tensor of `shape` on `device` with every element `value` as `dtype`.
pub(crate) fn full(shape: &Shape, value: Scalar, dtype: DType, device: Device) -> Result<Output> {
    let call = || (&aten::FULL, [Value::from(&shape[..]), value.into()], placement(dtype, device));
    offer(call, || device.backend().fill(device, shape, value, dtype))
}

/// A tensor of `shape` with every element `value` as `dtype`, on `like`'s device
/// (`like.new_full`): a factory that dispatches on `like`.
pub(crate) fn new_full(like: &Tensor, shape: &Shape, value: Scalar, dtype: DType) -> Result<Output> {
    let x = dense(like)?;
    let device = x.device();
    let call = || {
        let args = [like.into(), Value::from(&shape[..]), value.into()];
        (&aten::NEW_FULL, args, placement(dtype, super::reported_device(x)))
    };
    offer(call, || device.backend().fill(device, shape, value, dtype))
}

/// Writes `src` (of `dst`'s shape) into `dst`'s memory, converting and moving it.
pub(crate) fn copy_(dst: &Tensor, src: &Tensor) -> Result<()> {
    let kernel = || run_copy(dense(dst)?, dense(src)?);
    if intercepting() {
        let args = [dst.into(), src.into()];
        let written = || kernel().map(|()| Value::Tensor(dst.clone()));
        return intercept::<Output>(&aten::COPY_, &args, Kwargs::new(), &written).map(drop);
    }
    kernel()
}

/// Embedding's `max_norm`: the rows of `weight` that `indices` names scaled, in place, to
/// norm `max_norm` where theirs exceeds it.
pub(crate) fn embedding_renorm_(weight: &Tensor, indices: &Tensor, max_norm: f64, norm_type: f64) -> Result<()> {
    let kernel = || run_embedding_renorm(dense(weight)?, dense(indices)?, max_norm, norm_type);
    if intercepting() {
        let args = [weight.into(), indices.into(), max_norm.into(), norm_type.into()];
        let written = || kernel().map(|()| Value::Tensor(weight.clone()));
        return intercept::<Output>(&aten::EMBEDDING_RENORM_, &args, Kwargs::new(), &written).map(drop);
    }
    kernel()
}

/// The arrays of a list of tensors.
fn dense_all(ts: &[Tensor]) -> Result<Vec<&Dense>> {
    ts.iter().map(dense).collect()
}

/// The tensors of one fused Adam step, one of each list per parameter (`max_exp_avg_sqs`
/// empty without amsgrad), in `_fused_adam_`'s order.
pub(crate) struct AdamLists<'a> {
    pub params: &'a [Tensor],
    pub grads: &'a [Tensor],
    pub exp_avgs: &'a [Tensor],
    pub exp_avg_sqs: &'a [Tensor],
    pub max_exp_avg_sqs: &'a [Tensor],
    pub state_steps: &'a [Tensor],
}

/// One Adam step (AdamW's when `decoupled`) of every parameter, in place, by the backend's
/// fused kernel (`_fused_adam_`, `_fused_adamw_`).
pub(crate) fn fused_adam_(decoupled: bool, lists: &AdamLists<'_>, s: &FusedAdamOptions) -> Result<()> {
    let kernel = || {
        let lists = [
            dense_all(lists.params)?,
            dense_all(lists.grads)?,
            dense_all(lists.exp_avgs)?,
            dense_all(lists.exp_avg_sqs)?,
            dense_all(lists.max_exp_avg_sqs)?,
            dense_all(lists.state_steps)?,
        ];
        let (grad_scale, found_inf) =
            (s.grad_scale.as_ref().map(dense).transpose()?, s.found_inf.as_ref().map(dense).transpose()?);
        run_fused_adam(decoupled, &lists, &s.hyper, grad_scale, found_inf)
    };
    if intercepting() {
        let list = |ts: &[Tensor]| Value::List(ts.iter().map(Value::from).collect());
        let args = [
            list(lists.params),
            list(lists.grads),
            list(lists.exp_avgs),
            list(lists.exp_avg_sqs),
            list(lists.max_exp_avg_sqs),
            list(lists.state_steps),
        ];
        let mut kwargs = Kwargs::new();
        for (name, value) in [("lr", s.hyper.lr), ("beta1", s.hyper.beta1), ("beta2", s.hyper.beta2)] {
            kwargs.insert(name, Value::from(value));
        }
        kwargs.insert("weight_decay", Value::from(s.hyper.weight_decay));
        kwargs.insert("eps", Value::from(s.hyper.eps));
        kwargs.insert("amsgrad", Value::Bool(s.hyper.amsgrad));
        kwargs.insert("maximize", Value::Bool(s.hyper.maximize));
        for (name, t) in [("grad_scale", &s.grad_scale), ("found_inf", &s.found_inf)] {
            kwargs.insert(name, t.as_ref().map_or(Value::None, Value::from));
        }
        let op = if decoupled { &aten::FUSED_ADAMW_ } else { &aten::FUSED_ADAM_ };
        return intercept::<()>(op, &args, kwargs, &|| kernel().map(|()| Value::None));
    }
    kernel()
}

/// The tensors of one fused SGD step, one of each list per parameter (`momentum_buffers`
/// empty without momentum).
pub(crate) struct SgdLists<'a> {
    pub params: &'a [Tensor],
    pub grads: &'a [Tensor],
    pub momentum_buffers: &'a [Tensor],
}

/// One SGD step of every parameter, in place, by the backend's fused kernel (`_fused_sgd_`).
pub(crate) fn fused_sgd_(lists: &SgdLists<'_>, s: &FusedSgdOptions) -> Result<()> {
    let kernel = || {
        let lists = [dense_all(lists.params)?, dense_all(lists.grads)?, dense_all(lists.momentum_buffers)?];
        let (grad_scale, found_inf) =
            (s.grad_scale.as_ref().map(dense).transpose()?, s.found_inf.as_ref().map(dense).transpose()?);
        run_fused_sgd(&lists, &s.hyper, grad_scale, found_inf)
    };
    if intercepting() {
        let list = |ts: &[Tensor]| Value::List(ts.iter().map(Value::from).collect());
        let args = [list(lists.params), list(lists.grads), list(lists.momentum_buffers)];
        let mut kwargs = Kwargs::new();
        for (name, value) in [
            ("weight_decay", s.hyper.weight_decay),
            ("momentum", s.hyper.momentum),
            ("lr", s.hyper.lr),
            ("dampening", s.hyper.dampening),
        ] {
            kwargs.insert(name, Value::from(value));
        }
        for (name, flag) in
            [("nesterov", s.hyper.nesterov), ("maximize", s.hyper.maximize), ("is_first_step", s.hyper.is_first_step)]
        {
            kwargs.insert(name, Value::Bool(flag));
        }
        for (name, t) in [("grad_scale", &s.grad_scale), ("found_inf", &s.found_inf)] {
            kwargs.insert(name, t.as_ref().map_or(Value::None, Value::from));
        }
        return intercept::<()>(&aten::FUSED_SGD_, &args, kwargs, &|| kernel().map(|()| Value::None));
    }
    kernel()
}

/// The value of the one-element tensor `x`, read on the host.
pub(crate) fn local_scalar(x: &Tensor) -> Result<Scalar> {
    let kernel = || run_local_scalar(dense(x)?);
    if intercepting() {
        let value = || kernel().map(Value::from);
        return intercept(&aten::LOCAL_SCALAR_DENSE, &[x.into()], Kwargs::new(), &value);
    }
    kernel()
}

/// Samples of `dist` of `shape` and `dtype` on `device`, drawn from `generator` (or the default
/// one) on the host, so that a seed gives the same numbers on every device; none are drawn on
/// meta. The call is `aten::rand`, `randn`, `normal`, `randint` or, with `like` (the tensor
/// whose shape, dtype and device they take), `uniform`.
pub(crate) fn draw(
    func: &str,
    dist: Distribution,
    (shape, dtype, device): (&Shape, DType, Device),
    generator: Option<&Generator>,
    like: Option<&Tensor>,
) -> Result<Output> {
    if matches!(dist, Distribution::Bernoulli { .. }) && like.is_none() {
        return Err(Error::runtime_error(format!("{func}(): a Bernoulli draw takes its shape from a tensor")));
    }
    let call = || {
        let generator = generator.map_or(Value::None, |g| Value::Generator(g.clone()));
        let size = Value::from(&shape[..]);
        let (op, args, mut kwargs): (&'static Operator, Vec<Value>, Kwargs) = match (dist, like) {
            // Drawn like a tensor: its shape, dtype and device.
            (Distribution::Uniform { low, high }, Some(x)) => {
                (&aten::UNIFORM, vec![x.into(), low.into(), high.into()], Kwargs::new())
            }
            (Distribution::Bernoulli { p }, x) => {
                (&aten::BERNOULLI, vec![x.map_or(Value::None, Value::from), p.into()], Kwargs::new())
            }
            // Drawn of a size.
            (Distribution::Uniform { .. }, None) => (&aten::RAND, vec![size], placement(dtype, device)),
            (Distribution::Normal { mean, std }, _) if mean == 0.0 && std == 1.0 => {
                (&aten::RANDN, vec![size], placement(dtype, device))
            }
            (Distribution::Normal { mean, std }, _) => {
                (&aten::NORMAL, vec![mean.into(), std.into(), size], placement(dtype, device))
            }
            (Distribution::Integers { low, high }, _) => {
                (&aten::RANDINT, vec![low.into(), high.into(), size], placement(dtype, device))
            }
        };
        kwargs.insert_static("generator", generator);
        (op, args, kwargs)
    };
    offer(call, || run_draw(func, dist, shape, dtype, device, generator))
}

/// `x`, a tensor just made from data, as the modes make it (`lift_fresh`): itself when no mode
/// is active.
pub(crate) fn lift_fresh(x: Tensor) -> Result<Tensor> {
    if !intercepting() {
        return Ok(x);
    }
    let kernel = || Ok(Value::Tensor(x.clone()));
    intercept(&aten::LIFT_FRESH, &[(&x).into()], Kwargs::new(), &kernel).map(Output::into_tensor)
}

/// The positions of the nonzero elements of `x`: `[n, x.dim()]` indices, on `x`'s device.
pub(crate) fn nonzero(x: &Tensor) -> Result<Output> {
    let call = || (&aten::NONZERO, [x.into()], Kwargs::new());
    offer(call, || run_nonzero(dense(x)?))
}

// ---------------------------------------------------------------------------------------------
// The kernels both forms run.

/// Draws `dist`'s samples on the host and uploads them (nothing drawn on meta).
fn run_draw(
    func: &str,
    dist: Distribution,
    shape: &Shape,
    dtype: DType,
    device: Device,
    generator: Option<&Generator>,
) -> Result<Array> {
    if device.is_meta() {
        // No values to draw (and no numbers taken from the generator), as on PyTorch's meta.
        return device.backend().fill(device, shape, Scalar::Int(0), dtype);
    }
    let generator = generator.cloned().unwrap_or_else(Generator::default_generator);
    let data = crate::backend::sample(func, &mut generator.draw(), dist, shape, dtype)?;
    device.backend().upload(device, data, shape.clone())
}

/// Positions computed on the host as `device`'s index dtype (int64, or int32 where the device
/// holds no int64).
fn index_buffer(device: Device, positions: Vec<i64>) -> Buffer {
    match device.index_dtype() {
        DType::Int64 => Buffer::from_vec(positions),
        _ => Buffer::from_vec(positions.into_iter().map(|p| p as i32).collect::<Vec<i32>>()),
    }
}

/// Sorts `x` along `dim` on the host (stably, NaN largest; `descending` reverses the order,
/// ties keeping theirs) and uploads the values and the positions, only the first `keep` of each
/// lane when given (selected, then sorted); on meta, zeros of their shapes.
fn run_sort(x: &Dense, dim: usize, descending: bool, keep: Option<usize>) -> Result<(Array, Array)> {
    let device = x.device();
    let mut shape = x.layout.shape.clone();
    let n = shape.get(dim).copied().unwrap_or(1);
    let k = keep.unwrap_or(n).min(n);
    if !shape.is_empty() {
        shape = shape.iter().enumerate().map(|(d, &m)| if d == dim { k } else { m }).collect();
    }
    if device.is_meta() {
        let backend = device.backend();
        let values = backend.fill(device, &shape, Scalar::Int(0), x.dtype)?;
        return Ok((values, backend.fill(device, &shape, Scalar::Int(0), device.index_dtype())?));
    }
    let host = host::on_host(x)?;
    let inner: usize = x.layout.shape.iter().skip(dim + 1).product();
    let lanes = x.layout.shape.iter().product::<usize>().checked_div(n).unwrap_or(0);
    let mut positions = host::alloc("sort", lanes * k)?;
    let values = crate::types::with_dtype!(x.dtype, T => {
        let data = host::elements::<T>("sort", &host)?;
        // NaN (the one value unequal to itself) after every number, equal to itself.
        #[allow(clippy::eq_op)]
        let unordered = |v: &T| v != v;
        let order = |a: &T, b: &T| a.partial_cmp(b).unwrap_or_else(|| unordered(a).cmp(&unordered(b)));
        let mut sorted = host::alloc("sort", lanes * k)?;
        sorted.resize(lanes * k, T::default());
        positions.resize(lanes * k, 0i64);
        // Each lane as (value, position) pairs, side by side in memory.
        let mut lane: Vec<(T, usize)> = Vec::new();
        // Value, then position: the stable sort's order, for selecting its first `k`.
        let before = |a: &(T, usize), b: &(T, usize)| {
            let by_value = if descending { order(&b.0, &a.0) } else { order(&a.0, &b.0) };
            by_value.then(a.1.cmp(&b.1))
        };
        for l in 0..lanes {
            let (outer, i) = (l / inner.max(1), l % inner.max(1));
            let at = |m: usize, j: usize| (outer * m + j) * inner + i;
            lane.clear();
            if k < n {
                // The first `k` in one pass: candidates that come before the current k-th go to a
                // buffer of 2k, cut back to its first k whenever it fills.
                let mut threshold: Option<(T, usize)> = None;
                for j in 0..n {
                    let e = (data[at(n, j)], j);
                    if k == 0 || threshold.is_some_and(|t| before(&e, &t) != std::cmp::Ordering::Less) {
                        continue;
                    }
                    lane.push(e);
                    if lane.len() == 2 * k {
                        lane.select_nth_unstable_by(k - 1, before);
                        lane.truncate(k);
                        threshold = Some(lane[k - 1]);
                    }
                }
                if lane.len() > k {
                    lane.select_nth_unstable_by(k - 1, before);
                    lane.truncate(k);
                }
                // Selection shuffles: order by value, then position.
                lane.sort_unstable_by(before);
            } else {
                // In position order already: a stable sort by value keeps ties so (and is faster
                // than comparing positions too).
                lane.extend((0..n).map(|j| (data[at(n, j)], j)));
                if descending { lane.sort_by(|a, b| order(&b.0, &a.0)) } else { lane.sort_by(|a, b| order(&a.0, &b.0)) }
            }
            for (j, &(value, from)) in lane.iter().enumerate() {
                sorted[at(k, j)] = value;
                positions[at(k, j)] = from as i64;
            }
        }
        device.backend().upload(device, Buffer::from_vec(sorted), shape.clone())?
    });
    Ok((values, device.backend().upload(device, index_buffer(device, positions), shape)?))
}

/// Reads `x` on the host and uploads the positions of its nonzero elements, row-major.
fn run_nonzero(x: &Dense) -> Result<Array> {
    let host = host::on_host(x)?;
    let flags: Vec<bool> = crate::types::with_dtype!(x.dtype, T => host::elements::<T>("nonzero", &host)?
        .iter()
        .map(|v| *v != T::default())
        .collect());
    let shape = &x.layout.shape;
    let mut rows: Vec<i64> = Vec::new();
    for (flat, _) in flags.iter().enumerate().filter(|(_, f)| **f) {
        let start = rows.len();
        rows.resize(start + shape.len(), 0);
        let mut rest = flat;
        for d in (0..shape.len()).rev() {
            rows[start + d] = (rest % shape[d]) as i64;
            rest /= shape[d];
        }
    }
    let n = flags.iter().filter(|f| **f).count();
    let device = x.device();
    device.backend().upload(device, index_buffer(device, rows), Shape::from([n, shape.len()]))
}

/// Reads `indices` and each named row of `weight` on the host, and writes back the rows whose
/// norm exceeds `max_norm`, scaled by `max_norm / (norm + 1e-7)` in the weight's dtype (as
/// PyTorch's `row *= scale`): only those rows are written. Nothing on meta (no values).
fn run_embedding_renorm(weight: &Dense, indices: &Dense, max_norm: f64, norm_type: f64) -> Result<()> {
    let device = weight.device();
    if device.is_meta() || indices.device().is_meta() {
        return Ok(());
    }
    let (&[_, dim], &[row_stride, column_stride]) = (&weight.layout.shape[..], &weight.layout.strides[..]) else {
        return Err(Error::runtime_error("embedding_renorm_(): 'self' must be 2-D"));
    };
    let host = host::on_host(indices)?;
    // The indices were checked in range (int64 or int32).
    let mut rows: Vec<usize> = match indices.dtype {
        DType::Int32 => host::elements::<i32>("embedding_renorm_", &host)?.iter().map(|&i| i as usize).collect(),
        _ => host::elements::<i64>("embedding_renorm_", &host)?.iter().map(|&i| i as usize).collect(),
    };
    rows.sort_unstable();
    rows.dedup();
    for row in rows {
        let layout = Layout {
            shape: Shape::new(&[dim]),
            strides: [column_stride].into_iter().collect(),
            offset: weight.layout.offset + row * row_stride,
        };
        let view = weight.with_layout(layout);
        let scaled = match weight.dtype {
            DType::Float64 => scaled_row::<f64>(&view, max_norm, norm_type)?,
            _ => scaled_row::<f32>(&view, max_norm, norm_type)?,
        };
        if let Some(scaled) = scaled {
            let scaled = device.backend().upload(device, scaled, Shape::new(&[dim]))?;
            device.backend().assign(&view, &scaled)?;
        }
    }
    Ok(())
}

/// `row` scaled to norm `max_norm` (about), in host memory, when its norm exceeds `max_norm`.
fn scaled_row<T: crate::cpu::Float>(row: &Array, max_norm: f64, norm_type: f64) -> Result<Option<Buffer>> {
    let values = host::elements::<T>("embedding_renorm_", &*host::on_host(row)?)?;
    let norm = p_norm(values.iter().map(|v| v.to_f64()), norm_type);
    // A NaN norm or max_norm compares as not greater: that row is left alone, as in PyTorch.
    if norm.partial_cmp(&max_norm) != Some(std::cmp::Ordering::Greater) {
        return Ok(None);
    }
    let scale = T::from_f64(max_norm / (norm + 1e-7));
    Ok(Some(Buffer::from_vec(values.into_iter().map(|v| v.mul(scale)).collect::<Vec<T>>())))
}

/// The `p`-norm of `values`, as `torch.norm`: the largest absolute value for `inf`, the smallest
/// for `-inf`, the count of non-zero values for 0, `(sum |x|^p)^(1/p)` otherwise.
fn p_norm(values: impl Iterator<Item = f64>, p: f64) -> f64 {
    let abs = values.map(f64::abs);
    if p == f64::INFINITY {
        abs.fold(0.0, |m, v| if v.is_nan() || v > m { v } else { m })
    } else if p == f64::NEG_INFINITY {
        abs.fold(f64::INFINITY, |m, v| if v.is_nan() || v < m { v } else { m })
    } else if p == 0.0 {
        abs.filter(|&v| v != 0.0).count() as f64
    } else if p == 1.0 {
        abs.sum()
    } else if p == 2.0 {
        abs.map(|v| v * v).sum::<f64>().sqrt()
    } else {
        abs.map(|v| v.powf(p)).sum::<f64>().powf(1.0 / p)
    }
}

fn run_local_scalar(x: &Dense) -> Result<Scalar> {
    if x.device().is_meta() {
        return Err(Error::runtime_error("Tensor.item() cannot be called on meta tensors"));
    }
    host::scalar_of(x)
}

/// The fused Adam step of each parameter by its device's kernel (see [`fused_adam_`]); the
/// lists are checked to be of one length. Nothing is written on meta tensors (no values).
fn run_fused_adam(
    decoupled: bool,
    [params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps]: &[Vec<&Dense>; 6],
    s: &AdamHyperparameters,
    grad_scale: Option<&Dense>,
    found_inf: Option<&Dense>,
) -> Result<()> {
    let func = if decoupled { "_fused_adamw_" } else { "_fused_adam_" };
    let lists = [("grads", grads), ("exp_avgs", exp_avgs), ("exp_avg_sqs", exp_avg_sqs), ("state_steps", steps)];
    same_lengths(
        func,
        params.len(),
        lists.into_iter().chain(s.amsgrad.then_some(("max_exp_avg_sqs", max_exp_avg_sqs))),
    )?;
    let Some(grad_scale) = loss_scale(func, params, grad_scale, found_inf)? else { return Ok(()) };
    let mut arrays = Vec::new();
    for i in 0..params.len() {
        let Some(step) = one_value(func, "state_steps", steps[i])? else { continue };
        let max_exp_avg_sq = if s.amsgrad { Some(&**max_exp_avg_sqs[i]) } else { None };
        let state = [grads[i], exp_avgs[i], exp_avg_sqs[i]].into_iter().map(|d| &**d).chain(max_exp_avg_sq);
        if !on_one_device(func, i, params[i], state)? {
            continue;
        }
        let (param, grad, exp_avg, exp_avg_sq) = (&**params[i], &**grads[i], &**exp_avgs[i], &**exp_avg_sqs[i]);
        arrays.push(crate::backend::AdamArrays { param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step });
    }
    let hyper = crate::backend::AdamStep { hyper: *s, decoupled, grad_scale };
    by_device(func, &arrays, |a| a.param.device(), |backend, group| backend.fused_adam(group, &hyper))
}

/// The fused SGD step of each parameter by its device's kernel (see [`fused_sgd_`]).
fn run_fused_sgd(
    [params, grads, buffers]: &[Vec<&Dense>; 3],
    s: &SgdHyperparameters,
    grad_scale: Option<&Dense>,
    found_inf: Option<&Dense>,
) -> Result<()> {
    let func = "_fused_sgd_";
    let with_momentum = s.momentum != 0.0;
    let lists = std::iter::once(("grads", grads)).chain(with_momentum.then_some(("momentum_buffer_list", buffers)));
    same_lengths(func, params.len(), lists)?;
    let Some(grad_scale) = loss_scale(func, params, grad_scale, found_inf)? else { return Ok(()) };
    let mut arrays = Vec::new();
    for i in 0..params.len() {
        let momentum_buffer = with_momentum.then(|| &**buffers[i]);
        if !on_one_device(func, i, params[i], std::iter::once(&**grads[i]).chain(momentum_buffer))? {
            continue;
        }
        arrays.push(crate::backend::SgdArrays { param: params[i], grad: grads[i], momentum_buffer });
    }
    let hyper = crate::backend::SgdStep { hyper: *s, grad_scale };
    by_device(func, &arrays, |a| a.param.device(), |backend, group| backend.fused_sgd(group, &hyper))
}

/// An error unless each list has one tensor per parameter.
fn same_lengths<'a>(
    func: &str,
    n: usize,
    lists: impl IntoIterator<Item = (&'a str, &'a Vec<&'a Dense>)>,
) -> Result<()> {
    for (name, list) in lists {
        if list.len() != n {
            return Err(Error::runtime_error(format!(
                "{func}(): {name} has {} tensors, but there are {n} parameters",
                list.len()
            )));
        }
    }
    Ok(())
}

/// Whether parameter `i` is to be stepped (not on the meta device, which has no values), once
/// its state is on its device.
fn on_one_device<'a>(func: &str, i: usize, param: &Dense, state: impl IntoIterator<Item = &'a Array>) -> Result<bool> {
    let device = param.device();
    if let Some(other) = state.into_iter().map(|a| a.device()).find(|&d| d != device) {
        return Err(Error::runtime_error(format!(
            "{func}(): parameter {i} is on {device}, its state on {other}: all on one device"
        )));
    }
    Ok(!device.is_meta())
}

/// Runs a fused kernel over the parameters of each device, one call per device (whose kernel
/// checks all its parameters before writing any); a device without one is an error.
fn by_device<A>(
    func: &str,
    arrays: &[A],
    device_of: impl Fn(&A) -> Device,
    kernel: impl Fn(&'static dyn crate::backend::Backend, &[A]) -> Result<bool>,
) -> Result<()>
where
    A: Clone,
{
    let mut devices: Vec<Device> = Vec::new();
    for a in arrays {
        if !devices.contains(&device_of(a)) {
            devices.push(device_of(a));
        }
    }
    for device in devices {
        let group: Vec<A> = arrays.iter().filter(|a| device_of(a) == device).cloned().collect();
        if !kernel(device.backend(), &group)? {
            return Err(Error::runtime_error(format!(
                "{func}(): no fused kernel for {device} tensors (the CPU has one): use fused=false"
            )));
        }
    }
    Ok(())
}

/// A fused step's loss scaling: `None` when `found_inf` is set (the step writes nothing), else
/// the gradients' scale, if any (each read on the host; nothing on meta tensors). Both must be
/// on the device of the parameters (`params`).
fn loss_scale(
    func: &str,
    params: &[&Dense],
    grad_scale: Option<&Dense>,
    found_inf: Option<&Dense>,
) -> Result<Option<Option<f64>>> {
    for (name, t) in [("grad_scale", grad_scale), ("found_inf", found_inf)] {
        if let (Some(t), Some(p)) = (t, params.first())
            && t.device() != p.device()
        {
            return Err(Error::runtime_error(format!(
                "{func}(): {name} is on {}, the parameters on {}",
                t.device(),
                p.device()
            )));
        }
    }
    if let Some(found) = found_inf.map(|t| one_value(func, "found_inf", t)).transpose()?.flatten()
        && found != 0.0
    {
        return Ok(None);
    }
    Ok(Some(grad_scale.map(|t| one_value(func, "grad_scale", t)).transpose()?.flatten()))
}

/// The value of a one-element tensor argument of `func` (`None` on the meta device).
fn one_value(func: &str, name: &str, t: &Dense) -> Result<Option<f64>> {
    if t.device().is_meta() {
        return Ok(None);
    }
    if t.layout.numel() != 1 {
        return Err(Error::runtime_error(format!("{func}(): {name} must have one element")));
    }
    Ok(Some(host::scalar_of(t)?.to_f64()))
}

fn run_unary(x: &Dense, op: Unary, dtype: DType, out: Option<&Array>) -> Result<Array> {
    x.device().backend().unary(x, op, dtype, out)
}

fn run_reduce(x: &Dense, dims: &[usize], op: Reduce, dtype: DType) -> Result<Array> {
    x.device().backend().reduce(x, dims, op, dtype)
}

fn run_scan(x: &Dense, dim: usize, op: crate::backend::Scan, dtype: DType) -> Result<Array> {
    x.device().backend().scan(x, dim, op, dtype)
}

fn run_softmax(x: &Dense, dim: usize, log: bool, dtype: DType) -> Result<Array> {
    host::check_dtype(if log { "log_softmax" } else { "softmax" }, x.device(), dtype)?;
    x.device().backend().softmax(x, dim, log, dtype)
}

fn run_index_select(x: &Dense, dim: usize, index: &Dense) -> Result<Array> {
    device("index_select", &[x, index])?.backend().index_select(x, dim, index)
}

fn run_gather(x: &Dense, dim: usize, index: &Dense) -> Result<Array> {
    device("gather", &[x, index])?.backend().gather(x, dim, index)
}

fn run_scatter_add(shape: &Shape, dim: usize, index: &Dense, src: &Dense) -> Result<Array> {
    device("scatter_add", &[index, src])?.backend().scatter_add(shape, dim, index, src)
}

fn run_max_pool2d(x: &Dense, window: &Window) -> Result<(Array, Array)> {
    x.device().backend().max_pool2d(x, window)
}

fn run_convolution_backward(
    x: &Dense,
    w: &Dense,
    g: &Dense,
    groups: usize,
    window: &Window,
    which: [bool; 2],
) -> Result<Option<[Option<Array>; 2]>> {
    device("convolution_backward", &[x, w, g])?.backend().conv2d_backward(x, w, g, groups, window, which)
}

fn run_lstm_layer(gates: &Dense, h0: &Dense, c0: &Dense, w_hh: &Dense, reverse: bool) -> Result<[Array; 3]> {
    device("_lstm_layer", &[gates, h0, c0, w_hh])?.backend().lstm_layer(gates, h0, c0, w_hh, reverse)
}

fn run_lstm_layer_backward(grad_hs: &Dense, grad_cs: &Dense, saved: [&Dense; 4], reverse: bool) -> Result<[Array; 3]> {
    let [c0, w_hh, cs, workspace] = saved;
    let saved = LstmSaved { c0, w_hh, cs, workspace, reverse };
    let device = device("_lstm_layer_backward", &[grad_hs, grad_cs, c0, w_hh, cs, workspace])?;
    device.backend().lstm_layer_backward(grad_hs, grad_cs, &saved)
}

fn run_binary(x: &Dense, y: &Dense, op: Binary, dtype: DType, out: Option<&Array>) -> Result<Array> {
    let device = device("binary", &[x, y])?;
    let shape = broadcast(&x.layout.shape, &y.layout.shape)?;
    device.backend().binary(x, y, &shape, op, dtype, out)
}

/// An in-place operator's write: `kernel`'s result (of `shape`, in `dtype`, computed into `x`
/// where it can be) written into `x`, when [`write_error`] finds nothing wrong.
fn write_into_self(
    op: &Operator,
    x: &Dense,
    shape: &Shape,
    dtype: DType,
    kernel: &dyn Fn(Option<&Array>) -> Result<Array>,
) -> Result<()> {
    if let Some(error) = write_error(op.name(), x, shape, dtype) {
        return Err(error);
    }
    write_kernel(x, kernel)
}

/// `kernel`'s result written into `x`: computed there where the kernel can, else copied in.
fn write_kernel(x: &Dense, kernel: &dyn Fn(Option<&Array>) -> Result<Array>) -> Result<()> {
    let result = kernel(Some(&x.array))?;
    if !(result.shares(x) && result.layout == x.layout) {
        x.device().backend().assign(x, &result)?;
    }
    Ok(())
}

/// Whether the elementwise result of `x` and `others` (broadcast together) in `dtype` can be
/// written into `x` in place: [`write_error`] finds nothing wrong with it.
pub(crate) fn writable_in_place<'t>(x: &Dense, others: impl IntoIterator<Item = &'t Tensor>, dtype: DType) -> bool {
    let mut shape = x.layout.shape.clone();
    for t in others {
        match t.dense().map(|d| broadcast_shapes(&shape, &d.layout.shape, "")) {
            Some(Ok(s)) => shape = s,
            _ => return false,
        }
    }
    write_error("", x, &shape, dtype).is_none()
}

/// What is wrong with writing a result of `shape` and `dtype` into `x` in place, if anything:
/// the result must have `x`'s shape and cast to its dtype, and `x` must not be expanded.
fn write_error(func: &str, x: &Dense, shape: &Shape, dtype: DType) -> Option<Error> {
    if *shape != x.layout.shape {
        return Some(Error::runtime_error(format!(
            "{func}(): output with shape {:?} doesn't match the broadcast shape {:?}",
            &x.layout.shape[..],
            &shape[..]
        )));
    }
    if !dtype.can_cast(x.dtype) {
        return Some(Error::runtime_error(format!(
            "{func}(): result type {dtype} can't be cast to the desired output type {}",
            x.dtype
        )));
    }
    check_writable(func, &x.layout).err()
}

/// An error when `layout` has several elements in one memory location (an expanded tensor):
/// nothing may be written into it, as in PyTorch.
pub(crate) fn check_writable(func: &str, layout: &Layout) -> Result<()> {
    let expanded = layout.shape.iter().zip(&layout.strides).any(|(&n, &s)| s == 0 && n > 1);
    if expanded && layout.numel() > 0 {
        return Err(Error::runtime_error(format!(
            "{func}(): unsupported operation: more than one element of the written-to tensor refers to a single \
             memory location"
        )));
    }
    Ok(())
}

fn run_select(c: &Dense, x: &Dense, y: &Dense, dtype: DType) -> Result<Array> {
    let device = device("where", &[c, x, y])?;
    let shape = broadcast(&c.layout.shape, &x.layout.shape)?;
    let shape = broadcast(&shape, &y.layout.shape)?;
    device.backend().select(c, x, y, &shape, dtype)
}

fn run_matmul(x: &Dense, y: &Dense, dtype: DType) -> Result<Array> {
    let device = device("matmul", &[x, y])?;
    let (xs, ys) = (&x.layout.shape, &y.layout.shape);
    let batch = broadcast_shapes(&Shape::new(&xs[..xs.len() - 2]), &Shape::new(&ys[..ys.len() - 2]), "matmul")?;
    let pad = |arr: &Array| -> Array {
        let l = &arr.layout;
        let missing = batch.len() + 2 - l.ndim();
        let shape: Vec<usize> = std::iter::repeat_n(1, missing).chain(l.shape.iter().copied()).collect();
        let strides: Vec<usize> = std::iter::repeat_n(0, missing).chain(l.strides.iter().copied()).collect();
        arr.with_layout(Layout { shape: Shape::from(shape), strides: strides.into_iter().collect(), offset: l.offset })
    };
    device.backend().matmul(&pad(x), &pad(y), &batch, dtype)
}

fn run_cat(pieces: &[&Dense], dim: usize, shape: &Shape, dtype: DType) -> Result<Array> {
    let device = device("cat", pieces)?;
    let arrays: Vec<&Array> = pieces.iter().map(|d| &d.array).collect();
    device.backend().concat(&arrays, dim, shape, dtype)
}

fn run_convolution(x: &Dense, w: &Dense, b: Option<&Dense>, groups: usize, window: &Window) -> Result<Array> {
    let mut operands = vec![x, w];
    operands.extend(b);
    device("convolution", &operands)?.backend().conv2d(x, w, b.map(|b| &b.array), groups, window)
}

fn run_to_copy(x: &Dense, dtype: DType, device: Device) -> Result<Array> {
    if x.device() == device { x.device().backend().copy(x, dtype) } else { host::transfer("to", x, device, dtype) }
}

fn run_copy(dst: &Dense, src: &Dense) -> Result<()> {
    let device = dst.device();
    if src.device() == device {
        device.backend().assign(dst, src)
    } else {
        device.backend().assign(dst, &host::transfer("copy_", src, device, dst.dtype)?)
    }
}

/// The data of an operand: primitives pass dense tensors, so a duck here is an error naming
/// the layer.
#[inline]
pub(super) fn dense(t: &Tensor) -> Result<&Dense> {
    t.data("dispatch", "input")
}

/// The device `operands` share (zero-dimensional CPU tensors join any).
#[inline]
fn device(func: &str, operands: &[&Dense]) -> Result<Device> {
    let first = operands.first().map_or(Device::CPU, |d| d.device());
    if operands.iter().all(|d| d.device() == first) {
        return Ok(first);
    }
    mixed_devices(func, operands)
}

#[cold]
fn mixed_devices(func: &str, operands: &[&Dense]) -> Result<Device> {
    let named: Vec<(&str, &Dense)> = operands.iter().map(|&d| ("input", d)).collect();
    crate::ops::device::device_of(func, &named)
}

/// The shape `a` and `b` broadcast to, borrowed when they are the same.
#[inline]
fn broadcast<'s>(a: &'s Shape, b: &Shape) -> Result<Cow<'s, Shape>> {
    if a == b { Ok(Cow::Borrowed(a)) } else { Ok(Cow::Owned(broadcast_shapes(a, b, "binary")?)) }
}

// ---------------------------------------------------------------------------------------------
// Calls as values.

/// The keyword arguments of a family call: its parameter, if any, and the dtype.
fn keywords(param: Option<(&'static str, Value)>, dtype: DType) -> Kwargs {
    let mut kwargs = Kwargs::new();
    if let Some((name, value)) = param {
        kwargs.insert_static(name, value);
    }
    kwargs.insert_static("dtype", dtype);
    kwargs
}

/// The keyword arguments of a call that creates a tensor: its dtype and device.
fn placement(dtype: DType, device: Device) -> Kwargs {
    let mut kwargs = Kwargs::new();
    kwargs.insert_static("dtype", dtype);
    // A wrapper's memory is on a device of its own; the call names the device it stands for.
    kwargs.insert_static("device", super::stood_for(device));
    kwargs
}

/// A window's stride, padding and dilation as values; with `ceil`, also whether the output
/// size was rounded up (pooling's `ceil_mode`).
fn window_values(window: &Window, ceil: bool) -> Vec<Value> {
    let mut values: Vec<Value> =
        [window.stride, window.padding, window.dilation].into_iter().map(|v| Value::from(&v[..])).collect();
    if ceil {
        let floor = [0, 1].map(|a| {
            window_out(
                window.input[a],
                window.kernel[a],
                window.stride[a],
                window.padding[a],
                window.dilation[a],
                false,
            )
        });
        values.push((floor != [Some(window.out[0]), Some(window.out[1])]).into());
    }
    values
}

/// The output size of a window along one axis, PyTorch's formula; `None` when the window does
/// not fit.
fn window_out(
    input: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
    ceil: bool,
) -> Option<usize> {
    let reach = dilation.checked_mul(kernel.checked_sub(1)?)?.checked_add(1)?;
    let span = (input + 2 * padding).checked_sub(reach)?;
    let mut out = if ceil { span.div_ceil(stride) } else { span / stride } + 1;
    // A window that would start in the right padding is dropped (PyTorch's pooling).
    if ceil && (out - 1) * stride >= input + padding {
        out -= 1;
    }
    Some(out)
}

/// `op` on `args` and `kwargs` through the dispatch modes, its result read back as what the
/// primitive expects. While the modes run, `kernel` (the typed call, its result as a value) is
/// the call in progress: a hook that hands these very `args` and `kwargs` on to
/// [`Operator::call`] reaches it without binding them again (`protocol/rerun.rs`).
#[cold]
#[inline(never)]
pub(super) fn intercept<T: FromResult>(
    op: &'static Operator,
    args: &[Value],
    kwargs: Kwargs,
    kernel: &dyn Fn() -> Result<Value>,
) -> Result<T> {
    // Which tensor the kernel gave, when a hook handed the call on to it.
    let produced = std::cell::Cell::new(None);
    let rerun = |_: Route| {
        let value = kernel()?;
        produced.set(first_tensor(&value));
        Ok(value)
    };
    let current = Current::new(op, args, &kwargs, &rerun);
    let result = with_current(Some(&current), || dispatch(op, args, &kwargs))?;
    let unchecked = produced.get().is_none() || produced.get() != first_tensor(&result);
    let checked = unchecked.then(|| result.clone());
    let out = T::from_result(op, result)?;
    if let Some(result) = checked {
        check_result(op, args, &kwargs, &result)?;
    }
    Ok(out)
}

/// The identity of the first tensor of a result: the kernel's own result handed back has the
/// kernel's.
fn first_tensor(value: &Value) -> Option<usize> {
    match value {
        Value::Tensor(t) => Some(t.address()),
        Value::Tuple(items) => items.iter().find_map(first_tensor),
        _ => None,
    }
}

/// Checks a result a hook made itself against what the operator gives: the operator run on
/// meta copies of the arguments (shapes, dtypes, no data) must give tensors of the same shapes
/// and dtypes, so that autograd and the operations above never meet a result of the wrong
/// shape. Operators whose results depend on values, or that fail on meta, are not checked.
#[cold]
fn check_result(op: &'static Operator, args: &[Value], kwargs: &Kwargs, result: &Value) -> Result<()> {
    if op.has_tag(super::Tag::DataDependent) || op.has_tag(super::Tag::DynamicOutputShape) {
        return Ok(());
    }
    let fake = |v: &Value| crate::meta::faked(v, &crate::meta::like_tensor);
    let meta_args: Vec<Value> = args.iter().map(fake).collect::<Result<_>>()?;
    let mut meta_kwargs = Kwargs::new();
    for (name, value) in kwargs.iter() {
        meta_kwargs.insert(name, fake(value)?);
    }
    let Ok(expected) = op.run(&meta_args, &meta_kwargs) else { return Ok(()) };
    // Meta computes indices in int64; a device without it (wgpu) gives int32.
    let index = tensors_in(result).next().and_then(|t| t.device().ok()).map_or(DType::Int64, Device::index_dtype);
    // What a result is made of: each tensor's dtype and shape, or the type of what is not one.
    let describe = |v: &Value| -> Vec<std::result::Result<(DType, Shape), &'static str>> {
        let items: Vec<&Value> = match v {
            Value::Tuple(items) => items.iter().collect(),
            single => vec![single],
        };
        items
            .iter()
            .map(|v| match v.as_tensor().and_then(Tensor::dense) {
                Some(d) => Ok((if d.dtype == DType::Int64 { index } else { d.dtype }, d.layout.shape.clone())),
                None => Err(v.type_name()),
            })
            .collect()
    };
    let (got, want) = (describe(result), describe(&expected));
    // A result given as `None` is one not computed (the schema's `Tensor?`).
    let fits = got.len() == want.len() && got.iter().zip(&want).all(|(g, w)| *g == Err("NoneType") || g == w);
    if !fits {
        let show = |items: &[std::result::Result<(DType, Shape), &str>]| -> String {
            let shown = items.iter().map(|item| match item {
                Ok((dtype, shape)) => format!("{dtype}{:?}", &shape[..]),
                Err(type_name) => type_name.to_string(),
            });
            shown.collect::<Vec<_>>().join(", ")
        };
        return Err(Error::runtime_error(format!(
            "{op}: the __torch_dispatch__ hook returned {}, but the operator gives {}",
            show(&got),
            show(&want)
        )));
    }
    Ok(())
}

/// A kernel's result as a value.
fn tensor(array: Array) -> Value {
    Value::Tensor(Tensor::from_array(array))
}

/// A kernel's two results as a value.
fn pair((a, b): (Array, Array)) -> Value {
    Value::Tuple(vec![tensor(a), tensor(b)])
}

/// A kernel's results as a tuple.
fn tensors<const N: usize>(arrays: [Array; N]) -> Value {
    Value::Tuple(arrays.into_iter().map(tensor).collect())
}

/// The convolution gradients as `convolution_backward`'s three results (none for the bias).
fn gradients(grads: Option<[Option<Array>; 2]>) -> Value {
    let [gx, gw] = grads.unwrap_or([None, None]);
    Value::Tuple(vec![gx.map_or(Value::None, tensor), gw.map_or(Value::None, tensor), Value::None])
}

/// What a dispatch hook's result gives back to a primitive.
pub(super) trait FromResult: Sized {
    fn from_result(op: &Operator, value: Value) -> Result<Self>;
}

/// The error of a hook's result that is not what the operator returns.
fn wrong_result(op: &Operator, value: &Value) -> Error {
    let returns: Vec<&str> = op.schema().returns().iter().map(|r| r.ty()).collect();
    Error::type_error(format!(
        "{op}: the __torch_dispatch__ hook returned {}, but the operator returns ({})",
        value.type_name(),
        returns.join(", ")
    ))
}

/// A hook's result tensor, when it has data.
impl FromResult for Output {
    fn from_result(op: &Operator, value: Value) -> Result<Self> {
        match value {
            Value::Tensor(tensor) if tensor.dense().is_some() => Ok(Output::Given(tensor)),
            Value::Tensor(duck) => Err(Error::type_error(format!(
                "{op}: the __torch_dispatch__ hook returned a duck tensor ({}), but the operator returns a tensor \
                 with data",
                Value::Tensor(duck).type_name()
            ))),
            other => Err(wrong_result(op, &other)),
        }
    }
}

/// Every result of an operator that returns one or several tensors (the matrix
/// decompositions), counted against its schema.
impl FromResult for Vec<Output> {
    fn from_result(op: &Operator, value: Value) -> Result<Self> {
        let items = match value {
            Value::Tuple(items) | Value::List(items) => items,
            other => vec![other],
        };
        if items.len() != op.schema().returns().len() {
            return Err(Error::type_error(format!(
                "{op}: the __torch_dispatch__ hook returned {} results, but the operator returns {}",
                items.len(),
                op.schema().returns().len()
            )));
        }
        items.into_iter().map(|v| Output::from_result(op, v)).collect()
    }
}

/// An operator that returns nothing (`-> ()`).
impl FromResult for () {
    fn from_result(op: &Operator, value: Value) -> Result<Self> {
        if value.is_none() { Ok(()) } else { Err(wrong_result(op, &value)) }
    }
}

impl FromResult for Scalar {
    fn from_result(op: &Operator, value: Value) -> Result<Self> {
        Scalar::from_value(&value).ok_or_else(|| wrong_result(op, &value))
    }
}

impl FromResult for (Output, Output) {
    fn from_result(op: &Operator, value: Value) -> Result<Self> {
        match value {
            Value::Tuple(items) if items.len() == 2 => {
                let mut items = items.into_iter();
                let mut next = || Output::from_result(op, items.next().unwrap_or_default());
                Ok((next()?, next()?))
            }
            other => Err(wrong_result(op, &other)),
        }
    }
}

impl FromResult for Option<[Option<Tensor>; 2]> {
    fn from_result(op: &Operator, value: Value) -> Result<Self> {
        let Some([a, b, _]) = value.as_slice() else { return Err(wrong_result(op, &value)) };
        let read = |v: &Value| {
            if v.is_none() { Ok(None) } else { Output::from_result(op, v.clone()).map(|o| Some(o.into_tensor())) }
        };
        let grads = [read(a)?, read(b)?];
        // A gradient asked for and not given: the backend has no kernel (see the schema).
        Ok(if grads.iter().all(Option::is_none) { None } else { Some(grads) })
    }
}

/// An operator's arguments bound to its schema.
struct Bound {
    op: &'static Operator,
    values: super::schema::Bound,
}

impl Bound {
    fn position(&self, name: &str) -> usize {
        // The names come from the schemas this file reads, which a unit test checks.
        self.op.schema().arguments().iter().position(|a| a.name() == name).unwrap_or(usize::MAX)
    }

    fn get(&self, name: &str) -> &Value {
        self.values.get(self.position(name)).unwrap_or(&Value::None)
    }

    fn invalid(&self, name: &str, why: impl std::fmt::Display) -> Error {
        Error::value_error(format!("{}(): argument '{name}' {why}", self.op.name()))
    }

    fn dense(&self, name: &str) -> Result<&Dense> {
        match self.get(name).as_tensor() {
            Some(t) => t.data(self.op.name(), name),
            None => Err(self.invalid(name, "must be a tensor")),
        }
    }

    fn dense_opt(&self, name: &str) -> Result<Option<&Dense>> {
        if self.get(name).is_none() { Ok(None) } else { self.dense(name).map(Some) }
    }

    fn int(&self, name: &str) -> i64 {
        self.get(name).as_int().unwrap_or(0)
    }

    fn float(&self, name: &str) -> f64 {
        self.get(name).as_f64().unwrap_or(0.0)
    }

    /// The `device` keyword, the CPU when not given.
    fn device(&self) -> Device {
        match self.get("device") {
            Value::Device(d) => *d,
            _ => Device::CPU,
        }
    }

    fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), Value::Bool(true))
    }

    fn text(&self, name: &str) -> Option<&str> {
        self.get(name).as_str()
    }

    /// A non-negative size.
    fn size(&self, name: &str, value: i64) -> Result<usize> {
        usize::try_from(value).map_err(|_| self.invalid(name, format_args!("must not be negative, got {value}")))
    }

    /// A list of non-negative sizes (one number standing for all of a fixed-size list).
    fn sizes(&self, name: &str, fixed: usize) -> Result<Vec<usize>> {
        let ints: Vec<i64> = match self.get(name) {
            Value::Int(i) => vec![*i; fixed.max(1)],
            v => v.as_slice().unwrap_or(&[]).iter().filter_map(Value::as_int).collect(),
        };
        ints.into_iter().map(|i| self.size(name, i)).collect()
    }

    /// Two sizes (kernel, stride, padding, dilation).
    /// The `dim` argument as a dimension of `x` (0 for a 0-d `x`), checked.
    fn dim_of(&self, x: &Dense) -> Result<usize> {
        let (dim, ndim) = (self.int("dim"), x.layout.ndim().max(1) as i64);
        if !(-ndim..ndim).contains(&dim) {
            return Err(self.invalid("dim", "must be a dimension of self"));
        }
        Ok(if x.layout.ndim() == 0 { 0 } else { dim.rem_euclid(ndim) as usize })
    }

    fn pair(&self, name: &str) -> Result<[usize; 2]> {
        match self.sizes(name, 2)?[..] {
            [a, b] => Ok([a, b]),
            ref other => Err(self.invalid(name, format_args!("must have 2 elements, got {}", other.len()))),
        }
    }

    fn dim(&self, name: &str, ndim: usize) -> Result<usize> {
        normalize_dim(self.int(name), ndim, self.op.name())
    }

    /// Sorted, distinct dimensions; none (or an empty list) means all.
    fn dims(&self, name: &str, ndim: usize) -> Result<Vec<usize>> {
        let given: Vec<i64> = self.get(name).as_slice().unwrap_or(&[]).iter().filter_map(Value::as_int).collect();
        if given.is_empty() {
            return Ok((0..ndim).collect());
        }
        let mut dims = given.into_iter().map(|d| normalize_dim(d, ndim, self.op.name())).collect::<Result<Vec<_>>>()?;
        dims.sort_unstable();
        dims.dedup();
        Ok(dims)
    }

    fn dtype(&self, default: DType) -> DType {
        match self.get("dtype") {
            Value::DType(d) => *d,
            _ => default,
        }
    }

    /// Integer indices in `0..size`, read on the host (an out-of-range index is an error here,
    /// where the kernels assume checked indices).
    fn indices(&self, name: &str, size: usize) -> Result<&Dense> {
        let index = self.dense(name)?;
        if !matches!(index.dtype, DType::Int64 | DType::Int32) {
            return Err(self.invalid(name, format_args!("must be an integer tensor, got {}", index.dtype)));
        }
        // Meta indices have no values to check, as PyTorch's meta kernels check none.
        if index.numel() == 0 || index.device().is_meta() {
            return Ok(index);
        }
        let all: Vec<usize> = (0..index.layout.ndim()).collect();
        let backend = index.device().backend();
        let lo = host::scalar_of(&backend.reduce(index, &all, Reduce::Min, index.dtype)?)?.to_i64();
        let hi = host::scalar_of(&backend.reduce(index, &all, Reduce::Max, index.dtype)?)?.to_i64();
        if lo < 0 || usize::try_from(hi).is_ok_and(|hi| hi >= size) {
            let bad = if lo < 0 { lo } else { hi };
            return Err(Error::index_error(format!(
                "{}(): index {bad} is out of bounds for dimension with size {size}",
                self.op.name()
            )));
        }
        Ok(index)
    }

    /// The window of a convolution or pooling over `input` (`[.., h, w]`) with `kernel`.
    fn window(&self, input: &Shape, kernel: [usize; 2], stride: [usize; 2], ceil: bool) -> Result<Window> {
        let (padding, dilation) = (self.pair("padding")?, self.pair("dilation")?);
        let n = input.len();
        let plane = [input[n - 2], input[n - 1]];
        if stride.contains(&0) || dilation.contains(&0) || kernel.contains(&0) {
            return Err(self.invalid("stride", "kernel size, stride and dilation must be positive"));
        }
        let mut out = [0; 2];
        for a in 0..2 {
            out[a] = window_out(plane[a], kernel[a], stride[a], padding[a], dilation[a], ceil)
                .filter(|&o| o > 0)
                .ok_or_else(|| self.invalid("input", format_args!("is too small ({plane:?}) for the window")))?;
        }
        Ok(Window { kernel, stride, padding, dilation, input: plane, out })
    }
}

/// `op` on `args` and `kwargs` by the backend's kernel: the arguments bound to the schema and
/// checked (types, dimensions, shapes, index ranges), so no kernel sees what it cannot take.
pub(super) fn run(op: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
    if let Some(result) = rerun_current(op, args, kwargs, Route::Implementation) {
        return result;
    }
    let values = op.schema().bind(&op.name(), args, kwargs)?;
    let b = Bound { op, values };
    let tensor = |array: Array| Ok(self::tensor(array));
    match op.kernel {
        Kernel::Unary(u) => {
            let x = b.dense("self")?;
            let u = match u {
                Unary::Gelu if b.text("approximate") == Some("tanh") => Unary::GeluTanh,
                Unary::Round(_) => Unary::Round(b.int("decimals")),
                u => u,
            };
            // Float functions of integers compute in the default float dtype, as in PyTorch.
            let float = u.is_float_function();
            let default =
                if float && !x.dtype.is_floating_point() { crate::types::get_default_dtype() } else { x.dtype };
            let dtype = b.dtype(default);
            if b.op.has_tag(super::Tag::Inplace) {
                write_into_self(b.op, x, &x.layout.shape, dtype, &|out| run_unary(x, u, dtype, out))?;
                return Ok(b.get("self").clone());
            }
            tensor(run_unary(x, u, dtype, None)?)
        }
        Kernel::Binary(op) => {
            let (x, y) = (b.dense("self")?, b.dense(b.op.schema().arguments()[1].name())?);
            let alpha = || Scalar::from_value(b.get("alpha")).unwrap_or(Scalar::Int(1));
            let op = match op {
                Binary::Add(_) => Binary::Add(alpha()),
                Binary::Sub(_) => Binary::Sub(alpha()),
                Binary::DivTrunc => match b.text("rounding_mode") {
                    None => Binary::Div,
                    Some("trunc") => Binary::DivTrunc,
                    Some("floor") => Binary::DivFloor,
                    Some(other) => {
                        return Err(
                            b.invalid("rounding_mode", format_args!("must be 'trunc' or 'floor', got '{other}'"))
                        );
                    }
                },
                op => op,
            };
            let dtype = b.dtype(result_type([x.participant(), y.participant()]));
            if b.op.has_tag(super::Tag::Inplace) {
                let shape = broadcast(&x.layout.shape, &y.layout.shape)?;
                write_into_self(b.op, x, &shape, dtype, &|out| run_binary(x, y, op, dtype, out))?;
                return Ok(b.get("self").clone());
            }
            tensor(run_binary(x, y, op, dtype, None)?)
        }
        Kernel::Where => {
            let (c, x, y) = (b.dense("condition")?, b.dense("self")?, b.dense("other")?);
            if c.dtype != DType::Bool {
                return Err(b.invalid("condition", format_args!("must be a bool tensor, got {}", c.dtype)));
            }
            tensor(run_select(c, x, y, b.dtype(result_type([x.participant(), y.participant()])))?)
        }
        Kernel::Reduce(r) => {
            let x = b.dense("self")?;
            let dims = b.dims("dim", x.layout.ndim())?;
            let result = run_reduce(x, &dims, r, b.dtype(x.dtype))?;
            if !b.flag("keepdim") {
                return tensor(result);
            }
            let kept: Shape =
                x.layout.shape.iter().enumerate().map(|(d, &n)| if dims.contains(&d) { 1 } else { n }).collect();
            tensor(result.with_layout(Layout { offset: result.layout.offset, ..Layout::contiguous(kept) }))
        }
        Kernel::Scan(s) => {
            let x = b.dense("self")?;
            let dim = b.dim("dim", x.layout.ndim())?;
            tensor(run_scan(x, dim, s, b.dtype(x.dtype))?)
        }
        Kernel::Matmul => {
            let (x, y) = (b.dense("self")?, b.dense("other")?);
            let (xs, ys) = (&x.layout.shape, &y.layout.shape);
            if xs.len() < 2 || ys.len() < 2 || xs[xs.len() - 1] != ys[ys.len() - 2] {
                return Err(b.invalid(
                    "other",
                    format_args!("shapes {:?} and {:?} cannot be multiplied (each needs two dimensions, and the inner sizes must match)", &xs[..], &ys[..]),
                ));
            }
            tensor(run_matmul(x, y, b.dtype(result_type([x.participant(), y.participant()])))?)
        }
        Kernel::IndexSelect => {
            let x = b.dense("self")?;
            if x.layout.ndim() == 0 {
                return Err(b.invalid("self", "must have at least one dimension"));
            }
            let dim = b.dim("dim", x.layout.ndim())?;
            let index = b.indices("index", x.layout.shape[dim])?;
            if index.layout.ndim() != 1 {
                return Err(b.invalid("index", "must be a vector"));
            }
            tensor(run_index_select(x, dim, index)?)
        }
        Kernel::Gather => {
            let x = b.dense("self")?;
            if x.layout.ndim() == 0 {
                return Err(b.invalid("self", "must have at least one dimension"));
            }
            let dim = b.dim("dim", x.layout.ndim())?;
            let index = b.indices("index", x.layout.shape[dim])?;
            let fits = index.layout.ndim() == x.layout.ndim()
                && (0..x.layout.ndim()).all(|d| d == dim || index.layout.shape[d] <= x.layout.shape[d]);
            if !fits {
                return Err(
                    b.invalid("index", "must have self's number of dimensions and no larger size except along dim")
                );
            }
            tensor(run_gather(x, dim, index)?)
        }
        Kernel::ScatterAdd => {
            let shape = Shape::from(b.sizes("size", 0)?);
            if shape.is_empty() {
                return Err(b.invalid("size", "must have at least one dimension"));
            }
            let src = b.dense("src")?;
            let dim = b.dim("dim", shape.len())?;
            let index = b.indices("index", shape[dim])?;
            let fits = index.layout.shape == src.layout.shape
                && index.layout.ndim() == shape.len()
                && (0..shape.len()).all(|d| d == dim || index.layout.shape[d] <= shape[d]);
            if !fits {
                return Err(b.invalid(
                    "index",
                    "must have src's shape, size's number of dimensions and no larger size except along dim",
                ));
            }
            tensor(run_scatter_add(&shape, dim, index, src)?)
        }
        Kernel::Cat => {
            let tensors: Vec<&Dense> =
                tensors_in(b.get("tensors")).map(|t| t.data(op.name(), "tensors")).collect::<Result<_>>()?;
            let Some(first) = tensors.first() else { return Err(b.invalid("tensors", "must not be empty")) };
            let dim = b.dim("dim", first.layout.ndim())?;
            let mut shape = first.layout.shape.to_vec();
            shape[dim] = 0;
            for t in &tensors {
                let same = t.layout.ndim() == shape.len()
                    && (0..shape.len()).all(|d| d == dim || t.layout.shape[d] == shape[d]);
                if !same {
                    return Err(b.invalid("tensors", "must have the same sizes except along dim"));
                }
                shape[dim] += t.layout.shape[dim];
            }
            let dtype = b.dtype(result_type(tensors.iter().map(|t| t.participant())));
            tensor(run_cat(&tensors, dim, &Shape::from(shape), dtype)?)
        }
        Kernel::Softmax { log } => {
            let x = b.dense("self")?;
            let dim = b.dim("dim", x.layout.ndim())?;
            let dtype = b.dtype(x.dtype);
            if !dtype.is_floating_point() {
                return Err(b.invalid("dtype", format_args!("must be a floating point dtype, got {dtype}")));
            }
            tensor(run_softmax(x, dim, log, dtype)?)
        }
        Kernel::Convolution | Kernel::ConvolutionBackward => {
            let (x, w) = (b.dense("input")?, b.dense("weight")?);
            let groups = b.size("groups", b.int("groups"))?;
            let (xs, ws) = (&x.layout.shape, &w.layout.shape);
            let fits = xs.len() == 4
                && ws.len() == 4
                && groups > 0
                && xs[1] == ws[1] * groups
                && ws[0] % groups == 0
                && x.dtype.is_floating_point();
            if !fits || b.flag("transposed") {
                return Err(b.invalid(
                    "weight",
                    format_args!(
                        "{:?} does not fit a 2-D convolution of input {:?} in {groups} groups (float, not transposed)",
                        &ws[..],
                        &xs[..]
                    ),
                ));
            }
            let window = b.window(xs, [ws[2], ws[3]], b.pair("stride")?, false)?;
            if let Kernel::Convolution = op.kernel {
                let bias = b.dense_opt("bias")?;
                if bias.is_some_and(|bias| bias.layout.shape[..] != [ws[0]]) {
                    return Err(b.invalid("bias", format_args!("must have shape [{}]", ws[0])));
                }
                return tensor(run_convolution(x, w, bias, groups, &window)?);
            }
            let g = b.dense("grad_output")?;
            if g.layout.shape[..] != [xs[0], ws[0], window.out[0], window.out[1]] {
                return Err(b.invalid("grad_output", "must have the convolution's output shape"));
            }
            let mask: Vec<bool> =
                b.get("output_mask").as_slice().unwrap_or(&[]).iter().map(|v| matches!(v, Value::Bool(true))).collect();
            let which = [mask.first() == Some(&true), mask.get(1) == Some(&true)];
            Ok(gradients(run_convolution_backward(x, w, g, groups, &window, which)?))
        }
        Kernel::MaxPool2d => {
            let x = b.dense("self")?;
            if x.layout.ndim() != 3 || !x.dtype.is_floating_point() {
                return Err(b.invalid("self", "must be a float tensor of shape [planes, h, w]"));
            }
            let kernel = b.pair("kernel_size")?;
            let stride =
                if b.get("stride").as_slice().is_some_and(<[Value]>::is_empty) { kernel } else { b.pair("stride")? };
            let window = b.window(&x.layout.shape, kernel, stride, b.flag("ceil_mode"))?;
            Ok(pair(run_max_pool2d(x, &window)?))
        }
        Kernel::Sort => {
            let x = b.dense("self")?;
            let dim = b.dim_of(x)?;
            Ok(pair(run_sort(x, dim, b.flag("descending"), None)?))
        }
        Kernel::TopK => {
            let x = b.dense("self")?;
            let dim = b.dim_of(x)?;
            let n = x.layout.shape.get(dim).copied().unwrap_or(1);
            let k = usize::try_from(b.int("k")).ok().filter(|&k| k <= n);
            let Some(k) = k else { return Err(b.invalid("k", "must be at most the dimension's size")) };
            Ok(pair(run_sort(x, dim, b.flag("largest"), Some(k))?))
        }
        Kernel::ToCopy => {
            let x = b.dense("self")?;
            let device = match b.get("device") {
                Value::Device(d) => *d,
                _ => x.device(),
            };
            tensor(run_to_copy(x, b.dtype(x.dtype), device)?)
        }
        Kernel::AsStrided => {
            let t = b.get("self").as_tensor().ok_or_else(|| b.invalid("self", "must be a tensor"))?;
            let x = b.dense("self")?;
            let (size, stride) = (b.sizes("size", 0)?, b.sizes("stride", 0)?);
            let offset = match b.get("storage_offset") {
                Value::None => x.layout.offset,
                v => b.size("storage_offset", v.as_int().unwrap_or(0))?,
            };
            if size.len() != stride.len() {
                return Err(b.invalid("stride", "must have as many elements as size"));
            }
            let layout = Layout { shape: Shape::from(size), strides: stride.into_iter().collect(), offset };
            if !within(&layout, &x.layout) {
                return Err(b.invalid("size", "and stride reach memory outside self's elements"));
            }
            Ok(Value::Tensor(t.make_view(x, layout)))
        }
        Kernel::Full => {
            let shape = Shape::from(b.sizes("size", 0)?);
            let value = Scalar::from_value(b.get("fill_value")).unwrap_or(Scalar::Int(0));
            // `new_full` is placed like its `self`, `full` by its value and the defaults.
            let like = b.dense_opt("self")?;
            let default = match (like, value) {
                (Some(x), _) => x.dtype,
                (None, Scalar::Bool(_)) => DType::Bool,
                (None, Scalar::Int(_)) => DType::Int64,
                (None, Scalar::Float(_)) => crate::types::get_default_dtype(),
            };
            let device = match (b.get("device"), like) {
                (Value::Device(d), _) => *d,
                (_, Some(x)) => x.device(),
                _ => Device::CPU,
            };
            let dtype = b.dtype(default);
            host::check_dtype(op.name(), device, dtype)?;
            tensor(device.backend().fill(device, &shape, value, dtype)?)
        }
        Kernel::Nonzero => tensor(run_nonzero(b.dense("self")?)?),
        Kernel::Linalg(d) => {
            let mut inputs = vec![b.dense(op.schema().arguments()[0].name())?];
            if d == super::linalg::Decomposition::Solve {
                inputs.push(b.dense("B")?);
            }
            let flag = super::linalg::flag_of(d, &|name| b.get(name).clone())?;
            Ok(super::linalg::results(super::linalg::run(d, &inputs, flag)?))
        }
        Kernel::Draw(kind) => {
            let generator = match b.get("generator") {
                Value::Generator(g) => Some(g.clone()),
                _ => None,
            };
            // Drawn like a tensor: its shape, dtype and device; else from a size.
            let (dist, shape, dtype, device) = match kind {
                Draw::Uniform | Draw::Bernoulli => {
                    let x = b.dense("self")?;
                    let dist = match kind {
                        Draw::Uniform => Distribution::Uniform { low: b.float("from"), high: b.float("to") },
                        _ => Distribution::Bernoulli { p: b.float("p") },
                    };
                    (dist, x.layout.shape.clone(), x.dtype, x.device())
                }
                _ => {
                    let device = b.device();
                    let float = crate::types::get_default_dtype();
                    let (dist, default) = match kind {
                        Draw::Rand => (Distribution::Uniform { low: 0.0, high: 1.0 }, float),
                        Draw::Randn => (Distribution::Normal { mean: 0.0, std: 1.0 }, float),
                        Draw::Normal => (Distribution::Normal { mean: b.float("mean"), std: b.float("std") }, float),
                        _ => {
                            let (low, high) = (b.int("low"), b.int("high"));
                            if low >= high {
                                return Err(b.invalid("high", format_args!("must be above low ({low}), got {high}")));
                            }
                            (Distribution::Integers { low, high }, device.index_dtype())
                        }
                    };
                    (dist, Shape::from(b.sizes("size", 0)?), b.dtype(default), device)
                }
            };
            host::check_dtype(op.name(), device, dtype)?;
            tensor(run_draw(op.name(), dist, &shape, dtype, device, generator.as_ref())?)
        }
        Kernel::LiftFresh => {
            b.dense("self")?;
            Ok(b.get("self").clone())
        }
        Kernel::LocalScalar => {
            let x = b.dense("self")?;
            if x.layout.numel() != 1 {
                return Err(b.invalid("self", format_args!("must have one element, not {}", x.layout.numel())));
            }
            Ok(run_local_scalar(x)?.into())
        }
        Kernel::Copy => {
            let (dst, src) = (b.dense("self")?, b.dense("src")?);
            if dst.layout.shape != src.layout.shape {
                return Err(b.invalid(
                    "src",
                    format_args!("must have self's shape {:?}, got {:?}", &dst.layout.shape[..], &src.layout.shape[..]),
                ));
            }
            run_copy(dst, src)?;
            Ok(b.get("self").clone())
        }
        Kernel::FusedAdam { decoupled } => {
            let list = |name: &str| -> Result<Vec<&Dense>> {
                tensors_in(b.get(name)).map(|t| t.data(op.name(), name)).collect()
            };
            let lists = [
                list("self")?,
                list("grads")?,
                list("exp_avgs")?,
                list("exp_avg_sqs")?,
                list("max_exp_avg_sqs")?,
                list("state_steps")?,
            ];
            let scalars = AdamHyperparameters {
                lr: b.float("lr"),
                beta1: b.float("beta1"),
                beta2: b.float("beta2"),
                weight_decay: b.float("weight_decay"),
                eps: b.float("eps"),
                amsgrad: b.flag("amsgrad"),
                maximize: b.flag("maximize"),
            };
            run_fused_adam(decoupled, &lists, &scalars, b.dense_opt("grad_scale")?, b.dense_opt("found_inf")?)?;
            Ok(Value::None)
        }
        Kernel::FusedSgd => {
            let list = |name: &str| -> Result<Vec<&Dense>> {
                tensors_in(b.get(name)).map(|t| t.data(op.name(), name)).collect()
            };
            let lists = [list("self")?, list("grads")?, list("momentum_buffer_list")?];
            let scalars = SgdHyperparameters {
                lr: b.float("lr"),
                momentum: b.float("momentum"),
                dampening: b.float("dampening"),
                weight_decay: b.float("weight_decay"),
                nesterov: b.flag("nesterov"),
                maximize: b.flag("maximize"),
                is_first_step: b.flag("is_first_step"),
            };
            run_fused_sgd(&lists, &scalars, b.dense_opt("grad_scale")?, b.dense_opt("found_inf")?)?;
            Ok(Value::None)
        }
        Kernel::LstmLayer | Kernel::LstmLayerBackward => {
            let forward = matches!(op.kernel, Kernel::LstmLayer);
            let (cx, w) = (b.dense("cx")?, b.dense("weight_hh")?);
            let (first, rows) = if forward { ("gates", 4) } else { ("workspace", 4) };
            let g = b.dense(first)?;
            let (s, dtype) = (&g.layout.shape, g.dtype);
            let fits = s.len() == 3 && s[2] % 4 == 0 && s[2] > 0 && matches!(dtype, DType::Float32 | DType::Float64);
            if !fits {
                return Err(b.invalid(first, "must be a float32 or float64 tensor of shape [T, N, 4H], H positive"));
            }
            let (t, n, h) = (s[0], s[1], s[2] / rows);
            let mut expected = vec![("cx", cx, vec![n, h]), ("weight_hh", w, vec![4 * h, h])];
            let names: &[&str] = if forward { &["hx"] } else { &["grad_output", "grad_cell_states", "cell_states"] };
            for &name in names {
                let want = if forward { vec![n, h] } else { vec![t, n, h] };
                expected.push((name, b.dense(name)?, want));
            }
            for (name, x, want) in &expected {
                if x.layout.shape[..] != want[..] || x.dtype != dtype {
                    return Err(b.invalid(name, format_args!("must be {dtype} of shape {want:?}, as {first} implies")));
                }
            }
            let reverse = b.flag("reverse");
            if forward {
                return Ok(tensors(run_lstm_layer(g, b.dense("hx")?, cx, w, reverse)?));
            }
            let saved = [cx, w, b.dense("cell_states")?, g];
            Ok(tensors(run_lstm_layer_backward(b.dense("grad_output")?, b.dense("grad_cell_states")?, saved, reverse)?))
        }
        Kernel::EmbeddingRenorm => {
            let weight = b.dense("self")?;
            if weight.layout.ndim() != 2 || !weight.dtype.is_floating_point() {
                return Err(b.invalid("self", "must be a 2-D floating point tensor"));
            }
            let rows = weight.layout.shape[0];
            let indices = b.indices("indices", rows)?;
            run_embedding_renorm(weight, indices, b.float("max_norm"), b.float("norm_type"))?;
            Ok(b.get("self").clone())
        }
    }
}

/// Whether every element `layout` addresses lies between the first and last element `outer`
/// addresses (an empty layout addresses none).
fn within(layout: &Layout, outer: &Layout) -> bool {
    match (layout.span(), outer.span()) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some((lo, hi)), Some((olo, ohi))) => lo >= olo && hi <= ohi,
    }
}
