//! `torchfn::distributed` on real MPI jobs (the `mpi` feature): each test starts
//! `mpirun -np 2` (`-np 4` for the two-dimensional mesh) on this test binary, which runs the
//! test's body on every rank; the test passes when every rank does.
//!
//! Run them with `cargo test --features mpi --test distributed`; Open MPI's `mpirun` must be
//! on the PATH (`apt-get install libopenmpi-dev openmpi-bin`).

use std::process::Command;

use torchfn::distributed as dist;

mod collectives;
mod ddp;
mod dtensor;
mod faults;

/// Set in the processes mpirun starts: the body runs there.
const INSIDE: &str = "TORCHFN_MPI_TEST";

/// A test whose body runs on two MPI ranks (or `ranks = n;` of them), each with the default
/// group initialized.
macro_rules! mpi_test {
    ($(#[$attr:meta])* fn $name:ident() $body:block) => {
        crate::mpi_test! { ranks = 2; $(#[$attr])* fn $name() $body }
    };
    (ranks = $ranks:literal; $(#[$attr:meta])* fn $name:ident() $body:block) => {
        $(#[$attr])*
        #[test]
        fn $name() {
            let path = module_path!().split_once("::").map_or("", |(_, m)| m);
            crate::on_ranks($ranks, &format!("{path}::{}", stringify!($name)), || -> torchfn::Result<()> { $body });
        }
    };
}
pub(crate) use mpi_test;

/// Runs `body` on `ranks` ranks: in the test runner, starts the MPI job that runs this test
/// alone; inside the job, initializes the default group, runs `body`, and destroys the group.
pub(crate) fn on_ranks(ranks: usize, test: &str, body: impl FnOnce() -> torchfn::Result<()>) {
    if let Some(done) = std::env::var_os(INSIDE) {
        dist::init_process_group("mpi").expect("init_process_group");
        let rank = dist::get_rank(None).unwrap();
        if let Err(e) = body() {
            panic!("rank {rank}: {e:?}");
        }
        if dist::is_initialized() {
            dist::destroy_process_group(None).unwrap();
        }
        std::fs::write(std::path::Path::new(&done).join(format!("rank{rank}")), "done").unwrap();
        return;
    }
    // Each rank leaves a file here when its body has passed.
    let done = std::env::temp_dir().join(format!("torchfn-mpi-{}-{}", std::process::id(), test.replace("::", "-")));
    let _ = std::fs::remove_dir_all(&done);
    std::fs::create_dir_all(&done).unwrap();
    let exe = std::env::current_exe().expect("the test binary's path");
    let started = std::time::Instant::now();
    let output = Command::new("mpirun")
        .args(["-np", &ranks.to_string()])
        .arg(exe)
        .args([test, "--exact", "--nocapture", "--test-threads", "1"])
        .env(INSIDE, &done)
        // Open MPI refuses to run as root (CI containers) unless told, and to start more
        // ranks than cores unless told.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .output()
        .expect("mpirun must be on the PATH to run the distributed tests (apt-get install openmpi-bin)");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("{text}");
    assert!(output.status.success(), "the MPI job of {test} failed ({}): {text}", output.status);
    for rank in 0..ranks {
        let passed = done.join(format!("rank{rank}")).exists();
        assert!(passed, "rank {rank} did not run {test} to its end ({:.1?}): {text}", started.elapsed());
    }
    let _ = std::fs::remove_dir_all(&done);
}
