//! The collectives and point-to-point operations on tensors, with PyTorch's names and
//! arguments: each checks what it can on this process, describes the operation as a
//! [`Collective`] and hands it to the group's engine.

use std::fmt;

use torchfn_runtime::backend::Array;
use torchfn_runtime::{DType, Device, Error, Result, Tensor};

use crate::group::{ProcessGroup, resolve};
use crate::work::Work;

/// How a reduction combines the ranks' tensors (PyTorch's `ReduceOp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum (for bool: any).
    Sum,
    /// The mean over the group's ranks; floating-point tensors only.
    Avg,
    /// The product (for bool: all).
    Product,
    /// The smallest value (for bool: all).
    Min,
    /// The largest value (for bool: any).
    Max,
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReduceOp::Sum => "SUM",
            ReduceOp::Avg => "AVG",
            ReduceOp::Product => "PRODUCT",
            ReduceOp::Min => "MIN",
            ReduceOp::Max => "MAX",
        })
    }
}

/// One operation for the engine, on contiguous host memory. Ranks are ranks in the group,
/// and split sizes are in elements.
// Without the `mpi` feature no engine reads the operations.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) enum Collective {
    AllReduce {
        tensor: Array,
        op: ReduceOp,
    },
    Broadcast {
        tensor: Array,
        root: usize,
    },
    Reduce {
        tensor: Array,
        root: usize,
        op: ReduceOp,
    },
    /// One output per rank, in rank order: rank `i`'s input goes to `outputs[i]`, whose size
    /// must be that input's (uneven sizes are fine), through `gathered`, a buffer of the
    /// outputs' sizes added up.
    AllGather {
        outputs: Vec<Array>,
        input: Array,
        gathered: Array,
    },
    AllGatherIntoTensor {
        output: Array,
        input: Array,
    },
    ReduceScatter {
        output: Array,
        input: Array,
        op: ReduceOp,
    },
    AllToAll {
        output: Array,
        input: Array,
        output_splits: Vec<usize>,
        input_splits: Vec<usize>,
    },
    Barrier,
    Send {
        tensor: Array,
        peer: usize,
        tag: i32,
    },
    Recv {
        tensor: Array,
        peer: Option<usize>,
        tag: i32,
    },
}

/// A tensor's memory as the engine sees it: a contiguous CPU tensor's own, or a host copy of
/// a GPU tensor, copied back into it (for an output) when the work is waited for.
struct Staged {
    array: Array,
    /// For a GPU output: the tensor and its host copy.
    back: Option<(Tensor, Tensor)>,
}

/// Stages `tensor`, argument `arg` of `func`, which the operation reads, or also writes.
fn stage(tensor: &Tensor, func: &str, arg: &str, written: bool) -> Result<Staged> {
    let array = tensor.array()?;
    if !tensor.is_contiguous()? {
        return Err(Error::value_error(format!(
            "{func}(): Tensors must be contiguous: '{arg}' has shape {:?} and strides {:?}; call .contiguous() first",
            array.layout.shape.as_ref(),
            array.layout.strides.as_ref()
        )));
    }
    let device = array.device();
    if device.is_cpu() {
        return Ok(Staged { array, back: None });
    }
    if device.is_meta() {
        return Err(Error::runtime_error(format!(
            "{func}(): '{arg}' is a meta tensor, which has no data to communicate"
        )));
    }
    // A GPU tensor: one copy through host memory each way, since MPI reads and writes host
    // memory.
    let host = tensor.cpu()?.contiguous()?;
    Ok(Staged { array: host.array()?, back: written.then(|| (tensor.clone(), host)) })
}

/// [`stage`] for a collective that reduces: float16 and bfloat16, which MPI cannot add, are
/// reduced as float32 copies (PyTorch's backends also accumulate them in float32) and written
/// back rounded once.
fn stage_reduced(tensor: &Tensor, func: &str, arg: &str, written: bool) -> Result<Staged> {
    let staged = stage(tensor, func, arg, written)?;
    if !staged.array.dtype.is_reduced_float() {
        return Ok(staged);
    }
    let wide = tensor.to_device(Device::CPU, Some(DType::Float32), false, false)?;
    Ok(Staged { array: wide.array()?, back: written.then(|| (tensor.clone(), wide)) })
}

