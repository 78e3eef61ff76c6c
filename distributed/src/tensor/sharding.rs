//! The DTensor hook (below autograd): every operator call that receives a DTensor reaches
//! [`dispatch`], which reads each DTensor argument's local tensor and placement, picks the
//! cheapest sharding strategy of the operator's family (the placements its inputs must have
//! and those its outputs then have, as PyTorch's `OpStrategy`), redistributes the inputs that
//! differ, runs the operator on the local tensors, and wraps the local results as DTensors of
//! the global shapes the operator gives on shapes alone (the meta device).
//!
//! Families: pointwise (`Partial` kept through linear ones: sums, differences, products and
//! quotients by replicated values), reductions (a reduced sharded dimension gives a `Partial`
//! of the reduction), operators along one dimension (softmax, scans, sort, topk), matmul,
//! `cat`, indexing, convolution and its backward, pooling, copies and casts, `new_full`,
//! random draws like a tensor (the whole tensor's draw, as PyTorch's RNG tracker), `item`,
//! and the fused LSTM layer and its backward (split along the batch). An operator outside
//! them is an error naming it.

use std::sync::Arc;

use torchfn_runtime::backend::Layout;
use torchfn_runtime::dispatch::{Operator, Tag, aten, no_dispatch};
use torchfn_runtime::{Device, Error, Generator, Kwargs, Result, Shape, Tensor, Value};

use super::debug;
use super::mesh::DeviceMesh;
use super::placement::{Placement, shard_range};
use super::redistribute::redistribute_local;
use super::view::shard_view;
use super::{DTensor, Spec};
use crate::collectives::ReduceOp;

/// A DTensor argument of a call: where it is among the values, its local tensor and
/// placement, and its global shape.
pub(crate) struct Operand {
    at: (usize, Option<usize>),
    pub(crate) local: Tensor,
    pub(crate) placement: Placement,
    pub(crate) shape: Vec<usize>,
    /// Gathered from a view that does not map onto the pieces: a copy, not the DTensor's memory.
    gathered: bool,
}

/// Where DTensor `t` (its own layout: the contents' whole tensor or a view of it) lies in this
/// rank's local tensor.
enum Located {
    /// The contents' whole tensor.
    Whole,
    /// A view mapping onto the local tensor: its local view and its placement.
    Mapped(Layout, Placement),
    /// A view of a sharded tensor that does not map onto the pieces (it slices the sharded
    /// dimension): an operator sees it gathered, replicated.
    Unmapped,
}

/// `t`'s global view (its layout over the contents' whole tensor) and where it lies.
fn locate(t: &Tensor, d: &DTensor) -> Result<(Layout, Located)> {
    let view = t.array()?.layout;
    let spec = &d.spec;
    let located = if view == Layout::contiguous(Shape::from(&spec.shape[..])) {
        Located::Whole
    } else if let Some(dim) = spec.placement.shard_dim() {
        let mesh = &spec.mesh;
        match shard_view(&spec.shape, dim, mesh.size(), mesh.get_local_rank()?, &view) {
            Some((local, j)) => Located::Mapped(local, Placement::Shard(j as i64)),
            None => Located::Unmapped,
        }
    } else {
        Located::Mapped(view.clone(), spec.placement)
    };
    Ok((view, located))
}

/// The placement DTensor `t` has as operators see it (`Replicate` for an unmapped view).
pub(crate) fn placement(t: &Tensor, d: &DTensor) -> Result<Placement> {
    Ok(match locate(t, d)?.1 {
        Located::Whole => d.spec.placement,
        Located::Mapped(_, placement) => placement,
        Located::Unmapped => Placement::Replicate,
    })
}

/// The local tensor, placement and global shape of DTensor `t` (an unmapped view gathered).
pub(crate) fn operand(t: &Tensor, d: &DTensor, at: (usize, Option<usize>)) -> Result<Operand> {
    let spec = &d.spec;
    let (view, located) = locate(t, d)?;
    let (local, placement, gathered) = match located {
        Located::Whole => (d.local.clone(), spec.placement, false),
        Located::Mapped(local, placement) => (strided(&d.local, &local)?, placement, false),
        Located::Unmapped => {
            let full = redistribute_local(&d.local, &spec.shape, spec.placement, Placement::Replicate, &spec.mesh)?;
            (strided(&full, &view)?, Placement::Replicate, true)
        }
    };
    Ok(Operand { at, local, placement, shape: view.shape.to_vec(), gathered })
}

