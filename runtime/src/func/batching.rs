//! vmap's batched tensors and batching rules (functorch's `BatchedTensor` and
//! `BatchRulesHelper`): a batched tensor is a wrapper subclass on the dispatch layer whose
//! shape is one example's and whose contents are the whole batch (its *physical* tensor, the
//! batch dimension first). Every operator call that receives one reaches [`batch`], below
//! autograd, which runs the operator once on the physical tensors by the rule of its kernel
//! family (pointwise, reductions, scans, softmax, matmul, views, indexing, convolution,
//! pooling, copies), or, for an operator without a rule, once per example (the fallback loop,
//! which warns once per operator).
//!
//! Levels make vmaps nest: each `vmap` call has a level, its batched tensors record it, and a
//! call is batched over the highest level among its arguments; tensors of lower levels are
//! unbatched at that level (they are themselves batched tensors of the level below, which the
//! operator calls the rule makes reach in turn).
//!
//! A batched tensor's physical tensor is contiguous, and the wrapper's layout is the physical
//! layout without its first dimension (the same offset): a view the primitives take of the
//! wrapper (always an `as_strided`) is then the same view of each example's memory, so views
//! need no rule of their own and writes through them land in the batch.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use std::borrow::Cow;

use crate::autograd::{self, Backward, Edge, Node, forward_ad, meta};
use crate::dispatch::{Draw, Kernel, Operator, Tag, WrapperSubclass, tensors_in};
use crate::error::{Error, Result, bail};
use crate::ops::view::{advance, dims_of, view_of};
use crate::primitive;
use crate::tensor::{Layout, Shape, Tensor, normalize_dim, result_type};
use crate::value::{Kwargs, Value};

/// How random operations behave under `vmap` (PyTorch's `randomness=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Randomness {
    /// A random operation is an error (the default).
    #[default]
    Error,
    /// Each example draws its own numbers.
    Different,
    /// Every example sees the same numbers.
    Same,
}

/// One `vmap` call: its level (higher is inner), batch size and randomness.
pub(crate) struct Level {
    pub(crate) id: usize,
    pub(crate) size: usize,
    pub(crate) randomness: Randomness,
}

static LEVELS: AtomicUsize = AtomicUsize::new(1);

impl Level {
    /// A level above every level made so far.
    pub(crate) fn new(size: usize, randomness: Randomness) -> Arc<Level> {
        Arc::new(Level { id: LEVELS.fetch_add(1, Ordering::Relaxed), size, randomness })
    }
}

/// A batched tensor's contents: the whole batch (contiguous, batch dimension first) and its
/// level.
pub(crate) struct Batched {
    physical: Tensor,
    pub(crate) level: Arc<Level>,
}

impl WrapperSubclass for Batched {
    fn torch_dispatch(func: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        batch(func, args, kwargs)
    }
}

/// `physical` (batch dimension first) as a batched tensor of `level`.
pub(crate) fn wrap(physical: &Tensor, level: &Arc<Level>) -> Result<Tensor> {
    // Inner levels stay outside outer ones (a gradient batched by a later vmap, batched again
    // by the backward of an earlier one's exit): the batch goes beneath them.
    if let Some(outer) = physical.wrapper::<Batched>()
        && outer.level.id > level.id
    {
        let beneath = self::physical(physical, outer)?;
        let inner = wrap(&movedim(&beneath, 1, 0)?, level)?;
        return wrap(&inner, &outer.level);
    }
    let physical = primitive::contiguous(physical)?.into_owned();
    let l = &physical.data("vmap", "input")?.layout;
    if l.shape.first() != Some(&level.size) {
        bail!(
            Runtime,
            "vmap: a batched result must have the batch size {} in its first dimension, got shape {:?}",
            level.size,
            &l.shape[..]
        );
    }
    let layout = Layout { shape: l.shape[1..].into(), strides: l.strides[1..].into(), offset: l.offset };
    let (dtype, device) = kind(&physical)?;
    Tensor::wrapper_with_layout(Batched { physical, level: level.clone() }, layout, dtype, device)
}

/// The batch of `t` at its outermost level, and that level, when `t` is batched.
pub(crate) fn top_batch(t: &Tensor) -> Result<Option<(Tensor, Arc<Level>)>> {
    match t.wrapper::<Batched>() {
        Some(b) => Ok(Some((physical(t, b)?, b.level.clone()))),
        None => Ok(None),
    }
}

/// Whether `x` is the memory of a batched tensor.
pub(crate) fn is_batched(x: &crate::backend::Array) -> bool {
    crate::dispatch::wrapper_contents::<Batched>(x).is_some()
}

