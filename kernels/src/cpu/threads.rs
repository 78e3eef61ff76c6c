//! The CPU kernels' threads, run the way OpenMP runs PyTorch's: the calling thread works on
//! each parallel region itself, beside one worker for each other thread, and the workers spin
//! for a while after a region before they sleep, so the next region starts at once.
//!
//! A region is `tasks` calls of one closure, `f(0)` to `f(tasks - 1)`, which the threads
//! claim one at a time; it returns when every call has returned. Entering one costs well under
//! a microsecond while the workers spin: the recurrences and training steps enter thousands,
//! each a few microseconds long, where a work-stealing pool (rayon's, which torchfn used)
//! sends the caller to sleep and wakes it again, 10 to 40 µs a region on two cores.
//!
//! A region started from inside another one, or while another thread holds the workers, runs
//! on its calling thread alone. [`set_num_threads`] caps the threads, as `torch.set_num_threads`
//! does; `TORCHFN_NUM_THREADS` sets the count at start, else it is the cores this process may
//! use.

use std::any::Any;
use std::cell::{Cell, UnsafeCell};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long an idle worker spins before it sleeps (libgomp's default spin is of this order).
const SPIN: Duration = Duration::from_micros(300);

/// Elements of work a parallel task takes at least, for every kernel that splits its work:
/// large enough that scheduling a task is noise, small enough that both threads get work from
/// 32,768 elements on (an `add` of 65,536 float32s: 8.4 -> 4.6 µs against 65,536 elements a
/// task).
pub(super) const GRAIN: usize = 1 << 14;

/// The most runs of pieces [`for_each`] cuts for each thread: enough that a thread which
/// finishes early takes another, few enough that claiming them costs nothing.
const RUNS_PER_THREAD: usize = 4;

/// The closure of the region in progress, borrowed for the region's length.
type Task = &'static (dyn Fn(usize) + Sync);

/// What the calling thread and the workers share.
struct Pool {
    /// Odd while a region is open (workers may join it), even between regions.
    epoch: AtomicU64,
    /// Workers inside the open region (they may read `task`).
    active: AtomicUsize,
    /// The next call to claim, and the calls not yet returned.
    next: AtomicUsize,
    pending: AtomicUsize,
    /// The number of calls of the open region.
    tasks: AtomicUsize,
    /// The open region's closure: written only by the thread holding `busy`, while the epoch
    /// is even and `active` is zero.
    task: UnsafeCell<Option<Task>>,
    /// Whether a thread holds the workers (runs a region).
    busy: AtomicBool,
    /// The first panic of the region's calls, rethrown by the calling thread.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// Sleeping workers, and where they sleep.
    sleepers: AtomicUsize,
    sleep: Mutex<()>,
    wake: Condvar,
    /// Threads a region uses (the caller included), at most `1 + workers`.
    limit: AtomicUsize,
    /// Workers started.
    workers: Mutex<usize>,
}

// SAFETY: every field but `task` is a synchronisation primitive. `task` is written only by the
// thread holding `busy` while the epoch is even and no worker is active, and read only by a
// worker that has counted itself in `active` and then seen the region still open (see
// `Pool::join`), so no read overlaps a write.
unsafe impl Sync for Pool {}

thread_local! {
    /// Whether this thread is inside a region (a worker always is): its regions run inline.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// The pool, its workers started on first use.
fn pool() -> &'static Pool {
    static POOL: OnceLock<&'static Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::env::var("TORCHFN_NUM_THREADS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let pool: &'static Pool = Box::leak(Box::new(Pool {
            epoch: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            pending: AtomicUsize::new(0),
            tasks: AtomicUsize::new(0),
            task: UnsafeCell::new(None),
            busy: AtomicBool::new(false),
            panic: Mutex::new(None),
            sleepers: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
            limit: AtomicUsize::new(1),
            workers: Mutex::new(0),
        }));
        pool.resize(threads);
        pool
    })
}

/// The threads a parallel region runs on, the calling thread included
/// (`torch.get_num_threads()`).
pub fn get_num_threads() -> usize {
    pool().limit.load(Relaxed)
}

/// Sets the threads parallel regions run on, the calling thread included, at least one
/// (`torch.set_num_threads(n)`): workers are started as needed, and those past the count stay
/// idle. The count is the process's, as PyTorch's is.
///
/// ```
/// let before = torchfn::get_num_threads();
/// torchfn::set_num_threads(1);
/// assert_eq!(torchfn::get_num_threads(), 1);
/// let x = torchfn::arange(1_000_000, None, None)?;
/// assert_eq!(x.sum()?.to_vec::<i64>()?, [999_999 * 1_000_000 / 2]);
/// torchfn::set_num_threads(before);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn set_num_threads(n: usize) {
    pool().resize(n.max(1));
}

