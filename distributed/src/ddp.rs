//! DistributedDataParallel: one model replica per process, gradients averaged over the
//! processes in buckets that start communicating during backward.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use torchfn_nn::nn::{Forward, Module};
use torchfn_runtime::{DType, Device, Error, Result, Tensor};

use crate::collectives::{ReduceOp, all_reduce, broadcast};
use crate::group::{ProcessGroup, resolve};
use crate::tensor::{DTensor, DTensorExt};
use crate::work::Work;

/// PyTorch's default bucket size, 25 MiB.
const DEFAULT_BUCKET_CAP_MB: f64 = 25.0;

/// Data parallelism (PyTorch's `nn.parallel.DistributedDataParallel`): wraps a module that
/// every process of a group holds, each process running it on its own part of the data, and
/// averages the gradients over the processes during backward, so that after `backward` every
/// replica holds the gradient of the whole batch and the optimizers keep the replicas equal.
///
/// - At construction every parameter and buffer is broadcast from rank 0 of the group, so the
///   replicas start equal.
/// - The parameters that require grad are put in buckets of about `bucket_cap_mb` MiB, in
///   reverse order of `parameters()` (about the order backward reaches them). A hook on each
///   parameter (`register_post_accumulate_grad_hook`) counts it ready when its gradient has
///   accumulated; when a bucket is complete its gradients are copied into one flat tensor
///   whose average over the ranks (`all_reduce`, `AVG`) starts at once, on the communication
///   thread, while backward goes on. Buckets start in order on every rank.
/// - When backward ends, the buckets still waiting (parameters that got no gradient count as
///   zeros) start, every bucket is waited for, and each parameter's `grad` becomes its part of
///   the averaged bucket.
/// - With [`find_unused_parameters`](DistributedDataParallel::find_unused_parameters)`(true)`
///   (PyTorch's option of that name), the forward walks the graph from its output and counts
///   the parameters it cannot reach ready at once, so that their buckets start with the rest
///   instead of waiting for the end of backward; and a parameter no rank used (found with one
///   more all-reduce of a flag per parameter) keeps its `grad` as it was (`None` after
///   `zero_grad`), as on one process, so the optimizer leaves it alone. Without it, such a
///   parameter gets a zero gradient (PyTorch raises an error at the next iteration instead).
/// - Inside [`no_sync`](DistributedDataParallel::no_sync) backward only accumulates locally;
///   the next backward outside it averages the accumulated gradients.
///
/// Buffers (batch norm's running statistics) are broadcast from rank 0 at construction and,
/// as PyTorch's `broadcast_buffers=True` does, before every forward: `ddp.forward(x)` (the
/// [`Forward`] of a module that has one) copies rank 0's buffers to every rank, then runs the
/// module's forward ([`broadcast_buffers`](DistributedDataParallel::broadcast_buffers)`(false)`
/// turns that off). The rest of the module is reached through `Deref`; a module whose forward
/// is a method of its own (`gpt.forward(ids)` returning a tuple) runs without the broadcast,
/// and [`sync_buffers`](DistributedDataParallel::sync_buffers) does it by hand.
pub struct DistributedDataParallel<M: Module> {
    module: M,
    reducer: Arc<Reducer>,
    broadcast_buffers: bool,
}

/// Turns gradient averaging back on when dropped: what
/// [`DistributedDataParallel::no_sync`] returns.
pub struct NoSyncGuard {
    reducer: Arc<Reducer>,
}

impl Drop for NoSyncGuard {
    fn drop(&mut self) {
        self.reducer.sync.store(true, Ordering::Release);
    }
}

impl<M: Module> DistributedDataParallel<M> {
    /// Wraps `module` for the default group, with 25 MiB buckets.
    pub fn new(module: M) -> Result<DistributedDataParallel<M>> {
        DistributedDataParallel::new_with(module, None, None)
    }

