//! DTensor (PyTorch's `torch.distributed.tensor`): a tensor whose values are laid over the
//! ranks of a [`DeviceMesh`] — split along a dimension ([`Placement::Shard`]), whole on every
//! rank ([`Placement::Replicate`]) or held as contributions pending a reduction
//! ([`Placement::Partial`]) — and that computes like the global tensor it stands for.
//!
//! A DTensor is a [`Tensor`]: a wrapper subclass on the dispatch layer (below autograd) whose
//! shape is the global tensor's and whose contents are this rank's local tensor. Every
//! operator it takes part in, forward and backward, reaches its hook, which picks a sharding
//! strategy for the operator, redistributes inputs with collectives where the strategy needs
//! it, and runs the operator on the local tensors (see the `sharding` module). Autograd records
//! on DTensors as on any tensor, so gradients of DTensors are DTensors; [`DTensor::from_local`],
//! [`DTensorExt::to_local`] and [`DTensorExt::redistribute`] are differentiable.
//!
//! ```
//! use torchfn::distributed::{self as dist, tensor::{DTensorExt, Placement, distribute_tensor, init_device_mesh}};
//!
//! if dist::init_process_group("mpi").is_err() {
//!     return Ok(()); // built without the `mpi` feature
//! }
//! let mesh = init_device_mesh("cpu", &[dist::get_world_size(None)?])?;
//! let x = torchfn::arange(8, torchfn::DType::Float32, None)?.reshape(&[4, 2])?;
//! let d = distribute_tensor(&x, &mesh, &[Placement::Shard(0)])?;
//! assert_eq!(d.shape()?, x.shape()?); // the global shape
//! let y = (&d * 2.0)?.sum()?; // a partial sum on each rank, reduced when read
//! assert_eq!(y.placements()?, [Placement::PARTIAL]);
//! assert_eq!(y.full_tensor()?.to_vec::<f32>()?, [56.0]);
//! dist::destroy_process_group(None)?;
//! # Ok::<(), torchfn::Error>(())
//! ```
//!
//! DTensors lie over one-dimensional meshes (a dimension of a larger mesh, taken with
//! [`DeviceMesh::get`], composes tensor parallelism with data parallelism). Operators without a strategy are an error naming them
//! (`Operator aten.nonzero.default does not have a sharding strategy registered.`); a plain
//! tensor with dimensions among DTensor arguments is PyTorch's "mixed torch.Tensor and
//! DTensor" error. A random draw like a DTensor (`uniform_`, dropout's `bernoulli`) is the
//! whole tensor's draw from rank 0's generator state, each rank keeping its piece, as
//! PyTorch's RNG tracker makes it: shards hold what the global tensor's draw would, and
//! replicated draws agree on every rank.

mod debug;
mod mesh;
mod parallel;
mod placement;
mod redistribute;
mod sharding;
mod view;

use std::sync::Arc;

use torchfn_runtime::autograd::{Ctx, Function};
use torchfn_runtime::dispatch::{Operator, WrapperSubclass};
use torchfn_runtime::{Error, FromValue, Kwargs, Object, Result, Tensor, ToValue, Value};

pub use debug::{CommDebugGuard, CommDebugMode};
pub use mesh::{DeviceMesh, init_device_mesh, init_device_mesh_with_names};
pub use parallel::{
    ColwiseParallel, ParallelStyle, PrepareModuleInput, PrepareModuleOutput, RowwiseParallel, SequenceParallel,
    parallelize_module,
};
pub use placement::Placement;

use placement::shard_range;
use redistribute::{copied, redistribute_local};

/// What a DTensor's global tensor is: its mesh, placement and shape.
pub(crate) struct Spec {
    pub(crate) mesh: Arc<DeviceMesh>,
    pub(crate) placement: Placement,
    pub(crate) shape: Vec<usize>,
}

impl Spec {
    /// The spec of a gradient for a tensor of this spec: the same, but a `Partial` tensor's
    /// gradient is whole on every rank (each contribution's gradient is the gradient).
    fn of_gradient(&self) -> Arc<Spec> {
        let placement = if self.placement.is_partial() { Placement::Replicate } else { self.placement };
        Arc::new(Spec { mesh: self.mesh.clone(), placement, shape: self.shape.clone() })
    }
}

/// A DTensor's contents: this rank's local tensor (contiguous) and the global tensor's spec.
/// DTensors are [`Tensor`]s holding one ([`Tensor::wrapper`]); make them with
/// [`distribute_tensor`] or [`DTensor::from_local`], read them with [`DTensorExt`].
pub struct DTensor {
    local: Tensor,
    spec: Arc<Spec>,
}