/// `base` (contiguous) seen through `view` (relative to its first element).
fn strided(base: &Tensor, view: &Layout) -> Result<Tensor> {
    let offset = base.array()?.layout.offset + view.offset;
    let ints = |v: &[usize]| Value::List(v.iter().map(|&x| Value::Int(x as i64)).collect());
    let args = [base.into(), ints(&view.shape), ints(&view.strides), Value::Int(offset as i64)];
    let out = aten::AS_STRIDED.call(&args, &Kwargs::new())?;
    out.as_tensor().cloned().ok_or_else(|| Error::runtime_error("as_strided gave no tensor"))
}

/// The hook of DTensors.
pub(crate) fn dispatch(func: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
    if std::ptr::eq(func, &aten::AS_STRIDED) {
        // A view of a DTensor shares its contents; operators read it through `operand`.
        let _below = no_dispatch();
        return func.call(args, kwargs);
    }
    let _computing = debug::computing(func);
    let mut values = func.schema().bind_values(func, args, kwargs)?;
    let (mesh, operands) = operands(func, &values)?;
    if std::ptr::eq(func, &aten::NEW_FULL) {
        return new_full(func, values, &operands[0], &mesh);
    }
    if std::ptr::eq(func, &aten::LOCAL_SCALAR_DENSE) {
        let x = &operands[0];
        let full = redistribute_local(&x.local, &x.shape, x.placement, Placement::Replicate, &mesh)?;
        return func.call_bound(vec![full.into()]);
    }
    if func.has_tag(Tag::Inplace) {
        let into = match operands.first() {
            Some(dst) if dst.at == (0, None) && !dst.gathered => None,
            Some(dst) if dst.at == (0, None) => Some("a view of a DTensor that slices its sharded dimension"),
            _ => Some("a plain tensor"),
        };
        if let Some(into) = into {
            return Err(Error::runtime_error(format!("{func}: writing a DTensor into {into} is not supported")));
        }
    }
    let Some(family) = family(func) else {
        return Err(Error::not_implemented(format!("Operator {func} does not have a sharding strategy registered.")));
    };
    // `copy_` returns its destination: no result to wrap.
    let outs = if matches!(family, Family::Copy) { Vec::new() } else { global_outputs(func, &values, &operands)? };
    let choice = choose(func, family, &values, &operands, &outs, mesh.size())?;
    if func.has_tag(Tag::Random) {
        return draw_like_the_whole(func, values, &operands, &outs[0], choice.outputs[0], &mesh);
    }
    for (o, &want) in operands.iter().zip(&choice.inputs) {
        let local = redistribute_local(&o.local, &o.shape, o.placement, want, &mesh)?;
        put(&mut values, o.at, local.into());
    }
    // `scatter_add` makes its result from a size: a sharded one is this rank's piece.
    if let (Family::ScatterAdd, Some(&Placement::Shard(d))) = (family, choice.outputs.first()) {
        let (d, rank) = (d as usize, mesh.get_local_rank()?);
        if let Some(Value::List(size)) = values.first_mut()
            && let Some(n) = size.get(d).and_then(Value::as_int)
        {
            size[d] = Value::Int(shard_range(n as usize, mesh.size(), rank).1 as i64);
        }
    }
    let out = if std::ptr::eq(func, &aten::INDEX_SELECT) && choice.outputs[0].is_partial() {
        masked_lookup(func, &values, &operands, &mesh)?.into()
    } else {
        func.call_bound(values)?
    };
    // An in-place operator returns its `self`, which it wrote through its local piece.
    if func.has_tag(Tag::Inplace) {
        return Ok(args[0].clone());
    }
    // Result `k` (absent optional results keep their place) as a DTensor.
    let wrap = |k: usize, v: Value| -> Result<Value> {
        let Value::Tensor(t) = v else { return Ok(v) };
        let spec = Spec { mesh: mesh.clone(), placement: choice.outputs[k], shape: outs[k].clone() };
        Ok(DTensor::wrap(t, Arc::new(spec))?.into())
    };
    match out {
        Value::Tuple(items) => {
            Ok(Value::Tuple(items.into_iter().enumerate().map(|(k, v)| wrap(k, v)).collect::<Result<_>>()?))
        }
        single => wrap(0, single),
    }
}