thread_local! {
    /// The levels whose vmap is running on this thread, innermost last.
    static LIVE: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Marks `level`'s vmap as running until dropped.
pub(crate) struct LiveLevel(usize);

impl LiveLevel {
    pub(crate) fn enter(level: &Level) -> LiveLevel {
        LIVE.with(|l| l.borrow_mut().push(level.id));
        LiveLevel(level.id)
    }
}

impl Drop for LiveLevel {
    fn drop(&mut self) {
        LIVE.with(|l| l.borrow_mut().retain(|&id| id != self.0));
    }
}

/// `grad` summed over the batches of the vmaps that have returned (a gradient reaching a
/// tensor every example shared, from a backward that runs after the vmap): the batches of
/// running vmaps stay (per-example gradients).
pub(crate) fn sum_exited_levels(mut grad: Tensor) -> Result<Tensor> {
    loop {
        let mut exited = None;
        let mut t = grad.clone();
        while let Some(b) = t.wrapper::<Batched>() {
            if !LIVE.with(|l| l.borrow().contains(&b.level.id)) {
                exited = Some(b.level.clone());
                break;
            }
            t = physical(&t, b)?;
        }
        let Some(level) = exited else { return Ok(grad) };
        let examples = remove_batch_dim(&grad, &level)?;
        let dtype = examples.data("backward", "grad")?.dtype;
        grad = primitive::reduce(&examples, &[0], crate::backend::Reduce::Sum, dtype)?;
    }
}

/// vmap's entry (PyTorch's `_add_batch_dim`): `x`, its batch dimension first, as a batched
/// tensor of `level`. Its history and tangent cross over: the batched tensor is the output of
/// a node whose backward takes the batched gradient back to `x`'s, and its tangent is `x`'s
/// batched. The batch itself keeps neither, so the rules' work below records nothing.
pub(crate) fn add_batch_dim(x: &Tensor, level: &Arc<Level>) -> Result<Tensor> {
    let batched = wrap(&meta::detached(x), level)?;
    if forward_ad::level_active()
        && let Some(tangent) = forward_ad::tangent(x)
    {
        forward_ad::set_tangent(&batched, Some(wrap(&meta::detached(&tangent), level)?));
    }
    if meta::requires_grad(x) && autograd::is_grad_enabled() {
        let out = meta::output_meta(batched.data("vmap", "input")?);
        let node = Node::function(Boundary::Add(level.clone()), [meta::gradient_edge(x)], Vec::new(), [out]);
        meta::set_history(&batched, Some(Edge { node, output_nr: 0 }));
    }
    Ok(batched)
}

/// vmap's exit (PyTorch's `_remove_batch_dim`): the batch of `y` at `level` (batch dimension
/// first; `y` repeated when it is not batched there), with `y`'s history and tangent carried
/// across as [`add_batch_dim`] carries them in.
pub(crate) fn remove_batch_dim(y: &Tensor, level: &Arc<Level>) -> Result<Tensor> {
    let physical = meta::detached(&materialize(y, level)?);
    if forward_ad::level_active()
        && let Some(tangent) = forward_ad::tangent(y)
    {
        forward_ad::set_tangent(&physical, Some(materialize(&tangent, level)?));
    }
    if meta::requires_grad(y) && autograd::is_grad_enabled() {
        let out = meta::output_meta(physical.data("vmap", "output")?);
        let node = Node::function(Boundary::Remove(level.clone()), [meta::gradient_edge(y)], Vec::new(), [out]);
        meta::set_history(&physical, Some(Edge { node, output_nr: 0 }));
    }
    Ok(physical)
}

/// The backward of vmap's entry and exit.
enum Boundary {
    /// Into a level: the batched gradient back to the batch.
    Add(Arc<Level>),
    /// Out of a level: the batch's gradient batched.
    Remove(Arc<Level>),
}

impl Backward for Boundary {
    fn name(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            Boundary::Add(_) => "AddBatchDimBackward0",
            Boundary::Remove(_) => "RemoveBatchDimBackward0",
        })
    }

    fn apply(&self, _: &Node, grads: Vec<Option<Tensor>>, _: Vec<Tensor>) -> Result<Vec<Option<Tensor>>> {
        let Some(Some(g)) = grads.into_iter().next() else { return Ok(vec![None]) };
        Ok(vec![Some(match self {
            Boundary::Add(level) => materialize(&g, level)?,
            Boundary::Remove(level) => wrap(&g, level)?,
        })])
    }
}

/// `t`'s shape, read below the protocol.
fn shape_of(t: &Tensor) -> Result<Shape> {
    Ok(t.data("vmap", "input")?.layout.shape.clone())
}

/// `t`'s number of dimensions.
fn rank(t: &Tensor) -> Result<usize> {
    Ok(t.data("vmap", "input")?.layout.ndim())
}

/// `t`'s dtype and the device it reports.
fn kind(t: &Tensor) -> Result<(crate::tensor::DType, crate::backend::Device)> {
    let d = t.data("vmap", "input")?;
    Ok((d.dtype, crate::dispatch::reported_device(d)))
}

/// `t`'s batch contents when it is a batched tensor of `level`.
fn at_level<'t>(t: &'t Tensor, level: &Level) -> Option<&'t Batched> {
    t.wrapper::<Batched>().filter(|b| b.level.id == level.id)
}

/// The physical tensor of batched tensor `t` (which may be a view of the batch it was made
/// from): the same view of every example, the batch dimension first.
pub(crate) fn physical(t: &Tensor, b: &Batched) -> Result<Tensor> {
    let view = t.data("vmap", "input")?.layout.clone();
    let base = &b.physical.data("vmap", "input")?.layout;
    if view.shape[..] == base.shape[1..] && view.strides[..] == base.strides[1..] && view.offset == base.offset {
        return Ok(b.physical.clone());
    }
    // The batch is contiguous, so the view's strides count its elements as a contiguous
    // layout of its shape does: the same view of whatever layout the primitive hands in.
    let shift = view.offset - base.offset;
    view_of(&b.physical, |l| {
        (std::iter::once((l.shape[0], l.strides[0])).chain(dims_of(&view)).collect(), l.offset + shift)
    })
}

/// `t` as a batch of `level`: its physical tensor when it is batched there, else `t` repeated
/// (expanded, no copy) `level.size` times.
pub(crate) fn materialize(t: &Tensor, level: &Level) -> Result<Tensor> {
    match (at_level(t, level), t.wrapper::<Batched>()) {
        (Some(b), _) => physical(t, b),
        // Batched at an inner level too: the batch comes out from beneath it.
        (None, Some(outer)) if outer.level.id > level.id => {
            let beneath = materialize(&physical(t, outer)?, level)?;
            wrap(&movedim(&beneath, 0, 1)?, &outer.level)
        }
        (None, _) => expand_front(t, level.size),
    }
}

// ---------------------------------------------------------------------------------------------
// Views of physical tensors, each relative to the layout the primitive hands in.

/// `x` with `count` dimensions of size 1 inserted before dimension `at` (each with the stride
/// `unsqueeze` gives: one step over the dimension after it).
fn unsqueeze(x: &Tensor, at: usize, count: usize) -> Result<Tensor> {
    if count == 0 {
        return Ok(x.clone());
    }
    view_of(x, |l| {
        let mut dims: Vec<(usize, usize)> = dims_of(l).collect();
        let stride = dims.get(at).map_or(1, |&(n, s)| n.saturating_mul(s));
        dims.splice(at..at, std::iter::repeat_n((1, stride), count));
        (dims, l.offset)
    })
}

/// `x` repeated `n` times along a new first dimension (stride 0).
fn expand_front(x: &Tensor, n: usize) -> Result<Tensor> {
    view_of(x, |l| (std::iter::once((n, 0)).chain(dims_of(l)).collect(), l.offset))
}