impl WrapperSubclass for DTensor {
    fn torch_dispatch(func: &'static Operator, args: &[Value], kwargs: &Kwargs) -> Result<Value> {
        sharding::dispatch(func, args, kwargs)
    }
}

impl DTensor {
    /// A DTensor of `spec` holding `local` (made contiguous, without history).
    pub(crate) fn wrap(local: Tensor, spec: Arc<Spec>) -> Result<Tensor> {
        let local = local.detach()?.contiguous()?;
        let (dtype, device) = (local.dtype()?, local.device()?);
        let shape = spec.shape.clone();
        Tensor::make_wrapper_subclass(DTensor { local, spec }, &shape, None, dtype, device, false)
    }

    /// A DTensor from each rank's `local` tensor, taken to be placed as `placements` say over
    /// `mesh` (`DTensor.from_local`; no communication). The global shape follows from the local
    /// ones: a `Shard(d)` dimension is `ranks` times the local size (even pieces); for uneven
    /// ones, give the shape with [`from_local_with_shape`](DTensor::from_local_with_shape).
    /// Differentiable: the gradient of `local` is the DTensor gradient redistributed to
    /// `placements` (a `Partial` one to `Replicate`), locally.
    pub fn from_local(local: &Tensor, mesh: &Arc<DeviceMesh>, placements: &[Placement]) -> Result<Tensor> {
        let placement = one_placement(mesh, placements, local.dim()?)?;
        let mut shape = local.shape()?.to_vec();
        if let Some(d) = placement.shard_dim() {
            shape[d] *= mesh.size();
        }
        FromLocal::apply((local.clone(), SpecArg(Arc::new(Spec { mesh: mesh.clone(), placement, shape }))))
    }

    /// [`from_local`](DTensor::from_local) of the global `shape` (`DTensor.from_local(...,
    /// shape=...)`), for shards of uneven sizes, which the local shapes cannot tell: each
    /// rank's `local` must be its piece of `shape` (along a `Shard` dimension `torch.chunk`'s
    /// piece, as [`distribute_tensor`] cuts it; every other dimension whole). An error names the
    /// rank whose piece is not.
    ///
    /// ```
    /// use torchfn::distributed::{self as dist, tensor::{DTensor, DTensorExt, Placement, init_device_mesh}};
    ///
    /// if dist::init_process_group("mpi").is_err() {
    ///     return Ok(()); // built without the `mpi` feature
    /// }
    /// let mesh = init_device_mesh("cpu", &[dist::get_world_size(None)?])?;
    /// // This rank's rows of a [5, 4] tensor as torch.chunk cuts them: 3 and 2 on two ranks.
    /// let full = torchfn::arange(20, torchfn::DType::Float32, None)?.reshape(&[5, 4])?;
    /// let local = full.chunk(mesh.size() as i64, 0)?.swap_remove(mesh.get_local_rank()?);
    /// let d = DTensor::from_local_with_shape(&local, &mesh, &[Placement::Shard(0)], &[5, 4])?;
    /// assert_eq!(d.shape()?, full.shape()?);
    /// assert_eq!(d.full_tensor()?.to_vec::<f32>()?, full.to_vec::<f32>()?);
    /// dist::destroy_process_group(None)?;
    /// # Ok::<(), torchfn::Error>(())
    /// ```
    pub fn from_local_with_shape(
        local: &Tensor,
        mesh: &Arc<DeviceMesh>,
        placements: &[Placement],
        shape: &[usize],
    ) -> Result<Tensor> {
        let placement = one_placement(mesh, placements, local.dim()?)?;
        let rank = mesh.get_local_rank()?;
        let piece: Vec<usize> = (shape.iter().enumerate())
            .map(|(d, &n)| if placement.shard_dim() == Some(d) { shard_range(n, mesh.size(), rank).1 } else { n })
            .collect();
        let local_shape = local.shape()?.to_vec();
        if local_shape != piece {
            return Err(Error::value_error(format!(
                "DTensor.from_local(): rank {rank}'s local tensor has shape {local_shape:?}, but its piece of the \
                 global shape {shape:?} placed as {placement} over {mesh} has shape {piece:?}"
            )));
        }
        let spec = Spec { mesh: mesh.clone(), placement, shape: shape.to_vec() };
        FromLocal::apply((local.clone(), SpecArg(Arc::new(spec))))
    }
}

/// The one placement of a DTensor over `mesh`, normalized for `ndim` dimensions: DTensors lie
/// over one-dimensional meshes.
fn one_placement(mesh: &DeviceMesh, placements: &[Placement], ndim: usize) -> Result<Placement> {
    if mesh.ndim() != 1 {
        return Err(Error::not_implemented(format!(
            "DTensor: torchfn lays DTensors over one mesh dimension, and {mesh} has {}: take one dimension's mesh \
             (mesh.get(name)) to place them over",
            mesh.ndim()
        )));
    }
    match placements {
        [p] => p.normalized(ndim),
        _ => Err(Error::value_error(format!(
            "DTensor: torchfn's meshes have one dimension, so placements must have one entry; got {}",
            placements.len()
        ))),
    }
}

