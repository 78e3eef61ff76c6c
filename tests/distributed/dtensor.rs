//! DTensor on 2 ranks: placements and every redistribution against the full tensor, operators
//! of each family on sharded tensors against the same operators on the full tensor, autograd
//! through DTensors, and a tensor-parallel GPT (attention heads and MLP split over the ranks)
//! against the same model unsharded: logits, loss, gradients, an AdamW step, and the
//! collectives `CommDebugMode` counts (those PyTorch's tensor parallelism issues for the plan).

use std::sync::Arc;

use torchfn::distributed::tensor::{
    ColwiseParallel, CommDebugMode, DTensor, DTensorExt, DeviceMesh, ParallelStyle, Placement, PrepareModuleInput,
    RowwiseParallel, SequenceParallel, distribute_tensor, init_device_mesh, init_device_mesh_with_names,
    parallelize_module,
};
use torchfn::distributed::{self as dist, DistributedDataParallel, ReduceOp};
use torchfn::nn::{self, Embedding, Forward, Layer, LayerNorm, Linear, Module};
use torchfn::optim::{AdamW, AdamWOptions, Optimizer};
use torchfn::prelude::*;
use torchfn::{DType, Device};

use crate::mpi_test;

use Placement::{Replicate, Shard};

fn mesh() -> Result<Arc<DeviceMesh>> {
    init_device_mesh("cpu", &[dist::get_world_size(None)?])
}

/// A tensor of `shape` with distinct values, the same on every rank.
fn values(shape: &[usize]) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    &(&torchfn::arange(n as i64, DType::Float32, None)?.reshape(&dims)?.sin()? * 3.0)? + 0.5
}

fn assert_close(got: &Tensor, want: &Tensor, what: &str) -> Result<()> {
    assert_within(got, want, 1e-5, what)
}

/// `got` is `want` within `tolerance` times its largest magnitude (at least 1).
fn assert_within(got: &Tensor, want: &Tensor, tolerance: f64, what: &str) -> Result<()> {
    assert_eq!(got.shape()?, want.shape()?, "{what}: shape");
    let diff = torchfn::max(&(got - want)?.abs()?)?.to_vec::<f32>()?[0] as f64;
    let scale = (torchfn::max(&want.abs()?)?.to_vec::<f32>()?[0] as f64).max(1.0);
    assert!(diff <= tolerance * scale, "{what}: differs by {diff} (scale {scale})");
    Ok(())
}

mpi_test! {
    fn placements_and_every_redistribution_give_the_full_tensor() {
        let mesh = mesh()?;
        let rank = dist::get_rank(None)?;
        assert_eq!(mesh.to_string(), "DeviceMesh('cpu', [0, 1])");
        let x = values(&[5, 4])?;
        // Uneven rows (3 and 2), even columns.
        for placement in [Shard(0), Shard(1), Shard(-1), Replicate] {
            let d = distribute_tensor(&x, &mesh, &[placement])?;
            assert!(d.is_dtensor() && !x.is_dtensor());
            assert_eq!(d.shape()?, x.shape()?);
            let local = d.to_local()?;
            let expected: Vec<usize> = match placement {
                Shard(0) => vec![[3, 2][rank], 4],
                Shard(_) => vec![5, 2],
                _ => vec![5, 4],
            };
            assert_eq!(local.shape()?.to_vec(), expected, "{placement}");
            assert_close(&d.full_tensor()?, &x, &format!("{placement}: full_tensor"))?;
            for to in [Shard(0), Shard(1), Replicate] {
                let moved = d.redistribute(&[to])?;
                assert_eq!(moved.placements()?, [to.normalized_for_test(2)]);
                assert_close(&moved.full_tensor()?, &x, &format!("{placement} -> {to}"))?;
            }
        }
        // Partial: each rank holds a contribution; reducing gives their sum.
        let contribution = (&x * (rank as f64 + 1.0))?;
        let p = DTensor::from_local(&contribution, &mesh, &[Placement::PARTIAL])?;
        assert_eq!(p.placements()?[0].to_string(), "Partial(sum)");
        assert_close(&p.full_tensor()?, &(&x * 3.0)?, "Partial -> Replicate")?;
        assert_close(&p.redistribute(&[Shard(1)])?.full_tensor()?, &(&x * 3.0)?, "Partial -> Shard(1)")?;
        let max = DTensor::from_local(&contribution, &mesh, &[Placement::Partial(ReduceOp::Max)])?;
        assert_close(&max.full_tensor()?, &(&x * 2.0)?.maximum(&x)?, "Partial(max)")?;
        // Replicate -> Partial -> Replicate is the identity.
        let r = distribute_tensor(&x, &mesh, &[Replicate])?;
        assert_close(&r.redistribute(&[Placement::PARTIAL])?.full_tensor()?, &x, "Replicate -> Partial")?;
        // from_local of shards: the global shape is the ranks' pieces together.
        let piece = x.narrow(0, 0, 2)?;
        let joined = DTensor::from_local(&piece, &mesh, &[Shard(0)])?;
        assert_eq!(joined.shape()?.to_vec(), [4, 4]);
        assert_close(&joined.full_tensor()?, &torchfn::cat(&[piece.clone(), piece], 0)?, "from_local")?;
        // from_local with the global shape: uneven pieces, 3 rows and 2, differentiable.
        let (start, rows) = [(0, 3), (3, 2)][rank];
        let leaf = x.narrow(0, start, rows)?.detach()?.requires_grad_(true)?;
        let uneven = DTensor::from_local_with_shape(&leaf, &mesh, &[Shard(0)], &[5, 4])?;
        assert_eq!(uneven.shape()?.to_vec(), [5, 4]);
        assert_eq!(uneven.to_local()?.shape()?.to_vec(), [rows as usize, 4]);
        assert_close(&uneven.full_tensor()?, &x, "from_local with a shape")?;
        (&uneven * 2.0)?.sum()?.full_tensor()?.backward()?;
        assert_close(&leaf.grad()?.unwrap(), &torchfn::full_like(&leaf, 2.0, None)?, "from_local with a shape: grad")?;
        Ok(())
    }
}

