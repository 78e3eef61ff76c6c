//! The engine under the process groups: MPI on a communication thread of its own (the `mpi`
//! feature), or, without the feature, no engine, and an error saying how to get one.

#[cfg(feature = "mpi")]
mod mpi;
#[cfg(feature = "mpi")]
pub(crate) use self::mpi::{Engine, engine};

#[cfg(not(feature = "mpi"))]
mod off;
#[cfg(not(feature = "mpi"))]
pub(crate) use off::{Engine, engine};
