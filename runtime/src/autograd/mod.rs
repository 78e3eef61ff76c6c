//! Reverse-mode automatic differentiation, as PyTorch's `torch.autograd`.
//!
//! Operations on tensors that require grad record a graph: each result remembers the node
//! that made it (its [`grad_fn`](crate::Tensor::grad_fn)), and each node the tensors it saved
//! and where its inputs' gradients go. [`Tensor::backward`](crate::Tensor::backward) and
//! [`grad`] run the graph backward. Recording happens in one place, the primitives every
//! public operation is built from, whose derivatives are declared in one table; so every
//! differentiable operation differentiates, on every device.
//!
//! ```
//! let x = torchfn::tensor([1.0f64, 2.0, 3.0])?.requires_grad_(true)?;
//! let y = (&x * &x)?.sum()?;
//! assert_eq!(y.grad_fn()?.unwrap().name(), "SumBackward0");
//! y.backward()?;
//! assert_eq!(x.grad()?.unwrap().to_vec::<f64>()?, [2.0, 4.0, 6.0]);
//!
//! // Higher order: the backward is itself differentiable.
//! let x = torchfn::tensor([3.0f64])?.requires_grad_(true)?;
//! let y = x.pow(&torchfn::Tensor::scalar(3))?;
//! let dy = torchfn::autograd::grad(&[y], &[x.clone()], None, None, true, false)?;
//! let dy = dy[0].clone().unwrap();
//! assert_eq!(dy.to_vec::<f64>()?, [27.0]); // 3x²
//! let d2y = torchfn::autograd::grad(&[dy], &[x], None, None, false, false)?;
//! assert_eq!(d2y[0].as_ref().unwrap().to_vec::<f64>()?, [18.0]); // 6x
//! # Ok::<(), torchfn::Error>(())
//! ```
//!
//! Grad mode ([`no_grad`], [`enable_grad`], [`set_grad_enabled`]) is per thread; see
//! [`is_grad_enabled`] for how it behaves across threads.
//!
//! [`gradcheck`] and [`gradgradcheck`] check a function's gradients (and second derivatives)
//! against finite differences, as PyTorch's; [`gradcheck`]'s documentation shows how to call it.
//! A custom [`Function`] brings its own backward (and forward derivative); [`forward_ad`] is
//! forward-mode AD, and `torchfn::func` has the functional `jvp` and `vjp`.

mod engine;
pub mod forward_ad;
mod function;
mod gradcheck;
pub mod graph;
pub(crate) mod meta;
mod mode;

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

pub use function::{
    Ctx, FromSlots, Function, FunctionInputs, FunctionOutput, Names, Outputs, SaveSlot, SaveTensors, Slot,
};
pub use gradcheck::{GradcheckOptions, gradcheck, gradgradcheck};
pub(crate) use graph::{Backward, Edge, Node, OutputMeta, SavedTensor};
pub(crate) use meta::Meta;
// What a module's `to(device)` marks on the parameters it leaves behind (`torchfn-nn`).
#[doc(hidden)]
pub use meta::set_moved_to;
pub use mode::{GradModeGuard, enable_grad, is_grad_enabled, no_grad, set_grad_enabled};

use crate::error::{Result, bail};
use crate::tensor::Tensor;

/// A node of the recorded graph, as PyTorch's `grad_fn` objects: the operation that made a
/// tensor (`MulBackward0`), or a leaf's gradient accumulator (`AccumulateGrad`).
#[derive(Clone)]
pub struct GradFn(pub(crate) Arc<Node>);

impl GradFn {
    /// The node's name, as PyTorch's: `MulBackward0`, `AccumulateGrad`.
    pub fn name(&self) -> Cow<'static, str> {
        self.0.name()
    }

    /// Where the node sends its inputs' gradients, one entry per input: the next node and
    /// which of its outputs the input was, or `None` for an input that needs no gradient.
    pub fn next_functions(&self) -> Vec<Option<(GradFn, usize)>> {
        self.0.next.iter().map(|e| e.as_ref().map(|e| (GradFn(e.node.clone()), e.output_nr))).collect()
    }

    /// The leaf of an `AccumulateGrad` node (PyTorch's `variable`).
    pub fn variable(&self) -> Option<Tensor> {
        self.0.backward.leaf()?.upgrade()
    }

    /// Whether both are the same node.
    pub fn ptr_eq(&self, other: &GradFn) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// A number that tells this node from every other node alive (its address), for a walk
    /// over the graph to remember the nodes it has seen.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0).addr()
    }
}

/// A function run on each gradient computed for a tensor, which may return a replacement
/// (`Tensor.register_hook`'s argument): a value hooks and modes see and pass on.
#[derive(Clone)]
pub struct GradHook(pub(crate) graph::TensorHook);