/// `x` broadcast to `shape` (a view: stride 0 where `x` has size 1 or no dimension).
fn expand_to(x: &Tensor, shape: &[usize]) -> Result<Tensor> {
    view_of(x, |l| {
        let lead = shape.len().saturating_sub(l.ndim());
        let dims = shape.iter().enumerate().map(|(d, &n)| match d.checked_sub(lead) {
            Some(k) if l.shape[k] == n => (n, l.strides[k]),
            _ => (n, 0),
        });
        (dims.collect(), l.offset)
    })
}

/// `x` with dimension `from` moved to position `to`.
pub(crate) fn movedim(x: &Tensor, from: usize, to: usize) -> Result<Tensor> {
    if from == to {
        return Ok(x.clone());
    }
    view_of(x, |l| {
        let mut dims: Vec<(usize, usize)> = dims_of(l).collect();
        let moved = dims.remove(from);
        dims.insert(to, moved);
        (dims, l.offset)
    })
}

/// Element `i` of `x` along dimension `d`, the dimension removed.
pub(crate) fn select(x: &Tensor, d: usize, i: usize) -> Result<Tensor> {
    view_of(x, |l| {
        let mut dims: Vec<(usize, usize)> = dims_of(l).collect();
        let (_, stride) = dims.remove(d);
        (dims, advance(l.offset, i, stride))
    })
}

/// The tensors stacked along a new first dimension.
pub(crate) fn stack(pieces: &[Tensor]) -> Result<Tensor> {
    let first = pieces.first().ok_or_else(|| Error::runtime_error("vmap: nothing to stack"))?;
    let shape = shape_of(first)?;
    let unsqueezed: Vec<Tensor> = pieces.iter().map(|p| unsqueeze(p, 0, 1)).collect::<Result<_>>()?;
    let full: Shape = std::iter::once(pieces.len()).chain(shape.iter().copied()).collect();
    let dtype = kind(first)?.0;
    primitive::concat(&unsqueezed, 0, &full, dtype)
}

// ---------------------------------------------------------------------------------------------
// The rules.

/// An operator call that takes batched tensors of `level`, bound to its schema.
struct Call {
    op: &'static Operator,
    level: Arc<Level>,
    values: Vec<Value>,
}

/// A tensor argument in physical form: the batch (first dimension) or, when unbatched, the
/// tensor itself; and its logical number of dimensions.
struct Phys {
    t: Tensor,
    batched: bool,
    rank: usize,
}

impl Call {
    fn position(&self, name: &str) -> Result<usize> {
        self.op
            .schema()
            .arguments()
            .iter()
            .position(|a| a.name() == name)
            .ok_or_else(|| Error::runtime_error(format!("vmap: {} has no argument '{name}'", self.op.name())))
    }

    fn get(&self, name: &str) -> Result<&Value> {
        Ok(&self.values[self.position(name)?])
    }

    fn tensor_at(&self, i: usize) -> Result<Option<Phys>> {
        let Some(t) = self.values[i].as_tensor() else { return Ok(None) };
        Ok(Some(match at_level(t, &self.level) {
            Some(b) => Phys { t: physical(t, b)?, batched: true, rank: rank(t)? },
            None => Phys { t: t.clone(), batched: false, rank: rank(t)? },
        }))
    }

    fn tensor(&self, name: &str) -> Result<Phys> {
        self.tensor_at(self.position(name)?)?
            .ok_or_else(|| Error::runtime_error(format!("vmap: {}'s '{name}' is not a tensor", self.op.name())))
    }

    fn int(&self, name: &str) -> Result<i64> {
        self.get(name)?.as_int().ok_or_else(|| Error::runtime_error(format!("vmap: {name} must be an int")))
    }

    /// The call with some arguments replaced, run (on the physical tensors).
    fn run(&self, changes: Vec<(&str, Value)>) -> Result<Value> {
        let mut values = self.values.clone();
        for (name, value) in changes {
            values[self.position(name)?] = value;
        }
        self.op.call_bound(values)
    }
}

/// The highest vmap level among a call's batched tensors.
fn top_level(args: &[Value], kwargs: &Kwargs) -> Option<Arc<Level>> {
    args.iter()
        .chain(kwargs.iter().map(|(_, v)| v))
        .flat_map(tensors_in)
        .filter_map(|t| t.wrapper::<Batched>())
        .max_by_key(|b| b.level.id)
        .map(|b| b.level.clone())
}

/// What a rule gives: physical results to wrap at the call's level, or results that are
/// the same for every example (not batched).
enum Batch {
    Physical(Value),
    Unbatched(Value),
}

/// The hook of batched tensors: `op` batched over the highest level among its arguments.
fn batch(op: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
    let Some(level) = top_level(args, kwargs) else { return Ok(Value::NotImplemented) };
    let values = op.schema().bind(&op.name(), args, kwargs)?.into_vec();
    let call = Call { op, level, values };
    let out = match rule(&call)? {
        Some(out) => out,
        None => {
            warn_fallback(op);
            fallback(&call)?
        }
    };
    match out {
        Batch::Physical(value) => value.map_tensors(&|t| wrap(t, &call.level)),
        Batch::Unbatched(value) => Ok(value),
    }
}

