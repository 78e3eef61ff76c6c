//! The GPUs wgpu finds, and one lazily created context (device, queue, caches) per adapter.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::error::{Error, Result};

use super::adapter::{AdapterInfo, Preference};
use super::launch::Batch;
use super::memory::Pool;

/// The graphics APIs torchfn computes through: Vulkan (Linux, Windows, Android), Metal (macOS,
/// iOS) and DX12 (Windows). OpenGL is left out: its compute support is too uneven.
const APIS: wgpu::Backends = wgpu::Backends::VULKAN.union(wgpu::Backends::METAL).union(wgpu::Backends::DX12);

/// The environment variable that picks the default adapter: an index, or part of a name.
pub const ADAPTER_VARIABLE: &str = "TORCHFN_WGPU_ADAPTER";

/// The wgpu instance and its adapters, found once.
struct Adapters {
    instance: wgpu::Instance,
    adapters: Vec<wgpu::Adapter>,
    contexts: Vec<OnceLock<std::result::Result<Arc<Context>, String>>>,
}

fn found() -> &'static Adapters {
    static ADAPTERS: OnceLock<Adapters> = OnceLock::new();
    ADAPTERS.get_or_init(|| {
        let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle();
        descriptor.backends = APIS;
        let instance = wgpu::Instance::new(descriptor);
        let adapters = pollster::block_on(instance.enumerate_adapters(APIS));
        let contexts = adapters.iter().map(|_| OnceLock::new()).collect();
        Adapters { instance, adapters, contexts }
    })
}

/// The GPUs wgpu finds on this machine (through Vulkan, Metal or DX12), in device-index order.
///
/// ```
/// for adapter in torchfn::wgpu::adapters() {
///     println!("wgpu:{} is {} ({}, {})", adapter.index, adapter.name, adapter.api, adapter.kind);
/// }
/// ```
pub fn adapters() -> Vec<AdapterInfo> {
    found()
        .adapters
        .iter()
        .enumerate()
        .map(|(index, a)| {
            let info = a.get_info();
            AdapterInfo {
                index,
                name: info.name,
                api: format!("{:?}", info.backend),
                kind: format!("{:?}", info.device_type),
            }
        })
        .collect()
}

/// The number of adapters.
pub fn adapter_count() -> usize {
    found().adapters.len()
}

/// The index of the adapter `TORCHFN_WGPU_ADAPTER` names, else of the one wgpu prefers for
/// `preference`; an error when there is none.
pub fn preferred(preference: Preference) -> Result<usize> {
    let all = found();
    if all.adapters.is_empty() {
        return Err(no_adapter());
    }
    if let Ok(wanted) = std::env::var(ADAPTER_VARIABLE) {
        let listed = adapters();
        let hit = match wanted.parse::<usize>() {
            Ok(i) => listed.iter().find(|a| a.index == i),
            Err(_) => listed.iter().find(|a| a.name.to_lowercase().contains(&wanted.to_lowercase())),
        };
        return hit.map(|a| a.index).ok_or_else(|| {
            let names: Vec<String> = listed.iter().map(|a| format!("{}: {}", a.index, a.name)).collect();
            Error::runtime_error(format!(
                "{ADAPTER_VARIABLE}={wanted} names no adapter; this machine has {}",
                names.join(", ")
            ))
        });
    }
    // wgpu's choice for each preference, asked once.
    static CHOSEN: [OnceLock<usize>; 2] = [OnceLock::new(), OnceLock::new()];
    let (slot, power) = match preference {
        Preference::HighPerformance => (&CHOSEN[0], wgpu::PowerPreference::HighPerformance),
        Preference::LowPower => (&CHOSEN[1], wgpu::PowerPreference::LowPower),
    };
    Ok(*slot.get_or_init(|| {
        let options = wgpu::RequestAdapterOptions {
            power_preference: power,
            force_fallback_adapter: false,
            compatible_surface: None,
            apply_limit_buckets: false,
        };
        let chosen = pollster::block_on(all.instance.request_adapter(&options)).map(|a| a.get_info());
        chosen.ok().and_then(|info| all.adapters.iter().position(|a| a.get_info() == info)).unwrap_or(0)
    }))
}

/// The error for a machine without a GPU wgpu can use.
pub fn no_adapter() -> Error {
    Error::runtime_error(
        "no GPU adapter found: wgpu sees no Vulkan, Metal or DX12 device on this machine (on Linux without a GPU, \
         Mesa's software Vulkan driver gives one: apt-get install mesa-vulkan-drivers)",
    )
}

