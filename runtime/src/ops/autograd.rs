//! The autograd surface of a tensor, as PyTorch's: `requires_grad`, `grad`, `grad_fn`,
//! `is_leaf`, `detach`, `retain_grad`, `register_hook` and `backward`. All are overridable calls
//! (a mode or a subclass hook sees them), as in PyTorch; a graph node and a hook function reach
//! hooks as [`Value::Object`]s.

use crate::autograd::{self, GradFn, GradHook, meta};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::testing::{f32s, sample};
use crate::torch_function;
use crate::value::Value;

impl Tensor {
    /// Whether operations on this tensor record a graph for its gradient (`Tensor.requires_grad`):
    /// true for leaves marked with [`requires_grad_`](Tensor::requires_grad_) and for results of
    /// recorded operations.
    #[torch_function(property)]
    pub fn requires_grad(&self) -> Result<bool> {
        self.data("requires_grad", "self")?;
        Ok(meta::requires_grad(self))
    }

    /// Marks a leaf as requiring grad (or not), in place; returns `self`
    /// (`Tensor.requires_grad_`). Only floating-point tensors can require grad, and only
    /// leaves can stop requiring it.
    ///
    /// ```
    /// let x = torchfn::tensor([1.0f32])?.requires_grad_(true)?;
    /// assert!(x.requires_grad()? && x.is_leaf()?);
    /// assert!(torchfn::tensor([1i64])?.requires_grad_(true).is_err());
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function]
    pub fn requires_grad_(&self, #[default(true)] requires_grad: bool) -> Result<Tensor> {
        meta::set_requires_grad(self, requires_grad)?;
        Ok(self.clone())
    }

    /// Whether this tensor is a leaf of the graph (`Tensor.is_leaf`): it was not made by a
    /// recorded operation. Only leaves accumulate a `grad`.
    #[torch_function(property)]
    pub fn is_leaf(&self) -> Result<bool> {
        self.data("is_leaf", "self")?;
        Ok(meta::is_leaf(self))
    }

    /// The gradient accumulated into this leaf by backward (`Tensor.grad`), `None` before the
    /// first backward. The very same tensor comes back through every hook, never converted. A
    /// non-leaf has none unless [`retain_grad`](Tensor::retain_grad) was called (PyTorch warns
    /// there; torchfn returns `None`).
    #[torch_function(property, nowrap, name = "grad.__get__")]
    pub fn grad(&self) -> Result<Option<Tensor>> {
        self.data("grad", "self")?;
        Ok(meta::grad(self))
    }

    /// Sets (or, with `None`, clears) the gradient (`Tensor.grad = ...`); it must have this
    /// tensor's shape.
    #[torch_function(name = "grad.__set__")]
    pub fn set_grad(&self, grad: Option<&Tensor>) -> Result<()> {
        let x = self.data("grad", "self")?;
        if let Some(g) = grad {
            let gd = g.data("grad", "value")?;
            if gd.layout.shape != x.layout.shape {
                crate::error::bail!(
                    Runtime,
                    "assigned grad has data of a different size: {:?}, expected {:?}",
                    gd.layout.shape.as_ref(),
                    x.layout.shape.as_ref()
                );
            }
        }
        meta::set_grad(self, grad.cloned());
        Ok(())
    }

    /// The node that made this tensor (`Tensor.grad_fn`), `None` for leaves and tensors that
    /// do not require grad.
    ///
    /// ```
    /// let x = torchfn::tensor([2.0f32])?.requires_grad_(true)?;
    /// let y = (&x * &x)?;
    /// let node = y.grad_fn()?.unwrap();
    /// assert_eq!(node.name(), "MulBackward0");
    /// assert_eq!(node.next_functions()[0].as_ref().unwrap().0.name(), "AccumulateGrad");
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    #[torch_function(property)]
    pub fn grad_fn(&self) -> Result<Option<GradFn>> {
        self.data("grad_fn", "self")?;
        Ok(meta::grad_fn_of(self).map(|e| GradFn(e.node)))
    }

    /// The same data without history and not requiring grad (`Tensor.detach`); it shares
    /// memory (and the version counter) with this tensor.
    #[torch_function]
    pub fn detach(&self) -> Result<Tensor> {
        self.data("detach", "self")?;
        Ok(meta::detached(self))
    }

    /// Detaches this tensor from its history in place (`Tensor.detach_`); returns `self`.
    #[torch_function]
    pub fn detach_(&self) -> Result<Tensor> {
        self.data("detach_", "self")?;
        meta::detach_in_place(self);
        Ok(self.clone())
    }

    /// The device `Module::to_device` moved this parameter to, leaving this tensor behind
    /// (what an optimizer built before the move holds); `None` otherwise. For the optimizers'
    /// check, not part of PyTorch's API.
    #[doc(hidden)]
    pub fn __moved_to(&self) -> Option<crate::Device> {
        meta::moved_to(self)
    }

    /// Keeps the gradient that reaches this non-leaf in its `grad` (`Tensor.retain_grad`).
    #[torch_function]
    pub fn retain_grad(&self) -> Result<()> {
        meta::retain_grad(self)
    }

    /// Whether this non-leaf keeps its gradient (`Tensor.retains_grad`).
    #[torch_function(property)]
    pub fn retains_grad(&self) -> Result<bool> {
        self.data("retains_grad", "self")?;
        Ok(meta::retains_grad(self))
    }

    /// Runs `hook` on each gradient computed for this tensor (`Tensor.register_hook`); a hook
    /// that returns a tensor replaces the gradient.
    ///
    /// ```
    /// let x = torchfn::tensor([1.0f64, 2.0])?.requires_grad_(true)?;
    /// x.register_hook(|g| Ok(Some((g * 10.0)?)))?;
    /// (&x * 3.0)?.sum()?.backward()?;
    /// assert_eq!(x.grad()?.unwrap().to_vec::<f64>()?, [30.0, 30.0]);
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    pub fn register_hook(
        &self,
        hook: impl Fn(&Tensor) -> Result<Option<Tensor>> + Send + Sync + 'static,
    ) -> Result<()> {
        self.register_hook_with(GradHook::new(hook))
    }

    /// [`register_hook`](Tensor::register_hook) with the hook as a value, registered as
    /// `Tensor.register_hook`: hooks and modes see the call, with the hook function as a
    /// [`Value::Object`].
    #[torch_function(name = "register_hook")]
    pub fn register_hook_with(&self, hook: GradHook) -> Result<()> {
        meta::add_hook(self, hook.0)
    }

    /// Runs `hook` on this leaf after each backward has accumulated its gradient into `grad`
    /// (`Tensor.register_post_accumulate_grad_hook`): the hook reads `grad` complete, as an
    /// optimizer step in backward or a gradient all-reduce does.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let w = torchfn::tensor([1.0f64, 2.0])?.requires_grad_(true)?;
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// w.register_post_accumulate_grad_hook(move |p| {
    ///     log.lock().unwrap().push(p.grad()?.unwrap().to_vec::<f64>()?);
    ///     Ok(())
    /// })?;
    /// (&w * 3.0)?.sum()?.backward()?;
    /// (&w * 3.0)?.sum()?.backward()?;
    /// assert_eq!(*seen.lock().unwrap(), [vec![3.0, 3.0], vec![6.0, 6.0]]);
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    pub fn register_post_accumulate_grad_hook(
        &self,
        hook: impl Fn(&Tensor) -> Result<()> + Send + Sync + 'static,
    ) -> Result<()> {
        self.register_post_accumulate_grad_hook_with(GradHook::new(move |p| hook(p).map(|()| None)))
    }

    /// [`register_post_accumulate_grad_hook`](Tensor::register_post_accumulate_grad_hook) with
    /// the hook as a value (called with the leaf; it must return `None`), registered as
    /// `Tensor.register_post_accumulate_grad_hook`.
    #[torch_function(name = "register_post_accumulate_grad_hook")]
    pub fn register_post_accumulate_grad_hook_with(&self, hook: GradHook) -> Result<()> {
        meta::add_post_accumulate_hook(self, hook.0)
    }

    /// `backward()` with every default: the gradient of this one-element tensor with respect
    /// to the graph's leaves, accumulated into their `grad`. See
    /// [`backward_with`](Tensor::backward_with).
    pub fn backward(&self) -> Result<()> {
        self.backward_with(None, None, false, None)
    }

    /// Computes the gradient of this tensor with respect to the graph's leaves and accumulates
    /// it into their `grad` (`Tensor.backward(gradient, retain_graph, create_graph, inputs)`,
    /// registered as `Tensor.backward`). `gradient` is required unless this tensor has one
    /// element; without `retain_graph` (default: `create_graph`) the graph's saved tensors are
    /// freed; `create_graph` records the backward for higher-order gradients; `inputs` limits
    /// accumulation to those tensors.
    #[torch_function(name = "backward")]
    pub fn backward_with(
        &self,
        #[default(None)] gradient: Option<&Tensor>,
        #[default(None)] retain_graph: Option<bool>,
        #[default(false)] create_graph: bool,
        #[default(None)] inputs: Option<Vec<Tensor>>,
    ) -> Result<()> {
        let grads = gradient.map(|g| vec![g.clone()]);
        autograd::backward(std::slice::from_ref(self), grads.as_deref(), retain_graph, create_graph, inputs.as_deref())
    }
}

