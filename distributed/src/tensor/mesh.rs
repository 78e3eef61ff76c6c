//! [`DeviceMesh`]: the ranks a DTensor is laid over, and the process group that connects them.

use std::fmt;
use std::sync::Arc;

use torchfn_runtime::{Device, Error, Result};

use crate::group::{ProcessGroup, get_rank, get_world_size, new_group};

/// The ranks DTensors are placed over (PyTorch's `DeviceMesh`), with the device type of their
/// local tensors and the process groups their collectives use.
///
/// A mesh has one dimension or several: `init_device_mesh_with_names("cpu", &[2, 2], &["dp",
/// "tp"])` arranges four ranks in two rows, and [`get`](DeviceMesh::get) gives the
/// one-dimensional mesh of a dimension through this rank (PyTorch's `mesh["tp"]`): tensor
/// parallelism over a row, data parallelism (DistributedDataParallel on
/// `mesh.get("dp")?.get_group()`) down a column. DTensors lie over one-dimensional meshes.
pub struct DeviceMesh {
    device: Device,
    shape: Vec<usize>,
    /// The global ranks, in row-major order of the shape.
    ranks: Vec<usize>,
    /// One name per dimension, or none.
    names: Vec<String>,
    /// Every rank of the mesh.
    group: ProcessGroup,
    /// Of a mesh of several dimensions: each dimension's mesh through this rank (empty for a
    /// one-dimensional mesh, which is its own).
    dims: Vec<Arc<DeviceMesh>>,
}

/// A mesh of `mesh_shape` over the default group's ranks, in order (`init_device_mesh`). Every
/// rank of the default group must call it; the shape must multiply to the world size.
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
    init_device_mesh_with_names(device_type, mesh_shape, &[])
}

/// [`init_device_mesh`] with a name for each dimension (`mesh_dim_names`; `&[]` for none), by
/// which [`DeviceMesh::get`] finds a dimension's mesh. Makes the process group of every line of
/// the mesh along every dimension (each rank takes part in making each), as PyTorch does.
///
/// ```
/// use torchfn::distributed::{self as dist, tensor::init_device_mesh_with_names};
///
/// if dist::init_process_group("mpi").is_err() {
///     return Ok(()); // built without the `mpi` feature
/// }
/// let world = dist::get_world_size(None)?;
/// let mesh = init_device_mesh_with_names("cpu", &[1, world], &["dp", "tp"])?;
/// let rank = dist::get_rank(None)?;
/// assert_eq!(mesh.get_coordinate(), Some(vec![0, rank]));
/// assert_eq!(mesh.get("tp")?.mesh(), (0..world).collect::<Vec<_>>());
/// assert_eq!(mesh.get("dp")?.mesh(), [rank]);
/// dist::destroy_process_group(None)?;
/// # Ok::<(), torchfn::Error>(())
/// ```
pub fn init_device_mesh_with_names(device_type: &str, mesh_shape: &[usize], names: &[&str]) -> Result<Arc<DeviceMesh>> {
    let world = get_world_size(None)?;
    let n: usize = mesh_shape.iter().product();
    if mesh_shape.is_empty() || n != world {
        return Err(Error::runtime_error(format!(
            "init_device_mesh(): the mesh shape {mesh_shape:?} has {n} ranks, but the world has {world}: mesh_shape \
             must multiply to the world size"
        )));
    }
    if !names.is_empty() && names.len() != mesh_shape.len() {
        return Err(Error::value_error(format!(
            "init_device_mesh(): mesh_dim_names {names:?} must name each of the {} dimensions of mesh_shape {mesh_shape:?}",
            mesh_shape.len()
        )));
    }
    if let Some(twice) = names.iter().enumerate().find_map(|(i, a)| names[..i].contains(a).then_some(a)) {
        return Err(Error::value_error(format!("init_device_mesh(): mesh_dim_names {names:?} name {twice:?} twice")));
    }
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    DeviceMesh::build(device_type, (0..world).collect(), mesh_shape.to_vec(), names)
}

impl DeviceMesh {
    /// A one-dimensional mesh of the given global `ranks` (`DeviceMesh(device_type, ranks)`).
    /// Collective over the default group: every rank calls it, also those not in `ranks`.
    pub fn new(device_type: &str, ranks: &[usize]) -> Result<Arc<DeviceMesh>> {
        DeviceMesh::build(device_type, ranks.to_vec(), vec![ranks.len()], Vec::new())
    }

