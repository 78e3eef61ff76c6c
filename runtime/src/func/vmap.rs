//! `vmap`: a function of one example run on a batch in one call, each operator batched by its
//! rule (see [`batching`](super::batching)).

use std::sync::Arc;

use super::batching::{self, Level, Randomness};
use super::tree::{Dims, Tree, leaves_of, rebuilt};
use crate::dispatch::{Operator, TorchDispatchMode, push_dispatch_mode};
use crate::error::{Result, bail};
use crate::ops::view::narrowed;
use crate::primitive;
use crate::protocol::Types;
use crate::tensor::{Shape, Tensor, normalize_dim};
use crate::value::{Kwargs, Value};

/// `vmap`'s arguments besides the function (PyTorch's keywords): which dimension of each
/// input is mapped and where the batch goes in each output, how random operations behave, and
/// how many examples run at once.
#[derive(Clone, Debug)]
pub struct VmapOptions {
    /// The mapped dimension of each input leaf (`in_dims`, default `0`).
    pub in_dims: Dims,
    /// Where the batch dimension goes in each output leaf (`out_dims`, default `0`).
    pub out_dims: Dims,
    /// Random operations: an error, different numbers per example, or the same (`randomness`).
    pub randomness: Randomness,
    /// At most this many examples at once (`chunk_size`; `None`: all).
    pub chunk_size: Option<usize>,
}

impl Default for VmapOptions {
    fn default() -> Self {
        VmapOptions {
            in_dims: Dims::All(Some(0)),
            out_dims: Dims::All(Some(0)),
            randomness: Randomness::Error,
            chunk_size: None,
        }
    }
}

/// `f` mapped over a batch (`torch.func.vmap(f, in_dims, out_dims)`): the returned function
/// takes the arguments with an extra dimension (`in_dims` says which; `None` for an argument
/// every example shares) and returns `f`'s results for every example, stacked along `out_dims`.
/// Operators run once for the whole batch by their batching rules, not once per example.
///
/// ```
/// use torchfn::func::vmap;
/// use torchfn::Tensor;
///
/// // A dot product of one pair of vectors, mapped over rows.
/// let dot = |(a, b): (Tensor, Tensor)| (&a * &b)?.sum();
/// let a = torchfn::tensor([[1.0f32, 2.0], [3.0, 4.0]])?;
/// let b = torchfn::tensor([1.0f32, 1.0])?;
/// let out = vmap(dot, (0, None), 0)((a, b))?;
/// assert_eq!(out.to_vec::<f32>()?, [3.0, 7.0]);
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn vmap<A: Tree, O: Tree>(
    f: impl FnMut(A) -> Result<O>,
    in_dims: impl Into<Dims>,
    out_dims: impl Into<Dims>,
) -> impl FnMut(A) -> Result<O> {
    vmap_with(f, VmapOptions { in_dims: in_dims.into(), out_dims: out_dims.into(), ..VmapOptions::default() })
}

/// [`vmap`] with every option (`randomness`, `chunk_size` too).
pub fn vmap_with<A: Tree, O: Tree>(
    mut f: impl FnMut(A) -> Result<O>,
    options: VmapOptions,
) -> impl FnMut(A) -> Result<O> {
    move |args: A| run(&mut f, &options, args)
}

/// The size of dimension `dim` of each mapped input, normalized.
fn mapped_dims(leaves: &[Tensor], dims: &[Option<i64>], options: &VmapOptions) -> Result<(Vec<Option<usize>>, usize)> {
    let mut size = None;
    let mut out = Vec::with_capacity(leaves.len());
    for (t, d) in leaves.iter().zip(dims) {
        let Some(d) = *d else {
            out.push(None);
            continue;
        };
        let shape = t.data("vmap", "input")?.layout.shape.clone();
        let n = shape.len() as i64;
        if d < -n || d >= n {
            bail!(
                Value,
                "vmap(f, in_dims={}, ...)(<inputs>): Got in_dim={d} for some input, but that input is a Tensor of \
                 dimensionality {n} so expected in_dim to satisfy -{n} <= in_dim < {n}.",
                options.in_dims
            );
        }
        let dim = normalize_dim(d, shape.len(), "vmap")?;
        match size {
            None => size = Some(shape[dim]),
            Some(n) if n != shape[dim] => {
                let sizes: Vec<usize> = leaves
                    .iter()
                    .zip(dims)
                    .filter_map(|(t, d)| {
                        let shape = t.data("vmap", "input").ok()?.layout.shape.clone();
                        normalize_dim((*d)?, shape.len(), "vmap").ok().map(|d| shape[d])
                    })
                    .collect();
                bail!(
                    Value,
                    "vmap: Expected all tensors to have the same size in the mapped dimension, got sizes {sizes:?} for \
                     the mapped dimension"
                );
            }
            _ => {}
        }
        out.push(Some(dim));
    }
    match size {
        Some(size) => Ok((out, size)),
        None => bail!(Value, "vmap: Expected at least one Tensor to vmap over"),
    }
}

