//! Forward-mode automatic differentiation, as PyTorch's `torch.autograd.forward_ad`.
//!
//! Inside a [`dual_level`], a tensor made with [`make_dual`] carries a *tangent* beside its
//! value (its *primal*), and every differentiable operation on it gives a result whose tangent
//! is the directional derivative along it (the Jacobian-vector product), computed by the
//! forward formulas of the same derivatives table the backward uses. [`unpack_dual`] reads
//! both back. Tensors without a tangent count as having a zero one.
//!
//! ```
//! use torchfn::autograd::forward_ad;
//!
//! let x = torchfn::tensor([1.0f64, 2.0, 3.0])?;
//! let direction = torchfn::tensor([1.0f64, 0.0, 1.0])?;
//! let level = forward_ad::dual_level()?;
//! let dual = forward_ad::make_dual(&x, &direction)?;
//! let y = (&dual * &dual)?.sin()?;
//! let unpacked = forward_ad::unpack_dual(&y)?;
//! // d/dt sin((x + t v)²) at t = 0 is cos(x²) 2 x v.
//! let expected: Vec<f64> = [1.0f64, 2.0, 3.0].iter().zip([1.0, 0.0, 1.0]).map(|(x, v)| (x * x).cos() * 2.0 * x * v).collect();
//! assert_eq!(unpacked.tangent.unwrap().to_vec::<f64>()?, expected);
//! drop(level);
//! // Once the level is gone, so are its tangents.
//! assert!(forward_ad::unpack_dual(&y)?.tangent.is_none());
//! # Ok::<(), torchfn::Error>(())
//! ```
//!
//! As in PyTorch there is one level at a time (nested levels are an error; for higher order
//! use [`crate::func::jvp`] over a function that itself uses forward or reverse mode), the
//! level is process-wide, and grad mode does not turn forward mode off.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use super::meta;
use crate::error::{Result, bail};
use crate::tensor::Tensor;

/// The active level's id (0: none).
static LEVEL: AtomicU64 = AtomicU64::new(0);
static NEXT_LEVEL: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Set while a forward formula runs: the primitives it calls compute no tangents of their
    /// own (the formula's result is the tangent).
    static SUSPENDED: Cell<bool> = const { Cell::new(false) };
}

/// The forward-AD level in force until it is dropped (PyTorch's `with dual_level():`). Made by
/// [`dual_level`]; dropping it discards every tangent made at the level.
#[must_use = "the level ends as soon as the guard is dropped: bind it with `let _level = ...`"]
#[derive(Debug)]
pub struct DualLevel {
    id: u64,
}

impl Drop for DualLevel {
    fn drop(&mut self) {
        let mut holder = HOLDER.lock();
        // Tangents are stamped with the level: once it is gone they are no longer read.
        let _ = LEVEL.compare_exchange(self.id, 0, Ordering::SeqCst, Ordering::SeqCst);
        *holder = None;
        FREED.notify_all();
    }
}

/// The thread that holds the level, and the wake-up of threads waiting for it.
static HOLDER: parking_lot::Mutex<Option<std::thread::ThreadId>> = parking_lot::Mutex::new(None);
static FREED: parking_lot::Condvar = parking_lot::Condvar::new();

/// Enters a forward-AD level until the guard is dropped (`torch.autograd.forward_ad.dual_level`).
/// Only one level can be active at a time in the process, as in PyTorch: entering one inside
/// another is an error, and a thread that enters one while another thread holds one waits for
/// it to end (`func::jacfwd` on several threads runs them one after the other).
pub fn dual_level() -> Result<DualLevel> {
    let me = std::thread::current().id();
    let mut holder = HOLDER.lock();
    if *holder == Some(me) {
        bail!(Runtime, "dual_level(): Nested forward mode AD is not supported at the moment");
    }
    while holder.is_some() {
        FREED.wait(&mut holder);
    }
    *holder = Some(me);
    let id = NEXT_LEVEL.fetch_add(1, Ordering::Relaxed);
    LEVEL.store(id, Ordering::SeqCst);
    Ok(DualLevel { id })
}

/// Whether a level is active (one load: the check every primitive makes).
#[inline]
pub(crate) fn level_active() -> bool {
    LEVEL.load(Ordering::Relaxed) != 0
}

/// The active level, when forward formulas should run on this thread.
#[inline]
fn level() -> Option<u64> {
    let id = LEVEL.load(Ordering::Relaxed);
    if id == 0 || SUSPENDED.with(Cell::get) { None } else { Some(id) }
}

