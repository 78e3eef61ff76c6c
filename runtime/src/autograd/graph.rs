//! The recorded graph (`torch.autograd.graph`): nodes (PyTorch's `grad_fn` objects), the edges
//! between them and the tensors a node saved for its backward; and the hooks that watch a
//! backward run through it ([`register_multi_grad_hook`], [`queue_callback`]).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use smallvec::SmallVec;

use crate::backend::Device;
use crate::error::{Error, Result};
use crate::tensor::{DType, Shape, Tensor, WeakTensor};

/// A function run on the gradient flowing into a tensor, before it goes on: it may return a
/// replacement (`Tensor.register_hook`).
pub(crate) type TensorHook = Arc<dyn Fn(&Tensor) -> Result<Option<Tensor>> + Send + Sync>;

/// A function told that a node runs, with the gradient of one of its outputs or `None`.
pub(crate) type Observer = Arc<dyn Fn(Option<&Tensor>) -> Result<()> + Send + Sync>;

/// A hook on one output of a node: on its gradient when it has one, or, observing, on whatever
/// it has (`None` when the node runs without a gradient for that output).
#[derive(Clone)]
pub(crate) enum PreHook {
    /// `Tensor.register_hook`: runs on a gradient, may replace it.
    Grad(TensorHook),
    /// A multi-grad hook's part: told that the node runs, with the gradient or `None`.
    Observe(Observer),
}

/// What a node does with the gradients of its outputs: one entry in the derivatives table.
pub(crate) trait Backward: Send + Sync + 'static {
    /// The node's name, as PyTorch's (`MulBackward0`).
    fn name(&self) -> Cow<'static, str>;

    /// The leaf, for a leaf's gradient accumulator (whose gradients accumulate into the
    /// leaf's `grad` instead of flowing on).
    fn leaf(&self) -> Option<&WeakTensor> {
        None
    }

    /// Whether the node's outputs are views that share it (`split`'s pieces), which PyTorch
    /// does not let an in-place operation write while recording.
    fn shares_views(&self) -> bool {
        false
    }

    /// Whether gradients missing for some outputs reach [`apply`](Backward::apply) as zeros
    /// (else as `None`: a custom Function's `set_materialize_grads(false)`).
    fn materialize_grads(&self) -> bool {
        true
    }

    /// The gradients of the node's inputs (one per input, `None` where an input needs none),
    /// from the gradients of its outputs (one per output; missing ones as zeros, or `None`
    /// when the node does not materialize them) and the tensors it saved, unpacked.
    fn apply(&self, node: &Node, grads: Vec<Option<Tensor>>, saved: Vec<Tensor>) -> Result<Vec<Option<Tensor>>>;
}

/// Where a gradient goes: output `output_nr` of `node`... seen from the consumer, input
/// `output_nr` of the node's gradient buffer.
#[derive(Clone)]
pub(crate) struct Edge {
    pub(crate) node: Arc<Node>,
    pub(crate) output_nr: usize,
}

/// The shape, dtype and device of one of a node's outputs: what its gradient must have.
#[derive(Clone, Debug)]
pub(crate) struct OutputMeta {
    pub(crate) shape: Shape,
    pub(crate) dtype: DType,
    pub(crate) device: Device,
}

/// A node of the graph: a recorded operation (or a leaf's gradient accumulator), its backward
/// stored inline (one allocation per node).
pub(crate) struct Node<B: ?Sized = dyn Backward> {
    /// Where each input's gradient goes (`None`: the input needs none).
    pub(crate) next: SmallVec<[Option<Edge>; 2]>,
    pub(crate) outputs: SmallVec<[OutputMeta; 1]>,
    /// The order of recording: later nodes run first in backward.
    pub(crate) sequence: u64,
    saved: Mutex<Saved>,
    /// Hooks on the gradients of this node's outputs (of non-leaf tensors), by output.
    pub(crate) pre_hooks: Mutex<Vec<(usize, PreHook)>>,
    pub(crate) backward: B,
}

/// A leaf's gradient accumulator. The leaf holds its accumulator, so the accumulator holds
/// the leaf weakly.
struct AccumulateGrad(WeakTensor);

impl Backward for AccumulateGrad {
    fn name(&self) -> Cow<'static, str> {
        Cow::Borrowed("AccumulateGrad")
    }

    fn leaf(&self) -> Option<&WeakTensor> {
        Some(&self.0)
    }

    fn apply(&self, _: &Node, _: Vec<Option<Tensor>>, _: Vec<Tensor>) -> Result<Vec<Option<Tensor>>> {
        Ok(Vec::new())
    }
}

