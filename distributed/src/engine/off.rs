//! Without the `mpi` feature there is no engine: `Engine` has no values, so no process group
//! can exist, and starting one says which feature to turn on.

use std::sync::Arc;

use torchfn_runtime::{Error, Result};

use crate::collectives::Collective;
use crate::work::Completion;

/// No engine: this type has no values.
pub(crate) enum Engine {}

/// The error every process group gives in a build without MPI.
pub(crate) fn engine() -> Result<Arc<Engine>> {
    Err(Error::runtime_error(
        "torchfn was built without MPI, so it has no process groups: build with the `mpi` feature \
         (torchfn = { version = \"...\", features = [\"mpi\"] }, or cargo build --features mpi) on a machine with an \
         MPI library (Debian and Ubuntu: apt-get install libopenmpi-dev openmpi-bin)",
    ))
}

impl Engine {
    pub(crate) fn world(&self) -> (usize, usize) {
        match *self {}
    }

    pub(crate) fn submit(&self, _: u64, _: Collective, _: Completion) {
        match *self {}
    }

    pub(crate) fn new_communicator(&self, _: u64, _: Vec<usize>, _: Completion) {
        match *self {}
    }

    pub(crate) fn free_communicator(&self, _: u64) {
        match *self {}
    }
}
