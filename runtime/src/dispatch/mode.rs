//! Dispatch modes (`TorchDispatchMode`): objects whose hook sees every operator call below
//! autograd while they are on this thread's dispatch mode stack, and the guard that turns them
//! off (`no_dispatch`).

use std::any::Any;
use std::cell::Cell;
use std::marker::PhantomData;
use std::rc::Rc;

use crate::dispatch::Operator;
use crate::error::{Error, Result};
use crate::protocol::state::{self, Depth, Stack};
use crate::protocol::{IntoMode, ModeGuard, Types};
use crate::value::{Kwargs, Value};

/// A dispatch mode (`TorchDispatchMode`): its hook receives every operator call on this thread
/// while it is on the dispatch mode stack, after autograd recorded the call, forward and
/// backward alike, plain tensors included.
///
/// While its hook runs the mode is off the stack, so [`Operator::call`] inside the hook reaches
/// the next mode down, or the backend; it is pushed back afterwards, also on error.
///
/// ```
/// use std::cell::RefCell;
/// use torchfn::dispatch::{Operator, TorchDispatchMode, push_dispatch_mode};
/// use torchfn::prelude::*;
///
/// #[derive(Default)]
/// struct Log(RefCell<Vec<String>>);
/// impl TorchDispatchMode for Log {
///     fn torch_dispatch(&self, func: &'static Operator, _: &Types, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
///         self.0.borrow_mut().push(func.to_string());
///         func.call(args, kwargs)
///     }
/// }
///
/// let x = torchfn::tensor([1.0f32, 2.0])?.requires_grad_(true)?;
/// let log = push_dispatch_mode(Log::default());
/// (&x * &x)?.sum()?.backward()?;
/// // forward, then backward: the operators autograd's formulas run reach the mode too
/// assert_eq!(log.0.borrow()[..2], ["aten.mul.Tensor", "aten.sum.dim_IntList"]);
/// assert!(log.0.borrow().len() > 2);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub trait TorchDispatchMode: Any {
    /// Computes `func` on `args` and `kwargs` (bound to its [`schema`](Operator::schema)), and
    /// returns what the operator returns: a tensor, or a tuple of them. `types` holds the
    /// classes of the tensor subclasses among the arguments that take part in dispatch.
    fn torch_dispatch(&self, func: &'static Operator, types: &Types, args: &[Value], kwargs: &Kwargs) -> Result<Value>;

    /// The name error messages use for this mode; the type's name by default.
    fn name(&self) -> String {
        state::type_name::<Self>()
    }
}

impl dyn TorchDispatchMode {
    /// The mode as its own type, when it is an `M`.
    pub fn downcast_ref<M: TorchDispatchMode>(&self) -> Option<&M> {
        (self as &dyn Any).downcast_ref::<M>()
    }
}

/// Prints the mode's name (so `pop_dispatch_mode().unwrap_err()` and `{:?}` of a stack work).
impl std::fmt::Debug for dyn TorchDispatchMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

state::into_mode!(TorchDispatchMode);

thread_local! {
    static MODES: Stack<dyn TorchDispatchMode> = const { Stack::new() };
    /// How many [`NoDispatch`] guards are alive.
    static DISABLED: Cell<u32> = const { Cell::new(0) };
}

/// True when an operator call must be offered to a dispatch mode or a wrapper subclass: the
/// one branch the primitives pay when there is neither.
#[inline(always)]
pub(crate) fn intercepting() -> bool {
    (Stack::active(&MODES) || super::wrapper::any_alive()) && DISABLED.with(Cell::get) == 0
}

/// Pushes `mode` on this thread's dispatch mode stack until the returned guard is dropped
/// (Python's `with mode:`); the guard gives access to the mode.
pub fn push_dispatch_mode<M: IntoMode<dyn TorchDispatchMode>>(mode: M) -> ModeGuard<M::Mode> {
    Stack::push(&MODES, mode.into_mode())
}

/// Pops the top dispatch mode and returns it (`_pop_torch_dispatch_stack`); popping an empty
/// stack is PyTorch's `RuntimeError`.
pub fn pop_dispatch_mode() -> Result<Rc<dyn TorchDispatchMode>> {
    Stack::pop(&MODES)
}

/// The top active dispatch mode, if any (`_get_current_dispatch_mode`). Inside a mode's hook
/// that mode is not active: this is the mode below it.
pub fn current_dispatch_mode() -> Option<Rc<dyn TorchDispatchMode>> {
    Stack::current(&MODES)
}

/// The active dispatch modes, bottom to top (`_get_current_dispatch_mode_stack`).
pub fn dispatch_mode_stack() -> Vec<Rc<dyn TorchDispatchMode>> {
    Stack::modes(&MODES)
}

/// While alive, operator calls go straight to the backends: no dispatch mode sees them
/// (`torch.utils._mode_utils.no_dispatch`). A mode uses it to compute without seeing itself.
#[must_use = "dispatch is re-enabled when the guard is dropped"]
pub struct NoDispatch(PhantomData<*const ()>);

/// Turns dispatch modes off on this thread until the guard is dropped.
pub fn no_dispatch() -> NoDispatch {
    DISABLED.with(|d| d.set(d.get() + 1));
    NoDispatch(PhantomData)
}

impl Drop for NoDispatch {
    fn drop(&mut self) {
        DISABLED.with(|d| d.set(d.get() - 1));
    }
}

/// `op` on `args` and `kwargs`: the top dispatch mode's hook (with the mode off the stack); with
/// no mode active, the hook of a wrapper subclass among the arguments, or else the backend.
pub(crate) fn dispatch(op: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
    if !intercepting() {
        return op.run(args, kwargs);
    }
    let _depth = Depth::enter_or(|| too_deep(op))?;
    let mut declined = None;
    let outcome = Stack::with_top(&MODES, |mode| {
        let result = mode.torch_dispatch(op, &[], args, kwargs);
        if let Ok(Value::NotImplemented) = result {
            declined = Some(mode.name());
        }
        result
    });
    match outcome {
        Some(Ok(Value::NotImplemented)) => Err(Error::type_error(format!(
            "Multiple dispatch failed for '{}'; all __torch_dispatch__ handlers returned NotImplemented:\n\n  - mode \
             object {}",
            op.name(),
            declined.unwrap_or_default()
        ))),
        Some(result) => result,
        // No mode: the wrapper subclasses among the arguments, then the backend.
        None if super::wrapper::any_alive() => {
            super::wrapper::dispatch(op, args, kwargs).unwrap_or_else(|| op.run(args, kwargs))
        }
        None => op.run(args, kwargs),
    }
}

/// The error of a dispatch hook nested deeper than the recursion limit.
#[cold]
fn too_deep(op: &Operator) -> Error {
    Error::runtime_error(format!(
        "maximum recursion depth ({}) exceeded while dispatching '{op}': a __torch_dispatch__ hook calls '{op}' \
         again while its mode is active (a mode pushed back onto the stack inside its own hook), or a wrapper \
         subclass's hook calls it on the wrapper itself; call the operator with the mode off the stack, on the \
         unwrapped tensors, or inside no_dispatch()",
        crate::protocol::recursion_limit()
    ))
}