/// The DTensor arguments of a call and their mesh; a plain tensor with dimensions among them
/// is PyTorch's error, a zero-dimensional one (a number) is taken as it is.
fn operands(func: &Operator, values: &[Value]) -> Result<(Arc<DeviceMesh>, Vec<Operand>)> {
    let mut mesh: Option<Arc<DeviceMesh>> = None;
    let mut found = Vec::new();
    let mut visit = |t: &Tensor, at: (usize, Option<usize>)| -> Result<()> {
        let Some(d) = t.wrapper::<DTensor>() else {
            if t.dim()? == 0 {
                return Ok(());
            }
            return Err(Error::runtime_error(format!(
                "{func}: got mixed torch.Tensor and DTensor, need to convert all torch.Tensor to DTensor before \
                 calling distributed operators!"
            )));
        };
        match &mesh {
            Some(m) if !Arc::ptr_eq(m, &d.spec.mesh) => {
                return Err(Error::runtime_error(format!(
                    "{func}: DTensor does not support cross-mesh operation: {m} and {}",
                    d.spec.mesh
                )));
            }
            Some(_) => {}
            None => mesh = Some(d.spec.mesh.clone()),
        }
        found.push(operand(t, d, at)?);
        Ok(())
    };
    for (i, v) in values.iter().enumerate() {
        match v {
            Value::Tensor(t) => visit(t, (i, None))?,
            Value::List(items) | Value::Tuple(items) => {
                for (k, item) in items.iter().enumerate() {
                    if let Value::Tensor(t) = item {
                        visit(t, (i, Some(k)))?;
                    }
                }
            }
            _ => {}
        }
    }
    let mesh = mesh.ok_or_else(|| Error::runtime_error(format!("{func}: the DTensor hook got no DTensor")))?;
    Ok((mesh, found))
}

/// Replaces the value at `at`.
fn put(values: &mut [Value], at: (usize, Option<usize>), value: Value) {
    match at {
        (i, None) => values[i] = value,
        (i, Some(k)) => {
            if let Value::List(items) | Value::Tuple(items) = &mut values[i] {
                items[k] = value;
            }
        }
    }
}

/// The global shapes of the call's results, in order (an absent optional result is empty):
/// the operator run on the meta device on tensors of the global shapes.
fn global_outputs(func: &'static Operator, values: &[Value], operands: &[Operand]) -> Result<Vec<Vec<usize>>> {
    let mut meta: Vec<Value> = values
        .iter()
        .map(|v| match v {
            Value::Device(_) => Value::Device(Device::META),
            other => other.clone(),
        })
        .collect();
    for o in operands {
        put(&mut meta, o.at, torchfn_runtime::zeros(o.shape.clone(), o.local.dtype()?, Device::META)?.into());
    }
    let _below = no_dispatch();
    let out = func.call_bound(meta)?;
    let shape = |t: &Tensor| -> Result<Vec<usize>> { Ok(t.shape()?.to_vec()) };
    match out {
        Value::Tensor(t) => Ok(vec![shape(&t)?]),
        Value::Tuple(items) => items.iter().map(|v| v.as_tensor().map_or(Ok(Vec::new()), shape)).collect(),
        _ => Ok(Vec::new()),
    }
}

/// A random draw like a DTensor (`uniform`, `bernoulli`), made as PyTorch's RNG tracker makes
/// it: every rank of the mesh takes rank 0's generator state, draws the whole tensor and keeps
/// its piece under `placement`. A sharded result then holds what the whole tensor's draw
/// would, a replicated one is the same on every rank, and the ranks' generators stay in step.
/// (PyTorch skips ahead in Philox's counter to draw the piece alone; xoshiro256++ has no cheap
/// skip, so each rank draws the whole tensor.)
fn draw_like_the_whole(
    func: &'static Operator,
    mut values: Vec<Value>,
    operands: &[Operand],
    shape: &[usize],
    placement: Placement,
    mesh: &Arc<DeviceMesh>,
) -> Result<Value> {
    let generator = match arg(func, &values, "generator") {
        Some(Value::Generator(g)) => g.clone(),
        _ => Generator::default_generator(),
    };
    let state = generator.get_state();
    crate::collectives::broadcast(&state, mesh.mesh()[0], Some(mesh.get_group()), false)?;
    generator.set_state(&state)?;
    // These draws read their tensor's shape, dtype and device alone.
    for o in operands {
        let whole = torchfn_runtime::zeros(o.shape.clone(), o.local.dtype()?, o.local.device()?)?;
        put(&mut values, o.at, whole.into());
    }
    let whole = func.call_bound(values)?;
    let whole = whole.as_tensor().ok_or_else(|| Error::runtime_error(format!("{func} gave no tensor")))?;
    let local = match placement.shard_dim() {
        Some(d) => {
            let (start, len) = shard_range(shape[d], mesh.size(), mesh.get_local_rank()?);
            whole.narrow(d as i64, start as i64, len as i64)?
        }
        None => whole.clone(),
    };
    let spec = Spec { mesh: mesh.clone(), placement, shape: shape.to_vec() };
    Ok(DTensor::wrap(local, Arc::new(spec))?.into())
}