/// Runs `f(0)`, ..., `f(tasks - 1)` on the pool's threads and the calling thread, and returns
/// when all have returned. A panic in any call is rethrown here once all have returned.
pub fn run(tasks: usize, f: &(dyn Fn(usize) + Sync)) {
    let pool = pool();
    if tasks <= 1 || pool.limit.load(Relaxed) <= 1 || INSIDE.get() || pool.busy.swap(true, Acquire) {
        return (0..tasks).for_each(f);
    }
    INSIDE.set(true);
    // SAFETY: only the lifetime changes. The reference is read by workers only while the
    // region is open and they are counted in `active`; this function closes the region and
    // waits for `active` to reach zero before it returns or unwinds, so every read happens
    // while `f` is borrowed.
    let task: Task = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), Task>(f) };
    // SAFETY: this thread holds `busy`, the epoch is even and `active` zero (the previous
    // region ended so), so no worker reads `task` (see `Pool`'s Sync).
    unsafe { *pool.task.get() = Some(task) };
    pool.tasks.store(tasks, Relaxed);
    pool.next.store(0, Relaxed);
    pool.pending.store(tasks, Relaxed);
    let epoch = pool.epoch.load(Relaxed) + 1;
    pool.epoch.store(epoch, SeqCst);
    if pool.sleepers.load(SeqCst) > 0 {
        let _sleep = pool.sleep.lock().unwrap_or_else(|e| e.into_inner());
        pool.wake.notify_all();
    }
    pool.claim(f);
    wait_until(|| pool.pending.load(Acquire) == 0);
    pool.epoch.store(epoch + 1, SeqCst);
    wait_until(|| pool.active.load(SeqCst) == 0);
    let panic = pool.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
    INSIDE.set(false);
    pool.busy.store(false, Release);
    if let Some(panic) = panic {
        resume_unwind(panic);
    }
}

/// Runs `f` on each of `pieces` (disjoint parts of an output, tiles of a product) on the
/// pool's threads, in runs of consecutive pieces, four for each thread at most,
/// so that thousands of small pieces cost a few claims.
pub fn for_each<P: Send>(pieces: impl IntoIterator<Item = P>, f: impl Fn(P) + Sync) {
    let pieces: Vec<P> = pieces.into_iter().collect();
    let per_run = pieces.len().div_ceil(RUNS_PER_THREAD * get_num_threads()).max(1);
    let mut pieces = pieces.into_iter().peekable();
    let mut runs: Vec<Mutex<Vec<P>>> = Vec::new();
    while pieces.peek().is_some() {
        runs.push(Mutex::new(pieces.by_ref().take(per_run).collect()));
    }
    run(runs.len(), &|i| {
        let run = std::mem::take(&mut *runs[i].lock().unwrap_or_else(|e| e.into_inner()));
        run.into_iter().for_each(&f)
    });
}

/// `f` of each of `pieces`, in order, computed on the pool's threads.
pub fn map<P: Send, R: Send>(pieces: impl IntoIterator<Item = P>, f: impl Fn(P) -> R + Sync) -> Vec<R> {
    let pieces: Vec<P> = pieces.into_iter().collect();
    let results: Vec<Mutex<Option<R>>> = pieces.iter().map(|_| Mutex::new(None)).collect();
    for_each(pieces.into_iter().zip(&results), |(piece, slot)| {
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(f(piece))
    });
    results.into_iter().filter_map(|r| r.into_inner().unwrap_or_else(|e| e.into_inner())).collect()
}

