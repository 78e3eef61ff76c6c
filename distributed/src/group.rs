//! Process groups: the default group `init_process_group` makes, subgroups, and destroying
//! them.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use torchfn_runtime::{Error, Result};

use crate::engine::{self, Engine};
use crate::work::Work;

/// How long a collective may take before [`Work::wait`] gives up: PyTorch's default, 30
/// minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// A set of processes that communicate (PyTorch's `ProcessGroup`): the default group of
/// every process, made by [`init_process_group`], or a subgroup made by [`new_group`].
/// Cloning shares the group.
#[derive(Clone)]
pub struct ProcessGroup(Arc<Inner>);

struct Inner {
    /// The engine's name for this group's communicator.
    id: u64,
    /// The global ranks of the members, in the order of their rank in the group.
    ranks: Vec<usize>,
    /// This process's rank in the group; `None` when it is not a member.
    rank: Option<usize>,
    timeout: Duration,
    engine: Arc<Engine>,
    /// Why the group cannot be used any more: destroyed, or a collective that timed out.
    broken: Mutex<Option<String>>,
}

impl ProcessGroup {
    /// This process's rank in the group (`get_rank(group)`); `None` when it is not a member
    /// (PyTorch's -1).
    pub fn rank(&self) -> Option<usize> {
        self.0.rank
    }

    /// The number of processes in the group (`get_world_size(group)`).
    pub fn size(&self) -> usize {
        self.0.ranks.len()
    }

    /// The global ranks of the members, by rank in the group (`get_process_group_ranks`).
    pub fn ranks(&self) -> &[usize] {
        &self.0.ranks
    }

    /// How long an operation of this group may take (see [`Work::wait`]).
    pub fn timeout(&self) -> Duration {
        self.0.timeout
    }

    /// The global rank of the group's rank `group_rank` (`get_global_rank`).
    pub fn global_rank(&self, group_rank: usize) -> Result<usize> {
        self.0.ranks.get(group_rank).copied().ok_or_else(|| {
            Error::value_error(format!("group rank {group_rank} is out of range: the group has {} ranks", self.size()))
        })
    }

    /// The group rank of the global rank `global_rank` (`get_group_rank`); an error when that
    /// process is not a member.
    pub fn group_rank(&self, global_rank: usize) -> Result<usize> {
        self.0.ranks.iter().position(|&r| r == global_rank).ok_or_else(|| {
            Error::value_error(format!(
                "rank {global_rank} is not part of {}: its members are {:?}",
                self.describe(),
                self.0.ranks
            ))
        })
    }

    /// The engine and the group's communicator, when the group can be used.
    pub(crate) fn usable(&self) -> Result<(&Engine, u64)> {
        if let Some(why) = &*self.0.broken.lock() {
            return Err(Error::runtime_error(format!("{} cannot be used: {why}", self.describe())));
        }
        Ok((&self.0.engine, self.0.id))
    }

    /// Marks the group unusable, saying why (the first reason stays).
    pub(crate) fn break_with(&self, why: &str) {
        self.0.broken.lock().get_or_insert_with(|| why.to_string());
    }

    /// The group in words, for messages: `process group 1 (ranks [0, 1])`.
    pub(crate) fn describe(&self) -> String {
        format!("process group {} (ranks {:?})", self.0.id, self.0.ranks)
    }
}

impl fmt::Debug for ProcessGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProcessGroup(id={}, ranks={:?}, rank={:?}, backend=mpi)", self.0.id, self.0.ranks, self.0.rank)
    }
}

/// How [`init_process_group_with`] sets up the default group: PyTorch's
/// `init_process_group(backend, rank=, world_size=, timeout=)`.
#[derive(Clone, Debug)]
pub struct InitOptions {
    /// The backend's name: `"mpi"`, the one torchfn has.
    pub backend: String,
    /// This process's rank, when the launcher's must be checked (MPI assigns it).
    pub rank: Option<usize>,
    /// The number of processes, when the launcher's must be checked (MPI knows it).
    pub world_size: Option<usize>,
    /// How long a collective may take before [`Work::wait`] gives up with an error.
    pub timeout: Duration,
}

impl InitOptions {
    /// The options of `init_process_group(backend)`: rank and size from MPI, the default
    /// timeout.
    pub fn new(backend: &str) -> InitOptions {
        InitOptions { backend: backend.to_string(), rank: None, world_size: None, timeout: DEFAULT_TIMEOUT }
    }

    /// The same options with another timeout.
    pub fn timeout(self, timeout: Duration) -> InitOptions {
        InitOptions { timeout, ..self }
    }
}

struct Registry {
    default: Option<ProcessGroup>,
    /// Every group made since the default one, to destroy with it.
    groups: Vec<ProcessGroup>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { default: None, groups: Vec::new() });

/// The engine's names for the groups' communicators, one per group made in this process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Whether torchfn was built with the MPI backend (the `mpi` cargo feature):
/// `torch.distributed.is_mpi_available()`.
pub fn is_mpi_available() -> bool {
    cfg!(feature = "mpi")
}

/// Whether the default process group exists (`is_initialized`).
pub fn is_initialized() -> bool {
    REGISTRY.lock().default.is_some()
}

/// Makes the default process group over every process of the MPI job
/// (`init_process_group(backend)`): rank and world size come from MPI. Start the program
/// with `mpirun -np N`; started alone, it is a group of one.
///
/// Errors: a backend other than `"mpi"`, a group that already exists, and, when torchfn was
/// built without its `mpi` feature, every call.
pub fn init_process_group(backend: &str) -> Result<()> {
    init_process_group_with(InitOptions::new(backend))
}