/// `index_select` of a table split over the ranks along the looked-up dimension, at indices
/// whole on every rank: this rank's contribution to the lookup, its rows where an index falls
/// in them and zeros elsewhere (what PyTorch's `MaskPartial` placement computes). The local
/// values are bound (`self` this rank's piece, `index` whole).
fn masked_lookup(func: &Operator, values: &[Value], operands: &[Operand], mesh: &DeviceMesh) -> Result<Tensor> {
    let table = operand_at(func, operands, "self").map(|x| &operands[x]);
    let (Some(table), Some(Value::Tensor(local)), Some(Value::Tensor(index))) =
        (table, arg(func, values, "self"), arg(func, values, "index"))
    else {
        return Err(Error::runtime_error(format!("{func}: a split lookup needs its table and indices")));
    };
    let dim = dim_arg(func, values, "dim", table.shape.len())?;
    let (start, len) = shard_range(table.shape[dim], mesh.size(), mesh.get_local_rank()?);
    let _no_grad = torchfn_runtime::autograd::no_grad();
    let ours =
        index.ge(&Tensor::scalar(start as i64))?.logical_and(&index.lt(&Tensor::scalar((start + len) as i64))?)?;
    // Indices outside this rank's rows look up its first row (any would do), then are zeroed.
    let shifted = torchfn_runtime::sub(index, &Tensor::scalar(start as i64), 1)?;
    let shifted = torchfn_runtime::r#where(&ours, &shifted, &Tensor::scalar(0i64))?;
    let mut out_shape = local.shape()?.to_vec();
    out_shape[dim] = index.numel()?;
    if len == 0 {
        return torchfn_runtime::zeros(out_shape, local.dtype()?, local.device()?);
    }
    let rows = local.index_select(dim as i64, &shifted)?;
    let mut mask_shape = vec![1i64; out_shape.len()];
    mask_shape[dim] = -1;
    rows.masked_fill(&ours.logical_not()?.reshape(&mask_shape)?, &Tensor::scalar(0i64))
}

/// `new_full`: a result of `self`'s placement where it has `self`'s shape, else replicated.
fn new_full(func: &'static Operator, mut values: Vec<Value>, x: &Operand, mesh: &Arc<DeviceMesh>) -> Result<Value> {
    let size: Vec<usize> = values[1]
        .as_slice()
        .unwrap_or(&[])
        .iter()
        .filter_map(Value::as_int)
        .map(|n| usize::try_from(n).map_err(|_| Error::runtime_error(format!("{func}: negative size {n}"))))
        .collect::<Result<_>>()?;
    let placement = match x.placement {
        Placement::Shard(_) if size == x.shape => x.placement,
        _ => Placement::Replicate,
    };
    let local_size = if placement.is_shard(None) { x.local.shape()?.to_vec() } else { size.clone() };
    values[0] = x.local.clone().into();
    values[1] = Value::List(local_size.iter().map(|&n| Value::Int(n as i64)).collect());
    let out = func.call_bound(values)?;
    let local = out.as_tensor().cloned().ok_or_else(|| Error::runtime_error("new_full gave no tensor"))?;
    Ok(DTensor::wrap(local, Arc::new(Spec { mesh: mesh.clone(), placement, shape: size }))?.into())
}

// ---------------------------------------------------------------------------------------------
// Strategies.

/// One way to compute an operator: the placements its DTensor arguments must have (in the
/// order they appear) and those its results then have.
struct Strategy {
    inputs: Vec<Placement>,
    outputs: Vec<Placement>,
}

impl Strategy {
    fn new(inputs: Vec<Placement>, outputs: Vec<Placement>) -> Strategy {
        Strategy { inputs, outputs }
    }
}

/// What moving `numel` elements from `from` to `to` costs (elements communicated); `None`
/// where no redistribution does it.
fn cost(from: Placement, to: Placement, numel: usize) -> Option<usize> {
    use Placement::*;
    Some(match (from, to) {
        _ if from == to => 0,
        (Replicate, Shard(_) | Replicate | Partial(_)) => 0,
        (Shard(_), Partial(_)) => return None,
        (Shard(_), Replicate) | (Partial(_), Shard(_)) | (Shard(_), Shard(_)) => numel,
        (Partial(_), Replicate) => 2 * numel,
        (Partial(_), Partial(_)) => 3 * numel,
    })
}

