//! Runs a graph backward: from the roots' gradients to every leaf (or to the inputs asked
//! for), each node once, after every node that feeds it, latest recorded first.

use std::cell::RefCell;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::graph::{Edge, Node, PreHook};
use super::meta;
use crate::error::{Error, Result, bail};
use crate::primitive;
use crate::tensor::Tensor;

/// What to do with the gradients that reach the targets.
pub(crate) struct Run {
    /// Keep saved tensors, so the graph can run backward again.
    pub(crate) retain_graph: bool,
    /// Record the backward itself, for higher-order gradients.
    pub(crate) create_graph: bool,
    /// `Some`: return the gradients of these tensors (`autograd.grad`), or, with
    /// `accumulate`, accumulate only into them (`backward(inputs=...)`).
    pub(crate) inputs: Option<Vec<Tensor>>,
    /// Accumulate into `grad` (backward) rather than return (`autograd.grad`).
    pub(crate) accumulate: bool,
    /// With `inputs`: an input the outputs do not reach is not an error.
    pub(crate) allow_unused: bool,
}

/// A hasher for node addresses (and output numbers): a multiply-rotate mix, far cheaper than
/// the default SipHash for keys that are already well spread.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_usize(usize::from(b));
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0.rotate_left(5) ^ n as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type Map<K, V> = HashMap<K, V, BuildHasherDefault<AddressHasher>>;
type Set<K> = HashSet<K, BuildHasherDefault<AddressHasher>>;

/// A node's identity: its address.
type Key = *const ();

fn key(node: &Arc<Node>) -> Key {
    Arc::as_ptr(node).cast()
}

/// The edge gradients of `t` flow into when it is a target: its history, or its accumulator.
fn target_edge(t: &Tensor, position: usize) -> Result<Edge> {
    meta::gradient_edge(t).ok_or_else(|| {
        Error::runtime_error(format!("grad(): input {position} does not require grad and does not have a grad_fn"))
    })
}

