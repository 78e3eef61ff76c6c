//! The typed call in progress: how a hook's `func.call(args, kwargs)` or
//! `func.implementation(args, kwargs)` with the arguments it was given skips binding.
//!
//! A typed call that leaves the fast path converts its arguments into `args` and `kwargs` for
//! the hooks. The default hook (and most modes and user hooks) hand those very slices back to
//! `call` or `implementation`, which would bind them into typed arguments again: the typed
//! arguments the call started with. While a typed call dispatches, this module keeps a way to
//! rerun it with those original arguments; `Func` uses it when it receives the same function
//! and the same `args` and `kwargs` (by address), and binds as usual otherwise.

use std::cell::Cell;
use std::marker::PhantomData;

use crate::error::Result;
use crate::protocol::{Func, Route};
use crate::value::{Kwargs, Value};

/// Reruns the typed call by route, returning its result as a value.
pub type Rerun<'a> = &'a dyn Fn(Route) -> Result<Value>;

/// The typed call in progress, on the stack of `dispatch`.
pub(crate) struct Current<'a> {
    func: &'static Func,
    args: &'a [Value],
    kwargs: &'a Kwargs,
    rerun: Rerun<'a>,
}

impl<'a> Current<'a> {
    pub(crate) fn new(func: &'static Func, args: &'a [Value], kwargs: &'a Kwargs, rerun: Rerun<'a>) -> Self {
        Current { func, args, kwargs, rerun }
    }
}

thread_local! {
    /// The innermost typed call in progress on this thread, or null.
    static CURRENT: Cell<*const Current<'static>> = const { Cell::new(std::ptr::null()) };
}

/// Makes `current` the typed call in progress until dropped; then the previous one (of an
/// enclosing call) is restored.
pub(crate) struct InProgress<'a> {
    previous: *const Current<'static>,
    _current: PhantomData<&'a Current<'a>>,
}

impl<'a> InProgress<'a> {
    pub(crate) fn enter(current: &'a Current<'a>) -> Self {
        let current = (current as *const Current<'a>).cast::<Current<'static>>();
        InProgress { previous: CURRENT.with(|c| c.replace(current)), _current: PhantomData }
    }
}

impl Drop for InProgress<'_> {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.previous));
    }
}

/// Reruns the typed call in progress when `func`, `args` and `kwargs` are the ones it gave its
/// hooks; `None` otherwise.
pub(crate) fn rerun_current(func: &Func, args: &[Value], kwargs: &Kwargs, route: Route) -> Option<Result<Value>> {
    let current = CURRENT.with(Cell::get);
    if current.is_null() {
        return None;
    }
    // SAFETY: a non-null `CURRENT` was set by `InProgress::enter` from a `&'a Current<'a>`, and
    // is reset before that guard's lifetime `'a` ends: the guard borrows the `Current` for `'a`,
    // and restores the previous pointer when dropped, unwinding included (it is a local of
    // dispatch, never forgotten). So the pointer is valid here, on the thread that set it, and
    // the borrows inside it are alive; the `'static` in its type is never relied upon, since
    // nothing read from it outlives this call.
    let current = unsafe { &*current };
    let same =
        std::ptr::eq(current.func, func) && std::ptr::eq(current.args, args) && std::ptr::eq(current.kwargs, kwargs);
    same.then(|| (current.rerun)(route))
}
