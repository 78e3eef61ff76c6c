//! What autograd keeps on each tensor: whether it requires grad, its history (`grad_fn`), its
//! gradient, its hooks; and the tensor-level helpers that read and change them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use super::graph::{Edge, Node, Observer, OutputMeta, PreHook, TensorHook};
use crate::error::{Result, bail};
use crate::tensor::{Dense, Tensor};

/// The autograd state of one tensor. Every handle of the same tensor (subclass views made by
/// `as_subclass` and the default hook included) shares it.
#[derive(Default)]
pub(crate) struct Meta {
    /// Set for leaves that require grad and for every tensor with a history: the one thing the
    /// hot path reads.
    requires_grad: AtomicBool,
    state: Mutex<State>,
}

/// What every tensor may carry: its history inline (results of recorded operations need
/// only that), the rest boxed on first use.
#[derive(Default)]
struct State {
    grad_fn: Option<Edge>,
    more: Option<Box<More>>,
}

/// The autograd state few tensors have: leaves' gradients, hooks and accumulators.
#[derive(Default)]
struct More {
    grad: Option<Tensor>,
    retains_grad: bool,
    /// Hooks of a leaf, run before its gradient accumulates.
    hooks: Vec<TensorHook>,
    /// Hooks of a leaf, run on the leaf after its gradient accumulated.
    post_accumulate_hooks: Vec<TensorHook>,
    /// The leaf's gradient accumulator, made the first time an operation records it (it holds
    /// the leaf weakly).
    accumulator: Option<Arc<Node>>,
    /// The forward-AD tangent and the level it belongs to.
    tangent: Option<(u64, Tensor)>,
    /// The device a module's `to_device` moved this parameter to: the module then holds a new
    /// tensor there, and this one is stale (an optimizer built before the move holds it).
    moved_to: Option<crate::Device>,
}

impl State {
    fn more(&mut self) -> &mut More {
        self.more.get_or_insert_with(Box::default)
    }
}

impl Meta {
    /// The state of a fresh result of a recorded operation.
    pub(crate) fn with_history(edge: Edge) -> Meta {
        let state = State { grad_fn: Some(edge), ..State::default() };
        Meta { requires_grad: AtomicBool::new(true), state: Mutex::new(state) }
    }

    #[inline]
    pub(crate) fn requires_grad(&self) -> bool {
        self.requires_grad.load(Ordering::Relaxed)
    }

    fn with_state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.state.lock())
    }

    fn read<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        f(&self.state.lock())
    }
}

fn meta(t: &Tensor) -> Option<&Meta> {
    t.dense().map(|d| &d.meta)
}

/// Whether `t` requires grad (a leaf marked so, or a tensor with a history).
#[inline]
pub(crate) fn requires_grad(t: &Tensor) -> bool {
    meta(t).is_some_and(Meta::requires_grad)
}

/// The history of `t`: the node that made it and which of its outputs `t` is.
pub(crate) fn grad_fn_of(t: &Tensor) -> Option<Edge> {
    meta(t)?.read(|s| s.grad_fn.clone())
}

/// Whether `t` is a leaf: no history (PyTorch's `is_leaf`).
pub(crate) fn is_leaf(t: &Tensor) -> bool {
    !requires_grad(t) || grad_fn_of(t).is_none()
}

/// `requires_grad_(flag)`: only leaves change it, and only float tensors require grad.
pub(crate) fn set_requires_grad(t: &Tensor, flag: bool) -> Result<()> {
    let dense = t.data("requires_grad_", "self")?;
    if !is_leaf(t) {
        if flag {
            return Ok(());
        }
        bail!(
            Runtime,
            "requires_grad_(): you can only change requires_grad flags of leaf variables. If you want to use a \
             computed variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
        );
    }
    if flag && !dense.dtype.is_floating_point() {
        bail!(
            Runtime,
            "requires_grad_(): only Tensors of floating point dtype can require gradients (this one is {})",
            dense.dtype
        );
    }
    dense.meta.requires_grad.store(flag, Ordering::Relaxed);
    Ok(())
}

