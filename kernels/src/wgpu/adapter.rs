//! How adapters are described and chosen: the part of the GPU backend's API that does not need
//! wgpu itself, shared by builds with and without the `wgpu` feature.

/// Which adapter to prefer when none is named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preference {
    /// The fastest GPU (a discrete one over an integrated one).
    HighPerformance,
    /// The most frugal GPU (an integrated one over a discrete one).
    LowPower,
}

/// One GPU (adapter) wgpu found, as [`adapters`](super::adapters) lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdapterInfo {
    /// Its index: the device is `wgpu:{index}`.
    pub index: usize,
    /// The adapter's name (`"NVIDIA H100 80GB HBM3"`, `"llvmpipe (LLVM 15.0.6, 256 bits)"`).
    pub name: String,
    /// The graphics API wgpu reaches it through (`"Vulkan"`, `"Metal"`, `"Dx12"`).
    pub api: String,
    /// Discrete, integrated, virtual, CPU (a software rasterizer such as lavapipe) or other.
    pub kind: String,
}