    /// Wraps `module` for `group` (the default group when `None`) with buckets of about
    /// `bucket_cap_mb` MiB (25 when `None`; PyTorch's `process_group` and `bucket_cap_mb`).
    /// Every process of the group must construct it, with the same module structure.
    pub fn new_with(
        module: M,
        group: Option<&ProcessGroup>,
        bucket_cap_mb: Option<f64>,
    ) -> Result<DistributedDataParallel<M>> {
        let group = resolve(group)?;
        if group.rank().is_none() {
            return Err(Error::value_error(format!(
                "DistributedDataParallel(): this process is not in {group:?}: every process that wraps the module must \
                 be a member of the group"
            )));
        }
        let cap = bucket_cap_mb.unwrap_or(DEFAULT_BUCKET_CAP_MB);
        if !(cap > 0.0 && cap.is_finite()) {
            return Err(Error::value_error(format!(
                "DistributedDataParallel(): bucket_cap_mb must be positive, got {cap}"
            )));
        }
        let params: Vec<Tensor> =
            module.parameters().into_iter().filter(|p| p.requires_grad().unwrap_or(false)).collect();
        let source = group.global_rank(0)?;
        let everything: Vec<Tensor> = module
            .parameters()
            .into_iter()
            .chain(module.named_buffers().into_iter().map(|(_, b)| b.tensor().clone()))
            .collect();
        broadcast_all(&everything, source, &group)?;
        let buckets = buckets(&params, cap * 1024.0 * 1024.0)?;
        let reducer = Arc::new(Reducer {
            group,
            state: Mutex::new(State::idle(&buckets, params.len())),
            bucket_of: (0..params.len())
                .map(|i| buckets.iter().position(|b| b.params.contains(&i)).expect("every parameter has a bucket"))
                .collect(),
            buckets,
            params,
            sync: AtomicBool::new(true),
            find_unused: AtomicBool::new(false),
            timing: Mutex::new(BackwardTiming::default()),
        });
        for (index, param) in reducer.params.iter().enumerate() {
            let weak: Weak<Reducer> = Arc::downgrade(&reducer);
            param.register_post_accumulate_grad_hook(move |_| match weak.upgrade() {
                Some(reducer) => reducer.ready(index),
                None => Ok(()),
            })?;
        }
        Ok(DistributedDataParallel { module, reducer, broadcast_buffers: true })
    }

    /// Whether [`forward`](Forward::forward) first copies rank 0's buffers to every rank
    /// (PyTorch's `broadcast_buffers`, on by default).
    pub fn broadcast_buffers(mut self, broadcast: bool) -> DistributedDataParallel<M> {
        self.broadcast_buffers = broadcast;
        self
    }

    /// Whether backward looks for the parameters the forward did not use (PyTorch's
    /// `find_unused_parameters`, off by default; see the type's documentation): their buckets
    /// start without waiting for the end of backward, and a parameter no rank used keeps its
    /// `grad`. [`forward`](Forward::forward) finds them; for a module whose forward is a method
    /// of its own, call [`prepare_for_backward`](DistributedDataParallel::prepare_for_backward)
    /// on its outputs.
    pub fn find_unused_parameters(self, find: bool) -> DistributedDataParallel<M> {
        self.reducer.find_unused.store(find, Ordering::Release);
        self
    }

    /// With [`find_unused_parameters`](DistributedDataParallel::find_unused_parameters), finds
    /// the parameters that the next backward from `outputs` will not reach (a walk over the
    /// recorded graph, as PyTorch's reducer does at the end of DDP's forward); otherwise does
    /// nothing. [`forward`](Forward::forward) calls it.
    pub fn prepare_for_backward(&self, outputs: &[Tensor]) -> Result<()> {
        if !self.reducer.find_unused.load(Ordering::Acquire) {
            return Ok(());
        }
        let reached = leaves_reached(outputs)?;
        let unused = self.reducer.params.iter().map(|p| !reached.contains(&p.__identity())).collect();
        self.reducer.state.lock().unused = unused;
        Ok(())
    }

    /// The wrapped module (PyTorch's `ddp.module`).
    pub fn module(&self) -> &M {
        &self.module
    }

    /// The wrapped module, unwrapped. Its parameters keep their hook, which does nothing once
    /// the wrapper is gone.
    pub fn into_inner(self) -> M {
        self.module
    }

    /// The group the gradients are averaged over.
    pub fn process_group(&self) -> &ProcessGroup {
        &self.reducer.group
    }

    /// The parameters of each bucket, as indices into the parameters that require grad, in
    /// the order the buckets are reduced.
    pub fn bucket_indices(&self) -> Vec<Vec<usize>> {
        self.reducer.buckets.iter().map(|b| b.params.clone()).collect()
    }

