//! Per-thread protocol state: the mode stacks, the disable guards and the recursion depth.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::LocalKey;

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
        type_name::<Self>()
    }
}

/// The last segment of `T`'s type name: a mode's default name.
pub(crate) fn type_name<T: ?Sized>() -> String {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full).to_string()
}

impl dyn TorchFunctionMode {
    /// The mode as its own type, when it is an `M`: how code that got a mode from
    /// [`current_mode`] or [`mode_stack`] reads what it recorded.
    pub fn downcast_ref<M: TorchFunctionMode>(&self) -> Option<&M> {
        (self as &dyn Any).downcast_ref::<M>()
    }
}

/// Prints the mode's name (so `pop_mode().unwrap_err()` and `{:?}` of a stack work).
impl std::fmt::Debug for dyn TorchFunctionMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// What [`push_mode`] (and [`push_dispatch_mode`](crate::dispatch::push_dispatch_mode), with
/// `Stacked = dyn TorchDispatchMode`) takes: a mode, or a mode already shared (`Rc<M>`, or the
/// `Rc<dyn ...>` that the pop and stack functions give), so the same mode object can be pushed
/// again after it was popped, or be on the stack twice.
pub trait IntoMode<Stacked: ?Sized = dyn TorchFunctionMode> {
    /// The mode's type, which the guard derefs to.
    type Mode: ?Sized;
    /// The shared mode, and the same as a stack entry.
    fn into_mode(self) -> (Rc<Self::Mode>, Rc<Stacked>);
}

/// `IntoMode<dyn $trait>` for a mode, a shared mode and a stack entry.
macro_rules! into_mode {
    ($trait:path) => {
        impl<M: $trait> $crate::protocol::IntoMode<dyn $trait> for M {
            type Mode = M;
            fn into_mode(self) -> (::std::rc::Rc<M>, ::std::rc::Rc<dyn $trait>) {
                let mode = ::std::rc::Rc::new(self);
                (mode.clone(), mode)
            }
        }
        impl<M: $trait> $crate::protocol::IntoMode<dyn $trait> for ::std::rc::Rc<M> {
            type Mode = M;
            fn into_mode(self) -> (::std::rc::Rc<M>, ::std::rc::Rc<dyn $trait>) {
                (self.clone(), self)
            }
        }
        impl $crate::protocol::IntoMode<dyn $trait> for ::std::rc::Rc<dyn $trait> {
            type Mode = dyn $trait;
            fn into_mode(self) -> (::std::rc::Rc<dyn $trait>, ::std::rc::Rc<dyn $trait>) {
                (self.clone(), self)
            }
        }
    };
}
pub(crate) use into_mode;

into_mode!(TorchFunctionMode);

/// The address identifying a mode object on the stack.
fn address<M: ?Sized>(mode: &Rc<M>) -> *const () {
    Rc::as_ptr(mode) as *const ()
}

/// One thread's stack of modes of one kind: the bottom `count` entries are active; a mode whose
/// hook is running sits above them, inactive, until its hook returns. Function modes and
/// dispatch modes each have one.
pub(crate) struct Stack<M: ?Sized + 'static> {
    /// How many modes are active: the one number the fast paths read.
    count: Cell<usize>,
    entries: RefCell<Vec<Rc<M>>>,
    /// Counts the changes to `entries`, so that a mode whose hook left the stack as it was is
    /// made active again without looking for it.
    edits: Cell<u64>,
}

impl<M: ?Sized + 'static> Stack<M> {
    pub(crate) const fn new() -> Self {
        Stack { count: Cell::new(0), entries: RefCell::new(Vec::new()), edits: Cell::new(0) }
    }

    /// True when a mode is active.
    #[inline(always)]
    pub(crate) fn active(key: &'static LocalKey<Self>) -> bool {
        key.with(|s| s.count.get() != 0)
    }

    /// How many modes are active.
    pub(crate) fn len(key: &'static LocalKey<Self>) -> usize {
        key.with(|s| s.count.get())
    }

    /// Pushes `mode` on top of the active modes (modes whose hooks are running stay above it)
    /// until the returned guard is dropped.
    pub(crate) fn push<G: ?Sized>(key: &'static LocalKey<Self>, (mode, entry): (Rc<G>, Rc<M>)) -> ModeGuard<G> {
        key.with(|s| {
            let active = s.count.get();
            s.entries.borrow_mut().insert(active, entry);
            s.count.set(active + 1);
            s.edits.set(s.edits.get() + 1);
        });
        fn remove<M: ?Sized + 'static>(key: &'static LocalKey<Stack<M>>, ours: *const ()) {
            // `try_with`: a guard kept in a thread-local may be dropped after the stack is gone.
            let _ = key.try_with(|s| {
                let mut modes = s.entries.borrow_mut();
                if let Some(i) = modes.iter().rposition(|m| address(m) == ours) {
                    modes.remove(i);
                    s.edits.set(s.edits.get() + 1);
                    if i < s.count.get() {
                        s.count.set(s.count.get() - 1)
                    }
                }
            });
        }
        let remover: Remover = Box::new(move |ours| remove(key, ours));
        ModeGuard { mode, remove: Some(remover) }
    }

    /// Pops the top active mode; popping an empty stack is PyTorch's `RuntimeError`.
    pub(crate) fn pop(key: &'static LocalKey<Self>) -> Result<Rc<M>> {
        key.with(|s| {
            let Some(top) = s.count.get().checked_sub(1) else {
                return Err(Error::runtime_error("trying to pop from empty mode stack"));
            };
            s.count.set(top);
            s.edits.set(s.edits.get() + 1);
            Ok(s.entries.borrow_mut().remove(top))
        })
    }

    /// The top active mode.
    pub(crate) fn current(key: &'static LocalKey<Self>) -> Option<Rc<M>> {
        key.with(|s| s.entries.borrow().get(s.count.get().checked_sub(1)?).cloned())
    }

    /// The active modes, bottom to top.
    pub(crate) fn modes(key: &'static LocalKey<Self>) -> Vec<Rc<M>> {
        key.with(|s| s.entries.borrow()[..s.count.get()].to_vec())
    }

    /// Runs `f` with the top mode popped, pushing it back afterwards, also on error or
    /// unwinding; `None` when no mode is active.
    #[inline]
    pub(crate) fn with_top<R>(key: &'static LocalKey<Self>, f: impl FnOnce(&M) -> R) -> Option<R> {
        /// Makes the running mode active again: the modes up to it, wherever it now stands (its
        /// hook may have pushed or removed modes); nothing if its hook removed it. The same mode
        /// object may be on the stack twice: the entry at its old place is looked at first.
        struct PushBack<M: ?Sized + 'static>(&'static LocalKey<Stack<M>>, Rc<M>, usize, u64);
        impl<M: ?Sized + 'static> Drop for PushBack<M> {
            fn drop(&mut self) {
                let ours = address(&self.1);
                let _ = self.0.try_with(|s| {
                    if s.edits.get() == self.3 {
                        return s.count.set(self.2 + 1);
                    }
                    let modes = s.entries.borrow();
                    let at = match modes.get(self.2) {
                        Some(entry) if address(entry) == ours => Some(self.2),
                        _ => modes.iter().rposition(|m| address(m) == ours),
                    };
                    if let Some(i) = at {
                        s.count.set(i + 1);
                    }
                });
            }
        }
        let running = key.with(|s| {
            let index = s.count.get().checked_sub(1)?;
            let top = s.entries.borrow().get(index).cloned()?;
            s.count.set(index);
            Some(PushBack(key, top, index, s.edits.get()))
        })?;
        Some(f(&*running.1))
    }
}