/// An error unless `op` applies to `dtype`.
fn check_op(func: &str, op: ReduceOp, dtype: DType) -> Result<()> {
    if op == ReduceOp::Avg && !dtype.is_floating_point() {
        return Err(Error::value_error(format!(
            "{func}(): ReduceOp.AVG needs a floating-point tensor, got {dtype}; use SUM and divide"
        )));
    }
    Ok(())
}

/// An error unless every tensor has `dtype`.
fn check_dtypes(func: &str, dtype: DType, others: &[(&str, &Array)]) -> Result<()> {
    for (arg, a) in others {
        if a.dtype != dtype {
            return Err(Error::type_error(format!(
                "{func}(): '{arg}' holds {}, but the input holds {dtype}: every tensor must have one dtype",
                a.dtype
            )));
        }
    }
    Ok(())
}

/// An error unless `whole` has `size` times `part`'s elements (the gathered or scattered
/// tensor of a group of `size` ranks).
fn check_blocks(
    func: &str,
    (whole_arg, whole): (&str, &Array),
    (part_arg, part): (&str, &Array),
    size: usize,
) -> Result<()> {
    if whole.numel() != part.numel() * size {
        return Err(Error::value_error(format!(
            "{func}(): {whole_arg} must have world_size times the elements of {part_arg}: it has {}, {part_arg} {} \
             and the group {size} ranks",
            whole.numel(),
            part.numel()
        )));
    }
    Ok(())
}

/// Hands `collective` to `group`'s engine; with `async_op = false`, waits for it. Outputs
/// staged through host memory are copied back when the work is waited for.
fn submit(
    func: &'static str,
    group: &ProcessGroup,
    collective: Collective,
    staged: Vec<Staged>,
    async_op: bool,
) -> Result<Work> {
    if group.rank().is_none() {
        return Ok(Work::nothing(func, group));
    }
    let (engine, id) = group.usable()?;
    let (work, done) = Work::start(func, group);
    engine.submit(id, collective, done);
    let back: Vec<(Tensor, Tensor)> = staged.into_iter().filter_map(|s| s.back).collect();
    let work = if back.is_empty() {
        work
    } else {
        work.then(move || {
            let _no_grad = torchfn_runtime::autograd::no_grad();
            for (tensor, host) in back {
                tensor.copy_(&host)?;
            }
            Ok(())
        })
    };
    if !async_op {
        work.wait()?;
    }
    Ok(work)
}

/// The group rank of global rank `rank`, argument `arg` of `func`.
fn member(func: &str, group: &ProcessGroup, arg: &str, rank: usize) -> Result<usize> {
    group.group_rank(rank).map_err(|e| Error::value_error(format!("{func}(): '{arg}': {e}")))
}

/// Reduces `tensor` over the group's ranks, in place, on every rank (`all_reduce`).
pub fn all_reduce(tensor: &Tensor, op: ReduceOp, group: Option<&ProcessGroup>, async_op: bool) -> Result<Work> {
    const F: &str = "all_reduce";
    let group = resolve(group)?;
    let t = stage_reduced(tensor, F, "tensor", true)?;
    check_op(F, op, t.array.dtype)?;
    submit(F, &group, Collective::AllReduce { tensor: t.array.clone(), op }, vec![t], async_op)
}

/// Copies `tensor` from the process of global rank `src` to every rank's `tensor`
/// (`broadcast`).
pub fn broadcast(tensor: &Tensor, src: usize, group: Option<&ProcessGroup>, async_op: bool) -> Result<Work> {
    const F: &str = "broadcast";
    let group = resolve(group)?;
    let root = member(F, &group, "src", src)?;
    let t = stage(tensor, F, "tensor", true)?;
    submit(F, &group, Collective::Broadcast { tensor: t.array.clone(), root }, vec![t], async_op)
}

/// Reduces `tensor` over the group's ranks into the `tensor` of global rank `dst`
/// (`reduce`); the others' tensors are left as they were.
pub fn reduce(tensor: &Tensor, dst: usize, op: ReduceOp, group: Option<&ProcessGroup>, async_op: bool) -> Result<Work> {
    const F: &str = "reduce";
    let group = resolve(group)?;
    let root = member(F, &group, "dst", dst)?;
    let t = stage_reduced(tensor, F, "tensor", true)?;
    check_op(F, op, t.array.dtype)?;
    submit(F, &group, Collective::Reduce { tensor: t.array.clone(), root, op }, vec![t], async_op)
}