    /// Until the guard is dropped, backward accumulates gradients locally without averaging
    /// them (PyTorch's `no_sync()` context): for gradient accumulation over micro-batches,
    /// run every micro-batch's backward but the last inside it.
    pub fn no_sync(&self) -> NoSyncGuard {
        self.reducer.sync.store(false, Ordering::Release);
        NoSyncGuard { reducer: self.reducer.clone() }
    }

    /// How the last backward's averaging went: how long the buckets' all-reduces took in all,
    /// and how much of that backward did not hide (the time the end of backward waited for
    /// them). PyTorch logs the same as `avg_backward_comm_time` and the overlap.
    pub fn last_backward_timing(&self) -> BackwardTiming {
        *self.reducer.timing.lock()
    }

    /// Copies every buffer from rank 0 of the group to the others (what PyTorch's
    /// `broadcast_buffers=True` does before each forward, and [`forward`](Forward::forward)
    /// does here).
    pub fn sync_buffers(&self) -> Result<()> {
        let buffers: Vec<Tensor> = self.module.named_buffers().into_iter().map(|(_, b)| b.tensor().clone()).collect();
        broadcast_all(&buffers, self.reducer.group.global_rank(0)?, &self.reducer.group)
    }
}

impl<M: Module + Forward> Forward for DistributedDataParallel<M> {
    /// The module's forward, after copying rank 0's buffers to every rank unless
    /// [`broadcast_buffers`](DistributedDataParallel::broadcast_buffers) turned that off; with
    /// [`find_unused_parameters`](DistributedDataParallel::find_unused_parameters), the
    /// parameters its output does not depend on are found.
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        if self.broadcast_buffers && self.reducer.group.size() > 1 {
            self.sync_buffers()?;
        }
        let output = self.module.forward(input)?;
        self.prepare_for_backward(std::slice::from_ref(&output))?;
        Ok(output)
    }
}

impl<M: Module> Deref for DistributedDataParallel<M> {
    type Target = M;
    fn deref(&self) -> &M {
        &self.module
    }
}

impl<M: Module> DerefMut for DistributedDataParallel<M> {
    fn deref_mut(&mut self) -> &mut M {
        &mut self.module
    }
}

/// How one backward's gradient averaging went
/// ([`DistributedDataParallel::last_backward_timing`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BackwardTiming {
    /// The buckets' all-reduces, each from its start to its completion, added up.
    pub communication: Duration,
    /// How long the end of backward waited for them: the communication backward did not
    /// hide.
    pub exposed: Duration,
}

/// The identities of the leaves whose gradient a backward from `outputs` accumulates: the
/// `AccumulateGrad` nodes reachable from their `grad_fn`s (a leaf output is reached itself).
fn leaves_reached(outputs: &[Tensor]) -> Result<std::collections::HashSet<usize>> {
    let mut reached = std::collections::HashSet::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack = Vec::new();
    for t in outputs {
        match t.grad_fn()? {
            Some(node) => stack.push(node),
            None if t.requires_grad()? => {
                reached.insert(t.__identity());
            }
            None => {}
        }
    }
    while let Some(node) = stack.pop() {
        if !seen.insert(node.id()) {
            continue;
        }
        if let Some(leaf) = node.variable() {
            reached.insert(leaf.__identity());
        }
        stack.extend(node.next_functions().into_iter().flatten().map(|(next, _)| next));
    }
    Ok(reached)
}

/// Broadcasts every tensor (a DTensor's local tensor) from global rank `source`, all at once,
/// and waits.
fn broadcast_all(tensors: &[Tensor], source: usize, group: &ProcessGroup) -> Result<()> {
    let locals: Vec<Tensor> = tensors.iter().map(local).collect::<Result<_>>()?;
    let works: Vec<Work> = locals.iter().map(|t| broadcast(t, source, Some(group), true)).collect::<Result<_>>()?;
    works.iter().try_for_each(Work::wait)
}

/// What this rank holds of `t`: a DTensor's local tensor (its memory), any other tensor
/// itself. DDP averages what each rank holds, so a model whose parameters are DTensors (tensor
/// parallel over one mesh dimension) is averaged over another, shard by shard.
fn local(t: &Tensor) -> Result<Tensor> {
    if t.is_dtensor() {
        let _no_grad = torchfn_runtime::autograd::no_grad();
        t.to_local()
    } else {
        Ok(t.clone())
    }
}

