//! `torchfn::distributed`: PyTorch's `torch.distributed` on MPI. Process groups, the
//! collectives on tensors (`all_reduce`, `broadcast`, `all_gather`, `reduce_scatter_tensor`,
//! `all_to_all_single`, sends and receives...), asynchronous work handles, and
//! [`DistributedDataParallel`].
//!
//! ```
//! use torchfn::distributed::{self as dist, ReduceOp};
//!
//! // Started with `mpirun -np 2 ...`, every process runs this; started alone, the group has
//! // one process. A build without the `mpi` feature says so instead.
//! if let Err(e) = dist::init_process_group("mpi") {
//!     assert!(!dist::is_mpi_available() && e.to_string().contains("`mpi` feature"));
//!     return Ok(());
//! }
//! let (rank, world) = (dist::get_rank(None)?, dist::get_world_size(None)?);
//! let t = torchfn::tensor([rank as f32 + 1.0, 10.0])?;
//! dist::all_reduce(&t, ReduceOp::Sum, None, false)?;
//! let one_to_world: f32 = (1..=world).map(|r| r as f32).sum();
//! assert_eq!(t.to_vec::<f32>()?, [one_to_world, 10.0 * world as f32]);
//! dist::destroy_process_group(None)?;
//! # Ok::<(), torchfn::Error>(())
//! ```
//!
//! # How it runs
//!
//! Build with the `mpi` feature (it needs an MPI library: `apt-get install libopenmpi-dev
//! openmpi-bin` on Debian and Ubuntu) and start the program under MPI's launcher:
//! `mpirun -np 2 target/release/examples/train_gpt --ddp`. Open MPI refuses to start as root
//! unless told to: `mpirun --allow-run-as-root` or `OMPI_ALLOW_RUN_AS_ROOT=1
//! OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1`; on a machine with fewer cores than ranks add
//! `--oversubscribe`.
//!
//! MPI runs on a communication thread of its own, which initializes it, owns every
//! communicator and runs each process's operations in the order they were called (PyTorch's
//! `ProcessGroupMPI` does the same). A collective called with `async_op = true` returns at
//! once with a [`Work`] and runs while the caller computes; `async_op = false` waits for it.
//! Every rank must call a group's collectives in the same order: before moving data the ranks
//! compare what they were asked to do (operation, dtype, size, root or reduce op) and all get
//! the same error when they disagree. [`Work::wait`] gives up after the group's timeout
//! ([`InitOptions::timeout`]) with an error, when another rank stopped or hangs. MPI is
//! finalized when the process exits.
//!
//! CPU tensors go to MPI as they are, without a copy; they must be contiguous (PyTorch's
//! rule). A GPU tensor goes through one host copy each way: read into host memory before the
//! operation, written back when the work is waited for.

#![warn(missing_docs)]

mod collectives;
mod ddp;
mod engine;
mod group;
mod sampler;
pub mod tensor;
mod work;

pub use collectives::{
    ReduceOp, all_gather, all_gather_into_tensor, all_reduce, all_to_all_single, barrier, broadcast, irecv, isend,
    recv, reduce, reduce_scatter_tensor, send,
};
pub use ddp::{BackwardTiming, DistributedDataParallel, NoSyncGuard};
pub use group::{
    DEFAULT_TIMEOUT, InitOptions, ProcessGroup, default_group, destroy_process_group, get_rank, get_world_size,
    init_process_group, init_process_group_with, is_initialized, is_mpi_available, new_group,
};
pub use sampler::DistributedSampler;
pub use work::Work;

#[cfg(all(test, not(feature = "mpi")))]
mod tests {
    #[test]
    fn without_the_mpi_feature_every_group_call_says_which_feature_to_turn_on() {
        assert!(!crate::is_mpi_available());
        let err = crate::init_process_group("mpi").unwrap_err();
        assert!(err.to_string().contains("built without MPI") && err.to_string().contains("`mpi` feature"), "{err}");
        let err = crate::get_world_size(None).unwrap_err();
        assert!(err.to_string().contains("build it with the `mpi` feature"), "{err}");
    }
}