struct Saved {
    /// Two inline: most nodes save at most two tensors (a product's operands), and a node
    /// built without a second allocation is cheaper to record (a one-element chain's nodes).
    tensors: SmallVec<[SavedTensor; 2]>,
    freed: bool,
}

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// `items` pushed one by one: `collect` goes through `SmallVec`'s generic `extend`, which cost
/// more than the rest of building a node for the two inputs of a binary operation.
fn pushed<A: smallvec::Array>(items: impl IntoIterator<Item = A::Item>) -> SmallVec<A> {
    let mut vec = SmallVec::new();
    for item in items {
        vec.push(item);
    }
    vec
}

impl Node {
    pub(crate) fn function(
        backward: impl Backward,
        next: impl IntoIterator<Item = Option<Edge>>,
        saved: impl IntoIterator<Item = SavedTensor>,
        outputs: impl IntoIterator<Item = OutputMeta>,
    ) -> Arc<Node> {
        Arc::new(Node {
            next: pushed(next),
            outputs: pushed(outputs),
            sequence: SEQUENCE.fetch_add(1, Ordering::Relaxed),
            saved: Mutex::new(Saved { tensors: pushed(saved), freed: false }),
            pre_hooks: Mutex::new(Vec::new()),
            backward,
        })
    }

    pub(crate) fn accumulate(leaf: WeakTensor, output: OutputMeta) -> Arc<Node> {
        Node::function(AccumulateGrad(leaf), [], Vec::new(), [output])
    }

    /// The node's name, as PyTorch's: `MulBackward0`, `AccumulateGrad`.
    pub fn name(&self) -> Cow<'static, str> {
        self.backward.name()
    }

    /// The tensors saved for backward, checked against in-place changes since they were saved.
    pub(crate) fn unpack(self: &Arc<Node>) -> Result<Vec<Tensor>> {
        let saved = self.saved.lock();
        if saved.freed {
            return Err(freed_error());
        }
        saved.tensors.iter().map(|s| s.unpack(self)).collect()
    }

    /// Drops the saved tensors (after a backward that does not retain the graph).
    pub(crate) fn release(&self) {
        let mut saved = self.saved.lock();
        if !saved.tensors.is_empty() {
            saved.tensors.clear();
            saved.freed = true;
        }
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} object>", self.name())
    }
}

#[cold]
pub(crate) fn freed_error() -> Error {
    Error::runtime_error(
        "Trying to backward through the graph a second time (or directly access saved tensors after they have \
         already been freed). Saved intermediate values of the graph are freed when you call .backward() or \
         autograd.grad(). Specify retain_graph=true if you need to backward through the graph a second time or if \
         you need to access saved tensors after calling backward.",
    )
}

/// A tensor a node keeps for its backward, with the version of its memory at that time.
pub(crate) struct SavedTensor {
    /// An input as it was given, or, for the node's own output, an alias without history (so
    /// that the output does not keep itself alive through its node).
    tensor: Tensor,
    version: u64,
    /// For the node's own output: which output it is (its history is the node itself).
    output_nr: Option<usize>,
    /// For an output: whether it required grad (it may be given back its history).
    requires_grad: bool,
}

impl SavedTensor {
    /// Saves an input of the node being recorded.
    pub(crate) fn input(tensor: &Tensor) -> SavedTensor {
        SavedTensor { tensor: tensor.clone(), version: tensor.version(), output_nr: None, requires_grad: false }
    }

    /// Saves output `output_nr` of the node being recorded (given without its history).
    pub(crate) fn output(alias: Tensor, output_nr: usize) -> SavedTensor {
        SavedTensor { version: alias.version(), tensor: alias, output_nr: Some(output_nr), requires_grad: true }
    }

