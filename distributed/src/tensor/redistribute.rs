//! Moving a DTensor's local tensors from one placement to another with collectives, as
//! PyTorch's `redistribute` chooses them: `Shard` to `Replicate` is an all-gather, `Partial` to
//! `Replicate` an all-reduce, `Partial` to `Shard` a reduce-scatter (even pieces), `Shard` to another
//! `Shard` an all-to-all; `Replicate` to `Shard` or `Partial` needs no communication.

use torchfn_runtime::{Error, Result, Tensor};

use super::debug;
use super::mesh::DeviceMesh;
use super::placement::{Placement, shard_range};
use crate::collectives::{
    ReduceOp, all_gather, all_gather_into_tensor, all_reduce, all_to_all_single, reduce_scatter_tensor,
};

/// The local tensor of rank `rank`'s share, under `to`, of the global tensor of `shape` that
/// `local` holds under `from` (both normalized). The result is contiguous and owns its memory
/// (never `local` itself when communication happened).
pub(crate) fn redistribute_local(
    local: &Tensor,
    shape: &[usize],
    from: Placement,
    to: Placement,
    mesh: &DeviceMesh,
) -> Result<Tensor> {
    let ranks = mesh.size();
    let rank = mesh.get_local_rank()?;
    let group = Some(mesh.get_group());
    let _no_grad = torchfn_runtime::autograd::no_grad();
    Ok(match (from, to) {
        (Placement::Replicate, Placement::Replicate) => local.clone(),
        _ if from == to => local.clone(),
        (Placement::Shard(d), Placement::Replicate) => gather(local, shape, d as usize, mesh)?,
        (Placement::Replicate, Placement::Shard(d)) => chunk(local, shape, d as usize, ranks, rank)?,
        (Placement::Partial(op), Placement::Replicate) => {
            let out = copied(local)?;
            debug::record("all_reduce");
            all_reduce(&out, op, group, false)?;
            out
        }
        (Placement::Partial(op), Placement::Shard(d)) => {
            let d = d as usize;
            if shape[d].is_multiple_of(ranks) && op != ReduceOp::Avg {
                // Even pieces: a reduce-scatter along the first dimension, with dimension `d`
                // moved there and back.
                let front = local.transpose(0, d as i64)?.contiguous()?;
                let mut local_shape = front.shape()?.to_vec();
                local_shape[0] /= ranks;
                let out = torchfn_runtime::zeros(local_shape, local.dtype()?, local.device()?)?;
                debug::record("reduce_scatter_tensor");
                reduce_scatter_tensor(&out, &front, op, group, false)?;
                out.transpose(0, d as i64)?.contiguous()?
            } else {
                let full = redistribute_local(local, shape, from, Placement::Replicate, mesh)?;
                chunk(&full, shape, d, ranks, rank)?
            }
        }
        // The whole value as one rank's contribution: exact, and of the same dtype.
        (Placement::Replicate, Placement::Partial(op)) => match op {
            ReduceOp::Sum if rank != 0 => torchfn_runtime::zeros_like(local, None)?,
            ReduceOp::Product if rank != 0 => torchfn_runtime::ones_like(local, None)?,
            _ => copied(local)?,
        },
        (Placement::Shard(a), Placement::Shard(b)) => all_to_all(local, shape, a as usize, b as usize, mesh)?,
        (Placement::Partial(_), Placement::Partial(_)) => {
            let full = redistribute_local(local, shape, from, Placement::Replicate, mesh)?;
            redistribute_local(&full, shape, Placement::Replicate, to, mesh)?
        }
        (Placement::Shard(_), Placement::Partial(_)) => return Err(unsupported(from, to)),
    })
}

fn unsupported(from: Placement, to: Placement) -> Error {
    Error::runtime_error(format!("redistribute from {from} to {to} is not supported"))
}