/// Where a gradient for `t` goes: its history, or the accumulator of a leaf that requires
/// grad; `None` when `t` requires no grad.
pub(crate) fn gradient_edge(t: &Tensor) -> Option<Edge> {
    let dense = t.dense()?;
    if !dense.meta.requires_grad() {
        return None;
    }
    dense.meta.with_state(|s| {
        if let Some(edge) = &s.grad_fn {
            return Some(edge.clone());
        }
        let node =
            s.more().accumulator.get_or_insert_with(|| Node::accumulate(t.downgrade(), output_meta(dense))).clone();
        Some(Edge { node, output_nr: 0 })
    })
}

/// What a gradient of `dense` must look like.
pub(crate) fn output_meta(dense: &Dense) -> OutputMeta {
    OutputMeta { shape: dense.layout.shape.clone(), dtype: dense.dtype, device: dense.device() }
}

/// A new handle of `t`'s data (and class) with the history `edge`: a saved output given back
/// its history.
pub(crate) fn alias_with_history(t: &Tensor, edge: Edge) -> Tensor {
    t.alias(Meta::with_history(edge))
}

/// `t`'s data without history and not requiring grad (`detach`), sharing its memory.
pub(crate) fn detached(t: &Tensor) -> Tensor {
    t.alias(Meta::default())
}

/// Makes `t` the output of `edge` (an in-place operation rebases its history).
pub(crate) fn set_history(t: &Tensor, edge: Option<Edge>) {
    if let Some(m) = meta(t) {
        let requires = edge.is_some();
        m.with_state(|s| s.grad_fn = edge);
        m.requires_grad.store(requires, Ordering::Relaxed);
    }
}

/// `detach_()`: drops the history and the requires-grad flag in place.
pub(crate) fn detach_in_place(t: &Tensor) {
    set_history(t, None);
}

/// The accumulated gradient of `t` (`Tensor.grad`).
pub(crate) fn grad(t: &Tensor) -> Option<Tensor> {
    meta(t)?.read(|s| s.more.as_ref()?.grad.clone())
}

/// Sets or clears the gradient of `t`.
pub(crate) fn set_grad(t: &Tensor, grad: Option<Tensor>) {
    if let Some(m) = meta(t) {
        m.with_state(|s| s.more().grad = grad);
    }
}

/// Swaps `t`'s gradient for what `f` makes of it (accumulation), under no other lock.
pub(crate) fn take_grad(t: &Tensor) -> Option<Tensor> {
    meta(t)?.with_state(|s| s.more.as_mut()?.grad.take())
}

/// The hooks of the leaf `t`.
pub(crate) fn leaf_hooks(t: &Tensor) -> Vec<TensorHook> {
    meta(t).and_then(|m| m.read(|s| Some(s.more.as_ref()?.hooks.clone()))).unwrap_or_default()
}

/// The post-accumulate-grad hooks of the leaf `t`.
pub(crate) fn post_accumulate_hooks(t: &Tensor) -> Vec<TensorHook> {
    meta(t).and_then(|m| m.read(|s| Some(s.more.as_ref()?.post_accumulate_hooks.clone()))).unwrap_or_default()
}

/// Registers `hook` to run on the leaf `t` after each gradient accumulated into its `grad`.
pub(crate) fn add_post_accumulate_hook(t: &Tensor, hook: TensorHook) -> Result<()> {
    const FUNC: &str = "register_post_accumulate_grad_hook";
    let dense = t.data(FUNC, "self")?;
    if !dense.meta.requires_grad() {
        bail!(Runtime, "{FUNC}(): cannot register a hook on a tensor that doesn't require gradient");
    }
    if grad_fn_of(t).is_some() {
        bail!(Runtime, "{FUNC}(): post accumulate grad hooks cannot be registered on non-leaf tensors");
    }
    dense.meta.with_state(|s| s.more().post_accumulate_hooks.push(hook));
    Ok(())
}

