//! torchfn::distributed on 2 local ranks: `all_reduce` bandwidth from 1 MB to 256 MB against
//! the same MPI call made directly from C (`bench/mpi_allreduce.c`, built with `mpicc`), and a
//! DistributedDataParallel training step of gpt_small on 2 ranks (half the batch each) against
//! one process on the whole batch, with the share of communication backward hid.
//!
//! `cargo bench --features mpi --bench distributed` prints the table. The bench starts
//! `mpirun -np 2` on itself and on the C program, one after the other, in the same sitting.
//! It times by hand, not with criterion: every rank must make the same number of calls, which
//! criterion's adaptive sampling cannot promise.

use std::process::Command;
use std::time::{Duration, Instant};

use torchfn::distributed::{self as dist, DistributedDataParallel, ReduceOp};
use torchfn::nn::{Forward, Module};
use torchfn::optim::{AdamW, AdamWOptions, Optimizer};
use torchfn::prelude::*;

mod common;

#[allow(dead_code)]
#[path = "../examples/models/gpt.rs"]
mod gpt;

/// Which part runs in this process (set for the processes mpirun starts).
const MODE: &str = "TORCHFN_BENCH_DISTRIBUTED";
const SIZES_MB: [usize; 5] = [1, 4, 16, 64, 256];
const STEPS: usize = 20;

fn repeats(mb: usize) -> usize {
    (512 / mb).clamp(4, 64)
}

fn gpt_small() -> Result<gpt::GPT2LMHeadModel> {
    let config = gpt::GptConfig { n_layer: 4, n_head: 4, n_embd: 128, vocab_size: 128, n_positions: 32, dropout: 0.0 };
    gpt::GPT2LMHeadModel::new(config, &Generator::new().manual_seed(0))
}

/// gpt_small's batch (4 × 32 tokens) and its targets; `rows` of it.
fn batch(rows: std::ops::Range<i64>) -> Result<(Tensor, Tensor)> {
    let g = Generator::new().manual_seed(1);
    let ids = torchfn::randint(128, [4, 33], g, DType::Int64, None)?;
    let ids = ids.narrow(0, rows.start, rows.end - rows.start)?;
    Ok((ids.narrow(1, 0, 32)?.contiguous()?, ids.narrow(1, 1, 32)?.contiguous()?))
}

/// Mean seconds per training step of `model` on `ids`, over `STEPS` after 3 warm-up steps;
/// `each` runs after every step.
fn time_steps(model: &gpt::GPT2LMHeadModel, ids: &Tensor, targets: &Tensor, mut each: impl FnMut()) -> Result<f64> {
    let mut optimizer = AdamW::new(model.parameters(), AdamWOptions::new(1e-3))?;
    let mut step = || -> Result<()> {
        optimizer.zero_grad(true)?;
        gpt::GPT2LMHeadModel::loss(&model.forward(ids)?, targets)?.backward()?;
        optimizer.step()
    };
    for _ in 0..3 {
        step()?;
    }
    let start = Instant::now();
    for _ in 0..STEPS {
        step()?;
        each();
    }
    Ok(start.elapsed().as_secs_f64() / STEPS as f64)
}

/// Inside the MPI job: the all-reduces, then the DDP steps; rank 0 prints the results.
fn ranks() -> Result<()> {
    dist::init_process_group("mpi")?;
    let rank = dist::get_rank(None)?;
    for mb in SIZES_MB {
        let t = torchfn::full([mb * 1024 * 1024 / 4], 1.0, DType::Float32, None)?;
        for _ in 0..2 {
            dist::all_reduce(&t, ReduceOp::Sum, None, false)?;
        }
        dist::barrier(None, false)?;
        let start = Instant::now();
        for _ in 0..repeats(mb) {
            dist::all_reduce(&t, ReduceOp::Sum, None, false)?;
        }
        let seconds = start.elapsed().as_secs_f64() / repeats(mb) as f64;
        if rank == 0 {
            println!("RESULT {{\"what\": \"torchfn\", \"bytes\": {}, \"seconds\": {seconds:.9}}}", mb * 1024 * 1024);
        }
    }
    let ddp = DistributedDataParallel::new(gpt_small()?)?;
    let (ids, targets) = batch(2 * rank as i64..2 * rank as i64 + 2)?;
    let (mut communication, mut exposed) = (Duration::ZERO, Duration::ZERO);
    let seconds = time_steps(&ddp, &ids, &targets, || {
        let timing = ddp.last_backward_timing();
        communication += timing.communication;
        exposed += timing.exposed;
    })?;
    if rank == 0 {
        let (c, e) = (communication.as_secs_f64() / STEPS as f64, exposed.as_secs_f64() / STEPS as f64);
        println!(
            "RESULT {{\"what\": \"ddp\", \"seconds\": {seconds:.9}, \"communication\": {c:.9}, \"exposed\": {e:.9}}}"
        );
    }
    dist::destroy_process_group(None)
}