/// Rank `rank`'s piece of the whole tensor `full` under `Shard(d)`.
fn chunk(full: &Tensor, shape: &[usize], d: usize, ranks: usize, rank: usize) -> Result<Tensor> {
    let (start, len) = shard_range(shape[d], ranks, rank);
    copied(&full.narrow(d as i64, start as i64, len as i64)?)
}

/// A contiguous copy of `t` with memory of its own (collectives write in place).
pub(crate) fn copied(t: &Tensor) -> Result<Tensor> {
    torchfn_runtime::clone(&t.contiguous()?)
}

/// The whole tensor from every rank's piece along dimension `d` (an all-gather).
fn gather(local: &Tensor, shape: &[usize], d: usize, mesh: &DeviceMesh) -> Result<Tensor> {
    let (dtype, device) = (local.dtype()?, local.device()?);
    debug::record("all_gather_into_tensor");
    if d == 0 && shape.first().is_some_and(|n| n.is_multiple_of(mesh.size())) {
        // Even pieces along the first dimension: gathered straight into the result.
        let full = torchfn_runtime::zeros(shape.to_vec(), dtype, device)?;
        all_gather_into_tensor(&full, &local.contiguous()?, Some(mesh.get_group()), false)?;
        return Ok(full);
    }
    let pieces: Vec<Tensor> = (0..mesh.size())
        .map(|r| {
            let mut piece = shape.to_vec();
            piece[d] = shard_range(shape[d], mesh.size(), r).1;
            torchfn_runtime::zeros(piece, dtype, device)
        })
        .collect::<Result<_>>()?;
    all_gather(&pieces, &local.contiguous()?, Some(mesh.get_group()), false)?;
    torchfn_runtime::cat(&pieces, d as i64)
}

/// From pieces along `a` to pieces along `b`: each rank sends rank `r` the part of its piece
/// that falls in `r`'s piece along `b` (an all-to-all), and joins what it receives along `a`.
fn all_to_all(local: &Tensor, shape: &[usize], a: usize, b: usize, mesh: &DeviceMesh) -> Result<Tensor> {
    let (ranks, rank) = (mesh.size(), mesh.get_local_rank()?);
    let local_shape = local.shape()?.to_vec();
    let sent: Vec<Tensor> = (0..ranks)
        .map(|r| {
            let (start, len) = shard_range(shape[b], ranks, r);
            local.narrow(b as i64, start as i64, len as i64)?.contiguous()?.reshape(&[-1])
        })
        .collect::<Result<_>>()?;
    let input_splits: Vec<usize> = sent.iter().map(Tensor::numel).collect::<Result<_>>()?;
    // What rank `s` sends here: its piece along `a`, this rank's along `b`.
    let received_shapes: Vec<Vec<usize>> = (0..ranks)
        .map(|s| {
            let mut piece = local_shape.clone();
            piece[a] = shard_range(shape[a], ranks, s).1;
            piece[b] = shard_range(shape[b], ranks, rank).1;
            piece
        })
        .collect();
    let output_splits: Vec<usize> = received_shapes.iter().map(|s| s.iter().product()).collect();
    let output = torchfn_runtime::zeros([output_splits.iter().sum::<usize>()], local.dtype()?, local.device()?)?;
    debug::record("all_to_all_single");
    all_to_all_single(
        &output,
        &torchfn_runtime::cat(&sent, 0)?,
        Some(&output_splits),
        Some(&input_splits),
        Some(mesh.get_group()),
        false,
    )?;
    let mut pieces = Vec::with_capacity(ranks);
    let mut start = 0;
    for (shape, n) in received_shapes.iter().zip(&output_splits) {
        let dims: Vec<i64> = shape.iter().map(|&x| x as i64).collect();
        pieces.push(output.narrow(0, start as i64, *n as i64)?.reshape(&dims)?);
        start += n;
    }
    torchfn_runtime::cat(&pieces, a as i64)?.contiguous()
}
