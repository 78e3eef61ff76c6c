//! The typed call in progress: how a hook's `func.call(args, kwargs)` or
//! `func.implementation(args, kwargs)` with the arguments it was given skips binding (for
//! function hooks, and for dispatch hooks calling their operator).
//!
//! A typed call that leaves the fast path converts its arguments into `args` and `kwargs` for
//! the hooks. The default hook (and most modes and user hooks) hand those very slices back to
//! `call` or `implementation`, which would bind them into typed arguments again: the typed
//! arguments the call started with. While a typed call dispatches, this module keeps a way to
//! rerun it with those original arguments; `Func` uses it when it receives the same function
//! and the same `args` and `kwargs` (by address), and binds as usual otherwise.

use std::cell::Cell;

use crate::error::Result;
use crate::protocol::Route;
use crate::value::{Kwargs, Value};

/// Reruns the typed call by route, returning its result as a value.
pub type Rerun<'a> = &'a dyn Fn(Route) -> Result<Value>;

/// The typed call in progress, on the stack of `dispatch` (of either layer).
pub(crate) struct Current<'a> {
    /// The address of the function or operator called.
    func: *const (),
    args: &'a [Value],
    kwargs: &'a Kwargs,
    rerun: Rerun<'a>,
}

impl<'a> Current<'a> {
    #[inline]
    pub(crate) fn new<F>(func: &'static F, args: &'a [Value], kwargs: &'a Kwargs, rerun: Rerun<'a>) -> Self {
        Current { func: std::ptr::from_ref(func).cast(), args, kwargs, rerun }
    }
}

thread_local! {
    /// The innermost typed call in progress on this thread, or null.
    static CURRENT: Cell<*const Current<'static>> = const { Cell::new(std::ptr::null()) };
}

/// Runs `f` with `current`, when given, as the typed call in progress, then restores the
/// previous one (of an enclosing call), also when `f` unwinds. Without `current` the typed call
/// in progress stays the enclosing one.
#[inline]
pub(crate) fn with_current<R>(current: Option<&Current<'_>>, f: impl FnOnce() -> R) -> R {
    struct Restore(*const Current<'static>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.set(self.0);
        }
    }
    let previous = CURRENT.get();
    let pointer = current.map_or(previous, |c| std::ptr::from_ref(c).cast::<Current<'static>>());
    CURRENT.set(pointer);
    let _restore = Restore(previous);
    f()
}

/// Reruns the typed call in progress when `func`, `args` and `kwargs` are the ones it gave its
/// hooks; `None` otherwise.
pub(crate) fn rerun_current<F>(func: &F, args: &[Value], kwargs: &Kwargs, route: Route) -> Option<Result<Value>> {
    let current = CURRENT.get();
    if current.is_null() {
        return None;
    }
    // SAFETY: only `with_current` makes `CURRENT` non-null, pointing at a `Current` it borrows
    // for its whole call, and it restores the previous value before it returns or unwinds (the
    // `Restore` guard; this assumes, as all Rust code may, that a frame is never discarded
    // without running its destructors). So a non-null pointer read on this thread points at a
    // live `Current` whose borrows are alive for at least this call; the `'static` in its type
    // is never relied upon, as nothing read from it outlives this function.
    let current = unsafe { &*current };
    let func: *const () = std::ptr::from_ref(func).cast();
    let same = current.func == func && std::ptr::eq(current.args, args) && std::ptr::eq(current.kwargs, kwargs);
    same.then(|| (current.rerun)(route))
}