/// Runs `program` under `mpirun -np 2` and returns the JSON of its `RESULT` lines.
fn mpirun(program: &std::path::Path, args: &[String]) -> Vec<serde_json::Value> {
    let output = Command::new("mpirun")
        .args(["-np", "2"])
        .arg(program)
        .args(args)
        .env(MODE, "ranks")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .output()
        .expect("mpirun must be on the PATH (apt-get install openmpi-bin)");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{} failed: {text}{}", program.display(), String::from_utf8_lossy(&output.stderr));
    text.lines().filter_map(|l| l.strip_prefix("RESULT ")).filter_map(|j| serde_json::from_str(j).ok()).collect()
}

fn main() -> Result<()> {
    if std::env::var_os(MODE).is_some() {
        return ranks();
    }
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    // One process on the whole batch, with every core.
    let model = gpt_small()?;
    let (ids, targets) = batch(0..4)?;
    let whole = time_steps(&model, &ids, &targets, || {})?;

    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| format!("{}/target", env!("CARGO_MANIFEST_DIR")));
    let raw = std::path::PathBuf::from(target).join("mpi_allreduce");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/mpi_allreduce.c");
    let built = Command::new("mpicc").args(["-O2", "-o"]).arg(&raw).arg(source).status();
    assert!(built.is_ok_and(|s| s.success()), "mpicc could not build {source}");
    let args: Vec<String> =
        SIZES_MB.iter().flat_map(|&mb| [(mb * 1024 * 1024).to_string(), repeats(mb).to_string()]).collect();
    let baseline = mpirun(&raw, &args);
    let ours = mpirun(&std::env::current_exe().expect("the bench's path"), &[]);

    println!("\nProcessor: {}; 2 ranks on this machine (Open MPI, shared memory)", common::processor());
    println!("\n| all_reduce, float32, sum | torchfn | MPI_Allreduce from C | torchfn / C bandwidth |");
    println!("|---|---:|---:|---:|");
    for mb in SIZES_MB {
        let bytes = (mb * 1024 * 1024) as u64;
        let find = |rows: &[serde_json::Value], what: &str| {
            rows.iter()
                .find(|r| r["what"] == what && r["bytes"].as_u64() == Some(bytes))
                .and_then(|r| r["seconds"].as_f64())
        };
        let (t, c) = (find(&ours, "torchfn").unwrap_or(f64::NAN), find(&baseline, "raw").unwrap_or(f64::NAN));
        let gbs = |s: f64| bytes as f64 / s / 1e9;
        println!(
            "| {mb} MB | {:.3} ms, {:.2} GB/s | {:.3} ms, {:.2} GB/s | {:.0}% |",
            t * 1e3,
            gbs(t),
            c * 1e3,
            gbs(c),
            100.0 * c / t
        );
    }
    let ddp = ours.iter().find(|r| r["what"] == "ddp").expect("the DDP result");
    let get = |k: &str| ddp[k].as_f64().unwrap_or(f64::NAN);
    let (step, comm, exposed) = (get("seconds"), get("communication"), get("exposed"));
    println!("\n| gpt_small training step (AdamW) | time |");
    println!("|---|---:|");
    println!("| one process, whole batch (4 × 32) | {:.2} ms |", whole * 1e3);
    println!("| DDP, 2 ranks, half the batch each | {:.2} ms |", step * 1e3);
    println!(
        "\nDDP communication per step: {:.2} ms of all-reduce, {:.2} ms of it not hidden behind backward ({:.0}% hidden)",
        comm * 1e3,
        exposed * 1e3,
        100.0 * (1.0 - exposed / comm)
    );
    Ok(())
}