/// Gathers every rank's `tensor` into `tensor_list` on every rank, rank `i`'s into
/// `tensor_list[i]` (`all_gather`). The ranks' tensors may differ in size (and shape), as
/// long as `tensor_list[i]` has as many elements as rank `i`'s `tensor`.
pub fn all_gather(
    tensor_list: &[Tensor],
    tensor: &Tensor,
    group: Option<&ProcessGroup>,
    async_op: bool,
) -> Result<Work> {
    const F: &str = "all_gather";
    let group = resolve(group)?;
    if tensor_list.len() != group.size() {
        return Err(Error::value_error(format!(
            "{F}(): tensor_list has {} tensors, but the group has {} ranks: give one output per rank",
            tensor_list.len(),
            group.size()
        )));
    }
    let input = stage(tensor, F, "tensor", false)?;
    let outputs: Vec<Staged> = tensor_list.iter().map(|t| stage(t, F, "tensor_list", true)).collect::<Result<_>>()?;
    let dtype = input.array.dtype;
    check_dtypes(F, dtype, &outputs.iter().map(|o| ("tensor_list", &o.array)).collect::<Vec<_>>())?;
    let total = outputs.iter().map(|o| o.array.numel()).sum::<usize>();
    let gathered = torchfn_runtime::zeros([total], dtype, None)?.array()?;
    let collective = Collective::AllGather {
        outputs: outputs.iter().map(|o| o.array.clone()).collect(),
        input: input.array.clone(),
        gathered,
    };
    submit(F, &group, collective, outputs, async_op)
}

/// Gathers every rank's `input` into `output`, rank by rank along the first dimension
/// (`all_gather_into_tensor`): `output` has `world_size` times `input`'s elements.
pub fn all_gather_into_tensor(
    output: &Tensor,
    input: &Tensor,
    group: Option<&ProcessGroup>,
    async_op: bool,
) -> Result<Work> {
    const F: &str = "all_gather_into_tensor";
    let group = resolve(group)?;
    let i = stage(input, F, "input_tensor", false)?;
    let o = stage(output, F, "output_tensor", true)?;
    check_dtypes(F, i.array.dtype, &[("output_tensor", &o.array)])?;
    check_blocks(F, ("output_tensor", &o.array), ("input_tensor", &i.array), group.size())?;
    submit(
        F,
        &group,
        Collective::AllGatherIntoTensor { output: o.array.clone(), input: i.array.clone() },
        vec![o],
        async_op,
    )
}

/// Reduces `input` over the ranks and gives rank `i` the `i`-th of `world_size` equal blocks
/// of the result, in `output` (`reduce_scatter_tensor`).
pub fn reduce_scatter_tensor(
    output: &Tensor,
    input: &Tensor,
    op: ReduceOp,
    group: Option<&ProcessGroup>,
    async_op: bool,
) -> Result<Work> {
    const F: &str = "reduce_scatter_tensor";
    let group = resolve(group)?;
    check_dtypes(F, input.dtype()?, &[("output", &output.array()?)])?;
    let i = stage_reduced(input, F, "input", false)?;
    let o = stage_reduced(output, F, "output", true)?;
    check_op(F, op, i.array.dtype)?;
    check_blocks(F, ("input", &i.array), ("output", &o.array), group.size())?;
    submit(
        F,
        &group,
        Collective::ReduceScatter { output: o.array.clone(), input: i.array.clone(), op },
        vec![o],
        async_op,
    )
}