/// The cheapest strategy of the call's family (the first among equals).
fn choose(
    func: &'static Operator,
    family: Family,
    values: &[Value],
    operands: &[Operand],
    outs: &[Vec<usize>],
    ranks: usize,
) -> Result<Strategy> {
    let mut strategies = strategies(func, family, values, operands, outs, ranks)?;
    // An in-place write keeps `self` where it is: its local piece is what is written.
    if func.has_tag(Tag::Inplace) && !matches!(family, Family::Copy) {
        let kept = operands[0].placement;
        strategies.retain(|s| s.inputs[0] == kept && s.outputs.first() == Some(&kept));
    }
    // Least communication first, then the fewest inputs moved (an input keeps its placement
    // where that costs nothing more, as PyTorch's outputs follow their inputs).
    let mut best: Option<((usize, usize), Strategy)> = None;
    for s in strategies {
        let total = operands.iter().zip(&s.inputs).try_fold((0usize, 0usize), |(sum, moved), (o, &want)| {
            let c = cost(o.placement, want, o.shape.iter().product())?;
            Some((sum + c, moved + usize::from(o.placement != want)))
        });
        if let Some(total) = total
            && best.as_ref().is_none_or(|(b, _)| total < *b)
        {
            best = Some((total, s));
        }
    }
    best.map(|(_, s)| s).ok_or_else(|| {
        let got: Vec<String> = operands.iter().map(|o| o.placement.to_string()).collect();
        Error::runtime_error(format!("{func}: no sharding strategy for inputs placed as [{}]", got.join(", ")))
    })
}

/// An argument by name.
fn arg<'v>(func: &Operator, values: &'v [Value], name: &str) -> Option<&'v Value> {
    let i = func.schema().arguments().iter().position(|a| a.name() == name)?;
    values.get(i)
}

/// Dimension argument `name` normalized for `rank` dimensions.
fn dim_arg(func: &Operator, values: &[Value], name: &str, rank: usize) -> Result<usize> {
    let d = arg(func, values, name).and_then(Value::as_int).unwrap_or(0);
    let n = rank.max(1) as i64;
    if d < -n || d >= n {
        return Err(Error::index_error(format!("{func}: dimension {d} out of range for {rank} dimensions")));
    }
    Ok(if d < 0 { d + n } else { d } as usize)
}

/// The operand at argument `name` (its index among the operands).
fn operand_at(func: &Operator, operands: &[Operand], name: &str) -> Option<usize> {
    let i = func.schema().arguments().iter().position(|a| a.name() == name)?;
    operands.iter().position(|o| o.at == (i, None))
}

/// Where dimension `d` of a result of `rank` dimensions and size `n` there lies in an operand
/// of `shape` broadcast to it (`None`: broadcast or absent).
fn aligned(shape: &[usize], rank: usize, d: usize, n: usize) -> Option<usize> {
    let k = d.checked_sub(rank - shape.len().min(rank))?;
    (shape.get(k) == Some(&n)).then_some(k)
}

fn shard(d: usize) -> Placement {
    Placement::Shard(d as i64)
}

const R: Placement = Placement::Replicate;
const SUM: Placement = Placement::Partial(ReduceOp::Sum);

/// The operator families with sharding strategies.
#[derive(Clone, Copy)]
enum Family {
    /// Elementwise (and random draws like a tensor).
    Pointwise,
    /// Reductions over dimensions.
    Reduction,
    /// Softmax, scans, sort and topk: along one dimension.
    AlongDim,
    Matmul,
    Cat,
    /// `index_select` and `gather`.
    Indexing,
    /// `scatter_add` (the backward of indexing and pooling).
    ScatterAdd,
    Convolution,
    ConvolutionBackward,
    Pooling,
    /// `_to_copy`, `clone` and `lift_fresh`.
    Cast,
    /// `copy_`.
    Copy,
    /// The fused LSTM layer and its backward.
    Recurrent,
}