    fn unpack(&self, node: &Arc<Node>) -> Result<Tensor> {
        let now = self.tensor.version();
        if now != self.version {
            let (what, op) = match self.output_nr {
                Some(nr) => (format!("output {nr} of"), node.name().into_owned()),
                None => match crate::autograd::meta::grad_fn_of(&self.tensor) {
                    Some(edge) => (format!("output {} of", edge.output_nr), edge.node.name().into_owned()),
                    None => ("a leaf or an input of".to_string(), node.name().into_owned()),
                },
            };
            return Err(Error::runtime_error(format!(
                "one of the variables needed for gradient computation has been modified by an inplace operation: \
                 [{} {:?}], which is {what} {op}, is at version {now}; expected version {} instead. Hint: the \
                 operation that failed was {}; find the in-place operation that modified this tensor after it was \
                 saved, or clone the tensor before modifying it.",
                self.tensor.dtype().map(|d| d.to_string()).unwrap_or_default(),
                self.tensor.shape().map(|s| s.to_vec()).unwrap_or_default(),
                self.version,
                node.name(),
            )));
        }
        Ok(match self.output_nr {
            Some(nr) if self.requires_grad && crate::autograd::is_grad_enabled() => {
                let alias =
                    crate::autograd::meta::alias_with_history(&self.tensor, Edge { node: node.clone(), output_nr: nr });
                // Forward AD through a formula that reads the output (forward-over-reverse).
                if crate::autograd::forward_ad::level_active()
                    && let Some(tangent) = crate::autograd::meta::tangent(&self.tensor)
                {
                    crate::autograd::meta::set_tangent(&alias, Some(tangent));
                }
                alias
            }
            _ => self.tensor.clone(),
        })
    }
}

/// Gives the node's saved copy of its output `out` the tangent `out` has: a backward formula
/// that reads the output then differentiates in forward mode too (forward-over-reverse).
pub(crate) fn share_tangent_with_saved_output(out: &Tensor) {
    let (Some(edge), Some(tangent)) = (crate::autograd::meta::grad_fn_of(out), crate::autograd::meta::tangent(out))
    else {
        return;
    };
    let saved = edge.node.saved.lock();
    for s in saved.tensors.iter().filter(|s| s.output_nr == Some(edge.output_nr)) {
        crate::autograd::meta::set_tangent(&s.tensor, Some(tangent.clone()));
    }
}

/// What an [`identity`] node does with the gradients of its outputs.
#[doc(hidden)]
pub type IdentityBackward = Box<dyn Fn(Vec<Option<Tensor>>) -> Result<Vec<Option<Tensor>>> + Send + Sync>;

/// A node that hands its outputs' gradients to its inputs through a function (module backward
/// hooks' `BackwardHookFunctionBackward`).
struct Identity(&'static str, IdentityBackward);

impl Backward for Identity {
    fn name(&self) -> Cow<'static, str> {
        Cow::Borrowed(self.0)
    }

    fn materialize_grads(&self) -> bool {
        false
    }

    fn apply(&self, _: &Node, grads: Vec<Option<Tensor>>, _: Vec<Tensor>) -> Result<Vec<Option<Tensor>>> {
        (self.1)(grads)
    }
}

/// `tensors` passed through one node named `name` whose backward is `backward`: new handles of
/// the same data, those that require grad with the node as their history. `None` (nothing
/// recorded) when none requires grad or grad mode is off.
#[doc(hidden)] // for the module hooks of `torchfn-nn`
pub fn identity(tensors: &[Tensor], name: &'static str, backward: IdentityBackward) -> Option<Vec<Tensor>> {
    if !super::is_grad_enabled() || !tensors.iter().any(super::meta::requires_grad) {
        return None;
    }
    let next: Vec<Option<Edge>> = tensors.iter().map(super::meta::gradient_edge).collect();
    let outputs: Vec<OutputMeta> =
        tensors.iter().map(|t| t.dense().map(super::meta::output_meta)).collect::<Option<_>>()?;
    let node = Node::function(Identity(name, backward), next.iter().cloned(), Vec::new(), outputs);
    Some(
        tensors
            .iter()
            .zip(&next)
            .enumerate()
            .map(|(i, (t, edge))| match edge {
                Some(_) => super::meta::alias_with_history(t, Edge { node: node.clone(), output_nr: i }),
                None => t.clone(),
            })
            .collect(),
    )
}

/// When a multi-grad hook runs ([`register_multi_grad_hook`]'s `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MultiGradMode {
    /// Once the gradients of all the tensors a backward reaches are computed (`"all"`).
    All,
    /// On the first gradient computed for any of them (`"any"`).
    Any,
}

/// What a multi-grad hook is given: one gradient per tensor, `None` where the backward computed
/// none (with [`MultiGradMode::Any`], only the gradient that came first).
pub type MultiGradHook = dyn Fn(&[Option<Tensor>]) -> Result<()> + Send + Sync;