/// A tensor and its tangent, as [`unpack_dual`] returns them (PyTorch's `UnpackedDualTensor`).
#[derive(Clone, Debug)]
pub struct UnpackedDual {
    /// The value, a view of the dual tensor without its tangent.
    pub primal: Tensor,
    /// The tangent at the active level, `None` when the tensor has none (or no level is active).
    pub tangent: Option<Tensor>,
}

/// A view of `tensor` carrying `tangent` at the active level (`forward_ad.make_dual`). The
/// tangent must have the primal's shape, dtype and device; both must be floating point.
pub fn make_dual(tensor: &Tensor, tangent: &Tensor) -> Result<Tensor> {
    let Some(level) = level() else {
        bail!(
            Runtime,
            "make_dual(): Trying to create a dual Tensor for forward AD but no level exists, make sure to enter \
             dual_level() first."
        );
    };
    let (p, t) = (tensor.data("make_dual", "tensor")?, tangent.data("make_dual", "tangent")?);
    if !p.dtype.is_floating_point() {
        bail!(Value, "make_dual(): Expected primal to be floating point or complex, but got: {}", p.dtype);
    }
    if !t.dtype.is_floating_point() {
        bail!(Value, "make_dual(): Expected tangent to be floating point or complex, but got: {}", t.dtype);
    }
    if p.layout.shape != t.layout.shape {
        bail!(
            Runtime,
            "make_dual(): Trying to set a forward gradient that has a different size than that of the original \
             Tensor, this is not supported. Tensor is of size {:?} while the given forward gradient is of size {:?}.",
            p.layout.shape.as_ref(),
            t.layout.shape.as_ref()
        );
    }
    if p.dtype != t.dtype || !crate::dispatch::same_device(p.device(), t.device()) {
        bail!(
            Runtime,
            "make_dual(): Expected the tangent to have the primal's dtype and device ({} on {}), but got {} on {}",
            p.dtype,
            p.device(),
            t.dtype,
            t.device()
        );
    }
    let dual = alias(tensor)?;
    meta::set_tangent(&dual, Some((level, tangent.clone())));
    Ok(dual)
}

/// The primal and the tangent of `tensor` at the active level (`forward_ad.unpack_dual`).
pub fn unpack_dual(tensor: &Tensor) -> Result<UnpackedDual> {
    tensor.data("unpack_dual", "tensor")?;
    let tangent = tangent(tensor);
    let primal = if tangent.is_some() { alias(tensor)? } else { tensor.clone() };
    Ok(UnpackedDual { primal, tangent })
}

/// A view of `t` (same memory, gradients flow back to `t`) without a tangent.
fn alias(t: &Tensor) -> Result<Tensor> {
    let _suspended = suspend();
    crate::primitive::view(t, |l| Ok(l.clone()))
}

/// The tangent of `t` at the active level.
pub(crate) fn tangent(t: &Tensor) -> Option<Tensor> {
    let level = LEVEL.load(Ordering::Relaxed);
    if level == 0 {
        return None;
    }
    meta::tangent(t).and_then(|(l, t)| (l == level).then_some(t))
}

/// The tangents of `inputs` when a level is active, formulas may run, and one of them has a
/// tangent (`None` otherwise: the result gets no tangent).
#[inline]
pub(crate) fn tangents(inputs: &[&Tensor]) -> Option<Vec<Option<Tensor>>> {
    level()?;
    tangents_slow(inputs)
}

#[cold]
fn tangents_slow(inputs: &[&Tensor]) -> Option<Vec<Option<Tensor>>> {
    let tangents: Vec<Option<Tensor>> = inputs.iter().map(|t| tangent(t)).collect();
    tangents.iter().any(Option::is_some).then_some(tangents)
}

/// Gives `t` the tangent `tangent` at the active level (`None` clears it).
pub(crate) fn set_tangent(t: &Tensor, tangent: Option<Tensor>) {
    let level = LEVEL.load(Ordering::Relaxed);
    if level != 0 {
        meta::set_tangent(t, tangent.map(|tangent| (level, tangent)));
    }
}

/// Turns forward formulas off on this thread until dropped (while one runs).
pub(crate) fn suspend() -> Suspended {
    Suspended(SUSPENDED.with(|s| s.replace(true)))
}

/// Restores forward formulas when dropped; made by [`suspend`].
pub(crate) struct Suspended(bool);

impl Drop for Suspended {
    fn drop(&mut self) {
        SUSPENDED.with(|s| s.set(self.0));
    }
}
