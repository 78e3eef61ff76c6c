//! Module hooks (PyTorch's `register_forward_pre_hook`, `register_forward_hook`,
//! `register_full_backward_pre_hook`, `register_full_backward_hook`, and the global
//! `register_module_*` forms): functions run around every call of a module, forward and
//! backward, each removable through the handle its registration returns.
//!
//! A module's call is [`Layer::call`](super::Layer::call) (PyTorch's `module(x)`), or
//! [`call_module`] for a module that takes or returns several tensors. A module is known by
//! where it lives and its type (as `torchfn::fx` knows it), so its hooks stay with it as
//! long as it is not moved; and a hook lives as long as the handle its registration returned
//! (a guard), so that a hook does not outlive the code that set it up. (A module moved while
//! hooked loses its hooks, and a handle kept, or held longer than its module, may reach a
//! later module built where that one lived.)
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use torchfn::nn::{Layer, Linear, ModuleHooks};
//! use torchfn::prelude::*;
//!
//! let fc = Linear::new(3, 2, true, &Generator::new().manual_seed(0))?;
//! let shapes = Arc::new(Mutex::new(Vec::new()));
//! let log = shapes.clone();
//! let handle = fc.register_forward_hook(move |module, _input, output| {
//!     log.lock().unwrap().push(format!("{}: {:?}", module.type_name(), output[0].shape()?));
//!     Ok(None) // Some(outputs) would replace the output
//! });
//! fc.call(&torchfn::ones([4, 3], None, None)?)?;
//! handle.remove();
//! fc.call(&torchfn::ones([4, 3], None, None)?)?; // no longer seen
//! assert_eq!(*shapes.lock().unwrap(), ["Linear: torch.Size([4, 2])"]);
//! # Ok::<(), torchfn::Error>(())
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

use parking_lot::{Mutex, RwLock};

use super::module::Module;
use crate::Tensor;
use crate::autograd::graph::{IdentityBackward, identity};
use crate::error::{Error, Result, bail};