/// [`init_process_group`] with every option: a rank and world size to check against MPI's,
/// and the timeout of the group's operations.
pub fn init_process_group_with(options: InitOptions) -> Result<()> {
    if options.backend != "mpi" {
        return Err(Error::value_error(format!(
            "init_process_group(): backend '{}' is not available in torchfn; its backend is 'mpi'",
            options.backend
        )));
    }
    let mut registry = REGISTRY.lock();
    if registry.default.is_some() {
        return Err(Error::value_error(
            "init_process_group(): trying to initialize the default process group twice! \
             Call destroy_process_group() first",
        ));
    }
    let engine = engine::engine()?;
    let (rank, size) = engine.world();
    for (what, given, actual) in [("rank", options.rank, rank), ("world_size", options.world_size, size)] {
        if let Some(given) = given.filter(|&g| g != actual) {
            return Err(Error::value_error(format!(
                "init_process_group(): {what} {given} was given, but MPI started this process with {what} {actual} \
                 (mpirun decides both: leave them out)"
            )));
        }
    }
    let group = make_group(engine, (0..size).collect(), options.timeout)?;
    registry.default = Some(group);
    Ok(())
}

/// The default group: an error before [`init_process_group`].
pub fn default_group() -> Result<ProcessGroup> {
    REGISTRY.lock().default.clone().ok_or_else(not_initialized)
}

#[cold]
fn not_initialized() -> Error {
    let mut message =
        "Default process group has not been initialized, please make sure to call init_process_group.".to_string();
    if !is_mpi_available() {
        message.push_str(" (This build of torchfn has no process groups: build it with the `mpi` feature.)");
    }
    Error::runtime_error(message)
}

/// `group`, or the default group when `None`.
pub(crate) fn resolve(group: Option<&ProcessGroup>) -> Result<ProcessGroup> {
    match group {
        Some(g) => Ok(g.clone()),
        None => default_group(),
    }
}

/// This process's rank in `group` (the default group when `None`): `get_rank`. An error
/// before [`init_process_group`] and when the process is not a member (PyTorch returns -1;
/// [`ProcessGroup::rank`] gives `None` there).
pub fn get_rank(group: Option<&ProcessGroup>) -> Result<usize> {
    let group = resolve(group)?;
    group.rank().ok_or_else(|| Error::value_error(format!("get_rank(): this process is not in {}", group.describe())))
}

/// The number of processes in `group` (the default group when `None`): `get_world_size`.
pub fn get_world_size(group: Option<&ProcessGroup>) -> Result<usize> {
    Ok(resolve(group)?.size())
}

/// A group of the processes `ranks` (global ranks; every process when `None`), with the
/// default group's timeout (`new_group(ranks)`). Every process of the default group must
/// call it, members or not, in the same order as its other collectives; on a process that is
/// not a member, the group's collectives do nothing.
pub fn new_group(ranks: Option<&[usize]>) -> Result<ProcessGroup> {
    let default = default_group()?;
    let world = default.size();
    let mut ranks: Vec<usize> = ranks.map_or_else(|| (0..world).collect(), <[usize]>::to_vec);
    ranks.sort_unstable();
    if let Some(&bad) = ranks.iter().find(|&&r| r >= world) {
        return Err(Error::value_error(format!(
            "new_group(): rank {bad} is out of range: the world has {world} ranks"
        )));
    }
    if ranks.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::value_error(format!("new_group(): ranks {ranks:?} name a process twice")));
    }
    default.usable()?;
    let group = make_group(default.0.engine.clone(), ranks, default.timeout())?;
    REGISTRY.lock().groups.push(group.clone());
    Ok(group)
}

/// Makes a communicator for the global ranks `ranks` (sorted) and its group.
fn make_group(engine: Arc<Engine>, ranks: Vec<usize>, timeout: Duration) -> Result<ProcessGroup> {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let (world_rank, _) = engine.world();
    let rank = ranks.iter().position(|&r| r == world_rank);
    let group = ProcessGroup(Arc::new(Inner { id, ranks, rank, timeout, engine, broken: Mutex::new(None) }));
    let (work, done) = Work::start("new_group", &group);
    group.0.engine.new_communicator(id, group.0.ranks.clone(), done);
    work.wait()?;
    Ok(group)
}

/// Destroys `group`, or, with `None`, the default group and every group made since
/// (`destroy_process_group`): their operations fail from then on. Destroying the default
/// group lets [`init_process_group`] run again; MPI itself stays initialized until the process
/// exits, when torchfn finalizes it.
pub fn destroy_process_group(group: Option<&ProcessGroup>) -> Result<()> {
    let destroyed: Vec<ProcessGroup> = {
        let mut registry = REGISTRY.lock();
        match group {
            Some(g) => {
                registry.groups.retain(|other| !Arc::ptr_eq(&other.0, &g.0));
                if registry.default.as_ref().is_some_and(|d| Arc::ptr_eq(&d.0, &g.0)) {
                    registry.default = None;
                }
                vec![g.clone()]
            }
            None => {
                let default = registry.default.take().ok_or_else(not_initialized)?;
                std::iter::once(default).chain(registry.groups.drain(..)).collect()
            }
        }
    };
    for group in destroyed {
        group.break_with("it was destroyed (destroy_process_group)");
        group.0.engine.free_communicator(group.0.id);
    }
    Ok(())
}
