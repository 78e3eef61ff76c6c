//! The MPI engine: one communication thread per process initializes MPI, owns every
//! communicator, and runs the operations in the order they were submitted, as PyTorch's
//! `ProcessGroupMPI` does. The caller's thread only queues work and waits on it, so an
//! asynchronous collective overlaps the caller's computation.
//!
//! Every MPI call is in this file. Collectives run as blocking MPI calls on the thread;
//! sends and receives start as non-blocking calls and finish when the thread, between
//! messages, sees them done, so that a send waiting for its receive never holds up the
//! operations behind it. Before each collective the ranks exchange what they are about to do
//! (operation, dtype, element count, root or reduce op) in one small all-gather, so a rank
//! that disagrees gives every rank the same clear error instead of a hang or a corrupted
//! result.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::mem::MaybeUninit;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use mpi::ffi;
use mpi::traits::{AsRaw, Communicator};
use parking_lot::lock_api::{RawRwLock as _, RawRwLockRecursive as _};
use parking_lot::{RwLockReadGuard, RwLockWriteGuard};
use torchfn_runtime::backend::{Array, Buffer, Storage};
use torchfn_runtime::{DType, Error, Result};

use crate::collectives::{Collective, ReduceOp};
use crate::work::Completion;

unsafe extern "C" {
    /// `MPI_IN_PLACE`, from `in_place.c`.
    fn torchfn_mpi_in_place() -> *mut c_void;
    /// The C library's `atexit`.
    fn atexit(callback: extern "C" fn()) -> c_int;
}

/// How often the thread checks unfinished sends and receives while it has no new work.
const POLL: Duration = Duration::from_micros(20);

/// The handle to the communication thread.
pub(crate) struct Engine {
    messages: Mutex<Sender<Message>>,
    rank: usize,
    size: usize,
}

enum Message {
    /// Run an operation on communicator `comm`.
    Run { comm: u64, collective: Box<Collective>, done: Completion },
    /// Make communicator `id` for the world ranks `ranks` (collective over the world).
    Split { id: u64, ranks: Vec<usize>, done: Completion },
    /// Free communicator `id`.
    Free { id: u64 },
    /// Finish what is running, free everything, finalize MPI, and say so.
    Shutdown(Sender<()>),
}

static ENGINE: OnceLock<std::result::Result<Arc<Engine>, String>> = OnceLock::new();

/// The engine, started (MPI initialized) on first use.
pub(crate) fn engine() -> Result<Arc<Engine>> {
    ENGINE.get_or_init(start).clone().map_err(Error::runtime_error)
}

fn start() -> std::result::Result<Arc<Engine>, String> {
    let (messages, inbox) = mpsc::channel();
    let (ready, started) = mpsc::channel();
    std::thread::Builder::new()
        .name("torchfn-mpi".into())
        .spawn(move || serve(inbox, ready))
        .map_err(|e| format!("the MPI communication thread could not start: {e}"))?;
    let (rank, size) =
        started.recv().map_err(|_| "the MPI communication thread stopped while starting".to_string())??;
    // SAFETY: `atexit` takes a plain C function of no arguments; `finalize_at_exit` is one,
    // lives for the whole program, and never unwinds (it catches panics).
    unsafe { atexit(finalize_at_exit) };
    Ok(Arc::new(Engine { messages: Mutex::new(messages), rank, size }))
}

/// At exit, finalizes MPI on the thread that initialized it (MPI wants every process to
/// finalize; mpirun reports a process that did not). A thread stuck in a collective that timed
/// out cannot finalize: after a few seconds the process exits without it.
extern "C" fn finalize_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(Ok(engine)) = ENGINE.get() {
            let (ack, done) = mpsc::channel();
            if engine.send(Message::Shutdown(ack)).is_ok() {
                let _ = done.recv_timeout(Duration::from_secs(5));
            }
        }
    });
}

impl Engine {
    /// This process's rank in the world and the world's size.
    pub(crate) fn world(&self) -> (usize, usize) {
        (self.rank, self.size)
    }