fn run<A: Tree, O: Tree>(f: &mut impl FnMut(A) -> Result<O>, options: &VmapOptions, args: A) -> Result<O> {
    let leaves = leaves_of(&args);
    let dims = options.in_dims.per_leaf(&args, "in_dims")?;
    let (dims, size) = mapped_dims(&leaves, &dims, options)?;
    let chunk = options.chunk_size.unwrap_or(size);
    if chunk == 0 {
        bail!(Value, "vmap: chunk_size should be None or greater than 0. (got 0)");
    }
    if chunk >= size {
        return run_level(f, options, &args, &leaves, &dims, size);
    }
    // Chunks of the batch, one level each, their results joined along the output dimensions.
    let mut outs: Vec<Vec<Tensor>> = Vec::new();
    let mut template = None;
    for start in (0..size).step_by(chunk) {
        let n = chunk.min(size - start);
        let part: Vec<Tensor> = leaves
            .iter()
            .zip(&dims)
            .map(|(t, d)| match d {
                Some(d) => narrow(t, *d, start, n),
                None => Ok(t.clone()),
            })
            .collect::<Result<_>>()?;
        let out = run_level(f, options, &args, &part, &dims, n)?;
        outs.push(leaves_of(&out));
        template = Some(out);
    }
    let template = template.ok_or_else(|| crate::Error::runtime_error("vmap: no chunk ran"))?;
    let out_dims = options.out_dims.per_leaf(&template, "out_dims")?;
    let joined: Vec<Tensor> = (0..out_dims.len())
        .map(|i| {
            let pieces: Vec<Tensor> = outs.iter().map(|o| o[i].clone()).collect();
            match out_dims[i] {
                Some(d) => join(&pieces, d),
                None => Ok(pieces[0].clone()),
            }
        })
        .collect::<Result<_>>()?;
    rebuilt(&template, joined)
}

/// One level: the mapped inputs wrapped as batched tensors, `f` run on them, the results
/// unwrapped with their batch dimension where `out_dims` puts it.
fn run_level<A: Tree, O: Tree>(
    f: &mut impl FnMut(A) -> Result<O>,
    options: &VmapOptions,
    args: &A,
    leaves: &[Tensor],
    dims: &[Option<usize>],
    size: usize,
) -> Result<O> {
    let level = Level::new(size, options.randomness);
    let wrapped: Vec<Tensor> = leaves
        .iter()
        .zip(dims)
        .map(|(t, d)| match d {
            Some(d) => batching::add_batch_dim(&batching::movedim(t, *d, 0)?, &level),
            None => Ok(t.clone()),
        })
        .collect::<Result<_>>()?;
    let out = {
        // Random factories take no tensor, so a mode of the level sees them.
        let _mode = (options.randomness != Randomness::Same).then(|| push_dispatch_mode(VmapMode(level.clone())));
        let _live = batching::LiveLevel::enter(&level);
        f(rebuilt(args, wrapped)?)?
    };
    let out_dims = options.out_dims.per_leaf(&out, "out_dims")?;
    let outs = leaves_of(&out);
    let unwrapped: Vec<Tensor> = outs
        .iter()
        .zip(out_dims)
        .map(|(t, d)| {
            let batched = t.wrapper::<batching::Batched>().is_some_and(|b| b.level.id == level.id);
            match d {
                None if batched => {
                    bail!(Value, "vmap(f, ...): `f` can not return a BatchedTensor when out_dim is None")
                }
                None => Ok(t.clone()),
                Some(d) => {
                    let physical = batching::remove_batch_dim(t, &level)?;
                    let rank = physical.data("vmap", "output")?.layout.ndim();
                    let to = normalize_dim(d, rank, "vmap").map_err(|_| {
                        crate::Error::value_error(format!(
                            "vmap: out_dim={d} is out of range for an output of {} dimensions (with the batch dimension)",
                            rank
                        ))
                    })?;
                    batching::movedim(&physical, 0, to)
                }
            }
        })
        .collect::<Result<_>>()?;
    rebuilt(&out, unwrapped)
}

/// `n` elements of `t` from `start` along `dim` (a view).
fn narrow(t: &Tensor, dim: usize, start: usize, n: usize) -> Result<Tensor> {
    primitive::view(t, move |l| Ok(narrowed(l, dim, start, n)))
}

/// The pieces joined along `dim` (negative counts from the end).
fn join(pieces: &[Tensor], dim: i64) -> Result<Tensor> {
    let first = pieces[0].data("vmap", "output")?;
    let (rank, dtype) = (first.layout.ndim(), first.dtype);
    let dim = normalize_dim(dim, rank, "vmap")?;
    let mut shape: Vec<usize> = first.layout.shape.to_vec();
    shape[dim] = pieces.iter().map(|p| p.data("vmap", "output").map(|d| d.layout.shape[dim])).sum::<Result<usize>>()?;
    primitive::concat(pieces, dim, &Shape::from(shape), dtype)
}

/// The dispatch mode of a vmap level: random factories follow its randomness; every other
/// call goes on unchanged.
struct VmapMode(Arc<Level>);

impl TorchDispatchMode for VmapMode {
    fn torch_dispatch(&self, func: &'static Operator, _: &Types, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        if !batching::is_random_factory(func) {
            return func.call(args, kwargs);
        }
        match self.0.randomness {
            Randomness::Error => Err(batching::random_error()),
            Randomness::Same => func.call(args, kwargs),
            Randomness::Different => batching::batched_draw(func, &self.0, args, kwargs),
        }
    }

    fn name(&self) -> String {
        "VmapMode".into()
    }
}
