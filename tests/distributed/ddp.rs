//! DistributedDataParallel on 2 ranks, each taking half of gpt_tiny's batch, against one
//! process on the whole batch: the same parameters after 3 AdamW steps, also with `no_sync`
//! accumulation over two micro-batches.

use std::path::PathBuf;

use torchfn::DType;
use torchfn::distributed::{self as dist, DistributedDataParallel, DistributedSampler};
use torchfn::nn::{Forward, Layer, Module, StateDict};
use torchfn::optim::{AdamW, AdamWOptions, Optimizer};
use torchfn::prelude::*;

use crate::mpi_test;

#[allow(dead_code)]
#[path = "../../examples/models/gpt.rs"]
mod gpt;

fn golden(which: &str) -> StateDict {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/workloads/gpt_tiny"));
    torchfn::safetensors::load_file(dir.join(format!("{which}.safetensors"))).unwrap()
}

/// gpt_tiny (`tests/golden/workloads/gpt_tiny`) with its initial weights.
fn gpt_tiny() -> Result<gpt::GPT2LMHeadModel> {
    let config = gpt::GptConfig { n_layer: 2, n_head: 4, n_embd: 64, vocab_size: 128, n_positions: 32, dropout: 0.0 };
    let model = gpt::GPT2LMHeadModel::new(config, &Generator::new().manual_seed(0))?;
    model.load_state_dict(&golden("init"), true)?;
    Ok(model)
}

/// Three AdamW steps of `model`, each running `step` for the gradients.
fn train(model: &gpt::GPT2LMHeadModel, mut step: impl FnMut() -> Result<()>) -> Result<()> {
    let mut optimizer = AdamW::new(model.parameters(), AdamWOptions::new(1e-3))?;
    for _ in 0..3 {
        optimizer.zero_grad(true)?;
        step()?;
        optimizer.step()?;
    }
    Ok(())
}

fn loss(model: &gpt::GPT2LMHeadModel, ids: &Tensor, targets: &Tensor) -> Result<Tensor> {
    gpt::GPT2LMHeadModel::loss(&model.forward(ids)?, targets)
}

/// The largest difference between the two models' updates over all parameters, relative to
/// the update (`||(b - init) - (a - init)|| / ||a - init||`, the workload tests' measure),
/// checked against `limit`.
fn worst(a: &gpt::GPT2LMHeadModel, b: &gpt::GPT2LMHeadModel, limit: f64) -> Result<f64> {
    let init = golden("init");
    let mut worst: f64 = 0.0;
    for ((name, p), (_, q)) in a.named_parameters().into_iter().zip(b.named_parameters()) {
        let start = init
            .get(&name)
            .map(|t| t.to_vec::<f32>())
            .transpose()?
            .unwrap_or_else(|| vec![0.0; p.numel().unwrap_or(0)]);
        let (p, q) = (p.to_vec::<f32>()?, q.to_vec::<f32>()?);
        let (mut diff, mut update) = (0f64, 0f64);
        for ((x, y), s) in p.iter().zip(&q).zip(&start) {
            diff += ((x - y) as f64).powi(2);
            update += ((x - s) as f64).powi(2);
        }
        let e = if update == 0.0 { diff.sqrt() } else { (diff / update).sqrt() };
        assert!(e <= limit, "{name}: its update differs by {e:.2e} of itself");
        worst = worst.max(e);
    }
    Ok(worst)
}

mpi_test! {
    fn ddp_on_half_batches_trains_like_one_process_on_the_whole_batch() {
        let rank = dist::get_rank(None)?;
        let inputs = golden("inputs");
        let (ids, targets) = (inputs.get("input_ids").unwrap().clone(), inputs.get("targets").unwrap().clone());
        assert_eq!(ids.shape()?.as_ref(), [4, 16]);
        // Which rows each rank takes.
        let sampler = DistributedSampler::with(4, 2, rank, false, 0, false)?;
        let rows = Tensor::from_vec(sampler.indices().iter().map(|&i| i as i64).collect(), [2])?;
        let (my_ids, my_targets) = (ids.index_select(0, &rows)?, targets.index_select(0, &rows)?);

        let whole = gpt_tiny()?;
        train(&whole, || loss(&whole, &ids, &targets)?.backward())?;

        // Small buckets, so that several start during backward, in order.
        let ddp = DistributedDataParallel::new_with(gpt_tiny()?, None, Some(0.02))?;
        assert!(ddp.bucket_indices().len() > 3);
        train(&ddp, || loss(&ddp, &my_ids, &my_targets)?.backward())?;
        let ddp_error = worst(&whole, &ddp, 1e-3)?;

        // Gradient accumulation: one row at a time, the first backward without averaging.
        let accumulated = DistributedDataParallel::new(gpt_tiny()?)?;
        train(&accumulated, || {
            for row in 0..2 {
                let (x, y) = (my_ids.narrow(0, row, 1)?, my_targets.narrow(0, row, 1)?);
                let half = (&loss(&accumulated, &x, &y)? * 0.5)?;
                if row == 0 {
                    let _local = accumulated.no_sync();
                    half.backward()?;
                } else {
                    half.backward()?;
                }
            }
            Ok(())
        })?;
        let no_sync_error = worst(&whole, &accumulated, 1e-3)?;
        println!("rank {rank}: parameters after 3 AdamW steps, largest relative difference: ddp {ddp_error:.1e}, no_sync {no_sync_error:.1e}");
        Ok(())
    }
}

