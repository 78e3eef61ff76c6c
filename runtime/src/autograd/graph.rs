//! The recorded graph: nodes (PyTorch's `grad_fn` objects), the edges between them, and the
//! tensors a node saved for its backward.

use std::borrow::Cow;
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

/// What a node does with the gradients of its outputs: one entry in the derivatives table.
pub(crate) trait Backward: Send + Sync + 'static {
    /// The node's name, as PyTorch's (`MulBackward0`).
    fn name(&self) -> Cow<'static, str>;

    /// The leaf, for a leaf's gradient accumulator (whose gradients accumulate into the
    /// leaf's `grad` instead of flowing on).
    fn leaf(&self) -> Option<&WeakTensor> {
        None
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
pub struct Node<B: ?Sized = dyn Backward> {
    /// Where each input's gradient goes (`None`: the input needs none).
    pub(crate) next: SmallVec<[Option<Edge>; 2]>,
    pub(crate) outputs: SmallVec<[OutputMeta; 1]>,
    /// The order of recording: later nodes run first in backward.
    pub(crate) sequence: u64,
    saved: Mutex<Saved>,
    /// Hooks on the gradients of this node's outputs (of non-leaf tensors), by output.
    pub(crate) pre_hooks: Mutex<Vec<(usize, TensorHook)>>,
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
    tensors: Vec<SavedTensor>,
    freed: bool,
}

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

impl Node {
    pub(crate) fn function(
        backward: impl Backward,
        next: impl IntoIterator<Item = Option<Edge>>,
        saved: Vec<SavedTensor>,
        outputs: impl IntoIterator<Item = OutputMeta>,
    ) -> Arc<Node> {
        Arc::new(Node {
            next: next.into_iter().collect(),
            outputs: outputs.into_iter().collect(),
            sequence: SEQUENCE.fetch_add(1, Ordering::Relaxed),
            saved: Mutex::new(Saved { tensors: saved, freed: false }),
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
                crate::autograd::meta::alias_with_history(&self.tensor, Edge { node: node.clone(), output_nr: nr })
            }
            _ => self.tensor.clone(),
        })
    }
}