/// Registers `hook` on the gradient of `t`: on a leaf, run before accumulation; otherwise on
/// the gradient reaching `t`'s node.
pub(crate) fn add_hook(t: &Tensor, hook: TensorHook) -> Result<()> {
    let dense = t.data("register_hook", "self")?;
    if !dense.meta.requires_grad() {
        bail!(Runtime, "register_hook(): cannot register a hook on a tensor that doesn't require gradient");
    }
    match grad_fn_of(t) {
        Some(edge) => edge.node.pre_hooks.lock().push((edge.output_nr, PreHook::Grad(hook))),
        None => dense.meta.with_state(|s| s.more().hooks.push(hook)),
    }
    Ok(())
}

/// Registers `observer` on `t`'s gradient: on a non-leaf, told each time its node runs (with
/// `None` when no gradient reached `t`); on a leaf, run on each gradient before it accumulates.
pub(crate) fn observe(t: &Tensor, observer: Observer) -> Result<()> {
    match grad_fn_of(t) {
        Some(edge) if t.data("register_hook", "self")?.meta.requires_grad() => {
            edge.node.pre_hooks.lock().push((edge.output_nr, PreHook::Observe(observer)));
            Ok(())
        }
        _ => add_hook(
            t,
            Arc::new(move |g: &Tensor| {
                observer(Some(g))?;
                Ok(None)
            }),
        ),
    }
}

/// `retain_grad()`: a non-leaf keeps the gradient reaching it in its `grad`.
pub(crate) fn retain_grad(t: &Tensor) -> Result<()> {
    let dense = t.data("retain_grad", "self")?;
    if !dense.meta.requires_grad() {
        bail!(Runtime, "retain_grad(): can't retain_grad on Tensor that has requires_grad=False");
    }
    let Some(edge) = grad_fn_of(t) else { return Ok(()) };
    if dense.meta.with_state(|s| std::mem::replace(&mut s.more().retains_grad, true)) {
        return Ok(());
    }
    // The hook holds the tensor weakly: the tensor holds the node, the node its hooks.
    let weak = t.downgrade();
    let hook: TensorHook = Arc::new(move |grad: &Tensor| {
        if let Some(t) = weak.upgrade() {
            let sum = match take_grad(&t) {
                Some(old) => crate::primitive::add(&old, grad)?,
                None => crate::primitive::copy(grad, grad.dtype()?)?,
            };
            set_grad(&t, Some(sum));
        }
        Ok(None)
    });
    edge.node.pre_hooks.lock().push((edge.output_nr, PreHook::Grad(hook)));
    Ok(())
}

/// Whether `t` retains its gradient (`Tensor.retains_grad`).
pub(crate) fn retains_grad(t: &Tensor) -> bool {
    meta(t).is_some_and(|m| m.read(|s| s.more.as_ref().is_some_and(|more| more.retains_grad)))
}

/// The forward-AD tangent of `t` and its level.
pub(crate) fn tangent(t: &Tensor) -> Option<(u64, Tensor)> {
    meta(t)?.read(|s| s.more.as_ref()?.tangent.clone())
}

/// The device `Module::to_device` moved the parameter `t` to, leaving `t` behind.
pub(crate) fn moved_to(t: &Tensor) -> Option<crate::Device> {
    meta(t)?.read(|s| s.more.as_ref()?.moved_to)
}

/// Marks the parameter `t` as left behind by a move of its module to `device`.
pub fn set_moved_to(t: &Tensor, device: crate::Device) {
    if let Some(m) = meta(t) {
        m.with_state(|s| s.more().moved_to = Some(device));
    }
}

/// Sets or clears the forward-AD tangent of `t`.
pub(crate) fn set_tangent(t: &Tensor, tangent: Option<(u64, Tensor)>) {
    if let Some(m) = meta(t) {
        m.with_state(|s| s.more().tangent = tangent);
    }
}