/// `Placement::normalized` for the tests (the crate's is private).
trait Normalized {
    fn normalized_for_test(self, ndim: i64) -> Placement;
}

impl Normalized for Placement {
    fn normalized_for_test(self, ndim: i64) -> Placement {
        match self {
            Shard(d) if d < 0 => Shard(d + ndim),
            p => p,
        }
    }
}

mpi_test! {
    fn operators_on_sharded_tensors_compute_the_full_tensor_s_results() {
        let mesh = mesh()?;
        let (a, b, bias) = (values(&[4, 6])?, values(&[6, 8])?, values(&[8])?);
        let check = |placements: [Placement; 2], f: &dyn Fn(&Tensor, &Tensor) -> Result<Tensor>| -> Result<()> {
            let want = f(&a, &b)?;
            let (da, db) = (distribute_tensor(&a, &mesh, &[placements[0]])?, distribute_tensor(&b, &mesh, &[placements[1]])?);
            let got = f(&da, &db)?;
            assert!(got.is_dtensor(), "{placements:?}");
            assert_close(&got.full_tensor()?, &want, &format!("{placements:?}"))
        };
        for pa in [Shard(0), Shard(1), Replicate] {
            for pb in [Shard(0), Shard(1), Replicate] {
                check([pa, pb], &|a, b| a.matmul(b))?;
                check([pa, pb], &|a, b| a.matmul(b)?.softmax(-1, None))?;
                check([pa, pb], &|a, b| (&a.matmul(b)?.exp()? * 2.0)?.sum())?;
                check([pa, pb], &|a, b| a.matmul(b)?.mean_dim([0i64], false))?;
                check([pa, pb], &|a, b| torchfn::amax(&a.matmul(b)?, [1i64], true))?;
                check([pa, pb], &|a, b| {
                    // a view that splits, transposes and merges dimensions
                    let y = a.matmul(b)?.view(vec![4, 2, 4])?.transpose(0, 1)?;
                    torchfn::cumsum(&y.reshape(&[2, 16])?, 1, None)
                })?;
                check([pa, pb], &|a, _| torchfn::cat(&[a.clone(), a.t()?.matmul(a)?.narrow(0, 0, 4)?], 1))?;
            }
        }
        // Broadcasting a replicated bias, a scalar, and sums of partial sums.
        let d = distribute_tensor(&a, &mesh, &[Shard(1)])?.matmul(&distribute_tensor(&b, &mesh, &[Shard(0)])?)?;
        assert_eq!(d.placements()?, [Placement::PARTIAL]);
        let with_bias = (&(&d + &distribute_tensor(&bias, &mesh, &[Replicate])?)? * 0.5)?;
        assert_close(&with_bias.full_tensor()?, &(&(&a.matmul(&b)? + &bias)? * 0.5)?, "partial + bias")?;
        // Reading a value gathers it.
        let s = distribute_tensor(&a, &mesh, &[Shard(0)])?.sum()?;
        assert!((s.item()?.to_f64() - a.sum()?.item()?.to_f64()).abs() < 1e-4);
        Ok(())
    }
}

