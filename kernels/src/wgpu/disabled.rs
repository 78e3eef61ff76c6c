//! The GPU backend's API in a build without the `wgpu` cargo feature (on by default): the same
//! items, so that code compiles either way, but no backend behind them. [`Device::wgpu`] and
//! [`Device::wgpu_preferring`] return an error saying that torchfn was built without the
//! feature, [`adapters`] is empty and [`set_batch_limit`] does nothing. Enable the feature
//! (`torchfn = { version = "0.1", features = ["wgpu"] }`, or leave the default features on) to
//! compute on GPUs.
//!
//! ```
//! use torchfn::Device;
//! let err = Device::parse("wgpu:0").unwrap_err();
//! assert!(err.to_string().contains("without the `wgpu` feature"), "{err}");
//! assert!(torchfn::wgpu::adapters().is_empty());
//! ```

#[path = "adapter.rs"]
mod adapter;

pub use adapter::{AdapterInfo, Preference};

use crate::backend::Device;
use crate::error::Result;

impl Device {
    /// The GPU wgpu prefers for `preference`; in this build, without the `wgpu` feature, an
    /// error saying so.
    pub fn wgpu_preferring(preference: Preference) -> Result<Device> {
        let _ = preference;
        Device::new("wgpu", None)
    }
}

/// The GPUs wgpu finds on this machine: none, in a build without the `wgpu` feature.
pub fn adapters() -> Vec<AdapterInfo> {
    Vec::new()
}

/// Sets how many kernel launches are recorded into one submission to the GPU; in a build
/// without the `wgpu` feature there is no GPU, and this does nothing.
pub fn set_batch_limit(launches: usize) {
    let _ = launches;
}