/// Splits `input` along its first dimension, sends split `j` to rank `j`, and concatenates
/// what each rank sent into `output` (`all_to_all_single`). Split sizes are in rows of the
/// first dimension; `None` splits it evenly. Rank `j`'s `input_split_sizes[i]` must be rank
/// `i`'s `output_split_sizes[j]`.
pub fn all_to_all_single(
    output: &Tensor,
    input: &Tensor,
    output_split_sizes: Option<&[usize]>,
    input_split_sizes: Option<&[usize]>,
    group: Option<&ProcessGroup>,
    async_op: bool,
) -> Result<Work> {
    const F: &str = "all_to_all_single";
    let group = resolve(group)?;
    let i = stage(input, F, "input", false)?;
    let o = stage(output, F, "output", true)?;
    check_dtypes(F, i.array.dtype, &[("output", &o.array)])?;
    let splits = |arg: &str, a: &Array, given: Option<&[usize]>| -> Result<Vec<usize>> {
        let rows = a.layout.shape.first().copied().unwrap_or(1);
        let row = a.numel().checked_div(rows).unwrap_or(0);
        let sizes = match given {
            Some(s) if s.len() != group.size() => {
                return Err(Error::value_error(format!(
                    "{F}(): {arg}_split_sizes has {} entries for a group of {} ranks",
                    s.len(),
                    group.size()
                )));
            }
            Some(s) => s.to_vec(),
            None if rows % group.size() != 0 => {
                return Err(Error::value_error(format!(
                    "{F}(): {arg}'s first dimension ({rows}) does not split evenly over {} ranks: give the split sizes",
                    group.size()
                )));
            }
            None => vec![rows / group.size(); group.size()],
        };
        if sizes.iter().sum::<usize>() != rows {
            return Err(Error::value_error(format!(
                "{F}(): {arg}_split_sizes {sizes:?} add up to {}, but {arg}'s first dimension is {rows}",
                sizes.iter().sum::<usize>()
            )));
        }
        Ok(sizes.iter().map(|s| s * row).collect())
    };
    let output_splits = splits("output", &o.array, output_split_sizes)?;
    let input_splits = splits("input", &i.array, input_split_sizes)?;
    let collective =
        Collective::AllToAll { output: o.array.clone(), input: i.array.clone(), output_splits, input_splits };
    submit(F, &group, collective, vec![o], async_op)
}

/// Waits until every rank of the group has called it (`barrier`).
pub fn barrier(group: Option<&ProcessGroup>, async_op: bool) -> Result<Work> {
    let group = resolve(group)?;
    submit("barrier", &group, Collective::Barrier, Vec::new(), async_op)
}

/// The tag checked: MPI guarantees tags up to 32767.
fn check_tag(func: &str, tag: i32) -> Result<i32> {
    if !(0..=32767).contains(&tag) {
        return Err(Error::value_error(format!("{func}(): tag {tag} is out of range: use 0 to 32767")));
    }
    Ok(tag)
}

/// The group rank of the peer `rank` (global), which must not be this process.
fn peer(func: &str, group: &ProcessGroup, arg: &str, rank: usize) -> Result<usize> {
    let peer = member(func, group, arg, rank)?;
    if Some(peer) == group.rank() {
        return Err(Error::value_error(format!(
            "{func}(): Invalid {arg} rank {rank}: should not be the same as the rank of the current process"
        )));
    }
    Ok(peer)
}

/// Starts sending `tensor` to the process of global rank `dst` (`isend`); the tensor must not
/// be written until the work is done (writing it waits).
pub fn isend(tensor: &Tensor, dst: usize, group: Option<&ProcessGroup>, tag: i32) -> Result<Work> {
    const F: &str = "isend";
    let group = resolve(group)?;
    let peer = peer(F, &group, "dst", dst)?;
    let t = stage(tensor, F, "tensor", false)?;
    let collective = Collective::Send { tensor: t.array.clone(), peer, tag: check_tag(F, tag)? };
    submit(F, &group, collective, vec![t], true)
}

/// Sends `tensor` to the process of global rank `dst` and waits until it has gone (`send`).
pub fn send(tensor: &Tensor, dst: usize, group: Option<&ProcessGroup>, tag: i32) -> Result<()> {
    isend(tensor, dst, group, tag)?.wait()
}

/// Starts receiving into `tensor` from the process of global rank `src`, or from any process
/// when `None` (`irecv`); [`Work::source_rank`] says which. The message must have as many
/// elements, of the same dtype, as `tensor`.
pub fn irecv(tensor: &Tensor, src: Option<usize>, group: Option<&ProcessGroup>, tag: i32) -> Result<Work> {
    const F: &str = "irecv";
    let group = resolve(group)?;
    let peer = src.map(|s| peer(F, &group, "src", s)).transpose()?;
    let t = stage(tensor, F, "tensor", true)?;
    let collective = Collective::Recv { tensor: t.array.clone(), peer, tag: check_tag(F, tag)? };
    submit(F, &group, collective, vec![t], true)
}

/// Receives into `tensor` (see [`irecv`]) and returns the global rank of the sender
/// (`recv`).
pub fn recv(tensor: &Tensor, src: Option<usize>, group: Option<&ProcessGroup>, tag: i32) -> Result<usize> {
    irecv(tensor, src, group, tag)?.source_rank()
}
