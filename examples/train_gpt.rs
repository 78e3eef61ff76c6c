//! Trains the tiny GPT of the conformance suite (`examples/models/gpt.rs`) on a small text that
//! ships with the repository, character by character: a progress bar with the loss and steps per
//! second, the loss curve as an SVG plot, a safetensors checkpoint, and text sampled at the end.
//!
//! Run it with `cargo run --release --example train_gpt` (under two minutes on two cores).
//! Outputs go to `target/train_gpt/`.
//!
//! Data parallel on MPI (`--ddp`): every process trains a replica on its share of each batch,
//! and `DistributedDataParallel` averages the gradients during backward. Build with the `mpi`
//! feature and start one process per rank:
//!
//! ```sh
//! cargo build --release --features mpi --example train_gpt
//! mpirun -np 2 target/release/examples/train_gpt --ddp
//! ```
//!
//! (As root, Open MPI also wants `--allow-run-as-root`; with more ranks than cores,
//! `--oversubscribe`.) Rank 0 shows the progress and writes the outputs.
//!
//! Mixed precision (`--precision bf16`): each forward pass and loss run under
//! `torchfn::autocast("cpu", bfloat16)`, so the products run in bfloat16 while the parameters,
//! their gradients and AdamW's state stay float32 (`--precision f16` for float16).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use torchfn::nn::{Forward, Module};
use torchfn::optim::{AdamW, AdamWOptions, Optimizer};
use torchfn::prelude::*;

/// The model (`examples/models/gpt.rs`).
#[allow(dead_code)]
#[path = "models/gpt.rs"]
pub mod gpt;

/// The training text.
pub const TEXT: &str = include_str!("data/tensors.txt");

/// What a run produced.
pub struct Trained {
    /// The loss of every step.
    pub losses: Vec<f64>,
    /// The entropy of the text's letters, in nats: what a model that ignores context gets.
    pub unigram: f64,
    /// Text the model wrote.
    pub sample: String,
    /// Steps per second.
    pub steps_per_second: f64,
    /// This process's rank with `--ddp`; 0 otherwise.
    pub rank: usize,
}

/// Trains for `steps` steps on batches of `batch` windows of `context` letters, writing the plot
/// and the checkpoint into `out` (when given) and showing a progress bar when `progress`. With
/// `ddp`, this process is one rank of the default process group (initialized here): it takes
/// `batch / world_size` windows of each batch, and only rank 0 shows progress and writes. With
/// `autocast` (bfloat16 or float16), forward passes and losses run in an autocast region of
/// that dtype.
pub fn train(
    steps: usize,
    batch: usize,
    context: usize,
    out: Option<&Path>,
    progress: bool,
    ddp: bool,
    autocast: Option<DType>,
) -> Result<Trained> {
    use torchfn::distributed::{self as dist, DistributedDataParallel, ReduceOp};
    let (rank, world) = if ddp {
        dist::init_process_group("mpi")?;
        (dist::get_rank(None)?, dist::get_world_size(None)?)
    } else {
        (0, 1)
    };
    let (progress, out) = (progress && rank == 0, out.filter(|_| rank == 0));
    let letters: Vec<char> = TEXT.chars().collect::<BTreeSet<_>>().into_iter().collect();
    let ids: Vec<i64> = TEXT.chars().map(|c| letters.binary_search(&c).unwrap_or(0) as i64).collect();
    let config = gpt::GptConfig {
        n_layer: 2,
        n_head: 4,
        n_embd: 64,
        vocab_size: letters.len(),
        n_positions: context,
        dropout: 0.0,
    };
    let g = Generator::new().manual_seed(1337);
    let model = gpt::GPT2LMHeadModel::new(config, &g)?;
    // Each rank draws its own windows; the replicas start from rank 0's weights.
    let data = Generator::new().manual_seed(1337 + rank as u64);
    let (plain, replica) = if ddp { (None, Some(DistributedDataParallel::new(model)?)) } else { (Some(model), None) };
    let model: &gpt::GPT2LMHeadModel = replica.as_deref().or(plain.as_ref()).expect("one of the two holds the model");
    let options = AdamWOptions::new(3e-3).betas((0.9, 0.99)).weight_decay(0.01);
    let mut optimizer = AdamW::new(model.parameters(), options)?;

    let bar = if progress { ProgressBar::new(steps as u64) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps  {msg}")
            .map_err(|e| Error::runtime_error(e.to_string()))?,
    );
    let start = Instant::now();
    let mut losses = Vec::with_capacity(steps);
    for step in 0..steps {
        let (inputs, targets) = batch_of(&ids, batch / world, context, if ddp { &data } else { &g })?;
        optimizer.zero_grad(true)?;
        let loss = {
            let _region = autocast.map(|dtype| torchfn::autocast("cpu", dtype)).transpose()?;
            gpt::GPT2LMHeadModel::loss(&model.forward(&inputs)?, &targets)?
        };
        loss.backward()?;
        optimizer.step()?;
        if ddp {
            // The loss of the whole batch: the mean of the ranks' losses.
            dist::all_reduce(&loss, ReduceOp::Avg, None, false)?;
        }
        let value = loss.item()?.to_f64();
        losses.push(value);
        let rate = (step + 1) as f64 / start.elapsed().as_secs_f64();
        bar.set_message(format!("loss {value:.3}  {rate:.1} steps/s"));
        bar.inc(1);
    }
    bar.finish();
    let steps_per_second = steps as f64 / start.elapsed().as_secs_f64();

    if let Some(out) = out {
        std::fs::create_dir_all(out).map_err(|e| Error::os_error(format!("{}: {e}", out.display())))?;
        plot(&losses, &out.join("loss.svg"))?;
        torchfn::safetensors::save_file(&model.state_dict(), out.join("checkpoint.safetensors"))?;
    }
    model.eval();
    let sample = sample(model, &letters, &ids[..8], 200, context, &g)?;
    if ddp {
        dist::destroy_process_group(None)?;
    }
    Ok(Trained { losses, unigram: unigram_entropy(&ids), sample, steps_per_second, rank })
}