fn leaf(shape: &[usize]) -> Value {
    let t = crate::testing::values(shape, crate::DType::Float32);
    Value::Tensor(t.requires_grad_(true).expect("a float tensor can require grad"))
}

crate::samples! {
    Tensor::REQUIRES_GRAD => [sample([f32s(&[2])])],
    Tensor::REQUIRES_GRAD_ => [sample([f32s(&[2])])],
    Tensor::IS_LEAF => [sample([f32s(&[2])])],
    Tensor::GRAD => [sample([f32s(&[2])])],
    Tensor::SET_GRAD => [sample([f32s(&[2]), f32s(&[2])])],
    Tensor::DETACH => [sample([f32s(&[2])])],
    Tensor::DETACH_ => [sample([f32s(&[2])])],
    Tensor::RETAIN_GRAD => [sample([leaf(&[2, 3])])],
    Tensor::RETAINS_GRAD => [sample([f32s(&[2])])],
    Tensor::BACKWARD_WITH => [sample([leaf(&[])])],
    Tensor::GRAD_FN => [sample([f32s(&[2])])],
    Tensor::REGISTER_HOOK_WITH => [sample([leaf(&[2]), crate::autograd::GradHook::new(|_| Ok(None)).into()])],
    Tensor::REGISTER_POST_ACCUMULATE_GRAD_HOOK_WITH => [sample([leaf(&[2]), crate::autograd::GradHook::new(|_| Ok(None)).into()])],
}