/// A tensor laid over `mesh` as `placements` say, from the full tensor (`distribute_tensor`):
/// the mesh's first rank's `tensor` is broadcast, then each rank keeps its share. Collective:
/// every rank of the mesh calls it with a tensor of the same shape and dtype. The result is a
/// leaf that requires grad when `tensor` does (a module's parameters become DTensor parameters
/// this way).
pub fn distribute_tensor(tensor: &Tensor, mesh: &Arc<DeviceMesh>, placements: &[Placement]) -> Result<Tensor> {
    let placement = one_placement(mesh, placements, tensor.dim()?)?;
    let shape = tensor.shape()?.to_vec();
    let full = copied(&tensor.detach()?)?;
    crate::collectives::broadcast(&full, mesh.mesh()[0], Some(mesh.get_group()), false)?;
    let local = redistribute_local(&full, &shape, Placement::Replicate, placement, mesh)?;
    let d = DTensor::wrap(local, Arc::new(Spec { mesh: mesh.clone(), placement, shape }))?;
    if tensor.requires_grad()? { d.requires_grad_(true) } else { Ok(d) }
}

/// What a DTensor offers (PyTorch's `DTensor` methods), on [`Tensor`]s that are DTensors; on
/// other tensors each is an error saying so.
pub trait DTensorExt {
    /// Whether this tensor is a DTensor.
    fn is_dtensor(&self) -> bool;
    /// This rank's local tensor (`to_local()`). Differentiable: its gradient becomes a DTensor
    /// gradient of the same placement (`Partial`: `Replicate`). No communication, except for a
    /// view that slices a sharded dimension, which is gathered (every rank must then call it).
    fn to_local(&self) -> Result<Tensor>;
    /// The same global tensor placed as `placements` say (`redistribute`), with the collectives
    /// that takes. Differentiable.
    fn redistribute(&self, placements: &[Placement]) -> Result<Tensor>;
    /// The whole global tensor on every rank, as a plain tensor (`full_tensor()`).
    fn full_tensor(&self) -> Result<Tensor>;
    /// The placements, one per mesh dimension (`placements`).
    fn placements(&self) -> Result<Vec<Placement>>;
    /// The mesh (`device_mesh`).
    fn device_mesh(&self) -> Result<Arc<DeviceMesh>>;
}

impl DTensorExt for Tensor {
    fn is_dtensor(&self) -> bool {
        self.wrapper::<DTensor>().is_some()
    }

    fn to_local(&self) -> Result<Tensor> {
        contents(self, "to_local")?;
        ToLocal::apply(self.clone())
    }

    fn redistribute(&self, placements: &[Placement]) -> Result<Tensor> {
        let d = contents(self, "redistribute")?;
        let placement = one_placement(&d.spec.mesh, placements, self.dim()?)?;
        let spec = Spec { mesh: d.spec.mesh.clone(), placement, shape: self.shape()?.to_vec() };
        Redistribute::apply((self.clone(), SpecArg(Arc::new(spec))))
    }

    fn full_tensor(&self) -> Result<Tensor> {
        self.redistribute(&[Placement::Replicate])?.to_local()
    }

    fn placements(&self) -> Result<Vec<Placement>> {
        Ok(vec![sharding::placement(self, contents(self, "placements")?)?])
    }

    fn device_mesh(&self) -> Result<Arc<DeviceMesh>> {
        Ok(contents(self, "device_mesh")?.spec.mesh.clone())
    }
}

/// The DTensor contents of `t`, or an error naming `what` was asked of a plain tensor.
fn contents<'t>(t: &'t Tensor, what: &str) -> Result<&'t DTensor> {
    t.wrapper::<DTensor>().ok_or_else(|| Error::type_error(format!("{what}(): the tensor is not a DTensor")))
}

/// A spec passed through a custom autograd Function's inputs.
#[derive(Clone)]
struct SpecArg(Arc<Spec>);

impl ToValue for SpecArg {
    fn to_value(&self) -> Value {
        let s = &self.0;
        Value::Object(Object::new(
            self.clone(),
            "DTensorSpec",
            format!("DTensorSpec({}, {}, {:?})", s.mesh, s.placement, s.shape),
        ))
    }
}

impl FromValue for SpecArg {
    fn type_name() -> String {
        "DTensorSpec".into()
    }
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Object(o) => o.downcast_ref::<SpecArg>().cloned(),
            _ => None,
        }
    }
}

