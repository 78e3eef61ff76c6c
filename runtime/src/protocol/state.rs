//! Per-thread protocol state: the mode stack, the disable guards and the recursion depth.

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::ops::Deref;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::{Error, Result};
use crate::protocol::{Func, Outcome, Types};
use crate::value::{Kwargs, Value};

/// A mode (`TorchFunctionMode`): an object whose hook sees every overridable call in its
/// thread while it is on the mode stack, plain tensors included.
///
/// While its hook runs the mode is popped, so calls it makes reach the next mode down (or the
/// subclasses); it is pushed back afterwards, also on error.
pub trait TorchFunctionMode: 'static {
    /// Handles `func`, or returns [`Value::NotImplemented`].
    fn torch_function(&self, func: &'static Func, types: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome;

    /// The name error messages use for this mode; the type's name by default.
    fn name(&self) -> String {
        let full = std::any::type_name::<Self>();
        full.rsplit("::").next().unwrap_or(full).to_string()
    }
}

/// Whether dispatch is enabled, as PyTorch's `TorchFunctionDisabledState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Enabled {
    All,
    ModesOnly,
    Nothing,
}

thread_local! {
    /// How many modes are active: the bottom `MODE_COUNT` entries of `MODES`. A mode whose hook
    /// is running sits above them, inactive, until its hook returns. This is the one number the
    /// fast path reads.
    static MODE_COUNT: Cell<usize> = const { Cell::new(0) };
    static MODES: RefCell<Vec<Rc<dyn TorchFunctionMode>>> = const { RefCell::new(Vec::new()) };
    static ENABLED: Cell<Enabled> = const { Cell::new(Enabled::All) };
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// True when a mode is active on this thread.
#[inline(always)]
pub(crate) fn modes_active() -> bool {
    MODE_COUNT.with(|c| c.get() != 0)
}

pub(crate) fn enabled() -> Enabled {
    ENABLED.with(Cell::get)
}

/// Pushes `mode` on this thread's mode stack until the returned guard is dropped (Python's
/// `with mode:`). The guard gives access to the mode, to read what it recorded.
///
/// ```
/// use std::cell::Cell;
/// use torchfn::prelude::*;
///
/// #[derive(Default)]
/// struct Counter(Cell<usize>);
/// impl TorchFunctionMode for Counter {
///     fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
///         self.0.set(self.0.get() + 1);
///         func.call(args, kwargs) // the mode is popped here, so this runs the function
///     }
/// }
///
/// let x = torchfn::tensor([1.0f32, 2.0])?;
/// let counter = push_mode(Counter::default());
/// let _ = (&x + &x)?.sum()?;
/// assert_eq!(counter.0.get(), 2); // Tensor.__add__ and Tensor.sum
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn push_mode<M: TorchFunctionMode>(mode: M) -> ModeGuard<M> {
    let mode = Rc::new(mode);
    MODES.with(|m| {
        // On top of the active modes; modes whose hooks are running stay above it.
        let active = MODE_COUNT.with(Cell::get);
        m.borrow_mut().insert(active, mode.clone());
        MODE_COUNT.with(|c| c.set(active + 1));
    });
    ModeGuard { mode }
}

/// Keeps a mode on the stack; dropping it removes the mode.
#[must_use = "the mode is popped when the guard is dropped"]
pub struct ModeGuard<M: TorchFunctionMode> {
    mode: Rc<M>,
}

impl<M: TorchFunctionMode> Deref for ModeGuard<M> {
    type Target = M;
    fn deref(&self) -> &M {
        &self.mode
    }
}

impl<M: TorchFunctionMode> Drop for ModeGuard<M> {
    fn drop(&mut self) {
        let ours = Rc::as_ptr(&self.mode) as *const ();
        // `try_with`: a guard kept in a thread-local may be dropped after the stack is gone.
        let _ = MODES.try_with(|m| {
            let mut modes = m.borrow_mut();
            if let Some(i) = modes.iter().rposition(|m| Rc::as_ptr(m) as *const () == ours) {
                modes.remove(i);
                MODE_COUNT.with(|c| {
                    if i < c.get() {
                        c.set(c.get() - 1)
                    }
                });
            }
        });
    }
}

/// How many modes are active on this thread's stack (`_len_torch_function_stack`).
pub fn mode_stack_len() -> usize {
    MODE_COUNT.with(Cell::get)
}

/// Runs `f` with the top mode popped, pushing it back afterwards, also on error or unwinding.
pub(crate) fn with_top_mode<R>(f: impl FnOnce(&dyn TorchFunctionMode) -> R) -> Option<R> {
    /// Makes the running mode active again: the modes up to it, wherever it now stands (its
    /// hook may have pushed or removed modes); nothing if its hook removed it.
    struct PushBack(Rc<dyn TorchFunctionMode>);
    impl Drop for PushBack {
        fn drop(&mut self) {
            let ours = Rc::as_ptr(&self.0) as *const ();
            let _ = MODES.try_with(|m| {
                if let Some(i) = m.borrow().iter().rposition(|m| Rc::as_ptr(m) as *const () == ours) {
                    MODE_COUNT.with(|c| c.set(i + 1));
                }
            });
        }
    }
    let active = MODE_COUNT.with(Cell::get);
    let top = MODES.with(|m| m.borrow().get(active.checked_sub(1)?).cloned())?;
    MODE_COUNT.with(|c| c.set(active - 1));
    let running = PushBack(top);
    Some(f(&*running.0))
}

/// Sets the enabled state until dropped, then restores the previous one. Like Python's `with`
/// blocks, these guards must end in the reverse order of their creation (as scopes do): each
/// restores the state it found.
struct EnabledScope {
    previous: Enabled,
    _thread_bound: PhantomData<*const ()>,
}

impl EnabledScope {
    fn set(state: impl FnOnce(Enabled) -> Enabled) -> Self {
        let previous = enabled();
        ENABLED.with(|e| e.set(state(previous)));
        EnabledScope { previous, _thread_bound: PhantomData }
    }
}

impl Drop for EnabledScope {
    fn drop(&mut self) {
        ENABLED.with(|e| e.set(self.previous));
    }
}

/// While alive, subclasses and ducks are not dispatched to; modes still run
/// (`torch._C.DisableTorchFunctionSubclass`). The default hook runs the function under it.
#[must_use = "dispatch is re-enabled when the guard is dropped"]
pub struct DisableTorchFunctionSubclass(#[allow(dead_code)] EnabledScope);

impl DisableTorchFunctionSubclass {
    /// Disables subclass dispatch on this thread until the guard is dropped.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        DisableTorchFunctionSubclass(EnabledScope::set(|e| if e == Enabled::All { Enabled::ModesOnly } else { e }))
    }
}

/// While alive, nothing dispatches, modes included (`torch._C.DisableTorchFunction`).
#[must_use = "dispatch is re-enabled when the guard is dropped"]
pub struct DisableTorchFunction(#[allow(dead_code)] EnabledScope);

impl DisableTorchFunction {
    /// Disables all dispatch on this thread until the guard is dropped.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        DisableTorchFunction(EnabledScope::set(|_| Enabled::Nothing))
    }
}

/// Guard returned by [`enable_torch_function`].
#[must_use = "the previous state is restored when the guard is dropped"]
pub struct EnableTorchFunction(#[allow(dead_code)] EnabledScope);

/// Re-enables dispatch (subclasses and modes) inside a disabled scope until the returned
/// guard is dropped (`torch._C._EnableTorchFunction`).
pub fn enable_torch_function() -> EnableTorchFunction {
    EnableTorchFunction(EnabledScope::set(|_| Enabled::All))
}

/// True unless dispatch to subclasses is disabled on this thread.
pub fn is_torch_function_enabled() -> bool {
    enabled() == Enabled::All
}

/// True unless all dispatch is disabled on this thread.
pub fn is_torch_function_mode_enabled() -> bool {
    enabled() != Enabled::Nothing
}

/// The default [`recursion_limit`].
pub const DEFAULT_RECURSION_LIMIT: u32 = 64;

static RECURSION_LIMIT: AtomicU32 = AtomicU32::new(DEFAULT_RECURSION_LIMIT);

/// How many hook calls may nest on one thread before dispatch fails instead of overflowing the
/// stack (a hook calling `func` again on its own arguments recurses without end).
pub fn recursion_limit() -> u32 {
    RECURSION_LIMIT.load(Ordering::Relaxed)
}

/// Sets [`recursion_limit`] for all threads.
pub fn set_recursion_limit(limit: u32) {
    RECURSION_LIMIT.store(limit, Ordering::Relaxed)
}

/// One level of hook nesting; leaving the scope leaves the level.
pub(crate) struct Depth(PhantomData<*const ()>);

impl Depth {
    pub(crate) fn enter(func: &Func) -> Result<Depth> {
        let depth = DEPTH.with(|d| d.get()) + 1;
        let limit = recursion_limit();
        if depth > limit {
            return Err(Error::runtime_error(format!(
                "maximum recursion depth ({limit}) exceeded while dispatching '{func}': a __torch_function__ hook \
                 calls '{func}' again on its own arguments; call Tensor::torch_function (super) or \
                 func.implementation(args, kwargs) instead"
            )));
        }
        DEPTH.with(|d| d.set(depth));
        Ok(Depth(PhantomData))
    }
}

impl Drop for Depth {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get() - 1));
    }
}