/// Backward from `roots` (each an output's history and the gradient for it).
pub(crate) fn run(roots: Vec<(Edge, Tensor)>, run: Run) -> Result<Vec<Option<Tensor>>> {
    let targets: Vec<Edge> = match &run.inputs {
        Some(inputs) => inputs.iter().enumerate().map(|(i, t)| target_edge(t, i)).collect::<Result<_>>()?,
        None => Vec::new(),
    };
    let target_keys: Set<(Key, usize)> = targets.iter().map(|e| (key(&e.node), e.output_nr)).collect();

    // Every node the roots reach, and (with targets) which of them lead to one.
    let mut nodes: Map<Key, Arc<Node>> = Map::default();
    let mut order: Vec<Arc<Node>> = Vec::new();
    let mut stack: Vec<Arc<Node>> = roots.iter().map(|(e, _)| e.node.clone()).collect();
    while let Some(node) = stack.pop() {
        if nodes.insert(key(&node), node.clone()).is_some() {
            continue;
        }
        order.push(node.clone());
        stack.extend(node.next.iter().flatten().map(|e| e.node.clone()));
    }
    // With targets, only the nodes that lead to one run (`None`: every node runs).
    let needed: Option<Set<Key>> = run.inputs.is_some().then(|| {
        let target_nodes: Set<Key> = targets.iter().map(|e| key(&e.node)).collect();
        // Later nodes only feed earlier ones, so one pass from the oldest settles it.
        order.sort_by_key(|n| n.sequence);
        let mut needed = Set::default();
        for node in &order {
            if target_nodes.contains(&key(node)) || node.next.iter().flatten().any(|e| needed.contains(&key(&e.node))) {
                needed.insert(key(node));
            }
        }
        needed
    });
    let task = Rc::new(GraphTask {
        id: NEXT_TASK.fetch_add(1, Ordering::Relaxed),
        nodes,
        needed,
        callbacks: RefCell::new(Vec::new()),
    });
    let current = Current::enter(task.clone());
    let nodes = &task.nodes;
    let needed = |k: &Key| task.needed.as_ref().is_none_or(|n| n.contains(k));
    let mut dependencies: Map<Key, usize> = Map::with_capacity_and_hasher(nodes.len(), Default::default());
    for node in nodes.values().filter(|n| needed(&key(n))) {
        for edge in node.next.iter().flatten().filter(|e| needed(&key(&e.node))) {
            *dependencies.entry(key(&edge.node)).or_default() += 1;
        }
    }

    let _mode = super::set_grad_enabled(run.create_graph);
    let mut buffers: Map<Key, Vec<Option<Tensor>>> = Map::with_capacity_and_hasher(nodes.len(), Default::default());
    for (edge, grad) in roots {
        if needed(&key(&edge.node)) {
            add_into(&mut buffers, &edge, grad, run.create_graph)?;
        }
    }
    let mut ready: BinaryHeap<Ready> = BinaryHeap::new();
    for (k, node) in nodes {
        if needed(k) && !dependencies.contains_key(k) {
            ready.push(Ready(node.clone()));
        }
    }
    let mut captured: Map<(Key, usize), Tensor> = Map::default();
    while let Some(Ready(node)) = ready.pop() {
        let k = key(&node);
        let mut grads = buffers.remove(&k).unwrap_or_default();
        grads.resize(node.outputs.len(), None);
        let hooks = node.pre_hooks.lock().clone();
        for (nr, hook) in hooks {
            match hook {
                PreHook::Grad(hook) => {
                    if let Some(g) = &grads[nr]
                        && let Some(replaced) = hook(g)?
                    {
                        grads[nr] = Some(replaced);
                    }
                }
                PreHook::Observe(observer) => observer(grads[nr].as_ref())?,
            }
        }
        for (nr, grad) in grads.iter().enumerate() {
            if let Some(g) = grad
                && target_keys.contains(&(k, nr))
            {
                captured.insert((k, nr), g.clone());
            }
        }
        let is_target = targets.iter().any(|e| key(&e.node) == k);
        if let Some(leaf) = node.backward.leaf() {
            // A leaf no one holds any more has no gradient to keep.
            if let Some(grad) = grads.pop().flatten()
                && let Some(leaf) = leaf.upgrade()
                && run.accumulate
                && (run.inputs.is_none() || is_target)
            {
                accumulate(&leaf, grad, run.create_graph)?;
            }
            continue;
        }
        // A target's gradient is captured; the graph behind it runs only for other targets.
        if is_target && !node.next.iter().flatten().any(|e| needed(&key(&e.node))) {
            continue;
        }
        if node.backward.materialize_grads() {
            for (g, out) in grads.iter_mut().zip(&node.outputs).filter(|(g, _)| g.is_none()) {
                *g = Some(primitive::zeros(&out.shape, out.dtype, out.device)?);
            }
        }
        let saved = node.unpack()?;
        let results = node.backward.apply(&node, grads, saved)?;
        if !run.retain_graph {
            node.release();
        }
        if results.len() != node.next.len() {
            bail!(
                Runtime,
                "function {} returned an incorrect number of gradients (expected {}, got {})",
                node.name(),
                node.next.len(),
                results.len()
            );
        }
        for (edge, grad) in node.next.iter().zip(results) {
            let Some(edge) = edge else { continue };
            let ek = key(&edge.node);
            if !needed(&ek) {
                continue;
            }
            if let Some(grad) = grad {
                check_gradient(&node, edge, &grad)?;
                add_into(&mut buffers, edge, grad, run.create_graph)?;
            }
            let left = dependencies.get_mut(&ek).expect("every needed edge was counted");
            *left -= 1;
            if *left == 0 {
                ready.push(Ready(edge.node.clone()));
            }
        }
    }
    if run.accumulate {
        // Non-leaf inputs of `backward(inputs=...)` accumulate what reached them.
        for (t, e) in run.inputs.iter().flatten().zip(&targets) {
            if e.node.backward.leaf().is_none()
                && let Some(g) = captured.remove(&(key(&e.node), e.output_nr))
            {
                accumulate(t, g, run.create_graph)?;
            }
        }
    } else {
        // `get`, not `remove`: an input given twice gets its gradient twice, as in PyTorch.
        let grads = targets
            .iter()
            .enumerate()
            .map(|(i, e)| match captured.get(&(key(&e.node), e.output_nr)) {
                Some(g) => Ok(Some(g.clone())),
                None if run.allow_unused => Ok(None),
                None => Err(Error::runtime_error(format!(
                    "grad(): one of the differentiated Tensors (input {i}) appears to not have been used in the \
                     graph. Set allow_unused=true if this is the desired behavior."
                ))),
            })
            .collect::<Result<Vec<_>>>()?;
        current.finish()?;
        return Ok(grads);
    }
    current.finish()?;
    Ok(Vec::new())
}