/// The family of `func`, `None` when it has no strategies.
fn family(func: &'static Operator) -> Option<Family> {
    let is = |op: &Operator| std::ptr::eq(func, op);
    let along = [&aten::SOFTMAX, &aten::LOG_SOFTMAX, &aten::CUMSUM, &aten::CUMPROD, &aten::SORT_STABLE, &aten::TOPK];
    Some(if func.has_tag(Tag::Pointwise) || is(&aten::UNIFORM) || is(&aten::BERNOULLI) {
        Family::Pointwise
    } else if func.has_tag(Tag::Reduction) {
        Family::Reduction
    } else if along.into_iter().any(is) {
        Family::AlongDim
    } else if is(&aten::MATMUL) {
        Family::Matmul
    } else if is(&aten::CAT) {
        Family::Cat
    } else if is(&aten::INDEX_SELECT) || is(&aten::GATHER) {
        Family::Indexing
    } else if is(&aten::SCATTER_ADD) {
        Family::ScatterAdd
    } else if is(&aten::CONVOLUTION) {
        Family::Convolution
    } else if is(&aten::CONVOLUTION_BACKWARD) {
        Family::ConvolutionBackward
    } else if is(&aten::MAX_POOL2D_WITH_INDICES) {
        Family::Pooling
    } else if is(&aten::TO_COPY) || is(&aten::CLONE) || is(&aten::LIFT_FRESH) {
        Family::Cast
    } else if is(&aten::COPY_) {
        Family::Copy
    } else if is(&aten::LSTM_LAYER) || is(&aten::LSTM_LAYER_BACKWARD) {
        Family::Recurrent
    } else {
        return None;
    })
}