/// Spins until `done`, for [`SPIN`] at most; whether `done` came.
fn spin_until(done: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    let mut spins = 0u32;
    while !done() {
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(64) && start.elapsed() > SPIN {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}

/// Spins until `done`, then yields the processor between checks (a worker may have been
/// descheduled).
fn wait_until(done: impl Fn() -> bool) {
    if !spin_until(&done) {
        while !done() {
            std::thread::yield_now();
        }
    }
}

impl Pool {
    /// Caps regions at `threads` threads, starting the workers that are missing.
    fn resize(&'static self, threads: usize) {
        let mut started = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        while *started + 1 < threads {
            let index = *started;
            let spawned =
                std::thread::Builder::new().name(format!("torchfn-cpu-{}", index + 1)).spawn(move || self.work(index));
            if spawned.is_err() {
                break;
            }
            *started += 1;
        }
        self.limit.store(threads.min(*started + 1), Relaxed);
    }

    /// Claims and runs the open region's calls until none is left.
    fn claim(&self, f: &(dyn Fn(usize) + Sync)) {
        let tasks = self.tasks.load(Relaxed);
        loop {
            let i = self.next.fetch_add(1, Relaxed);
            if i >= tasks {
                break;
            }
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| f(i))) {
                self.panic.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(panic);
            }
            self.pending.fetch_sub(1, Release);
        }
    }

    /// Worker `index`'s loop: wait for a region, join it, repeat.
    fn work(&'static self, index: usize) {
        INSIDE.set(true);
        let mut seen = 0;
        loop {
            let epoch = self.wait_for_region(seen);
            seen = epoch;
            if index + 1 >= self.limit.load(Relaxed) {
                continue;
            }
            self.join(epoch);
        }
    }

    /// Joins region `epoch` if it is still open.
    fn join(&self, epoch: u64) {
        // Counted in before checking the region is open, with the caller closing it before it
        // checks the count (both sequentially consistent): either the caller sees this worker
        // and waits for it, or this worker sees the region closed and leaves `task` alone.
        self.active.fetch_add(1, SeqCst);
        if self.epoch.load(SeqCst) == epoch {
            // SAFETY: the region is open and this worker is counted in `active`, so `task`
            // was written before the epoch was published and is not written again until the
            // region has closed and `active` is zero.
            if let Some(f) = unsafe { *self.task.get() } {
                self.claim(f);
            }
        }
        self.active.fetch_sub(1, SeqCst);
    }

    /// Waits for an open region other than `seen`, spinning for [`SPIN`], then sleeping.
    fn wait_for_region(&self, seen: u64) -> u64 {
        let open = |epoch: u64| epoch % 2 == 1 && epoch != seen;
        // The open epoch as loaded (loading it again could find the region closed).
        let found = Cell::new(0);
        let opened = || {
            found.set(self.epoch.load(SeqCst));
            open(found.get())
        };
        loop {
            if spin_until(opened) {
                return found.get();
            }
            // Counted as asleep before checking the epoch again, with the caller publishing
            // the epoch before it checks the count: a region opened meanwhile is seen here or
            // wakes this worker.
            let sleep = self.sleep.lock().unwrap_or_else(|e| e.into_inner());
            self.sleepers.fetch_add(1, SeqCst);
            if !open(self.epoch.load(SeqCst)) {
                drop(self.wake.wait(sleep).unwrap_or_else(|e| e.into_inner()));
            } else {
                drop(sleep);
            }
            self.sleepers.fetch_sub(1, SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_runs_once_nested_regions_inline() {
        let counts: Vec<AtomicUsize> = (0..100).map(|_| AtomicUsize::new(0)).collect();
        for _ in 0..50 {
            run(counts.len(), &|i| {
                counts[i].fetch_add(1, Relaxed);
                // A nested region runs on this thread, whole.
                let inner = AtomicUsize::new(0);
                run(3, &|_| {
                    inner.fetch_add(1, Relaxed);
                });
                assert_eq!(inner.load(Relaxed), 3);
            });
        }
        assert!(counts.iter().all(|c| c.load(Relaxed) == 50));
        let squares = map(0..10usize, |i| i * i);
        assert_eq!(squares, (0..10).map(|i| i * i).collect::<Vec<_>>());
    }

    #[test]
    fn a_panic_reaches_the_caller_and_the_pool_still_works() {
        let caught = catch_unwind(|| run(8, &|i| assert!(i != 5, "call five fails")));
        assert!(caught.is_err());
        let sum = AtomicUsize::new(0);
        run(8, &|i| {
            sum.fetch_add(i, Relaxed);
        });
        assert_eq!(sum.load(Relaxed), 28);
    }

    #[test]
    fn one_thread_runs_every_call_on_the_caller() {
        let before = get_num_threads();
        set_num_threads(1);
        assert_eq!(get_num_threads(), 1);
        let me = std::thread::current().id();
        let ids = map(0..64, |_| std::thread::current().id());
        set_num_threads(before);
        assert!(ids.iter().all(|&id| id == me));
        assert_eq!(get_num_threads(), before);
    }

    #[test]
    fn regions_from_several_threads() {
        let total = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..200 {
                        run(4, &|_| {
                            total.fetch_add(1, Relaxed);
                        });
                    }
                });
            }
        });
        assert_eq!(total.load(Relaxed), 4 * 200 * 4);
    }
}