static NEXT_TASK: AtomicU64 = AtomicU64::new(0);

/// One run of the engine (PyTorch's graph task): the nodes it runs, and the callbacks to run
/// when it ends.
struct GraphTask {
    id: u64,
    nodes: Map<Key, Arc<Node>>,
    /// With targets, the nodes that lead to one (`None`: every node runs).
    needed: Option<Set<Key>>,
    callbacks: RefCell<Vec<Callback>>,
}

impl GraphTask {
    /// Whether this run executes the node `k`.
    fn executes(&self, k: &Key) -> bool {
        self.nodes.contains_key(k) && self.needed.as_ref().is_none_or(|n| n.contains(k))
    }
}

thread_local! {
    /// The runs in progress on this thread, innermost last (a hook may run a backward).
    static TASKS: RefCell<Vec<Rc<GraphTask>>> = const { RefCell::new(Vec::new()) };
}

/// Makes a run the current one until dropped, when the callbacks queued during it
/// (`queue_callback`) run, in order, those they queue too, while it is still current; also
/// when the run fails, so that what they clean up is cleaned.
struct Current(Rc<GraphTask>);

/// A function run when a backward ends.
type Callback = Box<dyn FnOnce() -> Result<()>>;

impl Current {
    fn enter(task: Rc<GraphTask>) -> Current {
        TASKS.with(|t| t.borrow_mut().push(task.clone()));
        Current(task)
    }

    /// Runs the queued callbacks, every one of them, and those they queue; the first error
    /// they return is the backward's.
    fn finish(&self) -> Result<()> {
        let mut first = Ok(());
        loop {
            let callbacks = std::mem::take(&mut *self.0.callbacks.borrow_mut());
            if callbacks.is_empty() {
                return first;
            }
            for callback in callbacks {
                let done = callback();
                if first.is_ok() {
                    first = done;
                }
            }
        }
    }
}

impl Drop for Current {
    /// A failed run's callbacks still run (they clean up); the run's own error is reported.
    fn drop(&mut self) {
        let _ = self.finish();
        TASKS.with(|t| t.borrow_mut().pop());
    }
}

fn current() -> Option<Rc<GraphTask>> {
    TASKS.with(|t| t.borrow().last().cloned())
}

/// The id of the backward running on this thread (PyTorch's `_current_graph_task_id`), `None`
/// outside one.
pub(crate) fn current_task_id() -> Option<u64> {
    current().map(|t| t.id)
}

/// Whether the backward running on this thread will execute `node`
/// (`_will_engine_execute_node`); `false` outside one.
pub(crate) fn will_execute(node: &Arc<Node>) -> bool {
    current().is_some_and(|t| t.executes(&key(node)))
}

/// Queues `callback` to run when the backward running on this thread ends
/// (`queue_callback`); `false` outside one.
pub(crate) fn queue_callback(callback: Callback) -> bool {
    current().map(|t| t.callbacks.borrow_mut().push(callback)).is_some()
}