fn strategies(
    func: &'static Operator,
    family: Family,
    values: &[Value],
    operands: &[Operand],
    outs: &[Vec<usize>],
    ranks: usize,
) -> Result<Vec<Strategy>> {
    let n = operands.len();
    let all = |p: Placement| vec![p; n];
    let out = outs.first().cloned().unwrap_or_default();
    let is = |op: &Operator| std::ptr::eq(func, op);
    let mut s = Vec::new();
    match family {
        Family::Pointwise => {
            for d in 0..out.len() {
                let inputs =
                    operands.iter().map(|o| aligned(&o.shape, out.len(), d, out[d]).map_or(R, shard)).collect();
                s.push(Strategy::new(inputs, vec![shard(d)]));
            }
            // Linear in a partial operand: the sum of the results is the result of the sum.
            let at = |name| operand_at(func, operands, name);
            if (is(&aten::ADD_TENSOR) || is(&aten::SUB_TENSOR)) && n == 2 {
                s.push(Strategy::new(all(SUM), vec![SUM]));
            }
            if is(&aten::MUL_TENSOR) {
                for i in 0..n {
                    s.push(Strategy::new((0..n).map(|k| if k == i { SUM } else { R }).collect(), vec![SUM]));
                }
            }
            if is(&aten::DIV_TENSOR)
                && let Some(i) = at("self")
            {
                s.push(Strategy::new((0..n).map(|k| if k == i { SUM } else { R }).collect(), vec![SUM]));
            }
            if is(&aten::NEG) {
                s.push(Strategy::new(all(SUM), vec![SUM]));
            }
            s.push(Strategy::new(all(R), vec![R]));
        }
        Family::Reduction => {
            let x = &operands[0];
            let rank = x.shape.len();
            let dims: Vec<usize> = match arg(func, values, "dim").and_then(Value::as_slice) {
                Some(list) if !list.is_empty() => list
                    .iter()
                    .filter_map(Value::as_int)
                    .map(|d| if d < 0 { d + rank as i64 } else { d } as usize)
                    .collect(),
                _ => (0..rank).collect(),
            };
            let keepdim = arg(func, values, "keepdim").is_some_and(|v| v.is_same_constant(&true.into()));
            let partial = if is(&aten::SUM_DIM_INTLIST) {
                Some(ReduceOp::Sum)
            } else if is(&aten::MEAN_DIM) {
                Some(ReduceOp::Avg)
            } else if is(&aten::AMAX) {
                Some(ReduceOp::Max)
            } else if is(&aten::AMIN) {
                Some(ReduceOp::Min)
            } else if is(&aten::PROD_DIM_INT) {
                Some(ReduceOp::Product)
            } else {
                None
            };
            for d in 0..rank {
                if dims.contains(&d) {
                    // The mean of the pieces' means is the mean when the pieces are equal.
                    // The mean of the pieces' means is the mean when the pieces are equal; a
                    // maximum or minimum needs every piece non-empty.
                    let even = x.shape[d].is_multiple_of(ranks);
                    let none_empty = shard_range(x.shape[d], ranks, ranks - 1).1 > 0;
                    match partial {
                        Some(ReduceOp::Avg) if !even => {}
                        Some(ReduceOp::Max | ReduceOp::Min) if !none_empty => {}
                        Some(op) => s.push(Strategy::new(vec![shard(d)], vec![Placement::Partial(op)])),
                        None => {}
                    }
                } else {
                    let at = if keepdim { d } else { d - dims.iter().filter(|&&r| r < d).count() };
                    s.push(Strategy::new(vec![shard(d)], vec![shard(at)]));
                }
            }
            if is(&aten::SUM_DIM_INTLIST) || is(&aten::MEAN_DIM) {
                s.push(Strategy::new(vec![SUM], vec![SUM]));
            }
            s.push(Strategy::new(vec![R], vec![R]));
        }
        Family::AlongDim => {
            let rank = operands[0].shape.len();
            let along = dim_arg(func, values, "dim", rank)?;
            for d in (0..rank).filter(|&d| d != along) {
                s.push(Strategy::new(vec![shard(d)], vec![shard(d); outs.len()]));
            }
            if is(&aten::CUMSUM) {
                s.push(Strategy::new(vec![SUM], vec![SUM]));
            }
            s.push(Strategy::new(vec![R], vec![R; outs.len()]));
        }
        Family::Matmul => s.extend(matmul(operands, &out)?),
        Family::Cat => {
            let along = dim_arg(func, values, "dim", out.len())?;
            for d in (0..out.len()).filter(|&d| d != along) {
                if operands.iter().all(|o| o.shape.len() == out.len()) {
                    s.push(Strategy::new(all(shard(d)), vec![shard(d)]));
                }
            }
            s.push(Strategy::new(all(R), vec![R]));
        }
        Family::Indexing => {
            let (x, index) = (operand_at(func, operands, "self"), operand_at(func, operands, "index"));
            let rank = out.len();
            let along = dim_arg(func, values, "dim", rank)?;
            for d in (0..rank).filter(|&d| d != along) {
                let index_too = is(&aten::GATHER) && index.is_some_and(|i| operands[i].shape.get(d) == out.get(d));
                if x.is_some_and(|x| operands[x].shape.get(d) == out.get(d)) && (is(&aten::INDEX_SELECT) || index_too) {
                    let inputs = (0..n)
                        .map(|k| if Some(k) == x || (is(&aten::GATHER) && Some(k) == index) { shard(d) } else { R });
                    s.push(Strategy::new(inputs.collect(), vec![shard(d)]));
                }
            }
            if is(&aten::INDEX_SELECT)
                && let Some(i) = index
            {
                s.push(Strategy::new((0..n).map(|k| if k == i { shard(0) } else { R }).collect(), vec![shard(along)]));
                // The table split along the looked-up dimension (`RowwiseParallel` on an
                // `Embedding`), the indices whole: each rank's lookup in its rows, zeros for
                // the others (see `masked_lookup`), adds up to the lookup in the whole table.
                if let Some(x) = x {
                    s.push(Strategy::new((0..n).map(|k| if k == x { shard(along) } else { R }).collect(), vec![SUM]));
                }
            }
            s.push(Strategy::new(all(R), vec![R]));
        }
        Family::ScatterAdd => {
            // `index` and `src` (one shape) split along another dimension than `dim` give the
            // result split the same way; split along `dim`, each rank's share of the sums.
            let size: Vec<usize> = arg(func, values, "size")
                .and_then(Value::as_slice)
                .unwrap_or(&[])
                .iter()
                .filter_map(|v| v.as_int().and_then(|n| usize::try_from(n).ok()))
                .collect();
            let along = dim_arg(func, values, "dim", size.len())?;
            let (index, src) = (operand_at(func, operands, "index"), operand_at(func, operands, "src"));
            if let (Some(_), Some(src_at)) = (index, src) {
                for d in 0..size.len() {
                    if d != along && operands[src_at].shape.get(d) == size.get(d) {
                        s.push(Strategy::new(all(shard(d)), vec![shard(d)]));
                    }
                }
                s.push(Strategy::new(all(shard(along)), vec![SUM]));
            }
            s.push(Strategy::new(all(R), vec![R]));
        }
        Family::Convolution => {
            // Batch-parallel: the batch sharded, the weights whole.
            if let Some(i) = operand_at(func, operands, "input") {
                s.push(Strategy::new((0..n).map(|k| if k == i { shard(0) } else { R }).collect(), vec![shard(0)]));
            }
            s.push(Strategy::new(all(R), vec![R]));
        }
        Family::ConvolutionBackward => {
            let (g, x) = (operand_at(func, operands, "grad_output"), operand_at(func, operands, "input"));
            let inputs = (0..n).map(|k| if Some(k) == g || Some(k) == x { shard(0) } else { R });
            s.push(Strategy::new(inputs.collect(), vec![shard(0), SUM, SUM]));
            s.push(Strategy::new(all(R), vec![R; 3]));
        }
        Family::Pooling => {
            for d in 0..operands[0].shape.len().saturating_sub(2) {
                s.push(Strategy::new(vec![shard(d)], vec![shard(d); 2]));
            }
            s.push(Strategy::new(vec![R], vec![R; 2]));
        }
        Family::Cast => {
            // A partial value stays partial through a conversion between floating-point types
            // only (rounding each contribution to an integer or a bool is not linear).
            let x = &operands[0];
            let floating = |v: Option<&Value>| matches!(v, Some(Value::DType(d)) if d.is_floating_point());
            let to_float =
                floating(arg(func, values, "dtype")) || arg(func, values, "dtype").is_none_or(Value::is_none);
            let from_float = x.local.dtype()?.is_floating_point();
            if !x.placement.is_partial() || (to_float && from_float) {
                s.push(Strategy::new(vec![x.placement], vec![x.placement]));
            }
            for d in 0..x.shape.len() {
                s.push(Strategy::new(vec![shard(d)], vec![shard(d)]));
            }
            s.push(Strategy::new(vec![R], vec![R]));
        }
        Family::Copy => {
            // The destination keeps its placement; the source comes to it.
            let dst = &operands[0];
            let src = match dst.placement {
                Placement::Shard(d) => operands
                    .get(1)
                    .map(|o| aligned(&o.shape, dst.shape.len(), d as usize, dst.shape[d as usize]).map_or(R, shard)),
                p => operands.get(1).map(|_| p),
            };
            s.push(Strategy::new(std::iter::once(dst.placement).chain(src).collect(), vec![dst.placement]));
        }
        Family::Recurrent => {
            // Each sequence of the batch is independent: the `[T, N, ..]` operands and results
            // split along the batch (dimension 1), the states `[N, H]` along 0, `weight_hh`
            // whole on every rank.
            let weight = operand_at(func, operands, "weight_hh");
            let batch = |ndim: usize| if ndim == 3 { shard(1) } else { shard(0) };
            let inputs = (operands.iter().enumerate())
                .map(|(k, o)| if Some(k) == weight { R } else { batch(o.shape.len()) })
                .collect();
            s.push(Strategy::new(inputs, outs.iter().map(|o| batch(o.len())).collect()));
            s.push(Strategy::new(all(R), vec![R; outs.len()]));
        }
    }
    Ok(s)
}