    fn send(&self, message: Message) -> std::result::Result<(), mpsc::SendError<Message>> {
        self.messages.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).send(message)
    }

    /// Queues `collective` on communicator `comm`; `done` finishes its work.
    pub(crate) fn submit(&self, comm: u64, collective: Collective, done: Completion) {
        if let Err(mpsc::SendError(Message::Run { done, .. })) =
            self.send(Message::Run { comm, collective: Box::new(collective), done })
        {
            done.finish(Err(stopped()));
        }
    }

    /// Queues making communicator `id` for the world ranks `ranks`.
    pub(crate) fn new_communicator(&self, id: u64, ranks: Vec<usize>, done: Completion) {
        if let Err(mpsc::SendError(Message::Split { done, .. })) = self.send(Message::Split { id, ranks, done }) {
            done.finish(Err(stopped()));
        }
    }

    /// Queues freeing communicator `id`.
    pub(crate) fn free_communicator(&self, id: u64) {
        let _ = self.send(Message::Free { id });
    }
}

#[cold]
fn stopped() -> Error {
    Error::runtime_error("the MPI communication thread has stopped (MPI was finalized at exit)")
}

/// The communication thread's state: the communicators and the unfinished sends and
/// receives. MPI's handles are raw pointers that never leave this thread.
struct Thread {
    world: ffi::MPI_Comm,
    world_rank: usize,
    comms: HashMap<u64, Comm>,
    pending: Vec<PointToPoint>,
}

/// A communicator of this thread, with its size and this process's rank in it.
struct Comm {
    handle: ffi::MPI_Comm,
    size: usize,
    rank: usize,
}