/// `batch` random windows of the text and the same windows one letter on.
fn batch_of(ids: &[i64], batch: usize, context: usize, g: &Generator) -> Result<(Tensor, Tensor)> {
    let starts = torchfn::rand([batch], g.clone(), DType::Float64, None)?.to_vec::<f64>()?;
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for s in starts {
        let at = (s * (ids.len() - context - 1) as f64) as usize;
        x.extend_from_slice(&ids[at..at + context]);
        y.extend_from_slice(&ids[at + 1..at + context + 1]);
    }
    Ok((Tensor::from_vec(x, [batch, context])?, Tensor::from_vec(y, [batch, context])?))
}

/// The entropy of the letters' frequencies, in nats.
fn unigram_entropy(ids: &[i64]) -> f64 {
    let mut counts = std::collections::HashMap::new();
    for id in ids {
        *counts.entry(id).or_insert(0usize) += 1;
    }
    let n = ids.len() as f64;
    counts.values().map(|&c| c as f64 / n).map(|p| -p * p.ln()).sum()
}

/// `length` letters written by the model after `prompt`, each drawn from its predicted distribution.
fn sample(
    model: &gpt::GPT2LMHeadModel,
    letters: &[char],
    prompt: &[i64],
    length: usize,
    context: usize,
    g: &Generator,
) -> Result<String> {
    let _no_grad = torchfn::autograd::no_grad();
    let mut ids = prompt.to_vec();
    for _ in 0..length {
        let window = &ids[ids.len().saturating_sub(context)..];
        let logits = model.forward(&Tensor::from_vec(window.to_vec(), [1, window.len()])?)?;
        let last = logits.select(1, window.len() as i64 - 1)?.reshape(&[-1])?;
        let probs = last.softmax(-1, None)?.to_vec::<f32>()?;
        let u = torchfn::rand([1], g.clone(), DType::Float64, None)?.to_vec::<f64>()?[0] as f32;
        let mut acc = 0.0;
        let next = probs.iter().position(|p| {
            acc += p;
            acc > u
        });
        ids.push(next.unwrap_or(probs.len() - 1) as i64);
    }
    Ok(ids.iter().map(|&i| letters[i as usize]).collect())
}

/// The loss curve as an SVG file.
fn plot(losses: &[f64], path: &Path) -> Result<()> {
    use plotters::prelude::*;
    let fail = |e: &dyn std::fmt::Display| Error::os_error(format!("plotting {}: {e}", path.display()));
    let root = SVGBackend::new(path, (720, 400)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let top = losses.iter().cloned().fold(0.0, f64::max) * 1.05;
    let mut chart = ChartBuilder::on(&root)
        .caption("train_gpt: loss per step", ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(0..losses.len(), 0.0..top)
        .map_err(|e| fail(&e))?;
    chart.configure_mesh().x_desc("step").y_desc("cross-entropy (nats)").draw().map_err(|e| fail(&e))?;
    chart.draw_series(LineSeries::new(losses.iter().copied().enumerate(), &BLUE)).map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))?;
    Ok(())
}

fn main() -> Result<()> {
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/train_gpt");
    let args: Vec<String> = std::env::args().collect();
    let ddp = args.iter().any(|a| a == "--ddp");
    let autocast = match args.iter().position(|a| a == "--precision").map(|i| args.get(i + 1).map(String::as_str)) {
        None | Some(Some("f32")) => None,
        Some(Some("bf16")) => Some(DType::BFloat16),
        Some(Some("f16")) => Some(DType::Float16),
        Some(other) => {
            return Err(Error::value_error(format!("--precision {other:?}: expected f32, bf16 or f16")));
        }
    };
    let trained = train(400, 8, 48, Some(&out), true, ddp, autocast)?;
    if trained.rank != 0 {
        return Ok(());
    }
    let first = trained.losses.first().copied().unwrap_or(f64::NAN);
    let last: f64 = trained.losses.iter().rev().take(20).sum::<f64>() / 20.0;
    println!(
        "loss: {first:.3} at the first step, {last:.3} over the last 20 (unigram baseline {:.3})",
        trained.unigram
    );
    println!("{:.1} steps per second", trained.steps_per_second);
    println!("wrote {} and {}", out.join("loss.svg").display(), out.join("checkpoint.safetensors").display());
    println!("sample:\n{}", trained.sample);
    Ok(())
}