/// `matmul`'s strategies: rows of the first operand sharded, columns of the second, the
/// contracted dimension of both (a partial sum), a batch dimension, a partial operand times a
/// replicated one, or everything replicated.
fn matmul(operands: &[Operand], out: &[usize]) -> Result<Vec<Strategy>> {
    let (a, b) = match operands {
        [a, b] => (a.shape.len(), b.shape.len()),
        _ => return Ok(vec![Strategy::new(vec![R; operands.len()], vec![R])]),
    };
    let r = out.len();
    let mut s = Vec::new();
    let (a_k, b_k) = (a - 1, b.saturating_sub(2));
    if a >= 2 {
        let out_n = r - 1 - usize::from(b >= 2);
        s.push(Strategy::new(vec![shard(a - 2), R], vec![shard(out_n)]));
    }
    if b >= 2 {
        s.push(Strategy::new(vec![R, shard(b - 1)], vec![shard(r - 1)]));
    }
    s.push(Strategy::new(vec![shard(a_k), shard(b_k)], vec![SUM]));
    let batch = r - usize::from(a >= 2) - usize::from(b >= 2);
    for (d, &size) in out.iter().enumerate().take(batch) {
        let side = |o: &Operand, own: usize| {
            let own_batch = own.saturating_sub(2);
            aligned(&o.shape[..own_batch], batch, d, size).map_or(R, shard)
        };
        let inputs = vec![side(&operands[0], a), side(&operands[1], b)];
        if inputs.iter().any(|p| p.is_shard(None)) {
            s.push(Strategy::new(inputs, vec![shard(d)]));
        }
    }
    s.push(Strategy::new(vec![SUM, R], vec![SUM]));
    s.push(Strategy::new(vec![R, SUM], vec![SUM]));
    s.push(Strategy::new(vec![R, R], vec![R]));
    Ok(s)
}