/// The rule of `call`'s kernel family; `None` where there is none (the loop runs it).
fn rule(call: &Call) -> Result<Option<Batch>> {
    let op = call.op;
    let physical = |v: Value| Ok(Some(Batch::Physical(v)));
    match op.kernel {
        // An in-place write goes into the batched `self`'s physical tensor, which stays `self`.
        Kernel::Unary(_) | Kernel::Binary(_) if op.has_tag(Tag::Inplace) => {
            if !call.tensor("self")?.batched {
                return Err(inplace_error());
            }
            pointwise(call)?;
            Ok(Some(Batch::Unbatched(call.get("self")?.clone())))
        }
        Kernel::Unary(_) | Kernel::Binary(_) | Kernel::Where => physical(pointwise(call)?),
        Kernel::Reduce(_) => physical(reduction(call)?),
        Kernel::Scan(_) | Kernel::Softmax { .. } | Kernel::Sort | Kernel::TopK => physical(along_dim(call)?),
        Kernel::Matmul => physical(matmul(call)?),
        Kernel::ToCopy | Kernel::LiftFresh => {
            let x = call.tensor("self")?;
            physical(call.run(vec![("self", x.t.into())])?)
        }
        Kernel::AsStrided => as_strided(call).map(|v| Some(Batch::Unbatched(v))),
        Kernel::Copy => copy_(call).map(|v| Some(Batch::Unbatched(v))),
        Kernel::IndexSelect => {
            let (x, index) = (call.tensor("self")?, call.tensor("index")?);
            let dim = normalize_dim(call.int("dim")?, x.rank.max(1), op.name())?;
            match index.batched {
                false => physical(call.run(vec![("self", x.t.into()), ("dim", (dim as i64 + 1).into())])?),
                true => physical(index_select_by_batch(call, x, dim, index.t)?.into()),
            }
        }
        Kernel::Gather => {
            let (x, index) = (call.tensor("self")?, call.tensor("index")?);
            let dim = normalize_dim(call.int("dim")?, x.rank.max(1), op.name())?;
            let (x, index) = (batch_of(call, x)?, batch_of(call, index)?);
            physical(call.run(vec![("self", x.into()), ("index", index.into()), ("dim", (dim as i64 + 1).into())])?)
        }
        Kernel::ScatterAdd => {
            let sizes: Vec<i64> =
                call.get("size")?.as_slice().unwrap_or(&[]).iter().filter_map(Value::as_int).collect();
            let dim = normalize_dim(call.int("dim")?, sizes.len().max(1), op.name())?;
            let (index, src) = (batch_of(call, call.tensor("index")?)?, batch_of(call, call.tensor("src")?)?);
            let size: Vec<Value> =
                std::iter::once(call.level.size as i64).chain(sizes).map(Value::Int).collect::<Vec<_>>();
            physical(call.run(vec![
                ("size", Value::List(size)),
                ("index", index.into()),
                ("src", src.into()),
                ("dim", (dim as i64 + 1).into()),
            ])?)
        }
        Kernel::Cat => physical(cat(call)?),
        Kernel::Convolution => convolution(call),
        Kernel::MaxPool2d => {
            let x = call.tensor("self")?;
            let shape = shape_of(&x.t)?;
            let folded = primitive::reshape(&x.t, &fold(&shape))?;
            let out = call.run(vec![("self", folded.into())])?;
            physical(unfold_all(&out, call.level.size)?)
        }
        Kernel::LocalScalar => Err(Error::runtime_error(
            "vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over calling .item() on a \
             Tensor, please try to rewrite what you're doing with other operations. If error is occurring somewhere \
             inside PyTorch internals, please file a bug report.",
        )),
        Kernel::Nonzero => Err(Error::runtime_error(format!(
            "vmap: We do not support batching operators that can output dynamic shape. Attempted to vmap over {}. \
             Please file an issue at https://github.com/pytorch/pytorch/issues if you need this feature.",
            op.name()
        ))),
        Kernel::Draw(Draw::Uniform | Draw::Bernoulli) => random_like(call).map(Some),
        // The decompositions take any leading dimensions: every operand batched in front.
        Kernel::Linalg(_) => {
            let names: Vec<&str> = op.schema().arguments().iter().map(|a| a.name()).collect();
            let mut args = Vec::new();
            for name in names.into_iter().filter(|n| matches!(*n, "A" | "B" | "self")) {
                args.push((name, batch_of(call, call.tensor(name)?)?.into()));
            }
            physical(call.run(args)?)
        }
        Kernel::ConvolutionBackward => convolution_backward(call),
        // `new_full` of a batched tensor: each example's, in one batch.
        Kernel::Full if std::ptr::eq(op, &crate::dispatch::aten::NEW_FULL) => {
            let sizes = call.get("size")?.as_slice().unwrap_or(&[]).iter().filter_map(Value::as_int);
            let size: Vec<Value> = std::iter::once(call.level.size as i64).chain(sizes).map(Value::Int).collect();
            let x = call.tensor("self")?;
            physical(call.run(vec![("self", x.t.into()), ("size", Value::List(size))])?)
        }
        Kernel::LstmLayer => lstm_layer(call, &["gates"], &["hx", "cx"]),
        Kernel::LstmLayerBackward => {
            lstm_layer(call, &["grad_output", "grad_cell_states", "cell_states", "workspace"], &["cx"])
        }
        Kernel::Draw(_) | Kernel::Full | Kernel::EmbeddingRenorm | Kernel::FusedAdam { .. } | Kernel::FusedSgd => {
            Ok(None)
        }
    }
}

/// Pointwise: the batched operands with dimensions of size 1 after the batch dimension, so
/// that every operand's dimensions line up from the right as the example's do; the dtype the
/// example would compute in (a batched zero-dimensional operand is not one physically).
fn pointwise(call: &Call) -> Result<Value> {
    let tensors: Vec<(usize, Phys)> = (0..call.values.len())
        .filter_map(|i| call.tensor_at(i).transpose().map(|p| p.map(|p| (i, p))))
        .collect::<Result<_>>()?;
    let rank = tensors.iter().map(|(_, p)| p.rank).max().unwrap_or(0);
    let mut values = call.values.clone();
    let logical: Vec<_> = tensors
        .iter()
        .filter_map(|(i, _)| call.values[*i].as_tensor().and_then(Tensor::dense).map(|d| d.participant()))
        .collect();
    for (i, p) in tensors {
        values[i] = if p.batched { unsqueeze(&p.t, 1, rank - p.rank)? } else { p.t }.into();
    }
    if matches!(call.op.kernel, Kernel::Binary(_) | Kernel::Where)
        && let Ok(dtype) = call.position("dtype")
        && values[dtype].is_none()
    {
        values[dtype] = result_type(logical).into();
    }
    call.op.call_bound(values)
}