/// Runs `hook` once per backward that reaches `tensors` (`torch.autograd.graph.register_multi_grad_hook`):
/// with [`MultiGradMode::All`], when the gradients of every one of them that the backward
/// computes are ready; with [`MultiGradMode::Any`], on the first. Each tensor must require grad.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use torchfn::autograd::graph::{MultiGradMode, register_multi_grad_hook};
///
/// let a = torchfn::tensor([1.0f64, 2.0])?.requires_grad_(true)?;
/// let (x, y) = ((&a * 2.0)?, (&a * 3.0)?);
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// register_multi_grad_hook(&[x.clone(), y.clone()], MultiGradMode::All, move |grads| {
///     log.lock().unwrap().push(grads.iter().map(|g| g.is_some()).collect::<Vec<_>>());
///     Ok(())
/// })?;
/// (&x.sum()? + &y.sum()?)?.backward_with(None, Some(true), false, None)?;
/// x.sum()?.backward()?; // y takes no part: the hook runs on x's gradient alone
/// assert_eq!(*seen.lock().unwrap(), [vec![true, true], vec![true, false]]);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn register_multi_grad_hook(
    tensors: &[Tensor],
    mode: MultiGradMode,
    hook: impl Fn(&[Option<Tensor>]) -> Result<()> + Send + Sync + 'static,
) -> Result<()> {
    let mut nodes = Vec::with_capacity(tensors.len());
    for (i, t) in tensors.iter().enumerate() {
        let Some(edge) = super::meta::gradient_edge(t) else {
            return Err(Error::runtime_error(format!(
                "register_multi_grad_hook(): tensor {i} does not require grad: a hook on its gradient would never run"
            )));
        };
        // Weak: the hook is stored on the node itself.
        nodes.push(Arc::downgrade(&edge.node));
    }
    /// What one backward has gathered so far.
    struct Pending {
        count: usize,
        expected: usize,
        grads: Vec<Option<Tensor>>,
        fired: bool,
    }
    let hook: Arc<MultiGradHook> = Arc::new(hook);
    let pending: Arc<Mutex<HashMap<u64, Pending>>> = Arc::default();
    let n = tensors.len();
    for (i, t) in tensors.iter().enumerate() {
        let (hook, pending, nodes) = (hook.clone(), pending.clone(), nodes.clone());
        let pending_handle = pending.clone();
        let inner = Arc::new(move |grad: Option<&Tensor>| -> Result<()> {
            let Some(task) = super::engine::current_task_id() else { return Ok(()) };
            let ready = {
                let mut pending = pending.lock();
                let p = pending.entry(task).or_insert_with(|| {
                    // The first part of this backward to run: forget the backward when it ends.
                    let pending = Arc::downgrade(&pending_handle);
                    super::engine::queue_callback(Box::new(move || {
                        if let Some(p) = pending.upgrade() {
                            p.lock().remove(&task);
                        }
                        Ok(())
                    }));
                    Pending {
                        count: 0,
                        // How many of the hooks this backward will run.
                        expected: nodes
                            .iter()
                            .filter(|n| n.upgrade().is_some_and(|n| super::engine::will_execute(&n)))
                            .count(),
                        grads: vec![None; n],
                        fired: false,
                    }
                });
                p.count += 1;
                if let Some(slot) = p.grads.get_mut(i) {
                    *slot = grad.cloned();
                }
                let due = match mode {
                    // The first gradient there is.
                    MultiGradMode::Any => !p.fired && grad.is_some(),
                    MultiGradMode::All => !p.fired && p.count >= p.expected,
                };
                p.fired |= due;
                due.then(|| p.grads.clone())
            };
            if let Some(grads) = ready {
                hook(&grads)?;
            }
            Ok(())
        });
        super::meta::observe(t, inner)?;
    }
    Ok(())
}

/// Runs `callback` when the backward running on this thread ends
/// (`Variable._execution_engine.queue_callback`); an error outside a backward. An error the
/// callback returns is the backward's (after every other callback has run).
pub fn queue_callback(callback: impl FnOnce() -> Result<()> + 'static) -> Result<()> {
    if super::engine::queue_callback(Box::new(callback)) {
        Ok(())
    } else {
        Err(Error::runtime_error("queue_callback(): final callbacks can only be installed during backward pass."))
    }
}

/// The id of the backward running on this thread (PyTorch's `_current_graph_task_id`).
#[doc(hidden)] // for the module hooks and the module tracker of `torchfn-nn`
pub fn current_task() -> Option<u64> {
    super::engine::current_task_id()
}

/// Whether a backward is running on this thread (PyTorch's `_current_graph_task_id() != -1`):
/// what tells a hook it runs in the backward pass.
pub fn in_backward() -> bool {
    super::engine::current_task_id().is_some()
}