mpi_test! {
    fn autograd_through_dtensors_gives_the_full_tensor_s_gradients() {
        let mesh = mesh()?;
        let (w, x) = (values(&[6, 4])?, values(&[3, 4])?);
        let reference = w.detach()?.requires_grad_(true)?;
        let loss = x.matmul(&reference.t()?)?.tanh()?.square()?.sum()?;
        loss.backward()?;
        for placement in [Shard(0), Shard(1), Replicate] {
            let dw = distribute_tensor(&w, &mesh, &[placement])?.requires_grad_(true)?;
            let dx = DTensor::from_local(&x, &mesh, &[Replicate])?;
            let dloss = dx.matmul(&dw.t()?)?.tanh()?.square()?.sum()?;
            assert_close(&dloss.full_tensor()?, &loss, "loss")?;
            dloss.backward()?;
            let grad = dw.grad()?.expect("a gradient");
            assert!(grad.is_dtensor());
            assert_close(&grad.full_tensor()?, &reference.grad()?.unwrap(), &format!("{placement}: grad"))?;
        }
        // to_local and from_local carry gradients across.
        let x_leaf = x.detach()?.requires_grad_(true)?;
        let d = DTensor::from_local(&x_leaf, &mesh, &[Replicate])?;
        let y = (&d * 3.0)?.to_local()?.sum()?;
        y.backward()?;
        assert_close(&x_leaf.grad()?.unwrap(), &torchfn::full_like(&x, 3.0, None)?, "through to_local")?;
        Ok(())
    }
}

mpi_test! {
    fn an_lstm_splits_its_batch_over_the_ranks() {
        let mesh = mesh()?;
        let (t, n, i, h) = (3, 4, 2, 5);
        let (x, state) = ((&values(&[t, n, i])? * 0.5)?, (&values(&[2, n, h])? * 0.1)?);
        let params = [values(&[4 * h, i])?, values(&[4 * h, h])?, values(&[4 * h])?, values(&[4 * h])?];
        let params: Vec<Tensor> =
            params.iter().chain(&params).map(|p| &(p * 0.2)? - 0.1).collect::<Result<_>>()?;
        // The whole batch on every rank, bidirectional (both directions of the fused layer).
        let leaves: Vec<Tensor> = params.iter().map(|p| p.detach()?.requires_grad_(true)).collect::<Result<_>>()?;
        let (out, h_n, c_n) = torchfn::lstm(&x, &[state.clone(), state.clone()], &leaves, true, 1, 0.0, true, true, false)?;
        let loss = (&(&out.tanh()?.sum()? + &h_n.sum()?)? + &c_n.square()?.sum()?)?;
        loss.backward()?;
        // The batch split over the ranks, the weights replicated.
        let dx = distribute_tensor(&x, &mesh, &[Shard(1)])?;
        let dstate = distribute_tensor(&state, &mesh, &[Shard(1)])?;
        let dparams: Vec<Tensor> = (params.iter())
            .map(|p| distribute_tensor(p, &mesh, &[Replicate])?.requires_grad_(true))
            .collect::<Result<_>>()?;
        let (dout, dh_n, dc_n) =
            torchfn::lstm(&dx, &[dstate.clone(), dstate], &dparams, true, 1, 0.0, true, true, false)?;
        assert_eq!(dout.placements()?, [Shard(1)]);
        assert_close(&dout.full_tensor()?, &out, "output")?;
        assert_close(&dh_n.full_tensor()?, &h_n, "h_n")?;
        assert_close(&dc_n.full_tensor()?, &c_n, "c_n")?;
        let dloss = (&(&dout.tanh()?.sum()? + &dh_n.sum()?)? + &dc_n.square()?.sum()?)?;
        assert_close(&dloss.full_tensor()?, &loss, "loss")?;
        dloss.backward()?;
        for (k, (d, leaf)) in dparams.iter().zip(&leaves).enumerate() {
            let grad = d.grad()?.expect("a gradient");
            assert_within(&grad.full_tensor()?, &leaf.grad()?.unwrap(), 1e-5, &format!("parameter {k}: grad"))?;
        }
        Ok(())
    }
}

mpi_test! {
    fn outputs_follow_their_inputs_and_conversions_stay_exact() {
        let mesh = mesh()?;
        let x = values(&[4, 6])?;
        // A replicated input stays replicated where nothing needs moving, in place too.
        let r = distribute_tensor(&x, &mesh, &[Replicate])?;
        assert_eq!((&r * 2.0)?.placements()?, [Replicate]);
        assert_eq!(r.exp()?.sum()?.placements()?, [Replicate]);
        r.mul_(&torchfn::tensor(3.0f32)?)?;
        assert_eq!(r.placements()?, [Replicate]);
        assert_close(&r.full_tensor()?, &(&x * 3.0)?, "mul_ of a replicated DTensor")?;
        // In place into a sharded DTensor: the other operand follows, `self` keeps its shards.
        let s = distribute_tensor(&x, &mesh, &[Shard(0)])?;
        s.add_(&r, 1)?;
        assert_eq!(s.placements()?, [Shard(0)]);
        assert_close(&s.full_tensor()?, &(&x * 4.0)?, "add_ into a sharded DTensor")?;
        // Replicate -> Partial(sum) is exact and keeps the dtype (integers too).
        let ints = torchfn::tensor([3i64, -7, 11])?;
        let p = distribute_tensor(&ints, &mesh, &[Replicate])?.redistribute(&[Placement::PARTIAL])?;
        assert_eq!(p.to_local()?.dtype()?, DType::Int64);
        assert_eq!(p.full_tensor()?.to_vec::<i64>()?, [3, -7, 11]);
        // A partial sum converted to an integer type is reduced first (truncating each
        // contribution would lose the fractions' sum).
        let half = DTensor::from_local(&torchfn::tensor([0.75f32, 1.5])?, &mesh, &[Placement::PARTIAL])?;
        let as_int = half.to(DType::Int64, false, false)?;
        assert_eq!(as_int.full_tensor()?.to_vec::<i64>()?, [1, 3]);
        // A maximum over a dimension with an empty piece (1 row over 2 ranks) on every rank.
        let one_row = distribute_tensor(&values(&[1, 4])?, &mesh, &[Shard(0)])?;
        assert_close(&torchfn::amax(&one_row, [0i64], false)?.full_tensor()?, &torchfn::amax(&values(&[1, 4])?, [0i64], false)?, "amax")?;
        // new_zeros on the DTensor's device, named explicitly, is a DTensor too.
        assert!(r.new_zeros([2], None, Device::CPU)?.is_dtensor());
        Ok(())
    }
}

