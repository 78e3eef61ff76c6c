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

#[derive(Clone, Copy)]
struct Current {
    func: *const Func,
    args: *const [Value],
    kwargs: *const Kwargs,
    rerun: *const (dyn Fn(Route) -> Result<Value> + 'static),
}

thread_local! {
    static CURRENT: Cell<Option<Current>> = const { Cell::new(None) };
}

/// Makes `rerun` the typed call in progress for `func` with `args` and `kwargs` until dropped;
/// then the previous one (of an enclosing call) is restored.
pub(crate) struct InProgress<'a> {
    previous: Option<Current>,
    _borrows: PhantomData<(Rerun<'a>, &'a [Value], &'a Kwargs)>,
}

impl<'a> InProgress<'a> {
    pub(crate) fn enter(func: &'static Func, args: &'a [Value], kwargs: &'a Kwargs, rerun: Rerun<'a>) -> Self {
        let rerun: *const (dyn Fn(Route) -> Result<Value> + 'a) = rerun;
        // SAFETY: this only erases the lifetime of the pointer; the layout of a trait object
        // pointer does not depend on it. The pointer is dereferenced only by `rerun_current`, on
        // this thread, while `CURRENT` holds it; `CURRENT` holds it only until this guard is
        // dropped, and the guard borrows `rerun` for `'a`, so the closure outlives every use.
        // Unwinding drops the guard too, and the guard is private to dispatch, never forgotten.
        let rerun: *const (dyn Fn(Route) -> Result<Value> + 'static) = unsafe { std::mem::transmute(rerun) };
        let current = Current { func, args, kwargs, rerun };
        InProgress { previous: CURRENT.with(|c| c.replace(Some(current))), _borrows: PhantomData }
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
    let current = CURRENT.with(Cell::get)?;
    let same =
        std::ptr::eq(current.func, func) && std::ptr::eq(current.args, args) && std::ptr::eq(current.kwargs, kwargs);
    if !same {
        return None;
    }
    // SAFETY: `current` is in `CURRENT`, so its `InProgress` guard is alive and the closure it
    // points to is borrowed for the guard's lifetime (see `InProgress::enter`).
    let rerun = unsafe { &*current.rerun };
    Some(rerun(route))
}