/// A forward pre-hook: the module and its inputs; `Some` replaces the inputs.
pub type ForwardPreHook = dyn Fn(&dyn Module, &[Tensor]) -> Result<Option<Vec<Tensor>>> + Send + Sync;
/// A forward hook: the module, its inputs and its outputs; `Some` replaces the outputs.
pub type ForwardHook = dyn Fn(&dyn Module, &[Tensor], &[Tensor]) -> Result<Option<Vec<Tensor>>> + Send + Sync;
/// A full backward pre-hook: the gradients of the module's outputs (`None` where an output got
/// none); `Some` replaces them. (The closure captures what it needs of the module: a backward
/// runs after the call that borrowed it.)
pub type BackwardPreHook = dyn Fn(&[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>> + Send + Sync;
/// A full backward hook: the gradients of the module's inputs (`None` where an input needs
/// none) and of its outputs; `Some` replaces the inputs' gradients.
pub type BackwardHook =
    dyn Fn(&[Option<Tensor>], &[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>> + Send + Sync;

/// What identifies a module (to its hooks, the tracker and fx's tracer): its address and its
/// type name (a struct and its first field can share an address, as can a zero-sized module and
/// the field after it; never a type).
pub type ModuleKey = (usize, &'static str);

/// The key of `module`.
pub fn module_key(module: &dyn Module) -> ModuleKey {
    ((module as *const dyn Module).cast::<()>().addr(), module.type_name())
}

/// The hooks of one module, or the global ones, each with its handle's id, in registration
/// order.
#[derive(Default, Clone)]
struct Hooks {
    forward_pre: Vec<(u64, Arc<ForwardPreHook>)>,
    forward: Vec<(u64, Arc<ForwardHook>)>,
    backward_pre: Vec<(u64, Arc<BackwardPreHook>)>,
    backward: Vec<(u64, Arc<BackwardHook>)>,
}

/// Moves the entries of `list` with handle `id` out into `removed`.
fn take<T>(list: &mut Vec<(u64, T)>, id: u64, removed: &mut Vec<(u64, T)>) {
    let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(list).into_iter().partition(|(i, _)| *i == id);
    *list = kept;
    removed.extend(gone);
}

impl Hooks {
    /// The hooks of handle `id`, taken out (to be dropped once the registry is unlocked: a
    /// hook's captures may hold handles, whose drop locks it again).
    fn take(&mut self, id: u64) -> Hooks {
        let mut removed = Hooks::default();
        take(&mut self.forward_pre, id, &mut removed.forward_pre);
        take(&mut self.forward, id, &mut removed.forward);
        take(&mut self.backward_pre, id, &mut removed.backward_pre);
        take(&mut self.backward, id, &mut removed.backward);
        removed
    }

    fn len(&self) -> usize {
        self.forward_pre.len() + self.forward.len() + self.backward_pre.len() + self.backward.len()
    }

    /// `self`'s hooks, then `other`'s (the global ones run before a module's own).
    fn then(mut self, other: Option<&Hooks>) -> Hooks {
        if let Some(o) = other {
            self.forward_pre.extend(o.forward_pre.iter().cloned());
            self.forward.extend(o.forward.iter().cloned());
            self.backward_pre.extend(o.backward_pre.iter().cloned());
            self.backward.extend(o.backward.iter().cloned());
        }
        self
    }
}

#[derive(Default)]
struct Registry {
    next: u64,
    global: Hooks,
    modules: HashMap<ModuleKey, Hooks>,
}

static REGISTRY: LazyLock<RwLock<Registry>> = LazyLock::new(Default::default);
/// How many hooks are registered: with none, a module call is its forward and one load.
static REGISTERED: AtomicUsize = AtomicUsize::new(0);

/// Adds a hook to `module`'s hooks (`None`: the global ones) through `add`.
fn register(module: Option<ModuleKey>, add: impl FnOnce(&mut Hooks, u64)) -> RemovableHandle {
    let mut registry = REGISTRY.write();
    let id = registry.next;
    registry.next += 1;
    let hooks = match module {
        Some(key) => registry.modules.entry(key).or_default(),
        None => &mut registry.global,
    };
    add(hooks, id);
    REGISTERED.fetch_add(1, Ordering::Relaxed);
    RemovableHandle { id, module, kept: false }
}

/// What removes a hook (PyTorch's `RemovableHandle`), as a guard: the hook stays registered
/// while the handle lives, and dropping it removes the hook, so a hook never outlives the
/// code that set it up (a module is known by its address, which a later module may reuse).
/// [`keep`](RemovableHandle::keep) leaves the hook in place for good.
#[derive(Debug)]
#[must_use = "dropping the handle removes the hook at once; keep it, or call .keep()"]
pub struct RemovableHandle {
    id: u64,
    module: Option<ModuleKey>,
    kept: bool,
}

impl RemovableHandle {
    /// Removes the hook now; removing it again does nothing.
    pub fn remove(&self) {
        let removed = {
            let mut registry = REGISTRY.write();
            match self.module {
                Some(key) => {
                    let removed = registry.modules.get_mut(&key).map(|h| h.take(self.id)).unwrap_or_default();
                    if registry.modules.get(&key).is_some_and(|h| h.len() == 0) {
                        registry.modules.remove(&key);
                    }
                    removed
                }
                None => registry.global.take(self.id),
            }
        };
        REGISTERED.fetch_sub(removed.len(), Ordering::Relaxed);
        // The registry is unlocked: the hooks' captures may be dropped now.
        drop(removed);
    }

    /// Leaves the hook registered for as long as the program runs (for a module that lives as
    /// long): dropping the handle no longer removes it.
    pub fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for RemovableHandle {
    fn drop(&mut self) {
        if !self.kept {
            self.remove();
        }
    }
}

/// The hooks of a module ([`Module`]s have them all): registering returns the handle that
/// removes the hook.
pub trait ModuleHooks {
    /// Runs `hook` before each forward, on the module and its inputs; a hook that returns
    /// tensors replaces the inputs (`register_forward_pre_hook`).
    fn register_forward_pre_hook(
        &self,
        hook: impl Fn(&dyn Module, &[Tensor]) -> Result<Option<Vec<Tensor>>> + Send + Sync + 'static,
    ) -> RemovableHandle;

    /// Runs `hook` after each forward, on the module, its inputs and its outputs; a hook that
    /// returns tensors replaces the outputs (`register_forward_hook`).
    fn register_forward_hook(
        &self,
        hook: impl Fn(&dyn Module, &[Tensor], &[Tensor]) -> Result<Option<Vec<Tensor>>> + Send + Sync + 'static,
    ) -> RemovableHandle;

    /// Runs `hook` in the backward pass when the gradients of the module's outputs are ready,
    /// before they go on into the module; a hook that returns gradients replaces them
    /// (`register_full_backward_pre_hook`).
    fn register_full_backward_pre_hook(
        &self,
        hook: impl Fn(&[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>> + Send + Sync + 'static,
    ) -> RemovableHandle;

    /// Runs `hook` in the backward pass when the gradients of the module's inputs are
    /// computed, on them and the outputs' gradients; a hook that returns gradients replaces the
    /// inputs' (`register_full_backward_hook`).
    fn register_full_backward_hook(
        &self,
        hook: impl Fn(&[Option<Tensor>], &[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>> + Send + Sync + 'static,
    ) -> RemovableHandle;
}

impl<M: Module + ?Sized> ModuleHooks for M {
    fn register_forward_pre_hook(
        &self,
        hook: impl Fn(&dyn Module, &[Tensor]) -> Result<Option<Vec<Tensor>>> + Send + Sync + 'static,
    ) -> RemovableHandle {
        register(Some(module_key(self.as_dyn())), |h, id| h.forward_pre.push((id, Arc::new(hook))))
    }

    fn register_forward_hook(
        &self,
        hook: impl Fn(&dyn Module, &[Tensor], &[Tensor]) -> Result<Option<Vec<Tensor>>> + Send + Sync + 'static,
    ) -> RemovableHandle {
        register(Some(module_key(self.as_dyn())), |h, id| h.forward.push((id, Arc::new(hook))))
    }

    fn register_full_backward_pre_hook(
        &self,
        hook: impl Fn(&[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>> + Send + Sync + 'static,
    ) -> RemovableHandle {
        register(Some(module_key(self.as_dyn())), |h, id| h.backward_pre.push((id, Arc::new(hook))))
    }

    fn register_full_backward_hook(
        &self,
        hook: impl Fn(&[Option<Tensor>], &[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>> + Send + Sync + 'static,
    ) -> RemovableHandle {
        register(Some(module_key(self.as_dyn())), |h, id| h.backward.push((id, Arc::new(hook))))
    }
}

/// A forward pre-hook on every module's call, run before the module's own
/// (`torch.nn.modules.module.register_module_forward_pre_hook`).
pub fn register_module_forward_pre_hook(
    hook: impl Fn(&dyn Module, &[Tensor]) -> Result<Option<Vec<Tensor>>> + Send + Sync + 'static,
) -> RemovableHandle {
    register(None, |h, id| h.forward_pre.push((id, Arc::new(hook))))
}

/// A forward hook on every module's call, run before the module's own
/// (`register_module_forward_hook`).
pub fn register_module_forward_hook(
    hook: impl Fn(&dyn Module, &[Tensor], &[Tensor]) -> Result<Option<Vec<Tensor>>> + Send + Sync + 'static,
) -> RemovableHandle {
    register(None, |h, id| h.forward.push((id, Arc::new(hook))))
}

/// A full backward pre-hook on every module's call (`register_module_full_backward_pre_hook`).
pub fn register_module_full_backward_pre_hook(
    hook: impl Fn(&[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>> + Send + Sync + 'static,
) -> RemovableHandle {
    register(None, |h, id| h.backward_pre.push((id, Arc::new(hook))))
}

/// A full backward hook on every module's call (`register_module_full_backward_hook`).
pub fn register_module_full_backward_hook(
    hook: impl Fn(&[Option<Tensor>], &[Option<Tensor>]) -> Result<Option<Vec<Option<Tensor>>>> + Send + Sync + 'static,
) -> RemovableHandle {
    register(None, |h, id| h.backward.push((id, Arc::new(hook))))
}

/// What a module takes or returns, as its hooks see it: a tensor, a tuple or a `Vec` of them.
pub trait ModuleIo: Sized {
    /// The tensors, in order.
    fn tensors(&self) -> Vec<Tensor>;
    /// The same structure holding `tensors` instead (as many as [`tensors`](ModuleIo::tensors)
    /// gave; `what` names them in the error otherwise).
    fn with_tensors(self, tensors: Vec<Tensor>, what: &str) -> Result<Self>;
}

fn expect_count(what: &str, got: usize, expected: usize) -> Result<()> {
    if got != expected {
        bail!(Runtime, "{what}: expected {expected} tensors, got {got}");
    }
    Ok(())
}

impl ModuleIo for Tensor {
    fn tensors(&self) -> Vec<Tensor> {
        vec![self.clone()]
    }
    fn with_tensors(self, tensors: Vec<Tensor>, what: &str) -> Result<Self> {
        expect_count(what, tensors.len(), 1)?;
        Ok(tensors.into_iter().next().expect("one tensor"))
    }
}

impl ModuleIo for Vec<Tensor> {
    fn tensors(&self) -> Vec<Tensor> {
        self.clone()
    }
    fn with_tensors(self, tensors: Vec<Tensor>, what: &str) -> Result<Self> {
        expect_count(what, tensors.len(), self.len())?;
        Ok(tensors)
    }
}

macro_rules! tuple_io {
    ($($n:literal: $($t:ident),+;)*) => {$(
        impl ModuleIo for ($(tuple_io!(@ty $t),)+) {
            fn tensors(&self) -> Vec<Tensor> {
                let ($($t,)+) = self;
                vec![$($t.clone()),+]
            }
            fn with_tensors(self, tensors: Vec<Tensor>, what: &str) -> Result<Self> {
                expect_count(what, tensors.len(), $n)?;
                let mut it = tensors.into_iter();
                Ok(($(tuple_io!(@next it $t),)+))
            }
        }
    )*};
    (@ty $t:ident) => { Tensor };
    (@next $it:ident $t:ident) => { $it.next().expect("counted") };
}

tuple_io! {
    2: a, b;
    3: a, b, c;
    4: a, b, c, d;
}

/// Calls `module` (PyTorch's `module(*args)`): its forward pre-hooks (the global ones first)
/// on `input`, then `forward`, then its forward hooks on the output, with its backward hooks
/// set up around both. [`Layer::call`](super::Layer::call) is this for one tensor in and out;
/// a module that takes or returns several tensors calls its forward through it.
///
/// ```
/// use torchfn::nn::{self, Forward, Layer, Linear, Module, ModuleHooks};
/// use torchfn::prelude::*;
///
/// /// Returns its output and the input it was given.
/// #[derive(Module)]
/// struct Both {
///     fc: Linear,
/// }
///
/// impl Both {
///     fn call(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
///         nn::call_module(self, x.clone(), |x| Ok((self.fc.call(&x)?, x)))
///     }
/// }
///
/// let m = Both { fc: Linear::new(3, 2, true, &Generator::new().manual_seed(0))? };
/// let _hook = m.register_forward_hook(|_, _, outputs| {
///     assert_eq!(outputs.len(), 2);
///     Ok(None)
/// });
/// let (y, x) = m.call(&torchfn::ones([4, 3], None, None)?)?;
/// assert_eq!((&y.shape()?[..], &x.shape()?[..]), (&[4, 2][..], &[4, 3][..]));
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn call_module<M: Module + ?Sized, I: ModuleIo, O: ModuleIo>(
    module: &M,
    input: I,
    forward: impl FnOnce(I) -> Result<O>,
) -> Result<O> {
    if REGISTERED.load(Ordering::Relaxed) == 0 {
        return forward(input);
    }
    hooked(module.as_dyn(), input, forward)
}

/// [`call_module`] with hooks registered somewhere: the ones of `module` run.
fn hooked<I: ModuleIo, O: ModuleIo>(module: &dyn Module, input: I, forward: impl FnOnce(I) -> Result<O>) -> Result<O> {
    let hooks = {
        let registry = REGISTRY.read();
        registry.global.clone().then(registry.modules.get(&module_key(module)))
    };
    let mut input = input;
    for (_, hook) in &hooks.forward_pre {
        if let Some(replaced) = hook(module, &input.tensors())? {
            input = input.with_tensors(replaced, "forward pre-hook result")?;
        }
    }
    let backward = (!hooks.backward.is_empty() || !hooks.backward_pre.is_empty()).then(|| {
        Arc::new(BackwardHooks {
            hooks: hooks.backward.iter().map(|(_, h)| h.clone()).collect(),
            pre_hooks: hooks.backward_pre.iter().map(|(_, h)| h.clone()).collect(),
            state: Mutex::default(),
        })
    });
    if let Some(b) = &backward {
        let tensors = input.tensors();
        b.state.lock().inputs = tensors.len();
        if let Some(wrapped) = identity(&tensors, "BackwardHookFunctionBackward", b.clone().input_backward()) {
            b.state.lock().inputs_recorded = true;
            input = input.with_tensors(wrapped, "module input")?;
        }
    }
    let args = if hooks.forward.is_empty() { Vec::new() } else { input.tensors() };
    let mut output = forward(input)?;
    for (_, hook) in &hooks.forward {
        if let Some(replaced) = hook(module, &args, &output.tensors())? {
            output = output.with_tensors(replaced, "forward hook result")?;
        }
    }
    if let Some(b) = &backward
        && let Some(wrapped) = identity(&output.tensors(), "BackwardHookFunctionBackward", b.clone().output_backward())
    {
        output = output.with_tensors(wrapped, "module output")?;
    }
    Ok(output)
}

/// The full backward hooks of one module call (PyTorch's `BackwardHook`): the module's inputs
/// and outputs each pass through an identity node whose backward runs them.
struct BackwardHooks {
    hooks: Vec<Arc<BackwardHook>>,
    pre_hooks: Vec<Arc<BackwardPreHook>>,
    state: Mutex<BackwardState>,
}

#[derive(Default)]
struct BackwardState {
    /// How many inputs the module took.
    inputs: usize,
    /// Whether an input required grad (so the inputs' node runs the hooks).
    inputs_recorded: bool,
    /// The outputs' gradients, by backward (graph task), from the outputs' node until the
    /// inputs' node uses them or the backward ends.
    grad_outputs: HashMap<u64, Vec<Option<Tensor>>>,
}

/// A hook's replacement gradients must be as many as it was given.
fn replaced(what: &str, new: Vec<Option<Tensor>>, old: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
    if new.len() != old.len() {
        return Err(Error::runtime_error(format!(
            "{what} returned an invalid number of gradients, got {}, but expected {}",
            new.len(),
            old.len()
        )));
    }
    Ok(new)
}

impl BackwardHooks {
    /// The backward of the outputs' node: the pre-hooks on the outputs' gradients; the hooks
    /// too when no input needs a gradient (the inputs' node never runs).
    fn output_backward(self: Arc<Self>) -> IdentityBackward {
        Box::new(move |mut grads| {
            for hook in &self.pre_hooks {
                if let Some(new) = hook(&grads)? {
                    grads = replaced("backward pre-hook", new, &grads)?;
                }
            }
            let mut state = self.state.lock();
            if state.inputs_recorded {
                if let Some(task) = crate::autograd::graph::current_task() {
                    state.grad_outputs.insert(task, grads.clone());
                    // Forgotten when the backward ends, whether or not the inputs' node ran.
                    let hooks = Arc::downgrade(&self);
                    let _ = crate::autograd::graph::queue_callback(move || {
                        if let Some(hooks) = hooks.upgrade() {
                            hooks.state.lock().grad_outputs.remove(&task);
                        }
                        Ok(())
                    });
                }
            } else {
                let none = vec![None; state.inputs];
                drop(state);
                for hook in &self.hooks {
                    if hook(&none, &grads)?.is_some_and(|g| g.iter().any(Option::is_some)) {
                        bail!(
                            Runtime,
                            "backward hook for Modules where no input requires gradient should always return None \
                             or None for all gradients."
                        );
                    }
                }
            }
            Ok(grads)
        })
    }

    /// The backward of the inputs' node: the hooks, on the inputs' and outputs' gradients.
    fn input_backward(self: Arc<Self>) -> IdentityBackward {
        Box::new(move |mut grads| {
            // No outputs' gradients: the gradient reached the inputs some other way (a double
            // backward), and the hooks do not run.
            let task = crate::autograd::graph::current_task();
            let Some(grad_outputs) = task.and_then(|t| self.state.lock().grad_outputs.remove(&t)) else {
                return Ok(grads);
            };
            for hook in &self.hooks {
                if let Some(new) = hook(&grads, &grad_outputs)? {
                    grads = replaced("backward hook", new, &grads)?;
                }
            }
            Ok(grads)
        })
    }
}