/// The local tensor and placement of DTensor `t` (a view's too).
fn local_of(t: &Tensor) -> Result<(Tensor, Placement, Arc<DeviceMesh>)> {
    let d = contents(t, "to_local")?;
    let o = sharding::operand(t, d, (0, None))?;
    Ok((o.local, o.placement, d.spec.mesh.clone()))
}

/// The spec of DTensor `t` as operators see it (a view's own; no communication).
fn spec_of(t: &Tensor) -> Result<Arc<Spec>> {
    let d = contents(t, "to_local")?;
    let placement = sharding::placement(t, d)?;
    Ok(Arc::new(Spec { mesh: d.spec.mesh.clone(), placement, shape: t.shape()?.to_vec() }))
}

/// `grad` (a DTensor or a plain tensor of the global shape) as a local tensor under `spec`'s
/// placement (`Partial`: `Replicate`).
fn gradient_to_local(grad: &Tensor, spec: &Spec) -> Result<Tensor> {
    let want = spec.of_gradient().placement;
    let (local, from) = match grad.wrapper::<DTensor>() {
        Some(_) => {
            let (local, placement, _) = local_of(grad)?;
            (local, placement)
        }
        None => (grad.clone(), Placement::Replicate),
    };
    redistribute_local(&local, &spec.shape, from, want, &spec.mesh)
}

/// `DTensor.from_local` as a differentiable operation.
#[derive(Default)]
struct FromLocal {
    spec: Option<Arc<Spec>>,
}

impl Function for FromLocal {
    type Inputs = (Tensor, SpecArg);
    type Output = Tensor;
    type GradOutputs = Tensor;

    fn forward((local, spec): &(Tensor, SpecArg)) -> Result<Tensor> {
        DTensor::wrap(local.clone(), spec.0.clone())
    }

    fn setup_context(ctx: &mut Ctx<Self>, (_, spec): &(Tensor, SpecArg), _: &Tensor) -> Result<()> {
        ctx.spec = Some(spec.0.clone());
        Ok(())
    }

    fn backward(ctx: &mut Ctx<Self>, grad: Tensor) -> Result<Vec<Option<Tensor>>> {
        let spec = ctx.spec.clone().ok_or_else(|| Error::runtime_error("from_local: backward before forward"))?;
        Ok(vec![Some(gradient_to_local(&grad, &spec)?), None])
    }
}

/// `DTensor.to_local` as a differentiable operation.
#[derive(Default)]
struct ToLocal {
    spec: Option<Arc<Spec>>,
}

impl Function for ToLocal {
    type Inputs = Tensor;
    type Output = Tensor;
    type GradOutputs = Tensor;

    fn forward(t: &Tensor) -> Result<Tensor> {
        Ok(local_of(t)?.0)
    }

    fn setup_context(ctx: &mut Ctx<Self>, t: &Tensor, _: &Tensor) -> Result<()> {
        ctx.spec = Some(spec_of(t)?);
        Ok(())
    }

    fn backward(ctx: &mut Ctx<Self>, grad: Tensor) -> Result<Vec<Option<Tensor>>> {
        let spec = ctx.spec.clone().ok_or_else(|| Error::runtime_error("to_local: backward before forward"))?;
        Ok(vec![Some(DTensor::wrap(grad, spec.of_gradient())?)])
    }
}

/// `DTensor.redistribute` as a differentiable operation: the gradient goes back to the input's
/// placement (`Partial`: `Replicate`).
#[derive(Default)]
struct Redistribute {
    from: Option<Arc<Spec>>,
}

impl Function for Redistribute {
    type Inputs = (Tensor, SpecArg);
    type Output = Tensor;
    type GradOutputs = Tensor;

    fn forward((t, to): &(Tensor, SpecArg)) -> Result<Tensor> {
        let (local, from, mesh) = local_of(t)?;
        let local = redistribute_local(&local, &to.0.shape, from, to.0.placement, &mesh)?;
        DTensor::wrap(local, to.0.clone())
    }

    fn setup_context(ctx: &mut Ctx<Self>, (t, _): &(Tensor, SpecArg), _: &Tensor) -> Result<()> {
        ctx.from = Some(spec_of(t)?);
        Ok(())
    }

    fn backward(ctx: &mut Ctx<Self>, grad: Tensor) -> Result<Vec<Option<Tensor>>> {
        let from = ctx.from.clone().ok_or_else(|| Error::runtime_error("redistribute: backward before forward"))?;
        Ok(vec![Some(DTensor::wrap(gradient_to_local(&grad, &from)?, from.of_gradient())?), None])
    }
}