/// A reduction over the example's dimensions `dim` (all when none are given): the same
/// dimensions one further in.
fn reduction(call: &Call) -> Result<Value> {
    let x = call.tensor("self")?;
    if x.rank == 0 {
        // One element per example: reduce a dimension of size 1 made for it.
        let t = unsqueeze(&x.t, 1, 1)?;
        return call.run(vec![("self", t.into()), ("dim", Value::List(vec![1.into()])), ("keepdim", false.into())]);
    }
    let given: Vec<i64> = call.get("dim")?.as_slice().unwrap_or(&[]).iter().filter_map(Value::as_int).collect();
    let dims: Vec<usize> = match given.is_empty() {
        true => (0..x.rank).collect(),
        false => given.iter().map(|&d| normalize_dim(d, x.rank, call.op.name())).collect::<Result<_>>()?,
    };
    let shifted = dims.iter().map(|&d| Value::Int(d as i64 + 1)).collect();
    call.run(vec![("self", x.t.into()), ("dim", Value::List(shifted))])
}

/// Scans and softmax along one dimension: the same dimension one further in.
fn along_dim(call: &Call) -> Result<Value> {
    let x = call.tensor("self")?;
    if x.rank == 0 {
        let t = unsqueeze(&x.t, 1, 1)?;
        let out = call.run(vec![("self", t.into()), ("dim", 1.into())])?;
        return out.map_tensors(&|t| select(t, 1, 0));
    }
    let dim = normalize_dim(call.int("dim")?, x.rank, call.op.name())?;
    call.run(vec![("self", x.t.into()), ("dim", (dim as i64 + 1).into())])
}

/// The matrix product: vectors as one-row (or one-column) matrices, the batched operands'
/// leading dimensions padded to line up, the batch dimension leading the broadcast ones.
fn matmul(call: &Call) -> Result<Value> {
    let (a, b) = (call.tensor("self")?, call.tensor("other")?);
    let as_matrix = |p: Phys, column: bool| -> Result<Phys> {
        if p.rank != 1 {
            return Ok(p);
        }
        let at = if column { rank(&p.t)? } else { rank(&p.t)? - 1 };
        Ok(Phys { t: unsqueeze(&p.t, at, 1)?, batched: p.batched, rank: 2 })
    };
    let (row, column) = (a.rank == 1, b.rank == 1);
    let (a, b) = (as_matrix(a, false)?, as_matrix(b, true)?);
    let padded = a.rank.max(b.rank);
    let inner = shape_of(&a.t)?.last().copied();
    let out = if a.batched && !b.batched && b.rank == 2 {
        // One product for the whole batch: the examples' rows stacked into one matrix.
        let shape = shape_of(&a.t)?;
        let k = shape[shape.len() - 1];
        let rows = Shape::from([shape.numel() / k.max(1), k]);
        let product = call.run(vec![("self", primitive::reshape(&a.t, &rows)?.into()), ("other", b.t.into())])?;
        let product =
            product.as_tensor().cloned().ok_or_else(|| Error::runtime_error("vmap: matmul gave no tensor"))?;
        let m = shape_of(&product)?[1];
        let unfolded: Shape = shape[..shape.len() - 1].iter().copied().chain([m]).collect();
        primitive::reshape(&product, &unfolded)?
    } else {
        let pad = |p: Phys| if p.batched { unsqueeze(&p.t, 1, padded - p.rank) } else { Ok(p.t) };
        let (a, b) = (pad(a)?, pad(b)?);
        let out = if inner == Some(1) {
            // Inner size 1 (a per-example outer product, as a weight's gradient is): a product
            // of each pair, broadcast.
            let mut kwargs = Kwargs::new();
            if !call.get("dtype")?.is_none() {
                kwargs.insert("dtype", call.get("dtype")?.clone());
            }
            crate::dispatch::aten::MUL_TENSOR.call(&[a.into(), b.into()], &kwargs)?
        } else {
            call.run(vec![("self", a.into()), ("other", b.into())])?
        };
        out.as_tensor().cloned().ok_or_else(|| Error::runtime_error("vmap: matmul gave no tensor"))?
    };
    let mut out = out;
    if column {
        out = select(&out, rank(&out)? - 1, 0)?;
    }
    if row {
        out = select(&out, rank(&out)? - 2, 0)?;
    }
    Ok(out.into())
}

/// `index_select` with a batched index (an embedding lookup of each example's tokens): one
/// lookup of every example's positions, each example's offset into a batched table.
fn index_select_by_batch(call: &Call, x: Phys, dim: usize, index: Tensor) -> Result<Tensor> {
    let batch = call.level.size;
    let k = shape_of(&index)?.get(1).copied().unwrap_or(1);
    let flat_index = Shape::from([batch * k]);
    let (table, positions) = if x.batched {
        // Examples' tables one after the other: example b's position p is row b * n + p.
        let moved = movedim(&x.t, 1 + dim, 1)?;
        let shape = shape_of(&moved)?;
        let n = shape[1];
        let rows: Shape = std::iter::once(batch * n).chain(shape.iter().skip(2).copied()).collect();
        let (dtype, device) = kind(&index)?;
        let offsets: Vec<i64> = (0..batch as i64).map(|b| b * n as i64).collect();
        let offsets =
            crate::tensor::Tensor::from_vec(offsets, vec![batch, 1])?.to_device(device, Some(dtype), false, false)?;
        let shifted = crate::dispatch::aten::ADD_TENSOR.call(&[index.into(), offsets.into()], &Kwargs::new())?;
        let shifted = shifted.as_tensor().cloned().ok_or_else(|| Error::runtime_error("vmap: add gave no tensor"))?;
        (primitive::reshape(&moved, &rows)?, primitive::reshape(&shifted, &flat_index)?)
    } else {
        (movedim(&x.t, dim, 0)?, primitive::reshape(&index, &flat_index)?)
    };
    let picked = call.op.call_bound(vec![table.into(), 0i64.into(), positions.into()])?;
    let picked =
        picked.as_tensor().cloned().ok_or_else(|| Error::runtime_error("vmap: index_select gave no tensor"))?;
    let shape = shape_of(&picked)?;
    let unfolded: Shape = [batch, k].into_iter().chain(shape.iter().skip(1).copied()).collect();
    movedim(&primitive::reshape(&picked, &unfolded)?, 1, 1 + dim)
}

/// A batched operand as is; an unbatched one repeated over the batch.
fn batch_of(call: &Call, p: Phys) -> Result<Tensor> {
    if p.batched { Ok(p.t) } else { expand_front(&p.t, call.level.size) }
}