mpi_test! {
    fn a_column_wise_embedding_trains_as_the_whole_one() {
        let mesh = mesh()?;
        let make = || Embedding::new(10, 6, &Generator::new().manual_seed(3));
        let (reference, mut sharded) = (make()?, make()?);
        let style = ColwiseParallel { output_layouts: Replicate, ..ColwiseParallel::default() };
        parallelize_module(&mut sharded, &mesh, &[("", &style)])?;
        assert_eq!(sharded.weight.placements()?, [Shard(1)]);
        let ids = torchfn::tensor([[1i64, 4, 4], [9, 0, 2]])?;
        let (got, want) = (sharded.call(&ids)?, reference.call(&ids)?);
        assert_close(&got, &want, "embedding output")?;
        got.square()?.sum()?.backward()?;
        want.square()?.sum()?.backward()?;
        // The backward's scatter_add runs on the shards.
        let grad = sharded.weight.grad()?.unwrap();
        assert_eq!(grad.placements()?, [Shard(1)]);
        assert_close(&grad.full_tensor()?, &reference.weight.grad()?.unwrap(), "embedding weight grad")
    }
}

mpi_test! {
    fn bad_dtensor_calls_are_errors_naming_what_was_wrong() {
        let mesh = mesh()?;
        let d = distribute_tensor(&values(&[4, 2])?, &mesh, &[Shard(0)])?;
        let err = d.nonzero().unwrap_err().to_string();
        assert!(err.contains("Operator aten.nonzero.default does not have a sharding strategy registered"), "{err}");
        let err = (&d + &values(&[4, 2])?).unwrap_err().to_string();
        assert!(err.contains("got mixed torch.Tensor and DTensor"), "{err}");
        let err = distribute_tensor(&values(&[4])?, &mesh, &[Shard(1)]).unwrap_err().to_string();
        assert!(err.contains("Shard(dim=1) is out of range"), "{err}");
        // A local tensor that is not this rank's piece of the global shape (3 rows of 6 each).
        let err = DTensor::from_local_with_shape(&values(&[2, 2])?, &mesh, &[Shard(0)], &[6, 2]).unwrap_err().to_string();
        assert!(err.contains("local tensor has shape [2, 2], but its piece of the global shape [6, 2]"), "{err}");
        assert!(err.contains("has shape [3, 2]"), "{err}");
        let err = values(&[2])?.to_local().unwrap_err().to_string();
        assert!(err.contains("not a DTensor"), "{err}");
        let err = init_device_mesh("cpu", &[2, 2]).unwrap_err().to_string();
        assert!(err.contains("the mesh shape [2, 2] has 4 ranks, but the world has 2"), "{err}");
        assert_eq!(init_device_mesh("cpu", &[2, 1])?.ndim(), 2);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// A small GPT written for tensor parallelism (separate query, key and value projections; the
// number of heads follows the width each rank sees).

#[derive(Module)]
struct Attention {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    #[module(skip)]
    head_dim: usize,
}

impl Forward for Attention {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let s = x.shape()?;
        let (b, t, d) = (s[0] as i64, s[1] as i64, self.head_dim as i64);
        let heads = |l: &Linear| l.call(x)?.view(vec![b, t, -1, d])?.transpose(1, 2);
        let (q, k, v) = (heads(&self.q)?, heads(&self.k)?, heads(&self.v)?);
        let mask = torchfn::full([t as usize, t as usize], f32::MIN, DType::Float32, x.device()?)?.triu(1)?;
        let scores = (&(&q.matmul(&k.transpose(-1, -2)?)? * (d as f64).powf(-0.5))? + &mask)?;
        let y = scores.softmax(-1, None)?.matmul(&v)?.transpose(1, 2)?.reshape(&[b, t, -1])?;
        self.o.call(&y)
    }
}

#[derive(Module)]
struct Mlp {
    fc: Linear,
    proj: Linear,
}

impl Forward for Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.proj.call(&nn::functional::gelu(&self.fc.call(x)?, "tanh")?)
    }
}

