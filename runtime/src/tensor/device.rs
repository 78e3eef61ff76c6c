//! Where a tensor's data lives.

use std::fmt;

/// The device of a tensor (`torch.device`). The CPU for now; GPUs join through wgpu.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Device {
    /// Host memory, computed with ndarray.
    #[default]
    Cpu,
}

/// Prints like PyTorch: `cpu`.
impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
        }
    }
}