/// What one adapter computes with: its device and queue, their limits, the pipelines built
/// so far, the pool of free buffers and the work recorded but not yet submitted.
pub struct Context {
    pub index: usize,
    pub description: String,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub limits: wgpu::Limits,
    /// Set when the device is lost: every later operation fails.
    lost: Arc<Mutex<Option<String>>>,
    /// Errors wgpu reported outside an error scope, taken by the next check.
    uncaptured: Arc<Mutex<Option<String>>>,
    /// The pipelines built so far, by kernel and specialization.
    pub pipelines: Mutex<HashMap<String, Arc<wgpu::ComputePipeline>>>,
    pub pool: Pool,
    pub batch: Mutex<Batch>,
}

/// The context of adapter `index`, created on first use.
pub fn context(index: usize) -> Result<Arc<Context>> {
    let all = found();
    let slot = all.contexts.get(index).ok_or_else(|| {
        Error::runtime_error(format!("wgpu:{index} is not available: this machine has {} adapters", all.adapters.len()))
    })?;
    let context = slot.get_or_init(|| Context::new(index, &all.adapters[index]).map(Arc::new));
    let context = context.as_ref().map_err(|e| Error::runtime_error(e.clone()))?;
    context.alive()?;
    Ok(context.clone())
}

impl Context {
    fn new(index: usize, adapter: &wgpu::Adapter) -> std::result::Result<Context, String> {
        let info = adapter.get_info();
        let description = format!("{} ({:?})", info.name, info.backend);
        // The adapter's own limits: the largest buffers and dispatches it allows.
        let limits = adapter.limits();
        let descriptor = wgpu::DeviceDescriptor {
            label: Some("torchfn"),
            required_features: wgpu::Features::empty(),
            required_limits: limits.clone(),
            ..Default::default()
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&descriptor))
            .map_err(|e| format!("wgpu:{index} ({description}) could not be opened: {e}"))?;
        let lost = Arc::new(Mutex::new(None));
        let on_lost = lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            *on_lost.lock() = Some(format!("{reason:?}: {message}"));
        });
        let uncaptured = Arc::new(Mutex::new(None::<String>));
        let on_error = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            on_error.lock().get_or_insert_with(|| error.to_string());
        }));
        let pool = Pool::default();
        let batch = Mutex::new(Batch::default());
        Ok(Context {
            index,
            description,
            device,
            queue,
            limits,
            lost,
            uncaptured,
            pipelines: Mutex::default(),
            pool,
            batch,
        })
    }

    /// An error when the device is lost, or when wgpu reported an error since the last check.
    pub fn alive(&self) -> Result<()> {
        if let Some(reason) = self.lost.lock().clone() {
            return Err(Error::runtime_error(format!(
                "wgpu:{} ({}) was lost ({reason}); its tensors are gone: move work to another device or restart",
                self.index, self.description
            )));
        }
        if let Some(error) = self.uncaptured.lock().take() {
            return Err(Error::runtime_error(format!(
                "wgpu:{} ({}) reported an error: {error}",
                self.index, self.description
            )));
        }
        Ok(())
    }

    /// A context of its own for adapter `index`, apart from the shared one (for tests that
    /// break it).
    #[cfg(test)]
    pub fn separate(index: usize) -> Result<Arc<Context>> {
        let adapter = found().adapters.get(index).ok_or_else(no_adapter)?;
        Context::new(index, adapter).map(Arc::new).map_err(Error::runtime_error)
    }

    /// Marks the device as lost, as the device-lost callback does (for tests of that path).
    #[cfg(test)]
    pub fn simulate_loss(&self, reason: &str) {
        *self.lost.lock() = Some(reason.to_string());
    }

    /// Runs `f` inside an error scope for `filter`, turning what wgpu reports there into an
    /// error that says what was being done.
    pub fn scoped<R>(&self, filter: wgpu::ErrorFilter, doing: &str, f: impl FnOnce() -> R) -> Result<R> {
        let scope = self.device.push_error_scope(filter);
        let result = f();
        match pollster::block_on(scope.pop()) {
            None => Ok(result),
            Some(e) => {
                Err(Error::runtime_error(format!("wgpu:{} ({}) failed {doing}: {e}", self.index, self.description)))
            }
        }
    }

    /// Waits for every submitted command to finish.
    pub fn idle(&self) -> Result<()> {
        self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| {
            Error::runtime_error(format!("wgpu:{} ({}): waiting failed: {e}", self.index, self.description))
        })?;
        self.alive()
    }
}