#[derive(Module)]
struct Block {
    ln_1: LayerNorm,
    attn: Attention,
    ln_2: LayerNorm,
    mlp: Mlp,
}

impl Forward for Block {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = (x + &self.attn.call(&self.ln_1.call(x)?)?)?;
        &x + &self.mlp.call(&self.ln_2.call(&x)?)?
    }
}

#[derive(Module)]
struct Gpt {
    wte: Embedding,
    wpe: Embedding,
    h: Vec<Block>,
    ln_f: LayerNorm,
    head: Linear,
}

impl Forward for Gpt {
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let t = ids.shape()?[1] as i64;
        let mut x = (&self.wte.call(ids)? + &self.wpe.call(&torchfn::arange(t, DType::Int64, None)?)?)?;
        for block in &self.h {
            x = block.call(&x)?;
        }
        self.head.call(&self.ln_f.call(&x)?)
    }
}

fn gpt(layers: usize) -> Result<Gpt> {
    let g = Generator::new().manual_seed(7);
    let (e, heads, vocab) = (32, 4, 50);
    let linear = |i, o| Linear::new(i, o, true, &g);
    let block = || -> Result<Block> {
        Ok(Block {
            ln_1: LayerNorm::new(&[e], 1e-5)?,
            attn: Attention {
                q: linear(e, e)?,
                k: linear(e, e)?,
                v: linear(e, e)?,
                o: linear(e, e)?,
                head_dim: e / heads,
            },
            ln_2: LayerNorm::new(&[e], 1e-5)?,
            mlp: Mlp { fc: linear(e, 4 * e)?, proj: linear(4 * e, e)? },
        })
    };
    Ok(Gpt {
        wte: Embedding::new(vocab, e, &g)?,
        wpe: Embedding::new(16, e, &g)?,
        h: (0..layers).map(|_| block()).collect::<Result<_>>()?,
        ln_f: LayerNorm::new(&[e], 1e-5)?,
        head: linear(e, vocab)?,
    })
}

/// The plan PyTorch's tutorials give a transformer block: queries, keys, values and the MLP's
/// first projection column-wise, the attention's output and the MLP's second row-wise.
fn plan(layers: usize) -> Vec<(String, Box<dyn ParallelStyle>)> {
    let mut plan: Vec<(String, Box<dyn ParallelStyle>)> = Vec::new();
    for i in 0..layers {
        for name in ["attn.q", "attn.k", "attn.v", "mlp.fc"] {
            plan.push((format!("h.{i}.{name}"), Box::new(ColwiseParallel::default())));
        }
        for name in ["attn.o", "mlp.proj"] {
            plan.push((format!("h.{i}.{name}"), Box::new(RowwiseParallel::default())));
        }
    }
    plan
}

/// `model` (parallelized) and `reference` (the same model unsharded) on one batch: the same
/// logits, loss, gradients and AdamW step. Returns the modes that counted the forward's and
/// the backward's collectives.
fn assert_trains_as_unsharded(model: &Gpt, reference: &Gpt) -> Result<(CommDebugMode, CommDebugMode)> {
    let ids = torchfn::tensor([[1i64, 5, 9, 2, 7, 3], [4, 4, 8, 1, 0, 6]])?;
    let targets = torchfn::tensor([[5i64, 9, 2, 7, 3, 1], [4, 8, 1, 0, 6, 2]])?;
    let loss_of = |logits: &Tensor| {
        let logits = logits.reshape(&[-1, 50])?;
        nn::functional::cross_entropy(&logits, &targets.reshape(&[-1])?, None, None, -100, None, "mean", 0.0)
    };
    let forward = CommDebugMode::new();
    let logits = {
        let _counting = forward.enter_with_module(model);
        model.call(&ids)?
    };
    let want = reference.call(&ids)?;
    assert!(!logits.is_dtensor());
    assert_close(&logits, &want, "logits")?;
    let (loss, want_loss) = (loss_of(&logits)?, loss_of(&want)?);
    assert_close(&loss, &want_loss, "loss")?;

    let backward = CommDebugMode::new();
    let counting = backward.enter();
    loss.backward()?;
    drop(counting);
    want_loss.backward()?;
    let full = |t: &Tensor| if t.is_dtensor() { t.full_tensor() } else { Ok(t.clone()) };
    let (got, expected) = (model.named_parameters(), reference.named_parameters());
    assert_eq!(got.len(), expected.len());
    for ((name, p), (_, r)) in got.iter().zip(&expected) {
        let g = p.grad()?.unwrap_or_else(|| panic!("{name}: no gradient"));
        assert_close(&full(&g)?, &r.grad()?.unwrap(), &format!("{name}.grad"))?;
    }
    // An AdamW step on the DTensor parameters: its state is DTensors too.
    for params in [model.parameters(), reference.parameters()] {
        AdamW::new(params, AdamWOptions::new(1e-2))?.step()?;
    }
    for ((name, p), (_, r)) in got.iter().zip(&expected) {
        // The keys' bias shifts every score of a query equally, which softmax ignores: its
        // gradient is rounding noise, whose sign Adam's normalisation turns into a step.
        if name.ends_with("attn.k.bias") {
            continue;
        }
        // Adam divides by the gradients' root mean square, so float32 rounding in small
        // gradients moves the step by a little of its size (lr 1e-2; 1e-4 is 1% of it).
        assert_within(&full(p.tensor())?.detach()?, &r.detach()?, 1e-4, &format!("{name} after a step"))?;
    }
    Ok((forward, backward))
}