/// Parameters averaged together: indices into the reducer's parameters.
struct Bucket {
    params: Vec<usize>,
}

/// The buckets of `params`, filled in reverse order up to `cap` bytes each, one dtype and
/// device per bucket.
fn buckets(params: &[Tensor], cap: f64) -> Result<Vec<Bucket>> {
    let mut buckets: Vec<Bucket> = Vec::new();
    let mut open: Vec<(DType, Device, f64, Vec<usize>)> = Vec::new();
    for index in (0..params.len()).rev() {
        let p = &local(&params[index])?;
        let (dtype, device) = (p.dtype()?, p.device()?);
        let bytes = (p.numel()? * dtype.itemsize()) as f64;
        let slot = match open.iter().position(|(d, v, _, _)| *d == dtype && *v == device) {
            Some(slot) => slot,
            None => {
                open.push((dtype, device, 0.0, Vec::new()));
                open.len() - 1
            }
        };
        let (_, _, size, members) = &mut open[slot];
        members.push(index);
        *size += bytes;
        if *size >= cap {
            buckets.push(Bucket { params: std::mem::take(members) });
            *size = 0.0;
        }
    }
    buckets.extend(open.into_iter().filter(|o| !o.3.is_empty()).map(|o| Bucket { params: o.3 }));
    Ok(buckets)
}

/// The gradient averaging behind a [`DistributedDataParallel`].
struct Reducer {
    group: ProcessGroup,
    buckets: Vec<Bucket>,
    /// Each parameter's bucket.
    bucket_of: Vec<usize>,
    /// The parameters that require grad, in `parameters()` order.
    params: Vec<Tensor>,
    /// `false` inside `no_sync`.
    sync: AtomicBool,
    /// `find_unused_parameters`.
    find_unused: AtomicBool,
    state: Mutex<State>,
    timing: Mutex<BackwardTiming>,
}

/// Where one backward's averaging stands.
struct State {
    /// Whether a backward has started averaging (its end-of-backward callback is queued).
    active: bool,
    /// Which parameters have their gradient.
    ready: Vec<bool>,
    /// How many of each bucket's parameters have theirs.
    counts: Vec<usize>,
    /// The next bucket to start: buckets start in order, the same on every rank.
    next: usize,
    /// The started buckets' flat gradients and their all-reduce.
    started: Vec<(Tensor, Work)>,
    /// Which parameters got their gradient from this backward (not counted ready for want
    /// of one).
    used: Vec<bool>,
    /// The parameters the last forward did not use ([`find_unused_parameters`]), counted
    /// ready when backward starts; empty when not looked for.
    ///
    /// [`find_unused_parameters`]: DistributedDataParallel::find_unused_parameters
    unused: Vec<bool>,
}

impl State {
    fn idle(buckets: &[Bucket], params: usize) -> State {
        State {
            active: false,
            ready: vec![false; params],
            counts: vec![0; buckets.len()],
            next: 0,
            started: Vec::new(),
            used: vec![false; params],
            unused: Vec::new(),
        }
    }
}

impl Reducer {
    /// Parameter `index`'s gradient has accumulated: starts every bucket that is now complete.
    fn ready(self: Arc<Self>, index: usize) -> Result<()> {
        if !self.sync.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut state = self.state.lock();
        if !state.active {
            state.active = true;
            let reducer = self.clone();
            torchfn_runtime::autograd::graph::queue_callback(move || reducer.finish())?;
            // The parameters this backward will not reach are ready now.
            for i in 0..self.params.len() {
                if state.unused.get(i) == Some(&true) {
                    self.mark_ready(&mut state, i);
                }
            }
        }
        if state.unused.get(index) == Some(&true) {
            return Err(Error::runtime_error(format!(
                "DistributedDataParallel: parameter {index} (in parameters() order, of those that require grad) got a \
                 gradient, but the forward's graph did not reach it (find_unused_parameters counted it ready as \
                 unused): was it used outside the recorded graph?"
            )));
        }
        state.used[index] = true;
        self.mark_ready(&mut state, index);
        self.start_in_order(&mut state, false)
    }

    /// Counts parameter `index` ready in its bucket (once).
    fn mark_ready(&self, state: &mut State, index: usize) {
        if !std::mem::replace(&mut state.ready[index], true) {
            state.counts[self.bucket_of[index]] += 1;
        }
    }