/// A gradient a node computed must have the shape and dtype of the input it is for.
fn check_gradient(node: &Node, edge: &Edge, grad: &Tensor) -> Result<()> {
    let want = &edge.node.outputs[edge.output_nr];
    let g = grad.data("backward", "grad")?;
    let (shape, dtype) = (&g.layout.shape, g.dtype);
    if *shape != want.shape {
        bail!(
            Runtime,
            "Function {} returned an invalid gradient at index {} - got {:?} but expected shape compatible with {:?}",
            node.name(),
            edge.output_nr,
            shape.as_ref(),
            want.shape.as_ref()
        );
    }
    if dtype != want.dtype {
        bail!(
            Runtime,
            "Function {} returned an invalid gradient - expected dtype {} but got {dtype}",
            node.name(),
            want.dtype
        );
    }
    Ok(())
}

/// Adds `grad` to what `edge`'s node has received for that output. As PyTorch's
/// `InputBuffer::accumulate`: outside `create_graph`, into the received gradient's own memory
/// when nothing else holds it (a residual connection's or a split's gradients then allocate
/// nothing), else into a new tensor.
fn add_into(buffers: &mut Map<Key, Vec<Option<Tensor>>>, edge: &Edge, grad: Tensor, create_graph: bool) -> Result<()> {
    let slots = buffers.entry(key(&edge.node)).or_default();
    if slots.len() <= edge.output_nr {
        slots.resize(edge.output_nr + 1, None);
    }
    let slot = &mut slots[edge.output_nr];
    *slot = Some(match slot.take() {
        Some(old) if !create_graph && old.is_sole_owner() && adds_in_place(&old, &grad) => {
            primitive::add_(&old, &grad)?;
            old
        }
        Some(old) => primitive::add(&old, &grad)?,
        None => grad,
    });
    Ok(())
}

/// A leaf's gradient: its hooks run, then it is added to `grad`, then its post-accumulate hooks
/// run on the leaf. As PyTorch's `AccumulateGrad`: the first gradient is kept when nothing else
/// holds it and copied otherwise (so the leaf owns its gradient, a fresh contiguous tensor), and
/// outside `create_graph` later ones are added into the gradient's memory (`grad += new`, which
/// a handle to the gradient sees), so accumulating allocates nothing.
fn accumulate(leaf: &Tensor, mut grad: Tensor, create_graph: bool) -> Result<()> {
    for hook in meta::leaf_hooks(leaf) {
        if let Some(replaced) = hook(&grad)? {
            grad = replaced;
        }
    }
    let sum = match meta::take_grad(leaf) {
        Some(old) => {
            let sum = match !create_graph && adds_in_place(&old, &grad) {
                true => primitive::add_(&old, &grad).map(|()| old.clone()),
                false => primitive::add(&old, &grad),
            };
            if sum.is_err() {
                meta::set_grad(leaf, Some(old));
            }
            sum?
        }
        None if create_graph => grad,
        None if grad.is_sole_owner() && !meta::requires_grad(&grad) => grad,
        None => primitive::copy(&grad, grad.dtype()?)?,
    };
    meta::set_grad(leaf, Some(sum));
    for hook in meta::post_accumulate_hooks(leaf) {
        if hook(leaf)?.is_some() {
            bail!(
                Runtime,
                "register_post_accumulate_grad_hook(): a post accumulate grad hook must not return a tensor"
            );
        }
    }
    Ok(())
}

/// Whether `new` can be added into `grad`'s memory: plain tensors (not wrappers, whose hooks
/// decide where their values live) of one shape and dtype.
fn adds_in_place(grad: &Tensor, new: &Tensor) -> bool {
    !grad.is_wrapper()
        && !new.is_wrapper()
        && grad.dense().zip(new.dense()).is_some_and(|(g, n)| g.dtype == n.dtype && g.layout.shape == n.layout.shape)
}

/// A node ready to run; the heap gives the latest recorded first.
struct Ready(Arc<Node>);

impl PartialEq for Ready {
    fn eq(&self, other: &Self) -> bool {
        self.0.sequence == other.0.sequence
    }
}
impl Eq for Ready {}
impl PartialOrd for Ready {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ready {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.sequence.cmp(&other.0.sequence)
    }
}