/// `cat`: every piece as a batch, joined along the example's dimension one further in.
fn cat(call: &Call) -> Result<Value> {
    let pieces = call.get("tensors")?.as_slice().unwrap_or(&[]);
    let rank = pieces
        .iter()
        .filter_map(Value::as_tensor)
        .map(rank)
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .max()
        .unwrap_or(1);
    let dim = normalize_dim(call.int("dim")?, rank.max(1), call.op.name())?;
    let batched: Vec<Value> = pieces
        .iter()
        .map(|v| match v.as_tensor() {
            Some(t) => materialize(t, &call.level).map(Value::Tensor),
            None => Ok(v.clone()),
        })
        .collect::<Result<_>>()?;
    call.run(vec![("tensors", Value::List(batched)), ("dim", (dim as i64 + 1).into())])
}

/// `[batch, n, ...]` folded to `[batch * n, ...]`.
fn fold(shape: &[usize]) -> Shape {
    std::iter::once(shape[0] * shape.get(1).copied().unwrap_or(1)).chain(shape.iter().skip(2).copied()).collect()
}

/// Each tensor `[batch * n, ...]` unfolded to `[batch, n, ...]`.
fn unfold_all(value: &Value, batch: usize) -> Result<Value> {
    value.map_tensors(&|t| {
        let shape = shape_of(t)?;
        let unfolded: Shape =
            [batch, shape[0] / batch.max(1)].into_iter().chain(shape.iter().skip(1).copied()).collect();
        primitive::reshape(t, &unfolded)
    })
}

/// A convolution: the batch folded into the images when the weights are shared, else the
/// batch as groups.
fn convolution(call: &Call) -> Result<Option<Batch>> {
    let (input, weight) = (call.tensor("input")?, call.tensor("weight")?);
    let bias = call.tensor("bias").ok();
    if input.rank != 4 {
        return Ok(None);
    }
    if !weight.batched && !bias.as_ref().is_some_and(|b| b.batched) {
        let folded = primitive::reshape(&input.t, &fold(&shape_of(&input.t)?))?;
        let out = call.run(vec![("input", folded.into())])?;
        return unfold_all(&out, call.level.size).map(|v| Some(Batch::Physical(v)));
    }
    // Batched weights (an ensemble): each example's weights as a group of its own.
    let batch = call.level.size;
    let mut changes = vec![
        ("input", grouped(&batch_of(call, input)?)?.into()),
        ("weight", merged(&batch_of(call, weight)?)?.into()),
        ("groups", Value::Int(call.int("groups")? * batch as i64)),
    ];
    if let Some(bias) = bias {
        changes.push(("bias", merged(&batch_of(call, bias)?)?.into()));
    }
    let out = call.run(changes)?;
    ungrouped(&out, batch).map(|v| Some(Batch::Physical(v)))
}

/// One LSTM layer's fused recurrence, forward or backward, with shared weights: the batch
/// folded into the layer's own (`[T, batch * N, ...]`), whose rows never meet. The sequences
/// (`[T, N, ...]` per example) and the states (`[N, H]`) are named; per-example weights (an
/// ensemble) go to the per-example loop.
fn lstm_layer(call: &Call, sequences: &[&str], states: &[&str]) -> Result<Option<Batch>> {
    if call.tensor("weight_hh")?.batched {
        return Ok(None);
    }
    let batch = call.level.size;
    let mut changes = Vec::new();
    for &name in sequences {
        let moved = movedim(&batch_of(call, call.tensor(name)?)?, 0, 1)?;
        let s = shape_of(&moved)?;
        let Some(&width) = s.get(3) else { return Ok(None) };
        changes.push((name, primitive::reshape(&moved, &Shape::from([s[0], s[1] * s[2], width]))?.into()));
    }
    for &name in states {
        let t = batch_of(call, call.tensor(name)?)?;
        changes.push((name, primitive::reshape(&t, &fold(&shape_of(&t)?))?.into()));
    }
    let out = call.run(changes)?;
    // `[T, batch * N, X]` back to `[batch, T, N, X]`, `[batch * N, H]` to `[batch, N, H]`.
    let unfolded = out.map_tensors(&|t| {
        let s = shape_of(t)?;
        match s[..] {
            [steps, rows, width] => {
                movedim(&primitive::reshape(t, &Shape::from([steps, batch, rows / batch.max(1), width]))?, 1, 0)
            }
            [rows, width] => primitive::reshape(t, &Shape::from([batch, rows / batch.max(1), width])),
            _ => Err(Error::runtime_error("vmap: an LSTM layer's result is not a sequence or a state")),
        }
    })?;
    Ok(Some(Batch::Physical(unfolded)))
}

/// `[batch, n, c, ...]` as `[n, batch * c, ...]`: each example's channels a group of their own.
fn grouped(t: &Tensor) -> Result<Tensor> {
    let moved = movedim(t, 0, 1)?;
    let s = shape_of(&moved)?;
    let shape: Shape = [s[0], s[1] * s[2]].into_iter().chain(s.iter().skip(3).copied()).collect();
    primitive::reshape(&moved, &shape)
}

/// `[n, batch * c, ...]` back to `[batch, n, c, ...]`, for each tensor of `value`.
fn ungrouped(value: &Value, batch: usize) -> Result<Value> {
    value.map_tensors(&|t| {
        let s = shape_of(t)?;
        let shape: Shape = [s[0], batch, s[1] / batch].into_iter().chain(s.iter().skip(2).copied()).collect();
        movedim(&primitive::reshape(t, &shape)?, 1, 0)
    })
}

/// `[batch, o, ...]` as `[batch * o, ...]` (weights and biases of every example, stacked).
fn merged(t: &Tensor) -> Result<Tensor> {
    primitive::reshape(t, &fold(&shape_of(t)?))
}