mpi_test! {
    fn ddp_starts_every_replica_from_rank_0s_parameters() {
        let rank = dist::get_rank(None)?;
        let config = gpt::GptConfig { n_layer: 1, n_head: 2, n_embd: 8, vocab_size: 16, n_positions: 8, dropout: 0.0 };
        // Different seeds: different initial weights on each rank.
        let model = gpt::GPT2LMHeadModel::new(config, &Generator::new().manual_seed(rank as u64))?;
        let ddp = DistributedDataParallel::new(model)?;
        let reference = gpt::GPT2LMHeadModel::new(
            gpt::GptConfig { n_layer: 1, n_head: 2, n_embd: 8, vocab_size: 16, n_positions: 8, dropout: 0.0 },
            &Generator::new().manual_seed(0),
        )?;
        for ((name, p), (_, q)) in reference.named_parameters().into_iter().zip(ddp.named_parameters()) {
            assert_eq!(p.to_vec::<f32>()?, q.to_vec::<f32>()?, "{name}");
        }
        Ok(())
    }
}

mpi_test! {
    fn ddp_forward_broadcasts_rank_0s_buffers_first_unless_told_not_to() {
        let rank = dist::get_rank(None)?;
        // Each rank's own batch: all ones on rank 0, all threes on rank 1.
        let x = torchfn::full([2, 1, 2, 2], 1.0 + 2.0 * rank as f64, None, None)?;
        let run = |broadcast: bool| -> Result<Vec<f32>> {
            let ddp = DistributedDataParallel::new(torchfn::nn::BatchNorm2d::new(1)?)?.broadcast_buffers(broadcast);
            // After construction the replicas agree; rank 1's statistics then drift.
            if rank == 1 {
                ddp.running_mean.tensor().fill_(100.0)?;
            }
            ddp.forward(&x)?;
            ddp.running_mean.tensor().to_vec::<f32>()
        };
        // With the broadcast each rank starts from rank 0's 0 and moves a tenth of the way to
        // its batch's mean; without it, rank 1 starts from its own 100.
        let want = 0.1 * (1.0 + 2.0 * rank as f32);
        assert_eq!(run(true)?, [want]);
        let own = if rank == 1 { 0.9 * 100.0 + 0.1 * 3.0 } else { want };
        assert_eq!(run(false)?, [own]);
        Ok(())
    }
}

/// A model whose forward takes a second branch only for batches of more than two rows, and
/// never uses one of its layers.
#[derive(Module)]
struct Branches {
    shared: torchfn::nn::Linear,
    a: torchfn::nn::Linear,
    b: torchfn::nn::Linear,
    never: torchfn::nn::Linear,
}

impl Branches {
    fn new() -> Result<Branches> {
        let g = Generator::new().manual_seed(11);
        let linear = |i, o| torchfn::nn::Linear::new(i, o, true, &g);
        Ok(Branches { shared: linear(3, 4)?, a: linear(4, 2)?, b: linear(4, 2)?, never: linear(4, 2)? })
    }
}

impl Forward for Branches {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.shared.call(x)?.relu()?;
        let y = self.a.call(&h)?;
        if x.shape()?[0] > 2 { &y + &self.b.call(&h)? } else { Ok(y) }
    }
}

mpi_test! {
    fn find_unused_parameters_leaves_what_no_rank_used_without_a_gradient() {
        let rank = dist::get_rank(None)?;
        // Rank 0's batch (2 rows) skips `b`, rank 1's (4 rows) takes it; no rank uses `never`.
        let x = (&torchfn::arange(3 * (2 + 2 * rank as i64), DType::Float32, None)?.reshape(&[-1, 3])?.sin()? * 2.0)?;
        // The gradients each rank computes alone, averaged by hand (none counts as zeros).
        let alone = Branches::new()?;
        alone.forward(&x)?.square()?.sum()?.backward()?;
        let mut averaged = Vec::new();
        for (_, p) in alone.named_parameters() {
            let g = match p.grad()? {
                Some(g) => g.clone(),
                None => torchfn::zeros_like(&p, None)?,
            };
            dist::all_reduce(&g, dist::ReduceOp::Avg, None, false)?;
            averaged.push(g);
        }
        for find in [false, true] {
            // One parameter per bucket, so that a bucket waits on the unused parameter alone.
            let ddp = DistributedDataParallel::new_with(Branches::new()?, None, Some(1e-6))?.find_unused_parameters(find);
            for _ in 0..2 {
                for p in ddp.parameters() {
                    p.set_grad(None)?;
                }
                ddp.forward(&x)?.square()?.sum()?.backward()?;
                for ((name, p), want) in ddp.named_parameters().into_iter().zip(&averaged) {
                    match p.grad()? {
                        // No rank used it: untouched with find_unused_parameters, else zeros.
                        None => assert!(find && name.starts_with("never."), "{name}: no gradient (find {find})"),
                        Some(g) => {
                            assert!(!(find && name.starts_with("never.")), "{name}: a gradient though no rank used it");
                            let diff = torchfn::max(&(&g - want)?.abs()?)?.to_vec::<f32>()?[0];
                            assert!(diff < 1e-6, "{name}: differs by {diff} from the average (find {find})");
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