/// Applies `plan` to `model`.
fn parallelize(model: &mut Gpt, mesh: &Arc<DeviceMesh>, plan: &[(String, Box<dyn ParallelStyle>)]) -> Result<()> {
    let entries: Vec<(&str, &dyn ParallelStyle)> = plan.iter().map(|(p, s)| (p.as_str(), s.as_ref())).collect();
    parallelize_module(model, mesh, &entries)
}

mpi_test! {
    fn tensor_parallel_gpt_gives_the_unsharded_logits_loss_gradients_and_step() {
        let mesh = mesh()?;
        let layers = 2;
        let reference = gpt(layers)?;
        let mut model = gpt(layers)?;
        parallelize(&mut model, &mesh, &plan(layers))?;
        let q = model.h[0].attn.q.weight.tensor();
        assert_eq!((q.placements()?, q.to_local()?.shape()?.to_vec()), (vec![Shard(0)], vec![16, 32]));
        assert_eq!(model.h[0].attn.o.weight.placements()?, [Shard(1)]);

        let (forward, backward) = assert_trains_as_unsharded(&model, &reference)?;
        // One all-reduce of each row-wise projection's partial sums per block, as PyTorch's plan.
        assert_eq!(forward.get_comm_counts().get("c10d_functional.all_reduce"), Some(&(2 * layers)));
        assert_eq!(forward.get_total_counts(), 2 * layers);
        let per_module = forward.get_comm_module_counts();
        // Counted in the module whose forward the output conversion runs in: the row-wise
        // projection's own forward hook runs after the tracker's (global hooks first, as in
        // PyTorch), so in its parent.
        assert_eq!(per_module["Global"]["c10d_functional.all_reduce"], 2 * layers);
        assert_eq!(per_module["Global.h.1"]["c10d_functional.all_reduce"], 2);
        assert_eq!(per_module["Global.h.0.mlp"]["c10d_functional.all_reduce"], 1);
        assert_eq!(per_module["Global.h.0.attn"]["c10d_functional.all_reduce"], 1);
        // Backward: the gradient of each column-wise projection's input (queries, keys, values,
        // the MLP's first) is a partial sum.
        assert_eq!(backward.get_comm_counts().get("c10d_functional.all_reduce"), Some(&(4 * layers)));
        Ok(())
    }
}

/// The sequence-parallel plan PyTorch's tutorial gives LLaMA, on the GPT: the token and
/// position embeddings split by rows (the vocabulary), each ending in a reduce-scatter along
/// the sequence; the norms on each rank's positions; each block's attention and MLP gathering
/// their input, their row-wise projections reduce-scattering their output; the head
/// gathering the sequence and its own columns.
fn sequence_parallel_plan(layers: usize) -> Vec<(String, Box<dyn ParallelStyle>)> {
    let rowwise = |output| RowwiseParallel { input_layouts: Replicate, output_layouts: output, ..Default::default() };
    let gather = || PrepareModuleInput {
        input_layouts: vec![Some(Shard(1))],
        desired_input_layouts: vec![Some(Replicate)],
        use_local_output: false,
    };
    let mut plan: Vec<(String, Box<dyn ParallelStyle>)> = vec![
        ("wte".into(), Box::new(rowwise(Shard(1)))),
        ("wpe".into(), Box::new(rowwise(Shard(0)))),
        ("ln_f".into(), Box::new(SequenceParallel::default())),
        (
            "head".into(),
            Box::new(ColwiseParallel { input_layouts: Shard(1), output_layouts: Replicate, use_local_output: true }),
        ),
    ];
    for i in 0..layers {
        for name in ["ln_1", "ln_2"] {
            plan.push((format!("h.{i}.{name}"), Box::new(SequenceParallel::default())));
        }
        for name in ["attn", "mlp"] {
            plan.push((format!("h.{i}.{name}"), Box::new(gather())));
        }
        for name in ["attn.q", "attn.k", "attn.v", "mlp.fc"] {
            plan.push((format!("h.{i}.{name}"), Box::new(ColwiseParallel::default())));
        }
        for name in ["attn.o", "mlp.proj"] {
            let style = RowwiseParallel { output_layouts: Shard(1), ..Default::default() };
            plan.push((format!("h.{i}.{name}"), Box::new(style)));
        }
    }
    plan
}

