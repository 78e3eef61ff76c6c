//! Work handles: what an asynchronous collective returns, and how the communication thread
//! says it is done.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use torchfn_runtime::{Error, ErrorKind, Result};

use crate::group::ProcessGroup;

/// A running or finished operation of a process group (PyTorch's `Work`): what a collective
/// called with `async_op = true` returns. A call with `async_op = false` returns it finished.
///
/// The tensors the operation reads and writes are locked while it runs: reading a tensor
/// that the operation writes, or writing one it reads, waits until it has finished, as if it
/// had been [`wait`](Work::wait)ed for. After `wait` returns `Ok`, the output tensors hold the
/// result.
#[derive(Clone)]
pub struct Work {
    state: Arc<State>,
}

struct State {
    /// The operation's name, for messages (`all_reduce`).
    op: &'static str,
    group: ProcessGroup,
    outcome: Mutex<Option<Outcome>>,
    finished: Condvar,
    /// What the caller's thread does once the operation has finished, the first time it is
    /// waited for: copying a GPU tensor's result back from its host copy.
    then: Mutex<Option<Then>>,
    started: Instant,
    /// How long it took, from submission to completion.
    duration: Mutex<Option<Duration>>,
}

type Then = Box<dyn FnOnce() -> Result<()> + Send>;

/// How an operation ended: with the rank a message came from (a receive), or an error.
type Outcome = std::result::Result<Option<usize>, (ErrorKind, String)>;

impl Work {
    /// A new operation of `group`, not finished; the communication thread finishes it through
    /// the returned [`Completion`].
    pub(crate) fn start(op: &'static str, group: &ProcessGroup) -> (Work, Completion) {
        let state = Arc::new(State {
            op,
            group: group.clone(),
            outcome: Mutex::new(None),
            finished: Condvar::new(),
            then: Mutex::new(None),
            started: Instant::now(),
            duration: Mutex::new(None),
        });
        (Work { state: state.clone() }, Completion(state))
    }

    /// An operation that had nothing to do (a collective on a group this rank is not in).
    pub(crate) fn nothing(op: &'static str, group: &ProcessGroup) -> Work {
        let (work, done) = Work::start(op, group);
        done.finish(Ok(None));
        work
    }

    /// Runs `then` on the waiting thread once the operation has succeeded.
    pub(crate) fn then(self, then: impl FnOnce() -> Result<()> + Send + 'static) -> Work {
        *self.state.then.lock() = Some(Box::new(then));
        self
    }

    /// Waits for the operation, at most the group's timeout
    /// ([`InitOptions::timeout`](crate::InitOptions::timeout)), and returns its error if it
    /// failed. When the time runs out the group is unusable from then on: the other ranks did
    /// not take part (one stopped, or called another collective), and MPI cannot cancel a
    /// collective.
    pub fn wait(&self) -> Result<()> {
        self.wait_timeout(self.state.group.timeout())
    }

    /// [`wait`](Work::wait) with a timeout of its own.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let mut outcome = self.state.outcome.lock();
        while outcome.is_none() {
            if self.state.finished.wait_until(&mut outcome, deadline).timed_out() && outcome.is_none() {
                drop(outcome);
                let message = format!(
                    "{} on {} did not finish within {timeout:?}: another rank stopped, hangs, or called a different \
                     operation. MPI cannot cancel a collective, so this process group is unusable from now on",
                    self.state.op,
                    self.state.group.describe()
                );
                self.state.group.break_with(&message);
                return Err(Error::runtime_error(message));
            }
        }
        if let Some(Err((kind, message))) = &*outcome {
            return Err(Error::new(*kind, message.clone()));
        }
        drop(outcome);
        let then = self.state.then.lock().take();
        then.map_or(Ok(()), |then| then())
    }

    /// Whether the operation has finished, successfully or not (`is_completed`).
    pub fn is_completed(&self) -> bool {
        self.state.outcome.lock().is_some()
    }

    /// Whether the operation has finished without error (`is_success`).
    pub fn is_success(&self) -> bool {
        matches!(&*self.state.outcome.lock(), Some(Ok(_)))
    }

    /// The error the operation finished with (`exception`); `None` while it runs or when it
    /// succeeded.
    pub fn exception(&self) -> Option<Error> {
        match &*self.state.outcome.lock() {
            Some(Err((kind, message))) => Some(Error::new(*kind, message.clone())),
            _ => None,
        }
    }

    /// How long the operation took, from the call to its completion on the communication
    /// thread (waiting included, for a collective that other ranks joined late); `None` while
    /// it runs (PyTorch's `get_duration`).
    pub fn duration(&self) -> Option<Duration> {
        *self.state.duration.lock()
    }

    /// The global rank a receive got its message from (`_source_rank`): what `irecv` from
    /// any source needs. Waits for the operation first.
    pub fn source_rank(&self) -> Result<usize> {
        self.wait()?;
        match &*self.state.outcome.lock() {
            Some(Ok(Some(group_rank))) => self.state.group.global_rank(*group_rank),
            _ => Err(Error::runtime_error(format!("source_rank(): {} is not a receive", self.state.op))),
        }
    }
}

impl fmt::Debug for Work {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &*self.state.outcome.lock() {
            None => "running",
            Some(Ok(_)) => "done",
            Some(Err(_)) => "failed",
        };
        write!(f, "Work({}, {state})", self.state.op)
    }
}

/// The communication thread's side of a [`Work`]: finishing it wakes its waiters.
pub(crate) struct Completion(Arc<State>);

impl Completion {
    /// Finishes the operation: `Ok(Some(rank))` for a receive (the sender's rank in the
    /// group), `Ok(None)` otherwise.
    pub(crate) fn finish(self, outcome: Result<Option<usize>>) {
        let outcome = outcome.map_err(|e| (e.kind(), format!("{}: {e}", self.0.op)));
        *self.0.duration.lock() = Some(self.0.started.elapsed());
        *self.0.outcome.lock() = Some(outcome);
        self.0.finished.notify_all();
    }
}