/// The gradients of a convolution, per example: the input's with the batch folded into the
/// images when the weights are shared (one call), and otherwise, like the weight's and the
/// bias's, with the batch as groups (one call: example b's images meet only example b's
/// gradients and weights, so each group's gradient is one example's).
fn convolution_backward(call: &Call) -> Result<Option<Batch>> {
    let (grad, input, weight) = (call.tensor("grad_output")?, call.tensor("input")?, call.tensor("weight")?);
    if input.rank != 4 {
        return Ok(None);
    }
    let batch = call.level.size;
    let mask: Vec<bool> =
        call.get("output_mask")?.as_slice().unwrap_or(&[]).iter().map(|v| matches!(v, Value::Bool(true))).collect();
    let asked = |i: usize| mask.get(i).copied().unwrap_or(false);
    let weight_batched = weight.batched;
    let (grad, input, weight) = (batch_of(call, grad)?, batch_of(call, input)?, batch_of(call, weight)?);
    let nth = |value: &Value, i: usize| value.as_slice().and_then(|s| s.get(i)).cloned().unwrap_or(Value::None);
    let mut out = vec![Value::None; 3];
    let by_groups = [weight_batched && asked(0), asked(1), asked(2)];
    if asked(0) && !weight_batched {
        let folded = |t: &Tensor| primitive::reshape(t, &fold(&shape_of(t)?));
        let given = call.run(vec![
            ("grad_output", folded(&grad)?.into()),
            ("input", folded(&input)?.into()),
            ("weight", select(&weight, 0, 0)?.into()),
            ("output_mask", Value::List(vec![true.into(), false.into(), false.into()])),
        ])?;
        out[0] = unfold_all(&nth(&given, 0), batch)?;
    }
    if by_groups.iter().any(|&b| b) {
        let o = shape_of(&weight)?[1];
        let bias_sizes = match call.get("bias_sizes")? {
            Value::None => Value::None,
            _ => Value::List(vec![Value::Int((batch * o) as i64)]),
        };
        let given = call.run(vec![
            ("grad_output", grouped(&grad)?.into()),
            ("input", grouped(&input)?.into()),
            ("weight", merged(&weight)?.into()),
            ("bias_sizes", bias_sizes),
            ("groups", Value::Int(call.int("groups")? * batch as i64)),
            ("output_mask", Value::List(by_groups.iter().map(|&b| b.into()).collect())),
        ])?;
        if by_groups[0] {
            out[0] = ungrouped(&nth(&given, 0), batch)?;
        }
        // [batch * o, ...] -> [batch, o, ...]
        for i in [1, 2] {
            out[i] = nth(&given, i).map_tensors(&|t| {
                let s = shape_of(t)?;
                let shape: Shape = [batch, s[0] / batch].into_iter().chain(s.iter().skip(1).copied()).collect();
                primitive::reshape(t, &shape)
            })?;
        }
    }
    Ok(Some(Batch::Physical(Value::Tuple(out))))
}

/// `as_strided` of a batched tensor: the view's layout on the batch's own memory (what the
/// primitive turns into a view of the wrapper; [`physical`] maps it back to the batch).
fn as_strided(call: &Call) -> Result<Value> {
    let x = call.get("self")?.as_tensor().cloned().ok_or_else(|| Error::runtime_error("as_strided(): self"))?;
    let b = at_level(&x, &call.level).ok_or_else(|| Error::runtime_error("vmap: as_strided of an unbatched tensor"))?;
    let ints = |name: &str| -> Result<Vec<usize>> {
        Ok(call.get(name)?.as_slice().unwrap_or(&[]).iter().filter_map(Value::as_int).map(|i| i as usize).collect())
    };
    let offset = match call.get("storage_offset")?.as_int() {
        Some(o) => o as usize,
        None => x.data("as_strided", "self")?.layout.offset,
    };
    let layout = Layout { shape: ints("size")?.into(), strides: ints("stride")?.into_iter().collect(), offset };
    let (dtype, device) = kind(&x)?;
    let contents = Batched { physical: b.physical.clone(), level: b.level.clone() };
    Ok(Tensor::wrapper_with_layout(contents, layout, dtype, device)?.into())
}

/// `copy_`: into a batched tensor, each example gets its own (or the same unbatched) values;
/// into an unbatched one from a batched one, PyTorch's error.
fn copy_(call: &Call) -> Result<Value> {
    let (dst, src) = (call.tensor("self")?, call.tensor("src")?);
    if !dst.batched {
        return Err(inplace_error());
    }
    let src = if src.batched { unsqueeze(&src.t, 1, dst.rank.saturating_sub(src.rank))? } else { src.t };
    let src = expand_to(&src, &shape_of(&dst.t)?)?;
    call.run(vec![("self", dst.t.into()), ("src", src.into())])?;
    Ok(call.get("self")?.clone())
}

/// PyTorch's error for a batched value written into an unbatched tensor (it names every
/// in-place write "inplace arithmetic" here).
fn inplace_error() -> Error {
    Error::runtime_error(
        "vmap: inplace arithmetic(self, *extra_args) is not possible because there exists a Tensor `other` in \
         extra_args that has more elements than `self`. This happened due to `other` being vmapped over but `self` \
         not being vmapped over in a vmap. Please try to use out-of-place operators instead of inplace arithmetic. \
         If said operator is being called inside the PyTorch framework, please file a bug report instead.",
    )
}

/// `uniform` and `bernoulli` of a batched tensor's shape: by the level's randomness.
fn random_like(call: &Call) -> Result<Batch> {
    let x = call.tensor("self")?;
    match call.level.randomness {
        Randomness::Error => Err(random_error()),
        Randomness::Different => Ok(Batch::Physical(call.run(vec![("self", x.t.into())])?)),
        Randomness::Same => {
            let example = if x.batched { select(&x.t, 0, 0)? } else { x.t };
            Ok(Batch::Unbatched(call.run(vec![("self", example.into())])?))
        }
    }
}

/// PyTorch's error for a random operation under `randomness='error'`.
pub(crate) fn random_error() -> Error {
    Error::runtime_error(
        "vmap: called random operation while in randomness error mode. Please either use the 'same' or 'different' \
         randomness flags on vmap or perform the randomness operation out of vmap",
    )
}

