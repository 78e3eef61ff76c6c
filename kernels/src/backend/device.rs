//! Where a tensor's data lives: a backend and one of its devices.

use std::fmt;
use std::hash::{Hash, Hasher};

use crate::error::{Error, Result};
use crate::types::DType;

use super::{BACKENDS, Backend, backend};

/// The device of a tensor (`torch.device`): a kind of backend (`cpu`, `wgpu`) and the index of
/// one of its devices (the adapter, for wgpu). Prints like PyTorch's: `cpu`, `wgpu:0`.
///
/// ```
/// use torchfn::Device;
/// let cpu = Device::parse("cpu")?;
/// assert_eq!(cpu, Device::CPU);
/// assert_eq!(cpu.to_string(), "cpu");
/// assert!(Device::parse("tpu").is_err());
/// # Ok::<(), torchfn::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct Device {
    backend: &'static dyn Backend,
    index: usize,
}

impl Device {
    /// The CPU (host memory, computed with ndarray on the CPU kernels' threads).
    pub const CPU: Device = Device { backend: &crate::cpu::CPU, index: 0 };

    /// The meta device (`torch.device("meta")`): tensors with shapes, dtypes and strides and
    /// no data, which every operation computes the result shapes of without allocating.
    pub const META: Device = Device { backend: &crate::meta::META, index: 0 };

    /// Device `index` of the backend named `kind`, or its default device when `index` is
    /// `None`: for wgpu, the adapter `TORCHFN_WGPU_ADAPTER` names, else the high-performance
    /// one. An error names the kinds linked in, or the devices there are.
    pub fn new(kind: &str, index: Option<usize>) -> Result<Device> {
        let Some(backend) = backend(kind) else {
            if kind == "wgpu" && !cfg!(feature = "wgpu") {
                return Err(Error::runtime_error(
                    "torchfn was built without the `wgpu` feature, so it has no GPU backend: enable the feature \
                     (it is on by default; `default-features = false` leaves it out)",
                ));
            }
            let known: Vec<&str> = BACKENDS.iter().map(|b| b.name()).collect();
            return Err(Error::runtime_error(format!(
                "Expected one of {} device type at start of device string: {kind}",
                known.join(", ")
            )));
        };
        let index = match index {
            Some(i) => i,
            None => backend.default_index()?,
        };
        let count = backend.device_count();
        if index >= count {
            return Err(Error::runtime_error(format!(
                "{kind}:{index} is not available: this machine has {count} {kind} device{}{}",
                if count == 1 { "" } else { "s" },
                if count > 0 { format!(" ({kind}:0 to {kind}:{})", count - 1) } else { String::new() }
            )));
        }
        Ok(Device { backend, index })
    }

    /// Device `index` of `backend`, without looking the backend up in [`BACKENDS`] (the
    /// runtime's own unit tests link two copies of the runtime, whose slices linkme refuses to
    /// read). The wgpu backend's tests use it.
    /// Device `index` of `backend`.
    pub fn with_backend(backend: &'static dyn Backend, index: usize) -> Device {
        Device { backend, index }
    }

    /// Parses PyTorch's device text: `"cpu"`, `"wgpu"` (the default adapter), `"wgpu:1"`.
    pub fn parse(text: &str) -> Result<Device> {
        let (kind, index) = match text.split_once(':') {
            Some((kind, index)) => {
                let index = index.parse::<usize>().map_err(|_| {
                    Error::runtime_error(format!("Invalid device string: '{text}' (the index must be a number)"))
                })?;
                (kind, Some(index))
            }
            None => (text, None),
        };
        Device::new(kind, index)
    }

    /// The default GPU through wgpu (Vulkan, Metal or DX12): the adapter `TORCHFN_WGPU_ADAPTER`
    /// names (an index, or part of the adapter's name), else the high-performance one. An
    /// error when the machine has none, or when torchfn was built without the `wgpu` cargo
    /// feature (on by default).
    pub fn wgpu() -> Result<Device> {
        Device::new("wgpu", None)
    }

    /// The kind of device: `"cpu"`, `"wgpu"` (`torch.device.type`).
    pub fn kind(self) -> &'static str {
        self.backend.name()
    }

    /// The index of the device among those of its kind (`torch.device.index`).
    pub fn index(self) -> usize {
        self.index
    }

    /// The backend that computes on this device.
    pub fn backend(self) -> &'static dyn Backend {
        self.backend
    }

    /// True for the CPU.
    pub fn is_cpu(self) -> bool {
        self == Device::CPU
    }

    /// True for the meta device (`torch.device.type == "meta"`).
    pub fn is_meta(self) -> bool {
        self == Device::META
    }

    /// A description of the device for people (the adapter's name and API, for wgpu).
    pub fn describe(self) -> String {
        self.backend.describe(self.index)
    }

    /// Whether tensors of `dtype` can live on this device.
    pub fn supports(self, dtype: DType) -> bool {
        self.backend.supports(dtype)
    }

    /// The dtype of indices and integer results that PyTorch gives as int64 (`argmax`, the
    /// indices of `max(dim)`, integer sums): int64 where the device has it, int32 otherwise.
    pub fn index_dtype(self) -> DType {
        if self.supports(DType::Int64) { DType::Int64 } else { DType::Int32 }
    }

    /// Waits until every kernel launched on this device has finished (`torch.cuda.synchronize`).
    pub fn synchronize(self) -> Result<()> {
        self.backend.synchronize(self.index)
    }
}

impl Default for Device {
    fn default() -> Self {
        Device::CPU
    }
}

impl PartialEq for Device {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        // The same backend object (address and type) is the same kind; otherwise compare names
        // (a type's vtable can be duplicated across codegen units).
        self.index == other.index
            && (std::ptr::eq(self.backend, other.backend) || self.backend.name() == other.backend.name())
    }
}

impl Eq for Device {}

impl Hash for Device {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.backend.name().hash(state);
        self.index.hash(state);
    }
}

/// Prints like PyTorch: `cpu`, `wgpu:0`.
impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_cpu() || self.is_meta() {
            f.write_str(self.kind())
        } else {
            write!(f, "{}:{}", self.kind(), self.index)
        }
    }
}

/// `device(type='wgpu', index=0)`, as PyTorch's repr.
impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_cpu() || self.is_meta() {
            write!(f, "device(type='{}')", self.kind())
        } else {
            write!(f, "device(type='{}', index={})", self.kind(), self.index)
        }
    }
}
