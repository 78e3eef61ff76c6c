//! With the `mpi` feature: compiles the one C line torchfn needs from the MPI headers,
//! `MPI_IN_PLACE`, whose value differs between MPI implementations (Open MPI, MPICH) and is
//! a macro bindgen cannot translate.

fn main() {
    println!("cargo:rerun-if-changed=src/engine/in_place.c");
    #[cfg(feature = "mpi")]
    {
        let library = build_probe_mpi::probe().unwrap_or_else(|errors| {
            let reasons: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            panic!(
                "the `mpi` feature needs an MPI library (on Debian or Ubuntu: apt-get install libopenmpi-dev \
                 openmpi-bin); none was found:\n{}",
                reasons.join("\n")
            )
        });
        let mut build = cc::Build::new();
        build.file("src/engine/in_place.c");
        match library.mpicc {
            Some(mpicc) => {
                build.compiler(mpicc);
            }
            None => {
                build.includes(&library.include_paths);
            }
        }
        build.compile("torchfn_mpi_in_place");
    }
}