    /// The mesh of `ranks` laid out as `shape`, with its groups: the whole mesh's and, with
    /// several dimensions, every line's along each one (made in the same order on every rank).
    fn build(device_type: &str, ranks: Vec<usize>, shape: Vec<usize>, names: Vec<String>) -> Result<Arc<DeviceMesh>> {
        let device = Device::new(device_type, None)?;
        if ranks.is_empty() {
            return Err(Error::value_error("DeviceMesh(): a mesh needs at least one rank"));
        }
        let group = new_group(Some(&ranks))?;
        let me = get_rank(None)?;
        let mut dims = Vec::new();
        if shape.len() > 1 {
            for (d, &along) in shape.iter().enumerate() {
                let stride: usize = shape[d + 1..].iter().product();
                let mut mine = None;
                // The lines along `d`: one through each position with coordinate 0 there.
                for start in (0..ranks.len()).filter(|i| (i / stride).is_multiple_of(along)) {
                    let line: Vec<usize> = (0..along).map(|k| ranks[start + k * stride]).collect();
                    let line_group = new_group(Some(&line))?;
                    if line.contains(&me) {
                        mine = Some((line, line_group));
                    }
                }
                if let Some((line, line_group)) = mine {
                    let name = names.get(d).cloned().into_iter().collect();
                    let shape = vec![line.len()];
                    dims.push(Arc::new(DeviceMesh {
                        device,
                        shape,
                        ranks: line,
                        names: name,
                        group: line_group,
                        dims: Vec::new(),
                    }));
                }
            }
        }
        Ok(Arc::new(DeviceMesh { device, shape, ranks, names, group, dims }))
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

    /// The mesh's shape (`shape`).
    pub fn shape(&self) -> Vec<usize> {
        self.shape.clone()
    }

    /// The number of mesh dimensions (`ndim`).
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The dimensions' names (`mesh_dim_names`), empty when they have none.
    pub fn mesh_dim_names(&self) -> &[String] {
        &self.names
    }

    /// The global ranks, in row-major order of the shape (`mesh.flatten().tolist()`).
    pub fn mesh(&self) -> &[usize] {
        &self.ranks
    }

    /// This process's position in a one-dimensional mesh (`get_local_rank()`); an error on a
    /// rank outside it, and on a mesh of several dimensions (take a dimension's mesh with
    /// [`get`](DeviceMesh::get)).
    pub fn get_local_rank(&self) -> Result<usize> {
        if self.ndim() > 1 {
            return Err(Error::runtime_error(format!(
                "get_local_rank(): {self} has {} dimensions: take one dimension's mesh (get(name)) first",
                self.ndim()
            )));
        }
        self.group.rank().ok_or_else(|| {
            Error::runtime_error(format!("this rank is not part of {self}: it holds no piece of the mesh's DTensors"))
        })
    }

    /// This process's coordinate in the mesh, `None` outside it (`get_coordinate()`).
    pub fn get_coordinate(&self) -> Option<Vec<usize>> {
        let me = get_rank(None).ok()?;
        let mut at = self.ranks.iter().position(|&r| r == me)?;
        let mut coordinate = vec![0; self.ndim()];
        for (c, &n) in coordinate.iter_mut().zip(&self.shape).rev() {
            *c = at % n;
            at /= n;
        }
        Some(coordinate)
    }

    /// The process group of every rank of the mesh (`get_group()`; of a one-dimensional mesh,
    /// its dimension's).
    pub fn get_group(&self) -> &ProcessGroup {
        &self.group
    }

    /// The one-dimensional mesh of dimension `name` through this rank (PyTorch's
    /// `mesh[name]`): the ranks whose coordinates differ from this rank's in that dimension
    /// alone, with their group. The same mesh each time (DTensors on it meet). An error for a
    /// name the mesh does not have, and on a rank outside the mesh.
    pub fn get(self: &Arc<Self>, name: &str) -> Result<Arc<DeviceMesh>> {
        let Some(d) = self.names.iter().position(|n| n == name) else {
            return Err(Error::value_error(format!(
                "DeviceMesh: no dimension named {name:?}; its dimensions are named {:?}",
                self.names
            )));
        };
        if self.ndim() == 1 {
            return Ok(self.clone());
        }
        self.dims.get(d).cloned().ok_or_else(|| {
            Error::runtime_error(format!("this rank is not part of {self}: it has no line along {name:?}"))
        })
    }
}

/// Prints as PyTorch's `repr`: `DeviceMesh('cpu', [0, 1])`, `DeviceMesh('cpu', [[0, 1], [2,
/// 3]], mesh_dim_names=('dp', 'tp'))`.
impl fmt::Display for DeviceMesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn nested(f: &mut fmt::Formatter<'_>, ranks: &[usize], shape: &[usize]) -> fmt::Result {
            match shape {
                [] | [_] => write!(f, "{ranks:?}"),
                [n, rest @ ..] => {
                    f.write_str("[")?;
                    for (i, row) in ranks.chunks(ranks.len() / n.max(&1)).enumerate() {
                        if i > 0 {
                            f.write_str(", ")?;
                        }
                        nested(f, row, rest)?;
                    }
                    f.write_str("]")
                }
            }
        }
        write!(f, "DeviceMesh('{}', ", self.device_type())?;
        nested(f, &self.ranks, &self.shape)?;
        if !self.names.is_empty() {
            let names: Vec<String> = self.names.iter().map(|n| format!("'{n}'")).collect();
            let comma = if names.len() == 1 { "," } else { "" };
            write!(f, ", mesh_dim_names=({}{comma})", names.join(", "))?;
        }
        f.write_str(")")
    }
}

impl fmt::Debug for DeviceMesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