mpi_test! {
    fn sequence_parallel_gpt_gives_the_unsharded_logits_loss_gradients_and_step() {
        let mesh = mesh()?;
        let layers = 2;
        let reference = gpt(layers)?;
        let mut model = gpt(layers)?;
        parallelize(&mut model, &mesh, &sequence_parallel_plan(layers))?;
        assert_eq!(model.wte.weight.placements()?, [Shard(0)]);
        assert_eq!(model.wte.weight.to_local()?.shape()?, [25, 32]);
        assert_eq!(model.h[0].ln_1.weight.placements()?, [Replicate]);

        let (forward, backward) = assert_trains_as_unsharded(&model, &reference)?;
        // Megatron's collectives: no all-reduce; a reduce-scatter ends each embedding and each
        // row-wise projection, an all-gather starts each attention and MLP and the head, whose
        // columns are gathered too.
        let counts = forward.get_comm_counts();
        assert_eq!(counts.get("c10d_functional.reduce_scatter_tensor"), Some(&(2 + 2 * layers)), "{counts:?}");
        assert_eq!(counts.get("c10d_functional.all_gather_into_tensor"), Some(&(2 * layers + 2)), "{counts:?}");
        assert_eq!(counts.get("c10d_functional.all_reduce"), None, "{counts:?}");
        // Backward swaps them: an all-gather for each reduce-scatter, a reduce-scatter for each
        // all-gather but the head's columns (their gradient is each rank's own columns).
        let counts = backward.get_comm_counts();
        assert_eq!(counts.get("c10d_functional.all_gather_into_tensor"), Some(&(2 + 2 * layers)), "{counts:?}");
        assert_eq!(counts.get("c10d_functional.reduce_scatter_tensor"), Some(&(2 * layers + 1)), "{counts:?}");
        assert_eq!(counts.get("c10d_functional.all_reduce"), None, "{counts:?}");
        Ok(())
    }
}

mpi_test! {
    fn a_row_wise_embedding_looks_up_each_rank_s_rows() {
        let mesh = mesh()?;
        let rank = dist::get_rank(None)?;
        // 11 rows: 6 on rank 0, 5 on rank 1; every index of both halves looked up.
        let make = || Embedding::new(11, 4, &Generator::new().manual_seed(5));
        let ids = torchfn::tensor([[0i64, 10, 5, 6], [3, 3, 9, 1]])?;
        let outputs = [(Replicate, "all_reduce"), (Shard(1), "reduce_scatter_tensor")];
        // Both made first: a module's hooks stay where it lives (see `parallelize_module`).
        let mut modules = outputs.iter().map(|_| Ok((make()?, make()?))).collect::<Result<Vec<_>>>()?;
        for ((output, collective), (reference, sharded)) in outputs.into_iter().zip(&mut modules) {
            let style = RowwiseParallel { input_layouts: Replicate, output_layouts: output, use_local_output: false };
            parallelize_module(sharded, &mesh, &[("", &style)])?;
            assert_eq!(sharded.weight.to_local()?.shape()?, [[6, 4], [5, 4]][rank]);
            let comm = CommDebugMode::new();
            let got = {
                let _counting = comm.enter();
                sharded.call(&ids)?
            };
            assert_eq!(comm.get_comm_counts().get(&format!("c10d_functional.{collective}")), Some(&1));
            assert_eq!(got.placements()?, [output]);
            let want = reference.call(&ids)?;
            assert_close(&got.full_tensor()?, &want, "row-wise embedding output")?;
            got.square()?.sum()?.backward()?;
            want.square()?.sum()?.backward()?;
            let grad = sharded.weight.grad()?.unwrap().full_tensor()?;
            assert_close(&grad, &reference.weight.grad()?.unwrap(), "row-wise embedding weight grad")?;
        }
        // The styles' own errors.
        let mut norm = LayerNorm::new(&[4], 1e-5)?;
        let err = parallelize_module(&mut norm, &mesh, &[("", &RowwiseParallel::default())]).unwrap_err().to_string();
        assert!(err.contains("RowwiseParallel currently only support nn.Linear and nn.Embedding! (got LayerNorm)"), "{err}");
        let style = PrepareModuleInput { input_layouts: vec![Some(Shard(1))], ..Default::default() };
        let err = parallelize_module(&mut norm, &mesh, &[("", &style)]).unwrap_err().to_string();
        assert!(err.contains("PrepareModuleInput: the layouts (1) and the desired layouts (0)"), "{err}");
        Ok(())
    }
}

