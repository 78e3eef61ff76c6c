//! Grad mode: whether operations record the graph, per thread, as PyTorch's.
//!
//! Grad mode is a thread-local flag, on by default in every thread. A spawned thread (and every
//! worker of the CPU kernels' threads) starts with grad mode on whatever its parent's is, as
//! PyTorch's threads do: the guards below change the current thread only. torchfn's own
//! kernels run on those workers, but they never record: recording happens before and after
//! them, on the calling thread.

use std::cell::Cell;

thread_local! {
    static ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether operations on this thread record the graph (`torch.is_grad_enabled`).
#[inline]
pub fn is_grad_enabled() -> bool {
    ENABLED.with(Cell::get)
}

/// Restores the grad mode it found when dropped. Made by [`no_grad`], [`enable_grad`] and
/// [`set_grad_enabled`].
#[must_use = "grad mode goes back as soon as the guard is dropped: bind it with `let _guard = ...`"]
pub struct GradModeGuard {
    previous: bool,
    // Thread-local state: the guard must be dropped on the thread that made it.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        ENABLED.with(|c| c.set(self.previous));
    }
}

/// Sets grad mode on this thread until the guard is dropped (`torch.set_grad_enabled(mode)`).
pub fn set_grad_enabled(enabled: bool) -> GradModeGuard {
    let previous = ENABLED.with(|c| c.replace(enabled));
    GradModeGuard { previous, _not_send: std::marker::PhantomData }
}

/// Turns recording off on this thread until the guard is dropped (`with torch.no_grad():`).
///
/// ```
/// let x = torchfn::tensor([1.0f32, 2.0])?.requires_grad_(true)?;
/// let y = {
///     let _guard = torchfn::autograd::no_grad();
///     (&x * 2.0)?
/// };
/// assert!(!y.requires_grad()?);
/// assert!((&x * 2.0)?.requires_grad()?); // recording again
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn no_grad() -> GradModeGuard {
    set_grad_enabled(false)
}

/// Turns recording on on this thread until the guard is dropped (`with torch.enable_grad():`),
/// also inside [`no_grad`].
pub fn enable_grad() -> GradModeGuard {
    set_grad_enabled(true)
}