/// The operator once per example, the results stacked.
fn fallback(call: &Call) -> Result<Batch> {
    let writes = call.op.has_tag(Tag::Inplace);
    // An in-place write goes into each example's part of a batched `self` (a view of the batch).
    if writes && !call.tensor_at(0)?.is_some_and(|p| p.batched) {
        return Err(inplace_error());
    }
    let mut outs = Vec::with_capacity(call.level.size);
    for i in 0..call.level.size {
        let example = |t: &Tensor| match at_level(t, &call.level) {
            Some(b) => select(&physical(t, b)?, 0, i),
            None => Ok(t.clone()),
        };
        let values: Vec<Value> = call.values.iter().map(|v| v.map_tensors(&example)).collect::<Result<_>>()?;
        outs.push(call.op.call_bound(values)?);
    }
    if writes {
        return Ok(Batch::Unbatched(call.values[0].clone()));
    }
    stacked(outs).map(Batch::Physical)
}

/// Per-example results, stacked tensor by tensor.
fn stacked(outs: Vec<Value>) -> Result<Value> {
    let first = outs.first().cloned().unwrap_or(Value::None);
    Ok(match first {
        Value::Tensor(_) => {
            let pieces: Vec<Tensor> = outs.iter().filter_map(|v| v.as_tensor().cloned()).collect();
            if pieces.len() != outs.len() {
                bail!(Runtime, "vmap: the examples' results differ in kind");
            }
            let shapes: HashSet<Vec<usize>> =
                pieces.iter().map(|p| shape_of(p).map(|s| s.to_vec())).collect::<Result<_>>()?;
            if shapes.len() > 1 {
                bail!(
                    Runtime,
                    "vmap: the examples' results have different shapes ({:?}): vmap needs one shape for all",
                    shapes
                );
            }
            stack(&pieces)?.into()
        }
        Value::Tuple(items) | Value::List(items) => {
            let mut columns = Vec::with_capacity(items.len());
            for i in 0..items.len() {
                let column: Vec<Value> =
                    outs.iter().map(|o| o.as_slice().and_then(|s| s.get(i)).cloned().unwrap_or(Value::None)).collect();
                columns.push(stacked(column)?);
            }
            if matches!(outs[0], Value::List(_)) { Value::List(columns) } else { Value::Tuple(columns) }
        }
        other => other,
    })
}

/// The operators that ran the fallback loop, warned about once each.
static FELL_BACK: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

fn warn_fallback(op: &'static Operator) {
    let mut seen = FELL_BACK.lock().unwrap_or_else(|e| e.into_inner());
    if seen.contains(&op.name()) {
        return;
    }
    seen.push(op.name());
    eprintln!(
        "UserWarning: There is a performance drop because we have not yet implemented the batching rule for {}. \
         torchfn runs it once per example.",
        op.name()
    );
}

/// How `vmap` runs each operator: by a batching rule, or by the per-example loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coverage {
    /// A batching rule runs the operator once for the whole batch.
    Rule,
    /// The operator runs once per example (and warns once).
    Fallback,
    /// vmap refuses it with PyTorch's error (reading values, dynamic shapes).
    Refused,
    /// A factory with no tensor argument: it never meets a batched tensor (random ones follow
    /// vmap's `randomness`).
    Factory,
}

/// How `vmap` runs each operator of the dispatch layer, sorted by name: the public coverage
/// list. A rule hands what it does not cover (a convolution whose input is not 4-D) to the
/// per-example loop too, which warns once per operator.
pub fn vmap_coverage() -> Vec<(&'static Operator, Coverage)> {
    crate::dispatch::operators()
        .into_iter()
        .map(|op| {
            // Exhaustive, as `rule` is: a new kernel family must say how vmap runs it.
            let coverage = match op.kernel {
                Kernel::LocalScalar | Kernel::Nonzero => Coverage::Refused,
                Kernel::EmbeddingRenorm | Kernel::FusedAdam { .. } | Kernel::FusedSgd => Coverage::Fallback,
                Kernel::Full | Kernel::Draw(Draw::Rand | Draw::Randn | Draw::Normal | Draw::Randint) => {
                    Coverage::Factory
                }
                Kernel::Unary(_)
                | Kernel::Binary(_)
                | Kernel::Where
                | Kernel::Reduce(_)
                | Kernel::Scan(_)
                | Kernel::Matmul
                | Kernel::IndexSelect
                | Kernel::Gather
                | Kernel::Cat
                | Kernel::Softmax { .. }
                | Kernel::Sort
                | Kernel::TopK
                | Kernel::Convolution
                | Kernel::ConvolutionBackward
                | Kernel::MaxPool2d
                | Kernel::ToCopy
                | Kernel::AsStrided
                | Kernel::ScatterAdd
                | Kernel::Copy
                | Kernel::LiftFresh
                | Kernel::Linalg(_)
                | Kernel::LstmLayer
                | Kernel::LstmLayerBackward
                | Kernel::Draw(Draw::Uniform | Draw::Bernoulli) => Coverage::Rule,
            };
            (op, coverage)
        })
        .collect()
}

/// Whether `op` is a random factory (what vmap's mode watches for).
pub(crate) fn is_random_factory(op: &Operator) -> bool {
    op.has_tag(Tag::Random) && op.has_tag(Tag::Factory)
}

/// `aten::rand`'s family under a vmap level with `different` randomness: the size with the
/// batch in front, so each example draws its own.
pub(crate) fn batched_draw(
    op: &'static Operator,
    level: &Arc<Level>,
    args: &[Value],
    kwargs: &Kwargs,
) -> Result<Value> {
    let mut values = op.schema().bind(&op.name(), args, kwargs)?.into_vec();
    let at = op.schema().arguments().iter().position(|a| a.name() == "size").unwrap_or(0);
    let sizes: Vec<Value> = std::iter::once(Value::Int(level.size as i64))
        .chain(values[at].as_slice().unwrap_or(&[]).iter().cloned())
        .collect();
    values[at] = Value::List(sizes);
    op.call_bound(values)?.map_tensors(&|t| wrap(t, level))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_lists_every_operator() {
        let coverage = vmap_coverage();
        assert_eq!(coverage.len(), crate::dispatch::operators().len());
        assert!(
            coverage.iter().any(|(op, c)| std::ptr::eq(*op, &crate::dispatch::aten::MATMUL) && *c == Coverage::Rule)
        );
    }
}