mpi_test! {
    ranks = 4;
    fn a_two_dimensional_mesh_composes_tensor_and_data_parallelism() {
        let rank = dist::get_rank(None)?;
        let mesh = init_device_mesh_with_names("cpu", &[2, 2], &["dp", "tp"])?;
        assert_eq!(mesh.to_string(), "DeviceMesh('cpu', [[0, 1], [2, 3]], mesh_dim_names=('dp', 'tp'))");
        let (row, column) = (rank / 2, rank % 2);
        assert_eq!(mesh.get_coordinate(), Some(vec![row, column]));
        let (dp, tp) = (mesh.get("dp")?, mesh.get("tp")?);
        assert_eq!(tp.mesh(), [2 * row, 2 * row + 1]);
        assert_eq!(dp.mesh(), [column, column + 2]);
        assert!(Arc::ptr_eq(&tp, &mesh.get("tp")?), "a dimension's mesh is the same each time");
        assert_eq!((tp.get_local_rank()?, dp.get_local_rank()?), (column, row));
        let err = mesh.get("pp").unwrap_err().to_string();
        assert!(err.contains("no dimension named \"pp\""), "{err}");
        let err = mesh.get_local_rank().unwrap_err().to_string();
        assert!(err.contains("has 2 dimensions"), "{err}");
        let err = distribute_tensor(&values(&[4])?, &mesh, &[Shard(0)]).unwrap_err().to_string();
        assert!(err.contains("lays DTensors over one mesh dimension"), "{err}");
        assert!(init_device_mesh_with_names("cpu", &[2, 2], &["dp", "dp"]).is_err());

        // Tensor parallelism within each row, DistributedDataParallel down each column: each
        // row takes half of the batch, and the model trains as one process on all of it.
        let layers = 1;
        let reference = gpt(layers)?;
        let mut model = gpt(layers)?;
        parallelize(&mut model, &tp, &plan(layers))?;
        let model = DistributedDataParallel::new_with(model, Some(dp.get_group()), None)?;
        let ids = torchfn::tensor([[1i64, 5, 9, 2, 7, 3], [4, 4, 8, 1, 0, 6], [7, 2, 2, 9, 5, 1], [0, 3, 6, 8, 8, 4]])?;
        let targets = ids.roll(-1, Some(1.into()))?;
        let loss_of = |logits: &Tensor, targets: &Tensor| {
            let logits = logits.reshape(&[-1, 50])?;
            nn::functional::cross_entropy(&logits, &targets.reshape(&[-1])?, None, None, -100, None, "mean", 0.0)
        };
        let half = |t: &Tensor| t.narrow(0, 2 * row as i64, 2);
        loss_of(&model.forward(&half(&ids)?)?, &half(&targets)?)?.backward()?;
        loss_of(&reference.call(&ids)?, &targets)?.backward()?;
        let full = |t: &Tensor| if t.is_dtensor() { t.full_tensor() } else { Ok(t.clone()) };
        let (got, expected) = (model.named_parameters(), reference.named_parameters());
        for ((name, p), (_, r)) in got.iter().zip(&expected) {
            let g = p.grad()?.unwrap_or_else(|| panic!("{name}: no gradient"));
            assert_eq!(g.is_dtensor(), p.is_dtensor(), "{name}");
            assert_close(&full(&g)?, &r.grad()?.unwrap(), &format!("{name}.grad"))?;
        }
        for params in [model.parameters(), reference.parameters()] {
            AdamW::new(params, AdamWOptions::new(1e-2))?.step()?;
        }
        for ((name, p), (_, r)) in got.iter().zip(&expected) {
            if !name.ends_with("attn.k.bias") {
                assert_within(&full(p.tensor())?.detach()?, &r.detach()?, 1e-4, &format!("{name} after a step"))?;
            }
        }
        Ok(())
    }
}

mpi_test! {
    fn random_draws_on_dtensors_are_the_whole_tensor_s_draw_from_rank_0s_state() {
        let mesh = mesh()?;
        let rank = dist::get_rank(None)?;
        // What one process seeded as rank 0 draws: a [5, 4] uniform, then dropout's mask on a
        // [3, 6] tensor of ones, then three plain numbers.
        torchfn::manual_seed(7);
        let uniform = torchfn::zeros([5, 4], None, None)?.uniform_(-1.0, 1.0, None)?;
        let dropped = nn::functional::dropout(&torchfn::ones([3, 6], None, None)?, 0.5, true, false)?;
        let after = torchfn::rand([3], None, None, None)?;

        // Every rank seeded differently: the draws follow rank 0's generator.
        for placement in [Shard(0), Shard(1), Replicate] {
            torchfn::manual_seed(7 + rank as u64);
            let d = distribute_tensor(&torchfn::zeros([5, 4], None, None)?, &mesh, &[placement])?;
            d.uniform_(-1.0, 1.0, None)?;
            assert_eq!(d.placements()?, [placement]);
            assert_close(&d.full_tensor()?, &uniform, &format!("uniform_ on {placement}"))?;
            if placement == Replicate {
                // The same numbers on every rank.
                assert_close(&d.to_local()?, &uniform, "a replicated draw")?;
            }
            let ones = distribute_tensor(&torchfn::ones([3, 6], None, None)?, &mesh, &[placement])?;
            let mask = nn::functional::dropout(&ones, 0.5, true, false)?;
            assert_close(&mask.full_tensor()?, &dropped, &format!("dropout on {placement}"))?;
            // The generators moved in step, by the whole tensors' draws.
            assert_close(&torchfn::rand([3], None, None, None)?, &after, "the next plain draw")?;
        }
        Ok(())
    }
}