thread_local! {
    static MODES: Stack<dyn TorchFunctionMode> = const { Stack::new() };
    static ENABLED: Cell<Enabled> = const { Cell::new(Enabled::All) };
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Whether dispatch is enabled, as PyTorch's `TorchFunctionDisabledState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Enabled {
    All,
    ModesOnly,
    Nothing,
}

/// True when a mode is active on this thread.
#[inline(always)]
pub(crate) fn modes_active() -> bool {
    Stack::active(&MODES)
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
    Stack::push(&MODES, mode.into_mode())
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
    Stack::pop(&MODES)
}

/// The top active mode of this thread's stack, if any (`_get_current_function_mode`). Inside a
/// mode's hook that mode is not active: this is the mode below it.
pub fn current_mode() -> Option<Rc<dyn TorchFunctionMode>> {
    Stack::current(&MODES)
}

/// The active modes of this thread's stack, bottom to top (`_get_current_function_mode_stack`).
pub fn mode_stack() -> Vec<Rc<dyn TorchFunctionMode>> {
    Stack::modes(&MODES)
}

/// Removes a guard's mode (the topmost entry of that mode object) from the stack it was pushed on.
type Remover = Box<dyn Fn(*const ())>;

/// Keeps a mode on its stack (function modes or dispatch modes); dropping it removes the mode
/// (the topmost entry of that mode object, if it is still there).
#[must_use = "the mode is popped when the guard is dropped; call `keep` to leave it pushed"]
pub struct ModeGuard<M: ?Sized> {
    mode: Rc<M>,
    /// `None` once [`keep`](ModeGuard::keep) left the mode on the stack.
    remove: Option<Remover>,
}

impl<M: ?Sized> ModeGuard<M> {
    /// Leaves the mode on the stack after the guard is gone (the primitive push,
    /// `_push_on_torch_function_stack`): [`pop_mode`] removes it. Returns the mode.
    pub fn keep(mut self) -> Rc<M> {
        self.remove = None;
        self.mode.clone()
    }

    /// The mode, shared: push it again, or keep it after the guard is gone.
    pub fn mode(&self) -> Rc<M> {
        self.mode.clone()
    }
}

impl<M: ?Sized> Deref for ModeGuard<M> {
    type Target = M;
    fn deref(&self) -> &M {
        &self.mode
    }
}

impl<M: ?Sized> Drop for ModeGuard<M> {
    fn drop(&mut self) {
        if let Some(remove) = &self.remove {
            remove(address(&self.mode));
        }
    }
}

impl<M: ?Sized> fmt::Debug for ModeGuard<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModeGuard").field("keeps", &self.remove.is_none()).finish_non_exhaustive()
    }
}

/// How many modes are active on this thread's stack (`_len_torch_function_stack`).
pub fn mode_stack_len() -> usize {
    Stack::len(&MODES)
}

/// Runs `f` with the top mode popped, pushing it back afterwards, also on error or unwinding.
#[inline]
pub(crate) fn with_top_mode<R>(f: impl FnOnce(&dyn TorchFunctionMode) -> R) -> Option<R> {
    Stack::with_top(&MODES, f)
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
        Depth::enter_or(|| too_deep(func))
    }

    /// One more level, or the error `too_deep` gives past [`recursion_limit`].
    #[inline]
    pub(crate) fn enter_or(too_deep: impl FnOnce() -> Error) -> Result<Depth> {
        let depth = DEPTH.get() + 1;
        if depth > recursion_limit() {
            return Err(too_deep());
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