fn serve(inbox: Receiver<Message>, ready: Sender<std::result::Result<(usize, usize), String>>) {
    // Funneled: only this thread, which initializes MPI, ever calls it.
    let Some((universe, _)) = mpi::initialize_with_threading(mpi::Threading::Funneled) else {
        let _ =
            ready.send(Err("MPI could not be initialized: other code in this process initialized it already".into()));
        return;
    };
    let world = universe.world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    let mut thread = Thread { world: world.as_raw(), world_rank: rank, comms: HashMap::new(), pending: Vec::new() };
    let _ = ready.send(Ok((rank, size)));
    loop {
        let message = if thread.pending.is_empty() {
            inbox.recv().ok()
        } else {
            match inbox.recv_timeout(POLL) {
                Ok(message) => Some(message),
                Err(RecvTimeoutError::Timeout) => {
                    thread.progress();
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => None,
            }
        };
        match message {
            Some(Message::Run { comm, collective, done }) => thread.run(comm, *collective, done),
            Some(Message::Split { id, ranks, done }) => done.finish(thread.split(id, &ranks).map(|()| None)),
            Some(Message::Free { id }) => thread.free(id),
            Some(Message::Shutdown(ack)) => {
                thread.shutdown();
                drop(world);
                drop(universe); // MPI_Finalize
                let _ = ack.send(());
                return;
            }
            None => break,
        }
        thread.progress();
    }
    thread.shutdown();
}

impl Thread {
    fn run(&mut self, comm: u64, collective: Collective, done: Completion) {
        let Some(comm) = self.comms.get(&comm) else {
            done.finish(Err(Error::runtime_error("the process group's communicator was freed")));
            return;
        };
        let handle = comm.handle;
        match collective {
            Collective::Send { tensor, peer, tag } => self.start(handle, tensor, Some(peer), tag, false, done),
            Collective::Recv { tensor, peer, tag } => self.start(handle, tensor, peer, tag, true, done),
            collective => done.finish(run_collective(comm, collective).map(|()| None)),
        }
    }

    /// Makes communicator `id` of the world ranks `ranks` (sorted): every world rank takes
    /// part; the others get none.
    fn split(&mut self, id: u64, ranks: &[usize]) -> Result<()> {
        let member = ranks.contains(&self.world_rank);
        // SAFETY: reading constants the MPI library defines.
        let (undefined, errors_return, mut comm) =
            unsafe { (ffi::RSMPI_UNDEFINED, ffi::RSMPI_ERRORS_RETURN, ffi::RSMPI_COMM_NULL) };
        let color = if member { 0 } else { undefined };
        // SAFETY: the world communicator is valid until finalize; `comm` is a place for the
        // new handle.
        check(
            unsafe { ffi::MPI_Comm_split(self.world, color, self.world_rank as c_int, &mut comm) },
            "MPI_Comm_split",
        )?;
        if member {
            // Errors are returned, not fatal: a truncated receive is an error to report.
            // SAFETY: `comm` is the valid communicator just made.
            check(unsafe { ffi::MPI_Comm_set_errhandler(comm, errors_return) }, "MPI_Comm_set_errhandler")?;
            let (size, rank) = (ranks.len(), ranks.iter().position(|&r| r == self.world_rank).unwrap_or(0));
            self.comms.insert(id, Comm { handle: comm, size, rank });
        }
        Ok(())
    }

    fn free(&mut self, id: u64) {
        if let Some(mut comm) = self.comms.remove(&id) {
            // SAFETY: the handle was made by `split` and is freed once (it left the map).
            unsafe { ffi::MPI_Comm_free(&mut comm.handle) };
        }
    }

    /// Before finalizing: gives unfinished sends and receives a few seconds, then frees the
    /// communicators.
    fn shutdown(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.pending.is_empty() && Instant::now() < deadline {
            self.progress();
            std::thread::sleep(POLL);
        }
        let ids: Vec<u64> = self.comms.keys().copied().collect();
        for id in ids {
            self.free(id);
        }
    }

    /// Starts a send (or, with `receive`, a receive) of `array` to or from `peer` (any rank
    /// when `None`). The storage stays locked, shared for a send and exclusively for a
    /// receive, until MPI has finished with it.
    fn start(
        &mut self,
        comm: ffi::MPI_Comm,
        array: Array,
        peer: Option<usize>,
        tag: i32,
        receive: bool,
        done: Completion,
    ) {
        let started = (|| {
            let count = count_of(array.numel())?;
            let dtype = datatype(array.dtype);
            let lock =
                array.storage.host_buffer().ok_or_else(|| Error::runtime_error("a tensor not in host memory"))?;
            // SAFETY: `raw` is unsafe because unlocking through it while a guard exists is
            // unsound; this lock is taken here and released once, when `held` drops, and no
            // guard is made from it in between.
            let raw = unsafe { lock.raw() };
            if receive {
                raw.lock_exclusive();
            } else {
                raw.lock_shared_recursive();
            }
            let held = Held { storage: array.storage.clone(), exclusive: receive };
            // SAFETY: the lock taken above keeps every other access out (writes, and for a
            // receive reads too) until `held` drops, and `held` keeps the storage alive, so the
            // buffer neither moves nor is touched while MPI uses it; a receive's address comes
            // from an exclusive borrow, a send's from a shared one.
            let (base, len) = unsafe {
                if receive {
                    first_element_mut(&mut *lock.data_ptr())
                } else {
                    let (base, len) = first_element(&*lock.data_ptr());
                    (base.cast_mut(), len)
                }
            };
            let address = elements(base, len, &array)?;
            let mut request = MaybeUninit::<ffi::MPI_Request>::uninit();
            let rc = if receive {
                // SAFETY: reading a constant the MPI library defines.
                let source = peer.map_or(unsafe { ffi::RSMPI_ANY_SOURCE }, |p| p as c_int);
                // SAFETY: `address` is the tensor's `count` elements of `dtype`, locked
                // exclusively until the request completes; `request` is a place for its handle.
                unsafe { ffi::MPI_Irecv(address, count, dtype, source, tag, comm, request.as_mut_ptr()) }
            } else {
                let dest = peer.expect("a send has a destination") as c_int;
                // SAFETY: as above; MPI only reads the elements, which stay locked against
                // writes until the request completes.
                unsafe { ffi::MPI_Isend(address, count, dtype, dest, tag, comm, request.as_mut_ptr()) }
            };
            check(rc, if receive { "MPI_Irecv" } else { "MPI_Isend" })?;
            // SAFETY: MPI wrote the handle (the call succeeded).
            Ok((unsafe { request.assume_init() }, held, count, dtype))
        })();
        match started {
            Ok((request, held, count, dtype)) => {
                self.pending.push(PointToPoint { request, held: Some(held), count, dtype, receive, done: Some(done) })
            }
            Err(e) => done.finish(Err(e)),
        }
    }

    /// Finishes the sends and receives MPI has completed.
    fn progress(&mut self) {
        self.pending.retain_mut(|p| !p.test());
    }
}

/// A storage lock held across messages, for a send or receive in flight.
struct Held {
    storage: Arc<Storage>,
    exclusive: bool,
}

impl Drop for Held {
    fn drop(&mut self) {
        let lock = self.storage.host_buffer().expect("held locks are on host memory");
        // SAFETY: this lock was taken in `Thread::start`, in this mode, and is released once.
        unsafe {
            if self.exclusive {
                self.storage.bump_version();
                lock.raw().unlock_exclusive();
            } else {
                lock.raw().unlock_shared();
            }
        }
    }
}

/// A send or receive in flight.
struct PointToPoint {
    request: ffi::MPI_Request,
    held: Option<Held>,
    count: c_int,
    dtype: ffi::MPI_Datatype,
    receive: bool,
    done: Option<Completion>,
}

impl PointToPoint {
    /// Whether it has finished (and then finishes its work).
    fn test(&mut self) -> bool {
        let mut flag: c_int = 0;
        // SAFETY: an all-zero status is a valid value of this plain C struct of integers.
        let mut status: ffi::MPI_Status = unsafe { MaybeUninit::zeroed().assume_init() };
        // SAFETY: `request` is the live handle `start` made; MPI_Test frees it when done.
        let rc = unsafe { ffi::MPI_Test(&mut self.request, &mut flag, &mut status) };
        if rc == ffi::MPI_SUCCESS as c_int && flag == 0 {
            return false;
        }
        // The storage is free again before anyone waiting on the work is woken.
        drop(self.held.take());
        let outcome = check(rc, "MPI_Test").and_then(|()| {
            if !self.receive {
                return Ok(None);
            }
            let mut got: c_int = 0;
            // SAFETY: `status` is the completed receive's.
            check(unsafe { ffi::MPI_Get_count(&status, self.dtype, &mut got) }, "MPI_Get_count")?;
            if got != self.count {
                return Err(Error::runtime_error(format!(
                    "the message has {got} elements, but the tensor received into holds {}: send and receive tensors \
                     must have the same size and dtype",
                    self.count
                )));
            }
            Ok(Some(status.MPI_SOURCE as usize))
        });
        if let Some(done) = self.done.take() {
            done.finish(outcome);
        }
        true
    }
}

/// An MPI return code as a result.
fn check(rc: c_int, what: &str) -> Result<()> {
    if rc == ffi::MPI_SUCCESS as c_int {
        return Ok(());
    }
    let mut text = vec![0 as c_char; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING characters and a terminator.
    unsafe { ffi::MPI_Error_string(rc, text.as_mut_ptr(), &mut len) };
    let text: String =
        text[..len.clamp(0, ffi::MPI_MAX_ERROR_STRING as c_int) as usize].iter().map(|&c| c as u8 as char).collect();
    Err(Error::runtime_error(format!("{what} failed: {text} (MPI error {rc})")))
}

/// An element count as MPI takes it.
fn count_of(n: usize) -> Result<c_int> {
    c_int::try_from(n).map_err(|_| {
        Error::value_error(format!("{n} elements are more than MPI's counts reach ({}): split the tensor", c_int::MAX))
    })
}

/// MPI's type for `dtype`. MPI has no half-precision types: float16 and bfloat16 move as their
/// 16 bits, and the collectives that reduce them widen them to float32 first (`collectives.rs`).
fn datatype(dtype: DType) -> ffi::MPI_Datatype {
    // SAFETY: reading constants the MPI library defines.
    unsafe {
        match dtype {
            DType::Bool => ffi::RSMPI_C_BOOL,
            DType::UInt8 => ffi::RSMPI_UINT8_T,
            DType::Int8 => ffi::RSMPI_INT8_T,
            DType::Int16 => ffi::RSMPI_INT16_T,
            DType::Float16 | DType::BFloat16 => ffi::RSMPI_UINT16_T,
            DType::Int32 => ffi::RSMPI_INT32_T,
            DType::Int64 => ffi::RSMPI_INT64_T,
            DType::Float32 => ffi::RSMPI_FLOAT,
            DType::Float64 => ffi::RSMPI_DOUBLE,
        }
    }
}

/// MPI's reduction for `op` on `dtype` (`Avg` sums; the caller divides).
fn operation(op: ReduceOp, dtype: DType) -> ffi::MPI_Op {
    // SAFETY: reading constants the MPI library defines.
    unsafe {
        match (op, dtype) {
            (ReduceOp::Sum | ReduceOp::Max, DType::Bool) => ffi::RSMPI_LOR,
            (ReduceOp::Product | ReduceOp::Min, DType::Bool) => ffi::RSMPI_LAND,
            (ReduceOp::Sum | ReduceOp::Avg, _) => ffi::RSMPI_SUM,
            (ReduceOp::Product, _) => ffi::RSMPI_PROD,
            (ReduceOp::Min, _) => ffi::RSMPI_MIN,
            (ReduceOp::Max, _) => ffi::RSMPI_MAX,
        }
    }
}

/// Where a buffer's elements start, and how many there are: from a shared borrow, for MPI
/// to read.
fn first_element(buffer: &Buffer) -> (*const c_void, usize) {
    match buffer {
        Buffer::Bool(v) => (v.as_ptr().cast(), v.len()),
        Buffer::UInt8(v) => (v.as_ptr().cast(), v.len()),
        Buffer::Int8(v) => (v.as_ptr().cast(), v.len()),
        Buffer::Int16(v) => (v.as_ptr().cast(), v.len()),
        Buffer::Int32(v) => (v.as_ptr().cast(), v.len()),
        Buffer::Int64(v) => (v.as_ptr().cast(), v.len()),
        Buffer::Float16(v) => (v.as_ptr().cast(), v.len()),
        Buffer::BFloat16(v) => (v.as_ptr().cast(), v.len()),
        Buffer::Float32(v) => (v.as_ptr().cast(), v.len()),
        Buffer::Float64(v) => (v.as_ptr().cast(), v.len()),
    }
}

/// [`first_element`] from an exclusive borrow, for MPI to write.
fn first_element_mut(buffer: &mut Buffer) -> (*mut c_void, usize) {
    match buffer {
        Buffer::Bool(v) => (v.as_mut_ptr().cast(), v.len()),
        Buffer::UInt8(v) => (v.as_mut_ptr().cast(), v.len()),
        Buffer::Int8(v) => (v.as_mut_ptr().cast(), v.len()),
        Buffer::Int16(v) => (v.as_mut_ptr().cast(), v.len()),
        Buffer::Int32(v) => (v.as_mut_ptr().cast(), v.len()),
        Buffer::Int64(v) => (v.as_mut_ptr().cast(), v.len()),
        Buffer::Float16(v) => (v.as_mut_ptr().cast(), v.len()),
        Buffer::BFloat16(v) => (v.as_mut_ptr().cast(), v.len()),
        Buffer::Float32(v) => (v.as_mut_ptr().cast(), v.len()),
        Buffer::Float64(v) => (v.as_mut_ptr().cast(), v.len()),
    }
}

/// The address of `array`'s elements in the buffer that starts at `base` and holds `len`
/// elements; an error unless they are all inside it.
fn elements(base: *mut c_void, len: usize, array: &Array) -> Result<*mut c_void> {
    let (offset, n) = (array.layout.offset, array.numel());
    if offset.checked_add(n).is_none_or(|end| end > len) {
        return Err(Error::runtime_error(format!(
            "elements {offset}..{} are outside their storage of {len} elements",
            offset.saturating_add(n)
        )));
    }
    // `wrapping_add` stays inside the buffer: checked above.
    Ok(base.cast::<u8>().wrapping_add(offset * array.dtype.itemsize()).cast())
}

/// A locked storage: exclusively when the collective writes it.
enum Guard<'a> {
    Write(RwLockWriteGuard<'a, Buffer>),
    /// Held for its lock only: MPI reads through the address taken when it was locked.
    Read {
        _held: RwLockReadGuard<'a, Buffer>,
    },
}

/// The storages of a collective's arrays, locked for its duration (each storage once, however
/// many arrays view it), with where each one's elements start: taken once per storage, so the
/// addresses of several arrays of one storage stay valid together.
struct Locked<'a> {
    storages: Vec<(&'a Arc<Storage>, Guard<'a>, *mut c_void, usize)>,
}

impl<'a> Locked<'a> {
    /// Locks the storages of `arrays` (each with whether the collective writes it).
    fn new(arrays: &[(&'a Array, bool)]) -> Result<Locked<'a>> {
        let mut storages: Vec<(&Arc<Storage>, Guard<'a>, *mut c_void, usize)> = Vec::new();
        for (array, _) in arrays {
            let storage = &array.storage;
            if storages.iter().any(|(s, ..)| Arc::ptr_eq(s, storage)) {
                continue;
            }
            let written = arrays.iter().any(|(a, w)| *w && Arc::ptr_eq(&a.storage, storage));
            let missing = || Error::runtime_error("a tensor not in host memory");
            let (guard, (base, len)) = if written {
                let mut guard = storage.write().ok_or_else(missing)?;
                let start = first_element_mut(&mut guard);
                (Guard::Write(guard), start)
            } else {
                let guard = storage.read().ok_or_else(missing)?;
                // Never written through: MPI only reads from a storage locked for reading.
                let (base, len) = first_element(&guard);
                (Guard::Read { _held: guard }, (base.cast_mut(), len))
            };
            storages.push((storage, guard, base, len));
        }
        Ok(Locked { storages })
    }

    /// The address of `array`'s elements, for MPI to read (or, for a written array, write).
    fn address(&self, array: &Array) -> Result<*mut c_void> {
        let (_, _, base, len) =
            self.storages.iter().find(|(s, ..)| Arc::ptr_eq(s, &array.storage)).expect("every array was locked");
        elements(*base, *len, array)
    }

    /// Divides a written float array's elements by `by` (an average).
    fn divide(&mut self, array: &Array, by: usize) {
        let range = array.layout.offset..array.layout.offset + array.numel();
        for (storage, guard, ..) in &mut self.storages {
            if let (true, Guard::Write(buffer)) = (Arc::ptr_eq(storage, &array.storage), guard) {
                if let Some(v) = buffer.as_mut_slice::<f32>() {
                    v[range.clone()].iter_mut().for_each(|x| *x /= by as f32);
                } else if let Some(v) = buffer.as_mut_slice::<f64>() {
                    v[range.clone()].iter_mut().for_each(|x| *x /= by as f64);
                }
            }
        }
    }
}

impl Drop for Locked<'_> {
    /// What a collective wrote is a new version of its storage (autograd checks saved tensors).
    fn drop(&mut self) {
        for (storage, guard, ..) in &self.storages {
            if matches!(guard, Guard::Write(_)) {
                storage.bump_version();
            }
        }
    }
}

/// What each rank says it is about to do, compared before any data moves: the operation (its
/// place in [`NAMES`]), dtype, element count, and the root or reduce op.
type Signature = [i64; 4];

const NAMES: [&str; 8] = [
    "all_reduce",
    "broadcast",
    "reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "all_to_all_single",
    "barrier",
];

/// This rank's signature of `collective`, and whether every rank's element count must be the
/// same (`all_gather` and `all_to_all_single` take uneven sizes, checked by their own rules).
fn signature(collective: &Collective) -> (Signature, bool) {
    let of = |code: i64, a: &Array, extra: i64| [code, a.dtype as i64, a.numel() as i64, extra];
    match collective {
        Collective::AllReduce { tensor, op } => (of(0, tensor, *op as i64), true),
        Collective::Broadcast { tensor, root } => (of(1, tensor, *root as i64), true),
        Collective::Reduce { tensor, root, op } => (of(2, tensor, *op as i64 * 1_000_000 + *root as i64), true),
        Collective::AllGather { input, .. } => (of(3, input, 0), false),
        Collective::AllGatherIntoTensor { input, .. } => (of(4, input, 0), true),
        Collective::ReduceScatter { input, op, .. } => (of(5, input, *op as i64), true),
        Collective::AllToAll { input, .. } => (of(6, input, 0), false),
        Collective::Barrier => ([7, 0, 0, 0], true),
        Collective::Send { .. } | Collective::Recv { .. } => unreachable!("sends and receives are not collectives"),
    }
}

/// Every rank's signature of what it is about to do; an error on every rank when they differ.
fn agree(comm: &Comm, collective: &Collective) -> Result<Vec<Signature>> {
    let (mine, same_count) = signature(collective);
    let mut all = vec![[0i64; 4]; comm.size];
    // SAFETY: `mine` is 4 int64 values and `all` has room for 4 from each of the ranks.
    check(
        unsafe {
            ffi::MPI_Allgather(
                mine.as_ptr().cast(),
                4,
                datatype(DType::Int64),
                all.as_mut_ptr().cast(),
                4,
                datatype(DType::Int64),
                comm.handle,
            )
        },
        "MPI_Allgather",
    )?;
    let describe = |s: &Signature| {
        let name = NAMES.get(s[0] as usize).copied().unwrap_or("?");
        let dtype = DType::ALL.into_iter().find(|&d| d as i64 == s[1]).map_or("?".to_string(), |d| d.to_string());
        format!("{name} of {} {dtype} elements", s[2])
    };
    let first = all[0];
    for (rank, s) in all.iter().enumerate().skip(1) {
        if s[0] != first[0] || s[1] != first[1] || s[3] != first[3] || (same_count && s[2] != first[2]) {
            let extra = if s[3] != first[3] { " with another root or reduce op" } else { "" };
            return Err(Error::runtime_error(format!(
                "the ranks disagree: rank 0 called {}, rank {rank} called {}{extra}. Every rank of a group must call \
                 the same collectives in the same order, with tensors of the same dtype and size, the same root and \
                 the same reduce op",
                describe(&first),
                describe(s)
            )));
        }
    }
    Ok(all)
}

/// Runs one collective on `comm`, on the calling (communication) thread, once the ranks have
/// agreed on it.
fn run_collective(comm: &Comm, collective: Collective) -> Result<()> {
    let all = agree(comm, &collective)?;
    let (size, rank, handle) = (comm.size, comm.rank, comm.handle);
    // SAFETY: reading a value the MPI library defines.
    let in_place = unsafe { torchfn_mpi_in_place() };
    match collective {
        Collective::AllReduce { tensor, op } => {
            let count = count_of(tensor.numel())?;
            let mut locked = Locked::new(&[(&tensor, true)])?;
            let buffer = locked.address(&tensor)?;
            let (dtype, mpi_op) = (datatype(tensor.dtype), operation(op, tensor.dtype));
            // SAFETY: `buffer` is `count` elements of the tensor's dtype, locked exclusively
            // for the call; MPI_IN_PLACE makes it both input and output.
            check(unsafe { ffi::MPI_Allreduce(in_place, buffer, count, dtype, mpi_op, handle) }, "MPI_Allreduce")?;
            if op == ReduceOp::Avg {
                locked.divide(&tensor, size);
            }
        }
        Collective::Broadcast { tensor, root } => {
            let count = count_of(tensor.numel())?;
            let locked = Locked::new(&[(&tensor, true)])?;
            let buffer = locked.address(&tensor)?;
            // SAFETY: `buffer` is `count` elements, locked exclusively for the call.
            let rc = unsafe { ffi::MPI_Bcast(buffer, count, datatype(tensor.dtype), root as c_int, handle) };
            check(rc, "MPI_Bcast")?;
        }
        Collective::Reduce { tensor, root, op } => {
            let count = count_of(tensor.numel())?;
            let mut locked = Locked::new(&[(&tensor, true)])?;
            let buffer = locked.address(&tensor)?;
            let (dtype, mpi_op) = (datatype(tensor.dtype), operation(op, tensor.dtype));
            // SAFETY: `buffer` is `count` elements, locked exclusively for the call; the root
            // reduces in place into it, the others only send from it (no receive buffer).
            let rc = unsafe {
                if rank == root {
                    ffi::MPI_Reduce(in_place, buffer, count, dtype, mpi_op, root as c_int, handle)
                } else {
                    ffi::MPI_Reduce(buffer, std::ptr::null_mut(), count, dtype, mpi_op, root as c_int, handle)
                }
            };
            check(rc, "MPI_Reduce")?;
            if op == ReduceOp::Avg && rank == root {
                locked.divide(&tensor, size);
            }
        }
        Collective::AllGather { outputs, input, gathered } => {
            for (i, (output, s)) in outputs.iter().zip(&all).enumerate() {
                if output.numel() as i64 != s[2] {
                    return Err(Error::value_error(format!(
                        "tensor_list[{i}] has {} elements, but rank {i} sends {}: each output must have its rank's size",
                        output.numel(),
                        s[2]
                    )));
                }
            }
            let counts: Vec<c_int> = all.iter().map(|s| count_of(s[2] as usize)).collect::<Result<_>>()?;
            let displacements = offsets(&counts)?;
            // MPI gathers into one buffer (the outputs' sizes added up); the outputs, separate
            // tensors, are filled from it.
            let mut arrays: Vec<(&Array, bool)> = vec![(&input, false), (&gathered, true)];
            arrays.extend(outputs.iter().map(|o| (o, true)));
            let locked = Locked::new(&arrays)?;
            let (send, receive) = (locked.address(&input)?, locked.address(&gathered)?);
            let dtype = datatype(input.dtype);
            // SAFETY: `send` is the input's elements, `receive` the gather buffer of as many
            // elements as `counts` add up to (the outputs' sizes, checked against them above),
            // laid out at `displacements`; all locked for the call.
            let rc = unsafe {
                ffi::MPI_Allgatherv(
                    send,
                    count_of(input.numel())?,
                    dtype,
                    receive,
                    counts.as_ptr(),
                    displacements.as_ptr(),
                    dtype,
                    handle,
                )
            };
            check(rc, "MPI_Allgatherv")?;
            let itemsize = input.dtype.itemsize();
            for (output, &at) in outputs.iter().zip(&displacements) {
                let target = locked.address(output)?;
                // SAFETY: the gathered part starts at `at` and has the output's size (checked
                // above), inside the gather buffer; the gather buffer is a storage of its own,
                // so the two do not overlap; both are locked.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        receive.cast::<u8>().add(at as usize * itemsize),
                        target.cast::<u8>(),
                        output.numel() * itemsize,
                    )
                };
            }
        }
        Collective::AllGatherIntoTensor { output, input } => {
            let count = count_of(input.numel())?;
            let locked = Locked::new(&[(&input, false), (&output, true)])?;
            let (send, receive) = (locked.address(&input)?, locked.address(&output)?);
            let dtype = datatype(input.dtype);
            // SAFETY: `send` is `count` elements, `receive` `size * count` (checked by the
            // caller), both locked for the call.
            check(unsafe { ffi::MPI_Allgather(send, count, dtype, receive, count, dtype, handle) }, "MPI_Allgather")?;
        }
        Collective::ReduceScatter { output, input, op } => {
            let count = count_of(output.numel())?;
            let mut locked = Locked::new(&[(&input, false), (&output, true)])?;
            let (send, receive) = (locked.address(&input)?, locked.address(&output)?);
            let (dtype, mpi_op) = (datatype(input.dtype), operation(op, input.dtype));
            // SAFETY: `send` is `size * count` elements (checked by the caller), `receive`
            // `count`, both locked for the call.
            let rc = unsafe { ffi::MPI_Reduce_scatter_block(send, receive, count, dtype, mpi_op, handle) };
            check(rc, "MPI_Reduce_scatter_block")?;
            if op == ReduceOp::Avg {
                locked.divide(&output, size);
            }
        }
        Collective::AllToAll { output, input, output_splits, input_splits } => {
            // Every rank's splits, to check that what rank j sends to i is what i expects.
            let mine: Vec<i64> = input_splits.iter().chain(&output_splits).map(|&s| s as i64).collect();
            let mut all = vec![0i64; 2 * size * size];
            let per_rank = (2 * size) as c_int;
            // SAFETY: `mine` is 2·size int64 values; `all` has room for as many per rank.
            let rc = unsafe {
                ffi::MPI_Allgather(
                    mine.as_ptr().cast(),
                    per_rank,
                    datatype(DType::Int64),
                    all.as_mut_ptr().cast(),
                    per_rank,
                    datatype(DType::Int64),
                    handle,
                )
            };
            check(rc, "MPI_Allgather")?;
            for sender in 0..size {
                for receiver in 0..size {
                    let sent = all[sender * 2 * size + receiver];
                    let expected = all[receiver * 2 * size + size + sender];
                    if sent != expected {
                        return Err(Error::value_error(format!(
                            "rank {sender} sends {sent} elements to rank {receiver}, which expects {expected}: \
                             input_split_sizes and output_split_sizes do not match across ranks"
                        )));
                    }
                }
            }
            let send_counts: Vec<c_int> = input_splits.iter().map(|&s| count_of(s)).collect::<Result<_>>()?;
            let receive_counts: Vec<c_int> = output_splits.iter().map(|&s| count_of(s)).collect::<Result<_>>()?;
            let (send_offsets, receive_offsets) = (offsets(&send_counts)?, offsets(&receive_counts)?);
            let locked = Locked::new(&[(&input, false), (&output, true)])?;
            let (send, receive) = (locked.address(&input)?, locked.address(&output)?);
            let dtype = datatype(input.dtype);
            // SAFETY: the counts and offsets lie within each tensor (their splits add up to
            // its first dimension, checked by the caller); both are locked for the call.
            let rc = unsafe {
                ffi::MPI_Alltoallv(
                    send,
                    send_counts.as_ptr(),
                    send_offsets.as_ptr(),
                    dtype,
                    receive,
                    receive_counts.as_ptr(),
                    receive_offsets.as_ptr(),
                    dtype,
                    handle,
                )
            };
            check(rc, "MPI_Alltoallv")?;
        }
        Collective::Barrier => {
            // SAFETY: `handle` is a live communicator of this thread.
            check(unsafe { ffi::MPI_Barrier(handle) }, "MPI_Barrier")?;
        }
        Collective::Send { .. } | Collective::Recv { .. } => unreachable!("sends and receives are started, not run"),
    }
    Ok(())
}

/// The running sums of `counts`, where each part starts.
fn offsets(counts: &[c_int]) -> Result<Vec<c_int>> {
    let mut at: c_int = 0;
    counts
        .iter()
        .map(|&c| {
            let start = at;
            at = at
                .checked_add(c)
                .ok_or_else(|| Error::value_error("more elements in total than MPI's counts reach"))?;
            Ok(start)
        })
        .collect()
}
