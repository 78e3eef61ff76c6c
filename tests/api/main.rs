//! torchfn's integration tests, through the public API as a user calls it. One test binary
//! with modules, so the crate is linked once.

mod amp;
mod autograd;
mod binding;
mod coverage;
mod dispatch;
mod dtypes;
mod edge_cases;
mod elementwise;
mod examples;
mod fake_tensor;
mod flop_counter;
mod forward_ad;
mod func;
mod function;
mod fx;
mod golden;
#[cfg(feature = "wgpu")]
mod gpu;
mod gradcheck;
mod gradcheck_api;
mod grads;
mod inplace;
mod inplace_math;
mod interop;
mod linalg;
mod macros;
mod meta;
mod modes;
mod module_golden;
mod module_hooks;
mod modules;
mod nn;
mod nn_layers;
mod nn_ops;
mod no_panic;
mod optim;
mod protocol;
mod protocol_complete;
mod random;
mod readme;
mod registry;
mod scatter;
mod subclass;
mod tensor;
mod tensor_api;
mod untrusted;
mod views;
mod workloads;
mod wrapper;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Counts this thread's allocations, to check that the fast path allocates nothing.
struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every method forwards its arguments unchanged to `System`, so each upholds the
// `GlobalAlloc` contract exactly as `System` does. The counter is a const-initialised
// thread-local `Cell` without a destructor: touching it never allocates or re-enters.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's `layout` obligations are passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this `layout`, as the caller guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// How many allocations `f` makes on this thread.
pub fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

/// Held by every test that enters a forward-AD level: the level is process-wide (as PyTorch's),
/// and only one can be active at a time.
pub(crate) static FORWARD_AD: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Held by every test that seeds the default generator and compares what it draws: the default
/// generator is process-wide (as PyTorch's), so two such tests running at once would draw from
/// each other's seeds.
pub(crate) fn seeded() -> std::sync::MutexGuard<'static, ()> {
    static DEFAULT_GENERATOR: std::sync::Mutex<()> = std::sync::Mutex::new(());
    DEFAULT_GENERATOR.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