impl GradHook {
    /// The hook `f`.
    pub fn new(f: impl Fn(&Tensor) -> Result<Option<Tensor>> + Send + Sync + 'static) -> GradHook {
        GradHook(Arc::new(f))
    }

    /// Runs the hook on `grad`.
    pub fn call(&self, grad: &Tensor) -> Result<Option<Tensor>> {
        (self.0)(grad)
    }
}

impl fmt::Debug for GradHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<function>")
    }
}

impl fmt::Debug for GradFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} object>", self.name())
    }
}

/// The root gradients of `outputs`: `grad_outputs` where given (checked against each output's
/// shape), else an implicit 1 for one-element outputs.
fn roots(func: &str, outputs: &[Tensor], grad_outputs: Option<&[Tensor]>) -> Result<Vec<(Edge, Tensor)>> {
    if let Some(g) = grad_outputs
        && g.len() != outputs.len()
    {
        bail!(
            Runtime,
            "{func}(): grad can be given for each output: got {} tensors for {} outputs",
            g.len(),
            outputs.len()
        );
    }
    let mut roots = Vec::new();
    for (i, out) in outputs.iter().enumerate() {
        let x = out.data(func, "tensors")?;
        let Some(edge) = meta::gradient_edge(out) else {
            bail!(Runtime, "{func}(): element {i} of tensors does not require grad and does not have a grad_fn");
        };
        let grad = match grad_outputs.map(|g| &g[i]) {
            Some(g) => {
                let gd = g.data(func, "grad_tensors")?;
                if gd.layout.shape != x.layout.shape {
                    bail!(
                        Runtime,
                        "{func}(): Mismatch in shape: grad_output[{i}] has a shape of {:?} and output[{i}] has a \
                         shape of {:?}.",
                        gd.layout.shape.as_ref(),
                        x.layout.shape.as_ref()
                    );
                }
                let same_device = crate::dispatch::same_device(gd.device(), x.device());
                if gd.dtype.is_floating_point() != x.dtype.is_floating_point() || !same_device {
                    bail!(
                        Runtime,
                        "{func}(): For invalid gradient at index {i} - expected {} on {}, but got {} on {}",
                        x.dtype,
                        x.device(),
                        gd.dtype,
                        gd.device()
                    );
                }
                if gd.dtype == x.dtype { g.clone() } else { crate::primitive::copy(g, x.dtype)? }
            }
            // `ones_like(out)`: a wrapper subclass's output gets a seed of its own kind.
            None if x.layout.numel() == 1 => {
                crate::primitive::new_full(out, &x.layout.shape, crate::tensor::Scalar::Int(1), x.dtype)?
            }
            None => bail!(Runtime, "{func}(): grad can be implicitly created only for scalar outputs"),
        };
        roots.push((edge, grad));
    }
    Ok(roots)
}

/// Computes the gradients of `tensors` with respect to the graph's leaves and accumulates them
/// into the leaves' `grad` (`torch.autograd.backward`). `grad_tensors` gives each output's
/// gradient (may be omitted for one-element outputs); without `retain_graph` (default:
/// `create_graph`) the saved tensors are freed; `create_graph` records the backward for
/// higher-order gradients; `inputs` limits accumulation to those tensors.
pub fn backward(
    tensors: &[Tensor],
    grad_tensors: Option<&[Tensor]>,
    retain_graph: Option<bool>,
    create_graph: bool,
    inputs: Option<&[Tensor]>,
) -> Result<()> {
    if inputs.is_some_and(<[Tensor]>::is_empty) {
        bail!(Runtime, "backward(): 'inputs' argument to backward() cannot be empty.");
    }
    let roots = roots("backward", tensors, grad_tensors)?;
    engine::run(
        roots,
        engine::Run {
            retain_graph: retain_graph.unwrap_or(create_graph),
            create_graph,
            inputs: inputs.map(<[Tensor]>::to_vec),
            accumulate: true,
            allow_unused: true,
        },
    )?;
    Ok(())
}

/// The gradients of `outputs` with respect to `inputs`, returned rather than accumulated
/// (`torch.autograd.grad`). `grad_outputs` as `backward`'s `grad_tensors`; an input the outputs
/// do not depend on is an error unless `allow_unused`, and then its gradient is `None`.
pub fn grad(
    outputs: &[Tensor],
    inputs: &[Tensor],
    grad_outputs: Option<&[Tensor]>,
    retain_graph: Option<bool>,
    create_graph: bool,
    allow_unused: bool,
) -> Result<Vec<Option<Tensor>>> {
    if inputs.is_empty() {
        bail!(Runtime, "grad(): grad requires non-empty inputs.");
    }
    let roots = roots("grad", outputs, grad_outputs)?;
    engine::run(
        roots,
        engine::Run {
            retain_graph: retain_graph.unwrap_or(create_graph),
            create_graph,
            inputs: Some(inputs.to_vec()),
            accumulate: false,
            allow_unused,
        },
    )
}