    /// Starts the buckets from the next one on, in order, while they are complete (or, with
    /// `all`, every one left).
    fn start_in_order(&self, state: &mut State, all: bool) -> Result<()> {
        while state.next < self.buckets.len()
            && (all || state.counts[state.next] == self.buckets[state.next].params.len())
        {
            let started = self.start(state.next)?;
            state.started.push(started);
            state.next += 1;
        }
        Ok(())
    }

    /// Copies bucket `b`'s gradients (zeros for a parameter without one) into one flat tensor
    /// and starts averaging it over the ranks.
    fn start(&self, b: usize) -> Result<(Tensor, Work)> {
        let _no_grad = torchfn_runtime::autograd::no_grad();
        let flat: Vec<Tensor> = self.buckets[b]
            .params
            .iter()
            .map(|&i| {
                let p = &self.params[i];
                match p.grad()? {
                    // A DTensor gradient as its parameter is placed, this rank's piece.
                    Some(g) if g.is_dtensor() => g.redistribute(&p.placements()?)?.to_local()?.reshape(&[-1]),
                    Some(g) => g.reshape(&[-1]),
                    None => torchfn_runtime::zeros_like(&local(p)?, None)?.reshape(&[-1]),
                }
            })
            .collect::<Result<_>>()?;
        let flat = torchfn_runtime::cat(&flat, 0)?;
        let work = all_reduce(&flat, ReduceOp::Avg, Some(&self.group), true)?;
        Ok((flat, work))
    }

    /// At the end of backward: starts what is left, waits for every bucket, and gives each
    /// parameter its part of the averaged gradients.
    fn finish(&self) -> Result<()> {
        let mut state = self.state.lock();
        let started = self.start_in_order(&mut state, true).map(|()| std::mem::take(&mut state.started));
        let used = std::mem::take(&mut state.used);
        *state = State::idle(&self.buckets, self.params.len());
        drop(state);
        let _no_grad = torchfn_runtime::autograd::no_grad();
        let used_anywhere =
            if self.find_unused.load(Ordering::Acquire) { Some(self.used_anywhere(&used)?) } else { None };
        let mut timing = BackwardTiming::default();
        for ((flat, work), bucket) in started?.into_iter().zip(&self.buckets) {
            let waiting = Instant::now();
            work.wait()?;
            timing.exposed += waiting.elapsed();
            timing.communication += work.duration().unwrap_or_default();
            let mut at = 0;
            for &i in &bucket.params {
                let p = &self.params[i];
                let held = local(p)?;
                let n = held.numel()?;
                if used_anywhere.as_ref().is_none_or(|used| used[i]) {
                    let shape: Vec<i64> = held.shape()?.iter().map(|&d| d as i64).collect();
                    let mut grad = flat.narrow(0, at as i64, n as i64)?.view(shape)?;
                    if p.is_dtensor() {
                        grad = DTensor::from_local_with_shape(&grad, &p.device_mesh()?, &p.placements()?, &p.shape()?)?;
                    }
                    p.set_grad(Some(&grad))?;
                }
                at += n;
            }
        }
        *self.timing.lock() = timing;
        Ok(())
    }

    /// Which parameters some rank's backward gave a gradient (`used` is this rank's): the
    /// flags' maximum over the ranks.
    fn used_anywhere(&self, used: &[bool]) -> Result<Vec<bool>> {
        let flags: Vec<i32> = used.iter().map(|&u| i32::from(u)).collect();
        let flags = Tensor::from_vec(flags, [used.len()])?;
        all_reduce(&flags, ReduceOp::Max, Some(&self.group), false)?;
        Ok(flags.to_vec::<i32>()?.into_iter().map(|f| f != 0).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_from_the_outputs_reaches_the_leaves_they_depend_on() -> Result<()> {
        let leaf = || torchfn_runtime::ones([2], None, None)?.requires_grad_(true);
        let (a, b, unused, alone) = (leaf()?, leaf()?, leaf()?, leaf()?);
        let y = (&(&a * 2.0)? + &b)?.sum()?;
        let reached = leaves_reached(&[y, alone.clone()])?;
        let expected: std::collections::HashSet<usize> = [&a, &b, &alone].iter().map(|t| t.__identity()).collect();
        assert_eq!(reached, expected);
        assert!(!reached.contains(&unused.__identity()));
        Ok(())
    }
}
