//! Per-thread protocol state: the mode stack, the disable guards and the recursion depth.

use std::any::Any;
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
pub trait TorchFunctionMode: Any {
    /// Handles `func`, or returns [`Value::NotImplemented`].
    fn torch_function(&self, func: &'static Func, types: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome;

    /// The name error messages use for this mode; the type's name by default.
    fn name(&self) -> String {
        let full = std::any::type_name::<Self>();
        full.rsplit("::").next().unwrap_or(full).to_string()
    }
}

impl dyn TorchFunctionMode {
    /// The mode as its own type, when it is an `M`: how code that got a mode from
    /// [`current_mode`] or [`mode_stack`] reads what it recorded.
    pub fn downcast_ref<M: TorchFunctionMode>(&self) -> Option<&M> {
        (self as &dyn Any).downcast_ref::<M>()
    }
}

/// What [`push_mode`] takes: a mode, or a mode already shared (`Rc<M>`, or the
/// `Rc<dyn TorchFunctionMode>` that [`pop_mode`] and [`mode_stack`] give), so the same mode
/// object can be pushed again after it was popped, or be on the stack twice.
pub trait IntoMode {
    /// The mode's type, which the guard derefs to.
    type Mode: TorchFunctionMode + ?Sized;
    /// The shared mode, and the same as a stack entry.
    fn into_mode(self) -> (Rc<Self::Mode>, Rc<dyn TorchFunctionMode>);
}

impl<M: TorchFunctionMode> IntoMode for M {
    type Mode = M;
    fn into_mode(self) -> (Rc<M>, Rc<dyn TorchFunctionMode>) {
        Rc::new(self).into_mode()
    }
}

impl<M: TorchFunctionMode> IntoMode for Rc<M> {
    type Mode = M;
    fn into_mode(self) -> (Rc<M>, Rc<dyn TorchFunctionMode>) {
        (self.clone(), self)
    }
}

impl IntoMode for Rc<dyn TorchFunctionMode> {
    type Mode = dyn TorchFunctionMode;
    fn into_mode(self) -> (Rc<dyn TorchFunctionMode>, Rc<dyn TorchFunctionMode>) {
        (self.clone(), self)
    }
}

/// The address identifying a mode object on the stack.
fn address<M: ?Sized>(mode: &Rc<M>) -> *const () {
    Rc::as_ptr(mode) as *const ()
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
    /// Counts the changes to `MODES`, so that a mode whose hook left the stack as it was is
    /// made active again without looking for it.
    static EDITS: Cell<u64> = const { Cell::new(0) };
    static ENABLED: Cell<Enabled> = const { Cell::new(Enabled::All) };
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// True when a mode is active on this thread.
#[inline(always)]
pub(crate) fn modes_active() -> bool {
    MODE_COUNT.with(|c| c.get() != 0)
}

#[inline]
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
pub fn push_mode<M: IntoMode>(mode: M) -> ModeGuard<M::Mode> {
    let (mode, entry) = mode.into_mode();
    MODES.with(|m| {
        // On top of the active modes; modes whose hooks are running stay above it.
        let active = MODE_COUNT.with(Cell::get);
        m.borrow_mut().insert(active, entry);
        MODE_COUNT.with(|c| c.set(active + 1));
    });
    EDITS.set(EDITS.get() + 1);
    ModeGuard { mode, pops: true }
}

/// Pops the top mode off this thread's stack and returns it
/// (`torch._C._pop_torch_function_stack`); it can be pushed again with [`push_mode`]. Popping
/// an empty stack is PyTorch's `RuntimeError`.
///
/// ```
/// use torchfn::prelude::*;
/// # struct Quiet;
/// # impl TorchFunctionMode for Quiet {
/// #     fn torch_function(&self, func: &'static Func, _: &Types, args: &[Value], kwargs: &Kwargs) -> Outcome {
/// #         func.call(args, kwargs)
/// #     }
/// # }
/// push_mode(Quiet).keep();                 // no guard: stays until popped
/// let mode = pop_mode()?;
/// assert!(mode.downcast_ref::<Quiet>().is_some());
/// let Err(empty) = pop_mode() else { unreachable!() };
/// assert_eq!(empty.to_string(), "trying to pop from empty mode stack");
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn pop_mode() -> Result<Rc<dyn TorchFunctionMode>> {
    let active = MODE_COUNT.with(Cell::get);
    let Some(top) = active.checked_sub(1) else {
        return Err(Error::runtime_error("trying to pop from empty mode stack"));
    };
    MODE_COUNT.with(|c| c.set(top));
    EDITS.set(EDITS.get() + 1);
    Ok(MODES.with(|m| m.borrow_mut().remove(top)))
}

/// The top active mode of this thread's stack, if any (`_get_current_function_mode`). Inside a
/// mode's hook that mode is not active: this is the mode below it.
pub fn current_mode() -> Option<Rc<dyn TorchFunctionMode>> {
    let active = MODE_COUNT.with(Cell::get);
    MODES.with(|m| m.borrow().get(active.checked_sub(1)?).cloned())
}

/// The active modes of this thread's stack, bottom to top (`_get_current_function_mode_stack`).
pub fn mode_stack() -> Vec<Rc<dyn TorchFunctionMode>> {
    let active = MODE_COUNT.with(Cell::get);
    MODES.with(|m| m.borrow()[..active].to_vec())
}

/// Keeps a mode on the stack; dropping it removes the mode (the topmost entry of that mode
/// object, if it is still there).
#[must_use = "the mode is popped when the guard is dropped; call `keep` to leave it pushed"]
pub struct ModeGuard<M: TorchFunctionMode + ?Sized> {
    mode: Rc<M>,
    /// False once [`keep`](ModeGuard::keep) left the mode on the stack.
    pops: bool,
}

impl<M: TorchFunctionMode + ?Sized> ModeGuard<M> {
    /// Leaves the mode on the stack after the guard is gone (the primitive push,
    /// `_push_on_torch_function_stack`): [`pop_mode`] removes it. Returns the mode.
    pub fn keep(mut self) -> Rc<M> {
        self.pops = false;
        self.mode.clone()
    }

    /// The mode, shared: push it again, or keep it after the guard is gone.
    pub fn mode(&self) -> Rc<M> {
        self.mode.clone()
    }
}

impl<M: TorchFunctionMode + ?Sized> Deref for ModeGuard<M> {
    type Target = M;
    fn deref(&self) -> &M {
        &self.mode
    }
}

impl<M: TorchFunctionMode + ?Sized> Drop for ModeGuard<M> {
    fn drop(&mut self) {
        if !self.pops {
            return;
        }
        let ours = address(&self.mode);
        // `try_with`: a guard kept in a thread-local may be dropped after the stack is gone.
        let _ = MODES.try_with(|m| {
            let mut modes = m.borrow_mut();
            if let Some(i) = modes.iter().rposition(|m| address(m) == ours) {
                modes.remove(i);
                EDITS.set(EDITS.get() + 1);
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
#[inline]
pub(crate) fn with_top_mode<R>(f: impl FnOnce(&dyn TorchFunctionMode) -> R) -> Option<R> {
    /// Makes the running mode active again: the modes up to it, wherever it now stands (its
    /// hook may have pushed or removed modes); nothing if its hook removed it. The same mode
    /// object may be on the stack twice: the entry at its old place is looked at first.
    struct PushBack(Rc<dyn TorchFunctionMode>, usize, u64);
    impl Drop for PushBack {
        fn drop(&mut self) {
            if EDITS.get() == self.2 {
                return MODE_COUNT.with(|c| c.set(self.1 + 1));
            }
            let ours = address(&self.0);
            let _ = MODES.try_with(|m| {
                let modes = m.borrow();
                let at = match modes.get(self.1) {
                    Some(entry) if address(entry) == ours => Some(self.1),
                    _ => modes.iter().rposition(|m| address(m) == ours),
                };
                if let Some(i) = at {
                    MODE_COUNT.with(|c| c.set(i + 1));
                }
            });
        }
    }
    let active = MODE_COUNT.with(Cell::get);
    let index = active.checked_sub(1)?;
    let top = MODES.with(|m| m.borrow().get(index).cloned())?;
    MODE_COUNT.with(|c| c.set(index));
    let running = PushBack(top, index, EDITS.get());
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
#[inline]
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
    #[inline]
    pub(crate) fn enter(func: &Func) -> Result<Depth> {
        let depth = DEPTH.get() + 1;
        if depth > recursion_limit() {
            return Err(too_deep(func));
        }
        DEPTH.set(depth);
        Ok(Depth(PhantomData))
    }
}

/// The error of a call nested deeper than [`recursion_limit`].
#[cold]
fn too_deep(func: &Func) -> Error {
    Error::runtime_error(format!(
        "maximum recursion depth ({}) exceeded while dispatching '{func}': a __torch_function__ hook calls \
         '{func}' again on its own arguments; call Tensor::torch_function (super) or \
         func.implementation(args, kwargs) instead",
        recursion_limit()
    ))
}

impl Drop for Depth {
    #[inline]
    fn drop(&mut self) {
        DEPTH.set(DEPTH.get() - 1);
    }
}
