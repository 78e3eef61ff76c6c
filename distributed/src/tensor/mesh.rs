//! [`DeviceMesh`]: the ranks a DTensor is laid over, and the process group that connects them.

use std::fmt;
use std::sync::Arc;

use torchfn_runtime::{Device, Error, Result};

use crate::group::{ProcessGroup, get_world_size, new_group};

/// The ranks DTensors are placed over (PyTorch's `DeviceMesh`), with the device type of their
/// local tensors and the process group their collectives use. torchfn's meshes have one
/// dimension (PyTorch's `init_device_mesh("cpu", (n,))`).
pub struct DeviceMesh {
    device: Device,
    ranks: Vec<usize>,
    group: ProcessGroup,
}

/// A mesh of `mesh_shape` over the default group's ranks, in order (`init_device_mesh`). Every
/// rank of the default group must call it. Only one-dimensional shapes, whose size is the world
/// size, are supported; any other is an error.
///
/// ```
/// use torchfn::distributed::{self as dist, tensor::init_device_mesh};
///
/// if dist::init_process_group("mpi").is_err() {
///     return Ok(()); // built without the `mpi` feature
/// }
/// let world = dist::get_world_size(None)?;
/// let mesh = init_device_mesh("cpu", &[world])?;
/// assert_eq!((mesh.size(), mesh.get_local_rank()?), (world, dist::get_rank(None)?));
/// dist::destroy_process_group(None)?;
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn init_device_mesh(device_type: &str, mesh_shape: &[usize]) -> Result<Arc<DeviceMesh>> {
    let world = get_world_size(None)?;
    match mesh_shape {
        [n] if *n == world => DeviceMesh::new(device_type, &(0..world).collect::<Vec<_>>()),
        [n] => Err(Error::runtime_error(format!(
            "init_device_mesh(): the mesh shape ({n},) has {n} ranks, but the world has {world}: \
             mesh_shape must multiply to the world size"
        ))),
        _ => Err(Error::not_implemented(format!(
            "init_device_mesh(): torchfn's device meshes have one dimension; got mesh_shape {mesh_shape:?}"
        ))),
    }
}

impl DeviceMesh {
    /// A one-dimensional mesh of the given global `ranks` (`DeviceMesh(device_type, ranks)`).
    /// Collective over the default group: every rank calls it, also those not in `ranks`.
    pub fn new(device_type: &str, ranks: &[usize]) -> Result<Arc<DeviceMesh>> {
        let device = Device::new(device_type, None)?;
        if ranks.is_empty() {
            return Err(Error::value_error("DeviceMesh(): a mesh needs at least one rank"));
        }
        let group = new_group(Some(ranks))?;
        Ok(Arc::new(DeviceMesh { device, ranks: ranks.to_vec(), group }))
    }

    /// The device type of the local tensors (`"cpu"`).
    pub fn device_type(&self) -> &str {
        self.device.kind()
    }

    /// The device of the local tensors.
    pub fn device(&self) -> Device {
        self.device
    }

    /// How many ranks the mesh has (`size()`).
    pub fn size(&self) -> usize {
        self.ranks.len()
    }

    /// The mesh's shape: `[size]`.
    pub fn shape(&self) -> Vec<usize> {
        vec![self.ranks.len()]
    }

    /// The number of mesh dimensions: 1.
    pub fn ndim(&self) -> usize {
        1
    }

    /// The global ranks, in mesh order (`mesh.tolist()`).
    pub fn mesh(&self) -> &[usize] {
        &self.ranks
    }

    /// This process's position in the mesh (`get_local_rank()`); an error on a rank outside it.
    pub fn get_local_rank(&self) -> Result<usize> {
        self.group.rank().ok_or_else(|| {
            Error::runtime_error(format!("this rank is not part of {self}: it holds no piece of the mesh's DTensors"))
        })
    }

    /// This process's coordinate in the mesh, `None` outside it (`get_coordinate()`).
    pub fn get_coordinate(&self) -> Option<Vec<usize>> {
        self.group.rank().map(|r| vec![r])
    }

    /// The process group of the mesh's one dimension (`get_group()`).
    pub fn get_group(&self) -> &ProcessGroup {
        &self.group
    }
}

/// Prints as PyTorch's `repr`: `DeviceMesh('cpu', [0, 1])`.
impl fmt::Display for DeviceMesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceMesh('{}', {:?})", self.device_type(), self.ranks)
    }
}

impl fmt::Debug for DeviceMesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
